// The retrieval graph as the runtime reads it: shared by the retrieval
// executable (plan-retrieval-abi) and grounded generation (plan-generate-abi).
#ifndef PLAN_RETRIEVAL_RETRIEVAL_H
#define PLAN_RETRIEVAL_RETRIEVAL_H

#include "plan/Dialect/Plan/IR/Plan.h"

#include <string>

namespace plan::retrieval {

/// Errors, naming them, for the parts of a graph the runtime does not implement.
mlir::LogicalResult checkSupported(pl::RetrievalOp r);

/// The graph as the JSON manifest (format planc-retrieval-1, docs/RETRIEVAL.md)
/// of planrt_retrieval_main_manifest, paths resolved against the plan's directory.
std::string manifest(pl::RetrievalOp r);

/// A NUL-terminated string constant `name` at the builder's point.
void emitStringGlobal(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef name, std::string text);

} // namespace plan::retrieval

#endif // PLAN_RETRIEVAL_RETRIEVAL_H
