// A pretrained model's parameters on disk, read by planc's names (pretrained.h).
#include "pretrained.h"

#include "kernels/common.h"

#include "sharded.h"
#include "status.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <regex>
#include <sys/stat.h>

using json = nlohmann::json;

namespace planrt::train {

namespace {

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string shapeText(const int64_t *shape, int rank) {
  std::string out = "[";
  for (int i = 0; i < rank; ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) // infinity or NaN
    return fromBits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) { // zero or subnormal: mant × 2^-24, exactly representable in f32
    float v = float(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return fromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

const char *dtypeName(planrt_dtype d) {
  static const char *names[] = {"F32", "F16", "BF16", "I32", "I64", "U16"};
  return unsigned(d) < 6 ? names[d] : "?";
}

} // namespace

planrt_status toF32(const planrt_tensor &t, const std::string &file, float *dst) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i)
    n *= t.shape[i];
  switch (t.dtype) {
  case PLANRT_F32:
    std::memcpy(dst, t.data, size_t(n) * sizeof(float));
    return PLANRT_OK;
  case PLANRT_BF16: {
    auto *src = static_cast<const uint16_t *>(t.data);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = fromBits(uint32_t(src[i]) << 16);
    return PLANRT_OK;
  }
  case PLANRT_F16: {
    auto *src = static_cast<const uint16_t *>(t.data);
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(src[i]);
    return PLANRT_OK;
  }
  default:
    return fail(PLANRT_ERR_MISMATCH, "%s: tensor '%s' is %s; parameters load from F32, BF16 or F16 tensors",
                file.c_str(), t.name, dtypeName(t.dtype));
  }
}

Pretrained::~Pretrained() {
  for (planrt_st *st : files)
    planrt_st_close(st);
}

planrt_status Pretrained::openFile(const std::string &file) {
  planrt_st *st = nullptr;
  if (planrt_status s = planrt_st_open(file.c_str(), &st))
    return s;
  files.push_back(st);
  paths.push_back(file);
  for (size_t i = 0; i < planrt_st_count(st); ++i) {
    planrt_tensor t;
    if (planrt_status s = planrt_st_find(st, planrt_st_name(st, i), &t))
      return s;
    tensors[t.name] = t;
  }
  return PLANRT_OK;
}

planrt_status Pretrained::openIndex(const std::string &index) {
  json j;
  try {
    std::ifstream in(index);
    if (!in)
      return fail(PLANRT_ERR_IO, "%s: cannot open: %s", index.c_str(), std::strerror(errno));
    j = json::parse(in);
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_FORMAT, "%s: not a safetensors index (%s)", index.c_str(), e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return fail(PLANRT_ERR_FORMAT, "%s: not a safetensors index: no 'weight_map' object", index.c_str());
  paths.push_back(index);
  std::string dir = index.substr(0, index.find_last_of('/') == std::string::npos ? 0 : index.find_last_of('/') + 1);
  std::map<std::string, bool> shards;
  for (auto &[name, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
      return fail(PLANRT_ERR_FORMAT, "%s: weight_map['%s'] is not a file name beside the index", index.c_str(),
                  name.c_str());
    shards[file.get<std::string>()] = true;
  }
  for (auto &[file, _] : shards)
    if (planrt_status s = openFile(dir + file))
      return s;
  for (auto &[name, file] : j["weight_map"].items())
    if (!tensors.count(name))
      return fail(PLANRT_ERR_FORMAT, "%s: '%s' is listed in %s but that file does not hold it", index.c_str(),
                  name.c_str(), file.get<std::string>().c_str());
  return PLANRT_OK;
}

planrt_status Pretrained::open(const std::string &path, const std::string &format, std::unique_ptr<Pretrained> &out) {
  std::unique_ptr<Pretrained> p(new Pretrained);
  p->hf = format == "hf";
  p->described = path;
  planrt_status s = PLANRT_OK;
  if (isDirectory(path)) {
    std::string file, hfIndex = path + "/model.safetensors.index.json", hfFile = path + "/model.safetensors";
    uint64_t step = 0;
    bool sharded = false;
    if (isFile(hfFile)) {
      file = hfFile;
    } else if (isFile(hfIndex)) {
      file = hfIndex;
    } else if (!listCheckpoints(path).empty()) {
      if ((s = latestCheckpoint(path, file, step, sharded)))
        return s;
      if (sharded)
        return fail(PLANRT_ERR_FORMAT,
                    "%s: its latest checkpoint (%s) is sharded; a base model loads from a whole one "
                    "(an executable's --export FILE writes one)",
                    path.c_str(), file.c_str());
    } else {
      return fail(PLANRT_ERR_IO,
                  "%s: no checkpoint in this directory (no model.safetensors, model.safetensors.index.json or "
                  "planc step checkpoint)",
                  path.c_str());
    }
    p->described = file;
    s = endsWith(file, ".json") ? p->openIndex(file) : p->openFile(file);
  } else if (!isFile(path)) {
    return fail(PLANRT_ERR_IO, "%s: cannot open the base checkpoint: %s", path.c_str(), std::strerror(errno));
  } else {
    s = endsWith(path, ".json") ? p->openIndex(path) : p->openFile(path);
  }
  if (s)
    return s;
  out = std::move(p);
  return PLANRT_OK;
}

planrt_status Pretrained::digest(std::string &hex) const {
  if (paths.size() == 1)
    return sha256File(paths[0], hex);
  std::string lines;
  for (const std::string &p : paths) {
    std::string one;
    if (planrt_status s = sha256File(p, one))
      return s;
    lines += p.substr(p.find_last_of('/') + 1) + " " + one + "\n";
  }
  hex = sha256Text(lines);
  return PLANRT_OK;
}

const planrt_tensor *Pretrained::find(const std::string &name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

planrt_status Pretrained::readCount(const std::string &name, int64_t &out) const {
  const planrt_tensor *t = find(name);
  if (!t || t->dtype != PLANRT_I64 || t->rank != 0)
    return fail(PLANRT_ERR_MISMATCH, "%s: '%s' is %s, not a count (a 0-d I64 tensor)", described.c_str(), name.c_str(),
                t ? "another tensor" : "not in the checkpoint");
  std::memcpy(&out, t->data, sizeof out);
  return PLANRT_OK;
}

planrt_status Pretrained::read(const std::string &name, const std::vector<int64_t> &shape, float *dst) const {
  if (hf && !find(name))
    return readHf(name, shape, dst);
  const planrt_tensor *t = find(name);
  if (!t)
    return fail(PLANRT_ERR_MISMATCH, "%s: the model's tensor '%s' is not in the checkpoint%s", described.c_str(),
                name.c_str(), hf ? "" : " (for Hugging Face names, write format: hf)");
  return convert(*t, name, shape, dst);
}

planrt_status Pretrained::convert(const planrt_tensor &t, const std::string &name, const std::vector<int64_t> &shape,
                                  float *dst) const {
  if (shapeText(t.shape, t.rank) != shapeText(shape.data(), int(shape.size())))
    return fail(PLANRT_ERR_MISMATCH, "%s: tensor '%s' is %s %s in the checkpoint but the model's '%s' is %s",
                described.c_str(), t.name, dtypeName(t.dtype), shapeText(t.shape, t.rank).c_str(), name.c_str(),
                shapeText(shape.data(), int(shape.size())).c_str());
  return toF32(t, described, dst);
}

float roundToPrecision(float x, const std::string &precision) {
  return planrt::kernels::roundTo(x, precision == "bf16" ? 1 : precision == "fp16" ? 2 : 0);
}

void mergeLora(float *w, const float *a, const float *b, int64_t in, int64_t out, int64_t rank, double scale) {
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double sum = 0;
      for (int64_t r = 0; r < rank; ++r)
        sum += double(a[i * rank + r]) * double(b[r * out + j]);
      w[i * out + j] = float(double(w[i * out + j]) + scale * sum);
    }
}

std::vector<std::string> hfLlamaModules(const std::string &module) {
  static const std::regex layer(R"(layers\.(\d+)\.(attention|feed_forward)\.(c_attn|c_proj|gate|up|down))");
  std::smatch m;
  if (module == "output")
    return {"lm_head"};
  if (!std::regex_match(module, m, layer))
    return {};
  std::string at = "model.layers." + m[1].str() + ".", leaf = m[3].str();
  if (m[2].str() == "attention" && leaf == "c_attn")
    return {at + "self_attn.q_proj", at + "self_attn.k_proj", at + "self_attn.v_proj"};
  if (m[2].str() == "attention" && leaf == "c_proj")
    return {at + "self_attn.o_proj"};
  if (m[2].str() == "feed_forward" && (leaf == "gate" || leaf == "up" || leaf == "down"))
    return {at + "mlp." + leaf + "_proj"};
  return {};
}

planrt_status Pretrained::readHf(const std::string &name, const std::vector<int64_t> &shape, float *dst) const {
  // GPT-2: planc's names are GPT2LMHeadModel's without its `transformer.` prefix.
  for (const char *prefix : {"transformer.", "model."})
    if (const planrt_tensor *t = find(prefix + name))
      return convert(*t, name, shape, dst);
  // Llama: Meta's module names (planc's llama family) onto LlamaForCausalLM's.
  static const std::regex norm(R"(layers\.(\d+)\.(attention|ffn)_norm\.weight)");
  std::smatch m;
  std::string direct;
  std::vector<std::string> transposed;
  if (name == "tok_embeddings.weight") {
    direct = "model.embed_tokens.weight";
  } else if (name == "norm.weight") {
    direct = "model.norm.weight";
  } else if (std::regex_match(name, m, norm)) {
    direct = "model.layers." + m[1].str() +
             (m[2].str() == "attention" ? ".input_layernorm.weight" : ".post_attention_layernorm.weight");
  } else if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
    for (const std::string &module : hfLlamaModules(name.substr(0, name.size() - 7)))
      transposed.push_back(module + ".weight");
  }
  if (!direct.empty()) {
    const planrt_tensor *t = find(direct);
    if (!t)
      return fail(PLANRT_ERR_MISMATCH,
                  "%s: the model's tensor '%s' is not in the checkpoint (as '%s', '%s' or Hugging Face's '%s')",
                  described.c_str(), name.c_str(), name.c_str(), ("transformer." + name).c_str(), direct.c_str());
    return convert(*t, name, shape, dst);
  }
  if (!transposed.empty())
    return readTransposed(name, shape, transposed, dst);
  return fail(PLANRT_ERR_MISMATCH,
              "%s: the model's tensor '%s' is not in the checkpoint (as '%s' or '%s'), and no Hugging Face "
              "name maps onto it",
              described.c_str(), name.c_str(), name.c_str(), ("transformer." + name).c_str());
}

planrt_status Pretrained::readTransposed(const std::string &name, const std::vector<int64_t> &shape,
                                         const std::vector<std::string> &parts, float *dst) const {
  std::string list;
  for (const std::string &p : parts)
    list += (list.empty() ? "'" : ", '") + p + "'";
  if (shape.size() != 2)
    return fail(PLANRT_ERR_MISMATCH, "%s: the model's '%s' is %s, not a matrix, but maps onto Hugging Face's %s",
                described.c_str(), name.c_str(), shapeText(shape.data(), int(shape.size())).c_str(), list.c_str());
  int64_t in = shape[0], rows = 0;
  std::vector<const planrt_tensor *> ts;
  for (const std::string &p : parts) {
    const planrt_tensor *t = find(p);
    if (!t)
      return fail(PLANRT_ERR_MISMATCH, "%s: the model's tensor '%s' is not in the checkpoint (as Hugging Face's %s)",
                  described.c_str(), name.c_str(), list.c_str());
    if (t->rank != 2 || t->shape[1] != in)
      return fail(PLANRT_ERR_MISMATCH,
                  "%s: tensor '%s' is %s in the checkpoint but the model's '%s' is %s: it needs [out, %lld]",
                  described.c_str(), p.c_str(), shapeText(t->shape, t->rank).c_str(), name.c_str(),
                  shapeText(shape.data(), 2).c_str(), (long long)in);
    rows += t->shape[0];
    ts.push_back(t);
  }
  if (rows != shape[1])
    return fail(PLANRT_ERR_MISMATCH, "%s: %s hold %lld rows in the checkpoint but the model's '%s' is %s",
                described.c_str(), list.c_str(), (long long)rows, name.c_str(), shapeText(shape.data(), 2).c_str());
  int64_t col = 0;
  std::vector<float> buf;
  for (const planrt_tensor *t : ts) {
    int64_t out = t->shape[0];
    buf.resize(size_t(out * in));
    if (planrt_status s = toF32(*t, described, buf.data()))
      return s;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        dst[i * rows + col + o] = buf[size_t(o * in + i)];
    col += out;
  }
  return PLANRT_OK;
}

} // namespace planrt::train
