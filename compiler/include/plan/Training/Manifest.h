// The manifests of the executables: JSON in a NUL-terminated string constant of the
// module (planc_manifest, planc_retrieval_manifest, planc_generate_manifest), which
// passes write, read back and rewrite, and the runtime reads.
#ifndef PLAN_TRAINING_MANIFEST_H
#define PLAN_TRAINING_MANIFEST_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

#include "llvm/Support/JSON.h"

#include <string>

namespace plan {

/// A NUL-terminated string constant `name` at the builder's point.
void emitStringGlobal(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef name, std::string text);

/// The JSON that the string constant `global` holds; an error on the global if it
/// holds no string or no JSON.
mlir::FailureOr<llvm::json::Value> readJsonGlobal(mlir::LLVM::GlobalOp global);

/// Replaces the string constant `global` by one of the same name holding `root`.
void rewriteJsonGlobal(mlir::LLVM::GlobalOp global, const llvm::json::Value &root);

} // namespace plan

#endif
