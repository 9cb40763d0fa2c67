// A fine-tuning plan's frozen base (trainer.h): drawn or loaded whole, this rank's
// pieces written after the trained parameters in the params buffer, never written
// again (QLoRA: quantized to NF4 as it is written); the pointer to it that checkpoints
// carry; the merged and PEFT exports.
#include "kernels/nf4.h"
#include "pretrained.h"
#include "sharded.h"
#include "trainer.h"

#include "planrt_kernels.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace planrt::train {

planrt_status Trainer::initFrozen(const std::map<std::string, std::string> *resumed) {
  if (m.frozen.empty())
    return PLANRT_OK;
  frozenWhole.assign(size_t(m.frozenFullFloats), 0.0f);
  // --init FILE holds the base and the adapters (planc names); else the plan's init
  // checkpoint; else the seed, with the streams a plan without adapters gives them.
  std::string path = !o.init.empty() ? o.init : m.initPath;
  if (!path.empty()) {
    std::unique_ptr<Pretrained> base;
    if (planrt_status s = Pretrained::open(path, o.init.empty() ? m.initFormat : "planc", base))
      return s;
    for (const Param &p : m.frozen)
      if (planrt_status s = base->read(p.name, p.fullShape, frozenWhole.data() + p.fullOffset))
        return s;
    baseFile = base->source();
    if (planrt_status s = base->digest(baseSha256))
      return s;
  } else {
    for (size_t i = 0; i < m.frozen.size(); ++i) {
      const Param &p = m.frozen[i];
      float *dst = frozenWhole.data() + p.fullOffset;
      // The stream of its position in the whole base (under a pipeline, its index).
      uint64_t stream = uint64_t(p.index >= 0 ? p.index : int64_t(i));
      planrt_status s = p.init == "normal"
                            ? planrt_init_normal(dst, p.fullCount, 0, 0.0, p.std, m.seed, stream)
                            : planrt_init_fill(dst, p.fullCount, p.init == "ones" ? 1.0f : 0.0f);
      if (s)
        return s;
    }
  }
  // A base with a NaN or an infinity would train to nothing (NF4 would spread it over its
  // block's group): refused by name.
  for (const Param &p : m.frozen)
    for (int64_t i = 0; i < p.fullCount; ++i)
      if (!std::isfinite(frozenWhole[size_t(p.fullOffset + i)]))
        return fail(PLANRT_ERR_ARG, "%s: the base's tensor '%s' is %s at element %lld",
                    baseFile.empty() ? "the base drawn from the seed" : baseFile.c_str(), p.name.c_str(),
                    std::isnan(frozenWhole[size_t(p.fullOffset + i)]) ? "NaN" : "infinite", (long long)i);
  // A resumed run must train over the base its checkpoint was trained over.
  if (resumed && resumed->count("base_sha256") && resumed->at("base_sha256") != baseSha256)
    return fail(PLANRT_ERR_MISMATCH,
                "the checkpoint's adapters were trained over the base %s (sha256 %s), but this run's base is %s "
                "(sha256 %s)",
                resumed->count("base") ? resumed->at("base").c_str() : "?", resumed->at("base_sha256").c_str(),
                baseFile.empty() ? "drawn from the seed" : baseFile.c_str(),
                baseSha256.empty() ? "none" : baseSha256.c_str());
  // This rank's region after the trained layout in params; under ZeRO-3 its piece of it.
  std::vector<float> whole;
  float *region = data(params) + m.numFloats;
  if (frozenShard >= 0) {
    whole.assign(size_t(m.frozenFloats), 0.0f);
    region = whole.data();
  }
  int64_t c = tensorCoord();
  for (const Param &p : m.frozen) {
    float *dst = region + (p.offset - m.numFloats);
    if (p.nf4.block) { // QLoRA: quantized here, the same way on every rank and every run
      nf4::quantize(frozenWhole.data() + p.fullOffset, p.count, p.nf4.block, p.nf4.dbl,
                    reinterpret_cast<uint8_t *>(dst));
      continue;
    }
    runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
      std::memcpy(dst + l, frozenWhole.data() + p.fullOffset + w, size_t(n) * sizeof(float));
    });
    // Mixed precision: rounded once here rather than at every step (nn-autodiff leaves
    // the frozen base unrounded; a dequantized NF4 weight is rounded where it is made).
    if (m.precision != "fp32")
      for (int64_t i = 0; i < p.count; ++i)
        dst[i] = roundToPrecision(dst[i], m.precision);
  }
  if (frozenShard >= 0) {
    int64_t piece = m.frozenFloats / m.dataParallel;
    std::memcpy(data(frozenShard), whole.data() + ctx.dataRank * piece, size_t(piece) * sizeof(float));
  }
  return PLANRT_OK;
}

