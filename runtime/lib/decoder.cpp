// Decoder: a compiled decoding entry, its parameters from a training checkpoint
// and its key/value cache (decoder.h).
#include "decoder.h"

#include "sharded.h"

#include <algorithm>
#include <cerrno>
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
  for (const ModelParam &p : m.params)
    if (planrt_status s =
            planrt_st_read(f, p.name.c_str(), PLANRT_F32, int(p.shape.size()), p.shape.data(), P + p.offset))
      return s;
  return PLANRT_OK;
}

Decoder::Decoder(ModelLayout layout, planrt_decode_fn fn)
    : m(std::move(layout)), fn(fn), P(size_t(m.numFloats), 0.0f), C(size_t(m.cacheFloats), 0.0f),
      out(size_t(m.chunk * m.width)), tokens(size_t(m.chunk)) {}

planrt_status Decoder::load(const std::string &path, const std::string &who) {
  return loadModelParams(m, path, who, P.data(), used);
}

const float *Decoder::run(const int32_t *ctx, int64_t from, int64_t to,
                          const std::function<void(int64_t, const float *)> &row) {
  const int64_t W = m.window, N = m.chunk;
  const float *last = nullptr;
  for (int64_t s = from; s < to;) {
    int64_t start = std::min(s, W - N);
    for (int64_t i = 0; i < N; ++i)
      tokens[size_t(i)] = start + i < to ? ctx[start + i] : 0;
    fn(P.data(), tokens.data(), start, C.data(), out.data());
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
