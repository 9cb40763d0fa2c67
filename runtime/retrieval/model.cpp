// A compiled, trained model as the store's embedder (mean- or last-pooled hidden
// states) and as a re-ranker (query likelihood), through the entries planc emits
// for `embed = model(...)` and `rerank = model(...)` (docs/RETRIEVAL.md "Models").
// Text reaches the model as bytes: both need a byte-level vocabulary of 256.
#include "decoder.h"
#include "planrt_manifest.h"
#include "retrieval.h"
#include "status.h"

#include <algorithm>
#include <cmath>

namespace planrt::rag {
namespace {

using planrt::fail;

constexpr int64_t kByteVocab = 256;

/// Parses a planc-model-1 manifest for `role` and loads the checkpoint.
planrt_status openDecoder(const planrt_retrieval_config &cfg, const char *role, const char *manifest,
                          planrt_decode_fn fn, const char *checkpoint, std::unique_ptr<planrt::Decoder> &out) {
  std::string who = std::string(role) + " = model(...) of retrieval graph '" + cfg.graph + "'";
  if (!manifest || !fn)
    return fail(PLANRT_ERR_ARG, "%s: this executable has no compiled entry for it (planc build makes one)",
                who.c_str());
  planrt::ModelLayout layout;
  if (planrt_status s = planrt::manifest::parse([&] {
        using namespace planrt::manifest;
        json j = json::parse(manifest);
        const std::string top = "the manifest";
        if (text(j, "format", top) != planrt::manifest::format::kModel)
          throw Malformed{std::string("format is not ") + planrt::manifest::format::kModel};
        if (text(j, "role", top) != role)
          throw Malformed{"role is not " + std::string(role)};
        planrt::readModelLayout(j, top, layout);
      })) {
    std::string why = planrt_last_error();
    return fail(s, "%s: %s", who.c_str(), why.c_str());
  }
  if (layout.vocab != kByteVocab)
    return fail(PLANRT_ERR_ARG,
                "%s: model '%s' has a vocabulary of %lld tokens; retrieval feeds models text as bytes "
                "(a vocabulary of 256)",
                who.c_str(), layout.model.c_str(), (long long)layout.vocab);
  who = std::string(role) + " = model(" + layout.model + ") of retrieval graph '" + cfg.graph + "'";
  auto d = std::make_unique<planrt::Decoder>(std::move(layout), fn);
  std::string path = resolvePath(cfg.base_dir ? cfg.base_dir : "", checkpoint ? checkpoint : "");
  if (planrt_status s = d->load(path, who))
    return s;
  out = std::move(d);
  return PLANRT_OK;
}

std::vector<int32_t> bytesOf(std::string_view text) {
  std::vector<int32_t> t;
  t.reserve(text.size());
  for (unsigned char c : text)
    t.push_back(int32_t(c));
  return t;
}

class ModelEmbedder final : public Embedder {
public:
  ModelEmbedder(std::unique_ptr<planrt::Decoder> d, bool last) : dec(std::move(d)), last(last) {
    const planrt::ModelLayout &m = dec->layout();
    std::string_view params(reinterpret_cast<const char *>(dec->params()), size_t(m.numFloats) * sizeof(float));
    fingerprint = "model(" + m.model + ",pool:" + (last ? "last" : "mean") + ",dim:" + std::to_string(m.width) +
                  ",window:" + std::to_string(m.window) + ",params:" + sha256Hex(params).substr(0, 16) + ")";
  }
  int64_t dim() const override { return dec->layout().width; }
  std::string describe() const override { return fingerprint; }

