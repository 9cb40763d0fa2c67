// The retrieval graph as the runtime reads it: shared by the retrieval
// executable (plan-retrieval-abi) and grounded generation (plan-generate-abi).
#ifndef PLAN_RETRIEVAL_RETRIEVAL_H
#define PLAN_RETRIEVAL_RETRIEVAL_H

#include "plan/Dialect/Plan/IR/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace plan::retrieval {

/// The compiled models of a graph.
struct Models {
  bool embed = false, rerank = false;
  int64_t embedDim = 0; ///< the embedder's hidden size
};

/// For `embed = model(...)` and `rerank = model(...)`: the entries `planc_embed`
/// (hidden states) and `planc_rerank` (logits) over a prefill chunk of the model's
/// positional table, with their manifests `planc_embed_manifest` and
/// `planc_rerank_manifest` (format planc-model-1, docs/RETRIEVAL.md "Models"), at
/// the end of `module`. Errors on the graph name what the runtime cannot feed: a
/// vocabulary other than 256 bytes, no positional table, a model not expanded.
mlir::FailureOr<Models> emitModels(mlir::ModuleOp module, pl::RetrievalOp r);

/// The graph as the JSON manifest (format planc-retrieval-1, docs/RETRIEVAL.md)
/// of planrt_retrieval_main_manifest, paths resolved against the plan's directory.
std::string manifest(pl::RetrievalOp r, const Models &models);

} // namespace plan::retrieval

#endif // PLAN_RETRIEVAL_RETRIEVAL_H
