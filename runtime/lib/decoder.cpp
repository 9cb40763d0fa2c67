// Decoder: a compiled decoding entry, its parameters from a training checkpoint (or
// from a fine-tuning run's adapters over its base) and its key/value cache (decoder.h).
#include "decoder.h"

#include "kernels/nf4.h"
#include "pretrained.h"
#include "sharded.h"

#include "planrt_kernels.h"
#include "planrt_nf4.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sys/stat.h>

namespace planrt {

using namespace manifest;

namespace {
constexpr int64_t kMaxFloats = int64_t(1) << 40;
constexpr int64_t kMaxCount = int64_t(1) << 31;
} // namespace

void readModelLayout(const json &j, const std::string &where, ModelLayout &m) {
  m.model = text(j, "model", where);
  m.numFloats = integer(j, "num_floats", where, 1, kMaxFloats);
  m.vocab = integer(j, "vocab", where, 1, kMaxCount);
  m.window = integer(j, "window", where, 1, kMaxCount);
  m.chunk = integer(j, "chunk", where, 1, m.window);
  m.layers = integer(j, "layers", where, 1, int64_t(1) << 20);
  m.cacheFloats = integer(j, "cache_floats", where, 1, kMaxFloats);
  m.width = integer(j, "width", where, 1, kMaxCount);
  const json &ps = field(j, "params", where);
  if (!ps.is_array() || ps.empty())
    throw Malformed{path(where, "params") + " is not a non-empty array"};
  m.params.clear();
  for (size_t i = 0; i < ps.size(); ++i) {
    std::string at = path(where, "params") + "[" + std::to_string(i) + "]";
    ModelParam p;
    p.name = text(ps[i], "name", at);
    p.offset = integer(ps[i], "offset", at, 0, m.numFloats);
    p.count = integer(ps[i], "count", at, 1, m.numFloats - p.offset);
    const json &shape = field(ps[i], "shape", at);
    int64_t n = 1;
    for (const json &d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1)
        throw Malformed{at + ".shape holds " + d.dump()};
      p.shape.push_back(d.get<int64_t>());
      n *= p.shape.back();
    }
    if (n != p.count)
      throw Malformed{at + ".shape does not hold count elements"};
    m.params.push_back(std::move(p));
  }
}

namespace {

/// The metadata `key` of a checkpoint, or "".
std::string metadata(const planrt_st *f, const char *key) {
  const char *v = planrt_st_metadata(f, key);
  return v ? v : "";
}

/// A fine-tuning run's checkpoint (train_frozen.cpp's baseMetadata) holds its adapters
/// alone and points at the base they were trained over: the model is that base, verified
/// by its sha256 (and under QLoRA made what the run trained over: quantized to NF4 and
/// back), with W + (alpha/rank)·a·b for each adapted weight.
planrt_status loadAdapted(const ModelLayout &m, planrt_st *f, const std::string &file, float *P) {
  std::string base = metadata(f, "base"), sha = metadata(f, "base_sha256");
  if (base.rfind("seed ", 0) == 0)
    return fail(PLANRT_ERR_ARG,
                "%s: its adapters were trained over a base drawn from the %s, not a file; write the model with "
                "the training executable's --export FILE --merge and load that",
                file.c_str(), base.c_str());
  std::unique_ptr<train::Pretrained> pre;
  if (planrt_status s = train::Pretrained::open(base, metadata(f, "base_format").empty() ? "planc" : metadata(f, "base_format"),
                                         pre))
    return s;
  std::string digest;
  if (planrt_status s = pre->digest(digest))
    return s;
  if (digest != sha)
    return fail(PLANRT_ERR_MISMATCH, "%s: its adapters were trained over %s with sha256 %s, but that file's is now %s",
                file.c_str(), base.c_str(), sha.c_str(), digest.c_str());
  int64_t rank = std::strtoll(metadata(f, "lora_rank").c_str(), nullptr, 10);
  double alpha = std::strtod(metadata(f, "lora_alpha").c_str(), nullptr);
  std::string nf4 = "," + metadata(f, "nf4_weights") + ",", precision = metadata(f, "base_precision");
  int64_t block = std::strtoll(metadata(f, "nf4_block").c_str(), nullptr, 10);
  bool dbl = metadata(f, "nf4_double") == "1";
  if (rank < 1 || rank > 65536 || !(alpha > 0) || !std::isfinite(alpha) || block < 0 || block > 4096 ||
      (nf4 != ",," && block < 1))
    return fail(PLANRT_ERR_FORMAT, "%s: its metadata lora_rank '%s', lora_alpha '%s' or nf4_block '%s' is not valid",
                file.c_str(), metadata(f, "lora_rank").c_str(), metadata(f, "lora_alpha").c_str(),
                metadata(f, "nf4_block").c_str());
  double scale = alpha / double(rank);
  int64_t applied = 0;
  for (const ModelParam &p : m.params) {
    float *w = P + p.offset;
    if (planrt_status s = pre->read(p.name, p.shape, w))
      return s;
    // What the run's steps read of it: its NF4 storage dequantized, or it rounded to the
    // run's precision (train_frozen.cpp).
    if (block > 0 && nf4.find("," + p.name + ",") != std::string::npos) {
      std::vector<float> q(size_t(planrt_nf4_bytes(p.count, block, dbl) / 4));
      nf4::quantize(w, p.count, block, dbl, reinterpret_cast<uint8_t *>(q.data()));
      planrt_k_dequant_nf4(q.data(), w, p.count, block, dbl);
    } else if (!precision.empty() && precision != "fp32") {
      for (int64_t i = 0; i < p.count; ++i)
        w[i] = train::roundToPrecision(w[i], precision);
    }
    std::string module = p.name.size() > 7 ? p.name.substr(0, p.name.size() - 7) : p.name;
    planrt_tensor t;
    if (p.shape.size() != 2 || planrt_st_find(f, (module + ".lora_a").c_str(), &t) != PLANRT_OK)
      continue;
    int64_t r = int64_t(rank), in = p.shape[0], out = p.shape[1];
    std::vector<float> a(size_t(in * r)), b(size_t(r * out));
    int64_t as[2] = {in, r}, bs[2] = {r, out};
    if (planrt_status s = planrt_st_read(f, (module + ".lora_a").c_str(), PLANRT_F32, 2, as, a.data()))
      return s;
    if (planrt_status s = planrt_st_read(f, (module + ".lora_b").c_str(), PLANRT_F32, 2, bs, b.data()))
      return s;
    train::mergeLora(w, a.data(), b.data(), in, out, r, scale);
    ++applied;
  }
  if (applied == 0)
    return fail(PLANRT_ERR_MISMATCH, "%s: holds adapters, but none of a weight of model '%s'", file.c_str(),
                m.model.c_str());
  return PLANRT_OK;
}

} // namespace

