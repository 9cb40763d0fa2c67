// The manifests of the executables. A training executable's (planc_manifest) travels
// between passes as a sched.manifest op holding a dictionary attribute, which the
// passes read and extend as JSON values converted structurally (no text is parsed);
// plan-emit-manifest writes it once as a NUL-terminated JSON string constant. The
// retrieval and decoding manifests, written once by their ABI passes, are emitted as
// string constants directly. The runtime reads the string constants.
#ifndef PLAN_TRAINING_MANIFEST_H
#define PLAN_TRAINING_MANIFEST_H

#include "plan/Dialect/Sched/IR/Sched.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/Support/JSON.h"

#include <string>

namespace plan {

/// A NUL-terminated string constant `name` at the builder's point.
void emitStringGlobal(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef name, std::string text);

/// A JSON value as an attribute: objects as dictionaries (keys sorted, as the JSON
/// text sorts them), arrays, strings, integers as i64, other numbers as f64, booleans,
/// null as the unit attribute.
mlir::Attribute jsonToAttr(mlir::MLIRContext *ctx, const llvm::json::Value &value);

/// The JSON value of an attribute that jsonToAttr made; failure for any other.
mlir::FailureOr<llvm::json::Value> attrToJson(mlir::Attribute attr);

/// What a sched.manifest holds, as JSON; an error on the op if it holds an attribute
/// that is not a JSON value.
mlir::FailureOr<llvm::json::Value> manifestJson(sched::ManifestOp op);

/// Replaces what a sched.manifest holds by `root`, a JSON object.
void setManifestJson(sched::ManifestOp op, const llvm::json::Value &root);

/// A plan's tokenizer (`tokenizer = bpe(…)`): `path` resolved against `baseDir`, which
/// must load as a byte-level BPE with at most `vocab` ids (model `model`'s vocabulary);
/// an error at `op` naming the file otherwise. Returns the resolved path.
mlir::FailureOr<std::string> checkTokenizer(mlir::Operation *op, llvm::StringRef baseDir, llvm::StringRef path,
                                            int64_t vocab, llvm::StringRef model);

} // namespace plan

#endif