planrt_status Trainer::frozenRegion(std::vector<float> &store, const float *&region) {
  if (frozenShard < 0) {
    region = data(params) + m.numFloats;
    return PLANRT_OK;
  }
  store.assign(size_t(m.frozenFloats), 0.0f);
  planrt::Waiting w(ctx, "all_gather over the data axes of the frozen base");
  if (planrt_status s =
          planrt_all_gather(ctx.mesh, m.dataMask, data(frozenShard), m.frozenFloats / m.dataParallel, store.data()))
    return s;
  region = store.data();
  return PLANRT_OK;
}

planrt_status Trainer::wholeFrozen(std::vector<float> &mine, std::vector<float> &store, std::vector<FrozenTensor> &out) {
  out.clear();
  if (m.pipeline <= 1) {
    for (const Param &p : m.frozen)
      out.push_back({&p, mine.data() + p.fullOffset});
    return PLANRT_OK;
  }
  int64_t most = *std::max_element(m.stageFrozenFullFloats.begin(), m.stageFrozenFullFloats.end());
  std::vector<float> padded(size_t(most), 0.0f);
  std::memcpy(padded.data(), mine.data(), size_t(m.frozenFullFloats) * sizeof(float));
  store.assign(size_t(most * m.pipeline), 0.0f);
  {
    planrt::Waiting w(ctx, "all_gather over the pipeline axis of the frozen base");
    if (planrt_status s =
            planrt_all_gather(ctx.mesh, 1u << unsigned(m.pipelineAxis), padded.data(), most, store.data()))
      return s;
  }
  for (int64_t q = 0; q < m.pipeline; ++q)
    for (const Param &p : m.stageFrozen[size_t(q)])
      if (!p.replica)
        out.push_back({&p, store.data() + q * most + p.fullOffset});
  return PLANRT_OK;
}

namespace {
/// v in the shortest decimal that reads back as the same double.
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
} // namespace

std::vector<std::string> Trainer::baseMetadata() const {
  if (m.frozen.empty())
    return {};
  std::vector<std::string> meta{"base",        baseFile.empty() ? "seed " + std::to_string(m.seed) : baseFile,
                                 "base_sha256", baseSha256,
                                 "base_format", o.init.empty() ? m.initFormat : "planc",
                                 "lora_rank",   std::to_string(m.adapt.rank),
                                 "lora_alpha",  exact(m.adapt.alpha),
                                 "base_precision", m.precision};
  // QLoRA: the weights the adapters were trained over are these, dequantized.
  std::string quantized;
  const Param *any = nullptr;
  for (const std::vector<Param> &stage : m.pipeline > 1 ? m.stageFrozen : std::vector<std::vector<Param>>{m.frozen})
    for (const Param &p : stage)
      if (p.nf4.block && !p.replica) {
        quantized += (quantized.empty() ? "" : ",") + p.name;
        any = &p;
      }
  if (any)
    meta.insert(meta.end(), {"nf4_weights", quantized, "nf4_block", std::to_string(any->nf4.block), "nf4_double",
                             any->nf4.dbl ? "1" : "0"});
  return meta;
}

