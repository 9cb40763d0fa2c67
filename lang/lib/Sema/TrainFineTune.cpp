// Fine-tuning a pretrained model (EXTENSIONS.md §1): where its parameters come from
// (`init = checkpoint(…)`), the adapters that train over it (`adapt = lora(…)`), and
// the NF4 storage of its frozen base (`quantize = nf4(…)`, QLoRA).
#include "Train.h"

#include <sys/stat.h>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

std::optional<std::map<std::string, Value>> TrainCheck::callKey(const char *key, const Signature &sig,
                                                                 const char *expected) {
  const Expr *e = sec.value(key);
  if (!e)
    return std::nullopt;
  Value v = sema.eval(*e, nullptr);
  if (!v.isError() && (v.kind != Value::Kind::Call || v.s != sig.name))
    sema.typeError(v, std::string("'") + key + "' of " + what, expected);
  std::optional<std::map<std::string, Value>> args;
  if (v.kind == Value::Kind::Call && v.s == sig.name)
    args = bindArgs(sema, sig, v);
  ok = ok && args.has_value();
  return args;
}

void TrainCheck::checkInit() {
  auto args = callKey("init", {"checkpoint", {{"path", true}, {"format", false}}},
                      "a checkpoint, as in checkpoint(\"ckpt/base\", format: hf)");
  if (!args)
    return;
  auto &a = *args;
  std::optional<std::string> path = sema.toString(a["path"], "the path of 'checkpoint'");
  if (!path) {
    ok = false;
    return;
  }
  if (path->empty()) {
    diags.error(a["path"].loc, "the path of 'checkpoint' is empty");
    ok = false;
    return;
  }
  std::string full = Sema::resolvePath(t.baseDir, *path);
  struct stat st;
  if (::stat(full.c_str(), &st) != 0) {
    diags.error(a["path"].loc, "no checkpoint at '" + full + "': no such file or directory")
        .note(a["path"].loc, "'init = checkpoint(PATH)' takes a .safetensors file, a planc checkpoint directory "
                             "(its latest step), or a Hugging Face model directory or its "
                             "model.safetensors.index.json; relative paths start at the plan's directory");
    ok = false;
    return;
  }
  t.init.path = *path;
  if (a.count("format")) {
    if (auto f = sema.toChoice(a["format"], "checkpoint format", {"planc", "hf"}))
      t.init.format = *f;
    else
      ok = false;
  }
}

namespace {
/// The weight matrices LoRA can adapt: those that `linear` and `attention` bindings
/// multiply their input by (not embeddings, not a tied head).
std::vector<std::string> adaptableMatrices(const sema::Model &model) {
  std::vector<std::string> out;
  for (const sema::GraphOp &op : model.ops) {
    std::vector<int> ws;
    if (op.kind == sema::OpKind::Linear && !op.params.empty())
      ws = {op.params[0]};
    else if (op.kind == sema::OpKind::Attention && op.params.size() >= 2)
      ws = {op.params[0], op.params[op.params.size() == 4 ? 2 : 1]};
    for (int w : ws)
      if (std::find(out.begin(), out.end(), model.params[size_t(w)].path) == out.end())
        out.push_back(model.params[size_t(w)].path);
  }
  return out;
}

/// Whether `path` without `.weight` ends with `target` at a component boundary.
bool matches(const std::string &path, const std::string &target) {
  std::string p = path;
  if (p.size() > 7 && p.compare(p.size() - 7, 7, ".weight") == 0)
    p.resize(p.size() - 7);
  if (p.size() < target.size() || p.compare(p.size() - target.size(), target.size(), target) != 0)
    return false;
  return p.size() == target.size() || p[p.size() - target.size() - 1] == '.';
}
} // namespace

