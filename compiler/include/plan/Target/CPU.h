// The CPU target: from the train step on tensors to an object file and an
// executable linked with libplanrt and BLAS.
#ifndef PLAN_TARGET_CPU_H
#define PLAN_TARGET_CPU_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace plan::cpu {

/// The passes that turn the bufferized step functions' linalg ops into loops.
inline constexpr const char *kLoops = "func.func(plan-free-buffers,convert-linalg-to-loops)";

/// grad stage → LLVM dialect: entry points, linalg, fusion, bufferization
/// (library calls), loops (`loops`: a pipeline fragment), LLVM, and the `main` that
/// starts the runtime.
void buildLoweringPipeline(mlir::OpPassManager &pm, const std::string &loops = kLoops,
                           const std::string &mainBackend = "cpu");

/// Translates an LLVM-dialect module to LLVM IR, optimises it at O3 for this
/// host's CPU and writes an object file.
mlir::LogicalResult emitObject(mlir::ModuleOp module, const std::string &path, std::string &error);

/// Links an object with libplanrt (and through it MPI, OpenBLAS) into an executable;
/// `extraLibraries` (the CUDA target's libplanrt_cuda) are linked first, from the same
/// directory.
mlir::LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath,
                         std::string &error, bool retrieval = false, llvm::ArrayRef<std::string> extraLibraries = {});

/// Registers the dialects, interfaces and translations the target needs.
void registerTarget(mlir::DialectRegistry &registry);

} // namespace plan::cpu

#endif // PLAN_TARGET_CPU_H