planrt_status Trainer::frozenFromBuffer(std::vector<float> &whole) {
  whole.assign(size_t(m.frozenFullFloats), 0.0f);
  std::vector<float> store;
  const float *region = nullptr;
  if (planrt_status s = frozenRegion(store, region))
    return s;
  if (!tensorParallel()) {
    for (const Param &p : m.frozen) {
      const float *src = region + (p.offset - m.numFloats);
      if (p.nf4.block) // QLoRA: the matrix the steps used
        planrt_k_dequant_nf4(src, whole.data() + p.fullOffset, p.count, p.nf4.block, p.nf4.dbl);
      else
        std::memcpy(whole.data() + p.fullOffset, src, size_t(p.count) * sizeof(float));
    }
    return PLANRT_OK;
  }
  std::vector<float> all(size_t(m.frozenFloats * m.tensorParallel));
  {
    planrt::Waiting w(ctx, "all_gather over the tensor axis of the frozen base");
    if (planrt_status s =
            planrt_all_gather(ctx.mesh, 1u << unsigned(m.tensorAxis), region, m.frozenFloats, all.data()))
      return s;
  }
  for (int64_t c = 0; c < m.tensorParallel; ++c)
    for (const Param &p : m.frozen)
      runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
        std::memcpy(whole.data() + p.fullOffset + w, all.data() + c * m.frozenFloats + (p.offset - m.numFloats) + l,
                    size_t(n) * sizeof(float));
      });
  return PLANRT_OK;
}

planrt_status Trainer::exportMerged(const std::string &file, const std::vector<WholeTensor> &adapters,
                                    const std::vector<FrozenTensor> &base) {
  std::map<std::string, const float *> byName;
  for (const WholeTensor &t : adapters)
    byName[t.p->name] = t.data[0];
  double scale = m.adapt.alpha / double(m.adapt.rank);
  std::vector<planrt_tensor> tensors;
  for (const FrozenTensor &t : base) {
    const Param &p = *t.p;
    std::string module = p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".weight") == 0
                             ? p.name.substr(0, p.name.size() - 7)
                             : p.name;
    auto a = byName.find(module + ".lora_a"), b = byName.find(module + ".lora_b");
    if (a != byName.end() && b != byName.end())
      mergeLora(t.data, a->second, b->second, p.fullShape[0], p.fullShape[1], m.adapt.rank, scale);
    tensors.push_back({p.name.c_str(), PLANRT_F32, int(p.fullShape.size()), p.fullShape.data(), t.data});
  }
  std::vector<std::string> meta = metadata("planc-params-1", lastStep);
  meta.insert(meta.end(), {"merged", "lora"});
  std::vector<const char *> mp = pointers(meta);
  return planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2);
}

std::vector<Trainer::PeftModule> Trainer::peftModules(const Param &b) const {
  std::string module = b.name.substr(0, b.name.size() - std::string(".lora_b").size());
  int64_t out = b.fullShape[1];
  if (module.rfind("layers.", 0) != 0 && module != "output") // GPT-2: Conv1D modules
    return {{"transformer." + module, 0, out}};
  std::vector<std::string> hf = hfLlamaModules(module);
  if (hf.size() == 1)
    return {{hf[0], 0, out}};
  if (hf.size() != 3 || b.qkv.size() != 3)
    return {};
  return {{hf[0], 0, b.qkv[0]}, {hf[1], b.qkv[0], b.qkv[1]}, {hf[2], b.qkv[0] + b.qkv[1], b.qkv[2]}};
}

planrt_status Trainer::checkPeftNames() const {
  for (const std::vector<Param> &stage : m.pipeline > 1 ? m.stageParams : std::vector<std::vector<Param>>{m.params})
    for (const Param &p : stage)
      if (!p.adapts.empty() && p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".lora_b") == 0 &&
          peftModules(p).empty())
        return fail(PLANRT_ERR_ARG,
                    "--export-adapters: '%s' adapts '%s', which has no Hugging Face module of its own; "
                    "--export FILE --merge writes the merged model",
                    p.name.c_str(), p.adapts.c_str());
  return PLANRT_OK;
}

