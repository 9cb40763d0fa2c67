// Decoding entries: a model's forward function specialised to a chunk of
// positions over a key/value cache, as an entry point on flat buffers. Generation
// (plan-generate-abi) decodes with two of them; a retrieval graph's model embedder
// and re-ranker (plan-retrieval-abi) run one each. docs/GENERATE.md specifies the
// entries and their manifests.
#ifndef PLAN_GENERATE_DECODE_H
#define PLAN_GENERATE_DECODE_H

#include "plan/Training/Flat.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/JSON.h"

namespace plan::decode {

/// Positions per prefill call: a text is processed in chunks of this many (fewer
/// when the window is smaller).
constexpr int64_t kPrefillChunk = 64;

/// What an entry returns for each position.
enum class Output {
  Logits, ///< the logits the loss was computed from: [n, vocab]
  Hidden, ///< the hidden states those logits project: [n, hidden]
};

/// A model's parameters at their offsets in one flat array, in the model's
/// argument order (the table of a checkpoint).
struct Params {
  llvm::SmallVector<training::FlatTensor> tensors;
  int64_t total = 0;
};
Params paramsOf(mlir::func::FuncOp model);

/// An emitted entry's buffers.
struct Entry {
  int64_t width = 0;       ///< floats per position returned
  int64_t cacheFloats = 0; ///< every layer's cache, in one array
  int64_t layers = 0;
};

/// Emits, at the end of `module`, `name(P, tokens [1, n], offset: i64, cache,
/// out [1, n, width])`: the model's `output` for positions offset … offset + n - 1
/// of `tokens`, their keys and values stored in the cache of `window` positions.
/// nn.sdpa becomes nn.sdpa_cached, nn.positions counts from the offset, dropout is
/// the identity. Errors are reported on `user`, named by `role` ("generate",
/// "embed = model(tiny)"): a model not returning cross_entropy, attention that is
/// not causal, no attention, hidden states that cannot be found.
mlir::FailureOr<Entry> emitEntry(mlir::ModuleOp module, mlir::Operation *user, llvm::StringRef role,
                                 mlir::func::FuncOp model, const Params &params, llvm::StringRef name, int64_t n,
                                 int64_t window, Output output);

/// The manifest keys an entry's runtime reads (runtime/lib/decoder.h): model,
/// num_floats, params, vocab, window, chunk, layers, cache_floats, width.
llvm::json::Object layoutJson(mlir::func::FuncOp model, const Params &params, int64_t vocab, int64_t window,
                              int64_t chunk, const Entry &entry);

} // namespace plan::decode

#endif // PLAN_GENERATE_DECODE_H
