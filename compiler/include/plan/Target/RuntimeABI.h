// The runtime ABI as the compiler sees it: every entry point of
// runtime/include/planrt_abi.def as an enumerator, its MLIR function type derived
// from its C prototype, and builders that declare it on first use and call it with
// arguments checked against that type. No compiler file names a planrt_* function
// as a string: a renamed or retyped entry point fails to compile here.
#ifndef PLAN_TARGET_RUNTIMEABI_H
#define PLAN_TARGET_RUNTIMEABI_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace plan::rt {

/// An entry point of the runtime ABI, named as in C.
enum class Fn : unsigned {
#define PLANRT_ABI_STEP(ret, name, params) name,
#define PLANRT_ABI_KERNEL(ret, name, params) name,
#define PLANRT_ABI_CUDA(ret, name, params) name,
#define PLANRT_ABI_RETRIEVAL(ret, name, params) name,
#include "planrt_abi.def"
};

/// The entry point's C name.
llvm::StringRef name(Fn fn);

/// The entry point named `name`, if the ABI has one.
std::optional<Fn> lookup(llvm::StringRef name);

/// Its type as a func.func: pointers are !llvm.ptr, integers and enums iN of their
/// C width, float f32, double f64; void returns nothing.
mlir::FunctionType funcType(mlir::MLIRContext *ctx, Fn fn);

/// Its type as an llvm.func.
mlir::LLVM::LLVMFunctionType llvmFuncType(mlir::MLIRContext *ctx, Fn fn);

/// The func.func declaration of `fn` in `module`, added (private, at the start of
/// the module) on first use.
mlir::func::FuncOp declareFunc(mlir::OpBuilder &b, mlir::ModuleOp module, Fn fn);

/// The llvm.func declaration of `fn` in `module`, added (at its end) on first use.
mlir::LLVM::LLVMFuncOp declareLLVMFunc(mlir::OpBuilder &b, mlir::ModuleOp module, Fn fn);

/// `fn(args)` as func.call, declaring it first. The arguments' types must be the
/// ABI's (a mismatch is a compiler bug: fatal, naming the entry and the argument).
mlir::func::CallOp callFunc(mlir::OpBuilder &b, mlir::Location loc, mlir::ModuleOp module, Fn fn,
                            mlir::ValueRange args);

/// `fn(args)` as llvm.call, declaring it first; arguments checked as callFunc's.
mlir::LLVM::CallOp callLLVMFunc(mlir::OpBuilder &b, mlir::Location loc, mlir::ModuleOp module, Fn fn,
                                mlir::ValueRange args);

} // namespace plan::rt

#endif // PLAN_TARGET_RUNTIMEABI_H