planrt_status Trainer::exportAdapters(const std::string &file, const std::vector<WholeTensor> &adapters) {
  // PEFT's layout: lora_A.weight [R, in] and lora_B.weight [out, R] (nn.Linear's [out, in]),
  // under `base_model.model.` + the Hugging Face module path; a fused q/k/v projection's
  // adapter is its three modules', lora_A shared and lora_B split by rows.
  if (planrt_status s = checkPeftNames())
    return s;
  std::map<std::string, const WholeTensor *> byName;
  for (const WholeTensor &t : adapters)
    byName[t.p->name] = &t;
  std::vector<std::string> names, modules;
  std::vector<std::vector<float>> store;
  std::vector<std::vector<int64_t>> shapes;
  bool llama = false;
  auto add = [&](const std::string &name, std::vector<float> data, int64_t rows, int64_t cols) {
    names.push_back(name);
    store.push_back(std::move(data));
    shapes.push_back({rows, cols});
  };
  for (const WholeTensor &bt : adapters) {
    const Param &b = *bt.p;
    if (b.name.size() <= 7 || b.name.compare(b.name.size() - 7, 7, ".lora_b") != 0)
      continue;
    std::string module = b.name.substr(0, b.name.size() - 7);
    auto at = byName.find(module + ".lora_a");
    if (at == byName.end())
      return fail(PLANRT_ERR_MISMATCH, "--export-adapters: '%s' has no '%s.lora_a'", b.name.c_str(), module.c_str());
    int64_t in = at->second->p->fullShape[0], rank = b.fullShape[0], out = b.fullShape[1];
    const float *a = at->second->data[0], *bv = bt.data[0];
    for (const PeftModule &pm : peftModules(b)) {
      std::vector<float> A(size_t(rank * in)), B(size_t(pm.count * rank));
      for (int64_t i = 0; i < in; ++i)
        for (int64_t r = 0; r < rank; ++r)
          A[size_t(r * in + i)] = a[i * rank + r];
      for (int64_t r = 0; r < rank; ++r)
        for (int64_t j = 0; j < pm.count; ++j)
          B[size_t(j * rank + r)] = bv[r * out + pm.first + j];
      add("base_model.model." + pm.name + ".lora_A.weight", std::move(A), rank, in);
      add("base_model.model." + pm.name + ".lora_B.weight", std::move(B), pm.count, rank);
      std::string leaf = pm.name.substr(pm.name.find_last_of('.') + 1);
      if (std::find(modules.begin(), modules.end(), leaf) == modules.end())
        modules.push_back(leaf);
      llama = llama || pm.name.rfind("transformer.", 0) != 0;
    }
  }
  std::vector<planrt_tensor> tensors;
  for (size_t i = 0; i < names.size(); ++i)
    tensors.push_back({names[i].c_str(), PLANRT_F32, 2, shapes[i].data(), store[i].data()});
  std::vector<std::string> meta{"format", "pt"};
  std::vector<const char *> mp = pointers(meta);
  if (planrt_status s = planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
    return s;
  nlohmann::ordered_json config = {{"peft_type", "LORA"},
                                   {"task_type", "CAUSAL_LM"},
                                   {"base_model_name_or_path", baseFile},
                                   {"r", m.adapt.rank},
                                   {"lora_alpha", m.adapt.alpha},
                                   {"lora_dropout", 0.0},
                                   {"target_modules", modules},
                                   {"fan_in_fan_out", !llama}, // GPT-2's Conv1D is [in, out]
                                   {"bias", "none"}};
  std::string dir = file.find_last_of('/') == std::string::npos ? "." : file.substr(0, file.find_last_of('/'));
  std::string path = dir + "/adapter_config.json", tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << config.dump(2) << "\n";
    if (!out.flush())
      return fail(PLANRT_ERR_IO, "%s: cannot write: %s", tmp.c_str(), std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return fail(PLANRT_ERR_IO, "%s: cannot rename into place: %s", path.c_str(), std::strerror(errno));
  return PLANRT_OK;
}

} // namespace planrt::train
