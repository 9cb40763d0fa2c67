// Internal: a model compiled into a decoding entry (planrt_decode_fn) — its flat
// buffers as a manifest describes them, its parameters loaded from a training
// checkpoint by name, and chunked runs of positions over its key/value cache.
// Shared by generation (generate.cpp) and the retrieval runtime's model embedder
// and re-ranker (runtime/retrieval/model.cpp). docs/GENERATE.md specifies the
// entries and the manifests.
#ifndef PLANRT_LIB_DECODER_H
#define PLANRT_LIB_DECODER_H

#include "manifest_json.h"
#include "planrt.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace planrt {

struct ModelParam {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, count = 0;
};

/// What a decoding entry works on: the parameters' table (a checkpoint's names and
/// shapes at offsets in one flat array), the positions of its key/value cache
/// (`window`) and of one call (`chunk`), the cache's floats (all layers) and the
/// floats each position produces (`width`: the vocabulary for logits, the hidden
/// size for hidden states).
struct ModelLayout {
  std::string model;
  int64_t numFloats = 0, vocab = 0, window = 0, chunk = 0, layers = 0, cacheFloats = 0, width = 0;
  std::vector<ModelParam> params;
};

/// Reads the model's keys (model, num_floats, params, vocab, window, chunk, layers,
/// cache_floats, width) from a manifest object; throws manifest::Malformed.
void readModelLayout(const manifest::json &j, const std::string &where, ModelLayout &m);

/// Reads the checkpoint at `path` — a directory (its newest checkpoint, single-file
/// or sharded from any data-parallel layout) or a safetensors file — into P by
/// parameter name. `who` names the reader in messages ("generate 'answer'");
/// `used` is the file read.
planrt_status loadModelParams(const ModelLayout &m, const std::string &path, const std::string &who, float *P,
                              std::string &used);

/// A compiled entry with its parameters and cache.
class Decoder {
public:
  Decoder(ModelLayout layout, planrt_decode_fn fn);
  /// Loads the parameters (loadModelParams).
  planrt_status load(const std::string &path, const std::string &who);
  /// Another decoder over the same parameters (shared, read-only) with a cache of
  /// its own: decoders that run at once in different threads (`serve`).
  std::unique_ptr<Decoder> sibling() const;
  const ModelLayout &layout() const { return m; }
  float *params() { return P->data(); }
  float *cache() { return C.data(); }
  const std::string &checkpoint() const { return used; }
  /// Runs positions [from, to) of `ctx` (to ≤ window; positions before `from` are
  /// already in the cache) in calls of `chunk` positions, calling row(p, out) with
  /// the `width` floats of each position p in [from, to). A call that would end
  /// past the window starts earlier instead, recomputing cached positions (the same
  /// values). Returns the row of position to - 1 (valid until the next run).
  const float *run(const int32_t *ctx, int64_t from, int64_t to,
                   const std::function<void(int64_t, const float *)> &row = {});

private:
  ModelLayout m;
  planrt_decode_fn fn;
  std::shared_ptr<std::vector<float>> P; ///< shared with siblings, written only by load()
  std::vector<float> C, out;
  std::vector<int32_t> tokens;
  std::string used;
};

} // namespace planrt

#endif // PLANRT_LIB_DECODER_H