  // Mean: the hidden states of every byte, the text taken in consecutive windows of
  // `window` bytes, each from position 0. Last: the hidden state of the last byte,
  // after the text's last `window` bytes.
  bool embed(std::string_view text, float *out) override {
    if (text.empty())
      return false;
    const int64_t W = dec->layout().window, D = dim(), n = int64_t(text.size());
    std::vector<int32_t> tokens = bytesOf(text);
    std::vector<double> acc(size_t(D), 0.0);
    if (last) {
      int64_t start = std::max<int64_t>(0, n - W);
      const float *h = dec->run(tokens.data() + start, 0, n - start);
      for (int64_t i = 0; i < D; ++i)
        acc[size_t(i)] = h[i];
    } else {
      for (int64_t w0 = 0; w0 < n; w0 += W)
        dec->run(tokens.data() + w0, 0, std::min(W, n - w0), [&](int64_t, const float *h) {
          for (int64_t i = 0; i < D; ++i)
            acc[size_t(i)] += h[i];
        });
    }
    double norm = 0;
    for (double v : acc)
      norm += v * v;
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < D; ++i)
      out[i] = norm > 0 ? float(acc[size_t(i)] / norm) : 0.0f;
    return true;
  }

private:
  std::unique_ptr<planrt::Decoder> dec;
  bool last;
  std::string fingerprint;
};

class ModelReranker final : public Reranker {
public:
  explicit ModelReranker(std::unique_ptr<planrt::Decoder> d) : dec(std::move(d)) {}

  // The context is the chunk's first bytes, a newline and the query (its first
  // ⌊window/2⌋ bytes), filling at most the window; the score is the mean of
  // log p(query byte | everything before it).
  double score(std::string_view chunk, std::string_view query) override {
    const int64_t W = dec->layout().window, V = dec->layout().width;
    int64_t q = std::min<int64_t>(int64_t(query.size()), std::max<int64_t>(1, W / 2));
    if (q == 0 || W < 2)
      return 0.0;
    int64_t d = std::min<int64_t>(int64_t(chunk.size()), W - 1 - q);
    std::vector<int32_t> ctx = bytesOf(chunk.substr(0, size_t(d)));
    ctx.push_back('\n');
    for (int64_t i = 0; i < q; ++i)
      ctx.push_back(int32_t(static_cast<unsigned char>(query[size_t(i)])));
    const int64_t len = int64_t(ctx.size()), first = d + 1;
    double total = 0;
    dec->run(ctx.data(), 0, len - 1, [&](int64_t p, const float *logits) {
      if (p + 1 < first)
        return;
      double mx = logits[0], sum = 0;
      for (int64_t v = 1; v < V; ++v)
        mx = std::max(mx, double(logits[v]));
      for (int64_t v = 0; v < V; ++v)
        sum += std::exp(double(logits[v]) - mx);
      total += double(logits[ctx[size_t(p + 1)]]) - mx - std::log(sum);
    });
    return total / double(q);
  }

private:
  std::unique_ptr<planrt::Decoder> dec;
};

} // namespace

planrt_status openModelEmbedder(const planrt_retrieval_config &cfg, std::unique_ptr<Embedder> &out) {
  const planrt_retrieval_models *m = cfg.models;
  std::unique_ptr<planrt::Decoder> d;
  if (planrt_status s =
          openDecoder(cfg, "embed", m ? m->embed_manifest : nullptr, m ? m->embed : nullptr, cfg.embed_checkpoint, d))
    return s;
  if (d->layout().width != cfg.embed_dim)
    return fail(PLANRT_ERR_ARG,
                "embed = model(%s): the configuration's dimension %lld is not the model's hidden size "
                "%lld",
                d->layout().model.c_str(), (long long)cfg.embed_dim, (long long)d->layout().width);
  bool last = cfg.embed_pool && std::string_view(cfg.embed_pool) == "last";
  out = std::make_unique<ModelEmbedder>(std::move(d), last);
  return PLANRT_OK;
}

planrt_status openReranker(const planrt_retrieval_config &cfg, std::unique_ptr<Reranker> &out) {
  out.reset();
  if (cfg.rerank != PLANRT_RERANK_MODEL)
    return PLANRT_OK;
  const planrt_retrieval_models *m = cfg.models;
  std::unique_ptr<planrt::Decoder> d;
  if (planrt_status s = openDecoder(cfg, "rerank", m ? m->rerank_manifest : nullptr, m ? m->rerank : nullptr,
                                    cfg.rerank_checkpoint, d))
    return s;
  if (d->layout().width != d->layout().vocab)
    return fail(PLANRT_ERR_FORMAT,
                "rerank = model(%s): the entry returns %lld floats a position, not the vocabulary's "
                "%lld logits",
                d->layout().model.c_str(), (long long)d->layout().width, (long long)d->layout().vocab);
  out = std::make_unique<ModelReranker>(std::move(d));
  return PLANRT_OK;
}

} // namespace planrt::rag