planrt_status loadModelParams(const ModelLayout &m, const std::string &path, const std::string &who, float *P,
                              std::string &used) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return fail(PLANRT_ERR_IO, "%s: %s (the checkpoint of %s; train model '%s' first)", path.c_str(),
                std::strerror(errno), who.c_str(), m.model.c_str());
  std::string file = path;
  bool sharded = false;
  if (S_ISDIR(st.st_mode)) {
    uint64_t step = 0;
    if (planrt_status s = latestCheckpoint(path, file, step, sharded))
      return s;
  }
  used = file;
  if (sharded) {
    // A data-parallel fine-tuning run's checkpoint holds its adapters' shards.
    planrt_st *first = nullptr;
    if (planrt_st_open((file + "/rank-00000.safetensors").c_str(), &first) == PLANRT_OK) {
      bool adapters = planrt_st_metadata(first, "lora_rank") != nullptr;
      planrt_st_close(first);
      if (adapters)
        return fail(PLANRT_ERR_ARG,
                    "%s: a sharded checkpoint of a fine-tuning run's adapters, which %s reads from one file: "
                    "export them with the training executable (--resume %s --steps STEP --export FILE, STEP the "
                    "checkpoint's; or the merged model with --export FILE --merge) and load that",
                    file.c_str(), who.c_str(), path.c_str());
    }
    std::vector<FlatParam> layout;
    for (const ModelParam &p : m.params)
      layout.push_back({p.name, p.offset, p.count});
    std::vector<float> M(size_t(m.numFloats)), V(size_t(m.numFloats));
    std::map<std::string, std::string> meta;
    return shardedLoad(file, layout, P, M.data(), V.data(), meta);
  }
  planrt_st *f = nullptr;
  if (planrt_status s = planrt_st_open(file.c_str(), &f))
    return s;
  std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(f, planrt_st_close);
  // Adapters, not a merged export (which carries the run's metadata too).
  if (planrt_st_metadata(f, "lora_rank") && !planrt_st_metadata(f, "merged"))
    return loadAdapted(m, f, file, P);
  for (const ModelParam &p : m.params)
    if (planrt_status s =
            planrt_st_read(f, p.name.c_str(), PLANRT_F32, int(p.shape.size()), p.shape.data(), P + p.offset))
      return s;
  return PLANRT_OK;
}

Decoder::Decoder(ModelLayout layout, planrt_decode_fn fn)
    : m(std::move(layout)), fn(fn), P(std::make_shared<std::vector<float>>(size_t(m.numFloats), 0.0f)),
      C(size_t(m.cacheFloats), 0.0f), out(size_t(m.chunk * m.width)), tokens(size_t(m.chunk)) {}

planrt_status Decoder::load(const std::string &path, const std::string &who) {
  return loadModelParams(m, path, who, P->data(), used);
}

std::unique_ptr<Decoder> Decoder::sibling() const {
  auto d = std::make_unique<Decoder>(ModelLayout(), fn);
  d->m = m;
  d->P = P;
  d->C.assign(size_t(m.cacheFloats), 0.0f);
  d->out.assign(size_t(m.chunk * m.width), 0.0f);
  d->tokens.assign(size_t(m.chunk), 0);
  d->used = used;
  return d;
}

const float *Decoder::run(const int32_t *ctx, int64_t from, int64_t to,
                          const std::function<void(int64_t, const float *)> &row) {
  const int64_t W = m.window, N = m.chunk;
  const float *last = nullptr;
  for (int64_t s = from; s < to;) {
    int64_t start = std::min(s, W - N);
    for (int64_t i = 0; i < N; ++i)
      tokens[size_t(i)] = start + i < to ? ctx[start + i] : 0;
    fn(P->data(), tokens.data(), start, C.data(), out.data());
    int64_t end = std::min(start + N, to);
    if (row)
      for (int64_t p = s; p < end; ++p)
        row(p, out.data() + (p - start) * m.width);
    last = out.data() + (end - 1 - start) * m.width;
    s = end;
  }
  return last;
}

} // namespace planrt
