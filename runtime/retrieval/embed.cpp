// The hashing embedder: signed feature hashing (Weinberger et al. 2009) of word
// unigrams and bigrams, L2-normalised, so a store needs no model.
#include "retrieval.h"

#include <cmath>

namespace planrt::rag {
namespace {

// FNV-1a 64 over the bytes, then splitmix64's finaliser so that every output bit
// depends on every input byte (FNV alone mixes its high bits poorly).
uint64_t featureHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

void add(std::string_view feature, int64_t dim, std::vector<double> &acc) {
  uint64_t h = featureHash(feature);
  acc[h % uint64_t(dim)] += (h >> 63) ? -1.0 : 1.0;
}

} // namespace

std::vector<std::string> embedWords(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  for (unsigned char c : text) {
    bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (word) {
      cur += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (!cur.empty()) {
      words.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty())
    words.push_back(std::move(cur));
  return words;
}

void embedHashing(std::string_view text, int64_t dim, float *out) {
  std::vector<double> acc(size_t(dim), 0.0);
  std::vector<std::string> words = embedWords(text);
  for (size_t i = 0; i < words.size(); ++i) {
    add(words[i], dim, acc);
    // A bigram is "w1 w2": the space keeps it apart from every unigram.
    if (i + 1 < words.size())
      add(words[i] + " " + words[i + 1], dim, acc);
  }
  double norm = 0;
  for (double v : acc)
    norm += v * v;
  norm = std::sqrt(norm);
  for (int64_t i = 0; i < dim; ++i)
    out[i] = norm > 0 ? float(acc[size_t(i)] / norm) : 0.0f;
}

} // namespace planrt::rag

namespace planrt::rag {
namespace {

class HashingEmbedder final : public Embedder {
public:
  explicit HashingEmbedder(int64_t dim) : d(dim) {}
  int64_t dim() const override { return d; }
  std::string describe() const override { return "hashing(" + std::to_string(d) + ")"; }
  bool embed(std::string_view text, float *out) override {
    if (embedWords(text).empty())
      return false;
    embedHashing(text, d, out);
    return true;
  }
  std::unique_ptr<Embedder> share() const override { return std::make_unique<HashingEmbedder>(d); }

private:
  int64_t d;
};

} // namespace

planrt_status openEmbedder(const planrt_retrieval_config &cfg, std::unique_ptr<Embedder> &out) {
  if (cfg.embed == PLANRT_EMBED_MODEL)
    return openModelEmbedder(cfg, out);
  if (cfg.embed == PLANRT_EMBED_FASTTEXT) {
    out = makeFastTextEmbedder(cfg);
    return PLANRT_OK;
  }
  out = std::make_unique<HashingEmbedder>(cfg.embed_dim);
  return PLANRT_OK;
}

} // namespace planrt::rag