void TrainCheck::checkAdapt() {
  auto args = callKey("adapt", {"lora", {{"rank", true}, {"alpha", false}, {"targets", true}, {"dropout", false}}},
                      "low-rank adapters, as in lora(rank: 8, alpha: 16, targets: [c_attn])");
  if (!args)
    return;
  auto &a = *args;
  std::optional<int64_t> rank = sema.toPositiveInt(a["rank"], "the rank of 'lora'");
  std::optional<double> alpha = a.count("alpha") ? sema.toFloat(a["alpha"], "the alpha of 'lora'")
                                                 : std::optional<double>(rank ? double(*rank) : 1.0);
  if (!rank || !alpha) {
    ok = false;
    return;
  }
  if (!(*alpha > 0)) {
    diags.error(a["alpha"].loc, "the alpha of 'lora' must be positive");
    ok = false;
  }
  if (a.count("dropout")) {
    std::optional<double> p = sema.toFloat(a["dropout"], "the dropout of 'lora'");
    if (!p) {
      ok = false;
    } else if (*p != 0) {
      diags.error(a["dropout"].loc, "LoRA dropout is not implemented in this version of planc; write dropout: 0 "
                                    "(or leave it out)");
      ok = false;
    }
  }
  // Targets: names (c_attn) or strings ("attn.c_proj"), each matching at least one matrix.
  Value &list = a["targets"];
  std::vector<std::pair<std::string, ast::Loc>> targets;
  std::vector<Value::Item> items =
      list.kind == Value::Kind::List ? list.items : std::vector<Value::Item>{{"", list.loc, std::make_shared<Value>(list)}};
  for (const Value::Item &it : items) {
    if (!it.key.empty() || (it.value->kind != Value::Kind::Name && it.value->kind != Value::Kind::String)) {
      sema.typeError(*it.value, "a target of 'lora'", "a layer name, as in c_attn or \"attn.c_proj\"");
      ok = false;
      return;
    }
    targets.push_back({it.value->s, it.value->loc});
  }
  if (targets.empty()) {
    diags.error(list.loc, "'lora' needs at least one target");
    ok = false;
    return;
  }
  if (!model)
    return;
  std::vector<std::string> candidates = adaptableMatrices(*model), matched;
  for (auto &[target, loc] : targets) {
    bool any = false;
    for (const std::string &path : candidates)
      if (matches(path, target)) {
        any = true;
        if (std::find(matched.begin(), matched.end(), path) == matched.end())
          matched.push_back(path);
      }
    if (!any) {
      std::vector<std::string> names;
      for (const std::string &path : candidates) {
        std::string p = path.substr(0, path.size() - (path.size() > 7 ? 7 : 0));
        names.push_back(p.substr(p.find_last_of('.') == std::string::npos ? 0 : p.find_last_of('.') + 1));
      }
      std::string best = closestMatch(target, names);
      auto d = diags.error(loc, "LoRA target '" + target + "' matches no weight matrix of model '" + model->name + "'" +
                                    (best.empty() ? "" : "; did you mean '" + best + "'?"));
      d.note(model->loc, "its linear and attention weights are named like '" +
                             (candidates.empty() ? std::string("(none)") : candidates.front()) + "'");
      ok = false;
    }
    t.adapt.targets.push_back(target);
  }
  // Keep the model's order, for a stable parameter order.
  for (const std::string &path : candidates)
    if (std::find(matched.begin(), matched.end(), path) != matched.end())
      t.adapt.matrices.push_back(path);
  t.adapt.rank = *rank;
  t.adapt.alpha = *alpha;
}

void TrainCheck::checkQuantize() {
  const ast::Entry *q = sec.get("quantize");
  if (!q)
    return;
  if (!sec.get("adapt")) {
    diags.error(q->loc, "'quantize' stores the frozen base of a fine-tuning plan quantized, so it needs 'adapt', as in "
                        "'adapt = lora(rank: 8, targets: [c_attn])' (QLoRA)");
    ok = false;
    return;
  }
  auto args = callKey("quantize", {"nf4", {{"block", false}, {"double", false}}},
                      "NF4 storage, as in nf4(block: 64, double: true)");
  if (!args)
    return;
  auto &a = *args;
  int64_t block = 64;
  if (a.count("block")) {
    std::optional<int64_t> b = sema.toPositiveInt(a["block"], "the block of 'nf4'");
    if (!b) {
      ok = false;
      return;
    }
    if (*b % 2 != 0 || *b > 4096) {
      diags.error(a["block"].loc, "the block of 'nf4' must be even and at most 4096 (QLoRA uses 64), not " +
                                      std::to_string(*b));
      ok = false;
      return;
    }
    block = *b;
  }
  if (a.count("double")) {
    std::optional<bool> d = sema.toBool(a["double"], "the 'double' of 'nf4'");
    if (!d) {
      ok = false;
      return;
    }
    t.adapt.quantize.dbl = *d;
  }
  // Each tensor-parallel rank would quantize its own piece: blocks and scales unlike
  // one device's, so the same plan would train over another base.
  if (!t.parallel.tensorAxis.empty()) {
    diags.error(q->loc, "'quantize' with tensor parallelism (axis '" + t.parallel.tensorAxis +
                            "') is not implemented in this version of planc: the base is quantized whole, so it "
                            "must be whole on every rank; use data parallelism (with ZeRO-1 or 2) instead");
    ok = false;
    return;
  }
  t.adapt.quantize.block = block;
  if (model)
    t.adapt.quantize.matrices = adaptableMatrices(*model);
}
