// Checks of mesh, train, retrieval and generate declarations: every static rule
// of the language (axis roles, divisibility, accumulation, pipeline limits, …).
#include "SemaInternal.h"

#include "plan/Lang/Layout.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

static std::string joinInts(const std::vector<std::pair<std::string, int64_t>> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? " × " : "") + v[i].first + " " + std::to_string(v[i].second);
  return s;
}

void Sema::checkMesh(const ast::Decl &decl) {
  std::string what = "mesh '" + decl.name + "'";
  Section sec(*this, decl.entries, what, {"devices", "axes", "memory", "peak", "hbm", "links"});
  sema::Mesh mesh;
  mesh.name = decl.name;
  mesh.loc = decl.nameLoc;
  bool ok = true;

  const Expr *devices = sec.value("devices");
  if (!devices) {
    if (!sec.get("devices"))
      diags.error(decl.nameLoc, what + " needs 'devices', as in 'devices = cpu(4)' or 'devices = cuda(8) * 2'");
    ok = false;
  } else {
    const Expr *call = devices;
    const Expr *nodes = nullptr;
    if (devices->kind == Expr::Kind::Binary && devices->text == "*" &&
        devices->lhs->kind == Expr::Kind::Call) {
      call = devices->lhs.get();
      nodes = devices->rhs.get();
    }
    Value v = call->kind == Expr::Kind::Call ? eval(*call, nullptr) : Value::error();
    if (call->kind != Expr::Kind::Call) {
      diags.error(devices->loc, "'devices' is 'cpu(N)', 'cuda(N)' or 'cuda(N) * nodes'");
      ok = false;
    } else if (!v.isError()) {
      if (v.s != "cpu" && v.s != "cuda") {
        // No "did you mean": gpu → cpu would quietly turn GPUs into CPU processes.
        diags.error(call->loc, "unknown device kind '" + v.s +
                                   "'; the kinds are cpu (processes on the host) and cuda (NVIDIA GPUs)");
        ok = false;
      } else if (auto args = bindArgs(*this, {v.s, {{"count", true}}}, v)) {
        mesh.kind = v.s == "cpu" ? sema::DeviceKind::CPU : sema::DeviceKind::CUDA;
        auto n = toPositiveInt((*args)["count"], "the device count");
        ok &= n.has_value();
        if (n)
          mesh.perNode = *n;
      } else {
        ok = false;
      }
      if (nodes) {
        auto m = toPositiveInt(eval(*nodes, nullptr), "the node count");
        ok &= m.has_value();
        if (m)
          mesh.nodes = *m;
      }
      int64_t total;
      if (ok && __builtin_mul_overflow(mesh.perNode, mesh.nodes, &total)) {
        diags.error(devices->loc, "too many devices");
        ok = false;
      }
    } else {
      ok = false;
    }
  }

  const ast::Entry *axesEntry = sec.get("axes");
  if (const Expr *axes = sec.value("axes")) {
    Value v = eval(*axes, nullptr);
    if (!v.isError()) {
      if (v.kind != Value::Kind::List || v.items.empty() || v.items.front().key.empty()) {
        typeError(v, "'axes' of " + what, "a list of named sizes, as in [dp: 2, tp: 4]");
        ok = false;
      } else {
        for (const Value::Item &it : v.items) {
          auto n = toPositiveInt(*it.value, "the size of axis '" + it.key + "'");
          if (!n) {
            ok = false;
            continue;
          }
          if (it.key == "none" || it.key == "_") {
            diags.error(it.keyLoc, "'" + it.key + "' cannot name a mesh axis");
            ok = false;
          }
          mesh.axes.push_back({it.key, *n, it.keyLoc});
        }
      }
    } else {
      ok = false;
    }
  } else if (!axesEntry) {
    diags.error(decl.nameLoc, what + " needs 'axes', as in 'axes = [dp: 2, tp: 2]'");
    ok = false;
  } else {
    ok = false;
  }

  if (ok) {
    int64_t product = 1;
    std::vector<std::pair<std::string, int64_t>> sizes;
    bool overflow = false;
    for (auto &a : mesh.axes) {
      overflow |= __builtin_mul_overflow(product, a.size, &product);
      sizes.push_back({a.name, a.size});
    }
    if (overflow || product != mesh.devices()) {
      diags.error(axesEntry->loc, "the axes of " + what + " multiply to " +
                                      (overflow ? std::string("more than 2^63") : std::to_string(product)) +
                                      " (" + joinInts(sizes) + "), but it has " +
                                      std::to_string(mesh.devices()) + " devices")
          .note(sec.get("devices")->loc, "devices are declared here")
          .note("the product of the axis sizes must equal the device count");
      ok = false;
    }
  }

  auto quantity = [&](const char *key, units::Dim dim) -> std::optional<double> {
    const Expr *e = sec.value(key);
    if (!e)
      return std::nullopt;
    auto q = toQuantity(eval(*e, nullptr), dim, std::string("'") + key + "' of " + what);
    if (!q) {
      ok = false;
    } else if (!(*q > 0)) {
      diags.error(e->loc, std::string("'") + key + "' of " + what + " must be positive");
      ok = false;
      return std::nullopt;
    }
    return q;
  };
  if (auto m = quantity("memory", units::Dim::Bytes))
    mesh.memoryBytes = int64_t(std::llround(std::min(*m, 9.2e18)));
  mesh.peakFlops = quantity("peak", units::Dim::FlopsPerSecond);
  mesh.hbmBytesPerSecond = quantity("hbm", units::Dim::BytesPerSecond);
  if (const Expr *links = sec.value("links")) {
    Value v = eval(*links, nullptr);
    if (v.kind != Value::Kind::List || (!v.items.empty() && v.items.front().key.empty())) {
      typeError(v, "'links' of " + what, "a list of named bandwidths, as in [node: 450 GB/s]");
      ok = false;
    } else {
      for (const Value::Item &it : v.items) {
        auto q = toQuantity(*it.value, units::Dim::BytesPerSecond, "link '" + it.key + "'");
        if (q && !(*q > 0)) {
          diags.error(it.value->loc, "link '" + it.key + "' of " + what + " must be positive");
          ok = false;
        } else if (q) {
          mesh.links[it.key] = *q;
        } else {
          ok = false;
        }
      }
    }
  }
  if (ok)
    program.meshes.push_back(std::move(mesh));
}

namespace {
/// One use of a mesh axis by a role, for the "exactly one role" rule.
struct AxisUse {
  std::string axis, role;
  ast::Loc loc;
};
} // namespace

void Sema::checkTrain(const ast::Decl &decl) {
  std::string what = "train '" + decl.name + "'";
  Section sec(*this, decl.entries, what,
              {"model", "mesh", "data", "val", "batch", "micro", "seq", "parallel", "shard",
               "precision", "loss_scale", "recompute", "optimizer", "schedule", "clip", "steps",
               "seed", "eval", "checkpoint"});
  sema::Train t;
  t.name = decl.name;
  t.loc = decl.nameLoc;
  t.baseDir = baseDir(decl.loc);
  bool ok = true;
  auto need = [&](const char *key, const char *example) -> const Expr * {
    const Expr *e = sec.value(key);
    if (!e && !sec.get(key) && !sec.misspelt(key)) {
      diags.error(decl.nameLoc, what + " needs '" + key + "', as in '" + key + " = " + example + "'");
      ok = false;
    }
    if (!e)
      ok = false;
    return e;
  };
  auto symbol = [&](const Expr *e, const char *key) -> std::optional<std::string> {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::Name) {
      typeError(v, std::string("'") + key + "' of " + what, "a name");
      return std::nullopt;
    }
    return v.s;
  };

  // model and mesh
  const sema::Model *model = nullptr;
  const sema::Mesh *mesh = nullptr;
  const ast::Decl *meshDecl = nullptr;
  if (const Expr *e = need("model", "tiny"))
    if (auto name = symbol(e, "model"))
      if (auto idx = modelIndex(*name, e->loc)) {
        t.model = *idx;
        model = &program.models[*idx];
      }
  if (const Expr *e = need("mesh", "cpu4"))
    if (auto name = symbol(e, "mesh")) {
      meshDecl = decls.lookup(*name);
      for (size_t i = 0; i < program.meshes.size(); ++i)
        if (program.meshes[i].name == *name) {
          t.mesh = int(i);
          mesh = &program.meshes[i];
        }
      if (!meshDecl || meshDecl->kind != ast::Decl::Kind::Mesh) {
        std::string best = closestMatch(*name, decls.names([](const ast::Decl &d) {
          return d.kind == ast::Decl::Kind::Mesh;
        }));
        diags.error(e->loc, "unknown mesh '" + *name + "'" +
                                (best.empty() ? "" : "; did you mean '" + best + "'?"));
        ok = false;
        meshDecl = nullptr;
      } else if (!mesh) {
        ok = false;  // the mesh itself has errors, already reported
      }
    }

  // data
  auto tokenFiles = [&](const char *key, std::vector<std::string> &out) {
    const Expr *e = sec.value(key);
    if (!e)
      return;
    Value v = eval(*e, nullptr);
    if (v.isError()) {
      ok = false;
      return;
    }
    if (v.kind != Value::Kind::Call || v.s != "tokens" || v.items.empty()) {
      typeError(v, std::string("'") + key + "' of " + what,
                "token files, as in tokens(\"data/train.bin\")");
      ok = false;
      return;
    }
    for (const Value::Item &it : v.items) {
      if (!it.key.empty()) {
        diags.error(it.keyLoc, "'tokens' takes file paths or globs only");
        ok = false;
        continue;
      }
      if (auto s = toString(*it.value, "a token file"))
        out.push_back(*s);
      else
        ok = false;
    }
  };
  if (!sec.get("data") && !sec.misspelt("data")) {
    diags.error(decl.nameLoc, what + " needs 'data', as in 'data = tokens(\"data/train.bin\")'");
    ok = false;
  }
  tokenFiles("data", t.data);
  tokenFiles("val", t.val);

  auto intKey = [&](const char *key, int64_t &out, bool required, int64_t minimum) -> bool {
    const Expr *e = sec.value(key);
    if (!e) {
      if (required && !sec.get(key) && !sec.misspelt(key)) {
        diags.error(decl.nameLoc, what + " needs '" + key + "'");
        ok = false;
      }
      return false;
    }
    auto i = toInt(eval(*e, nullptr), std::string("'") + key + "' of " + what);
    if (!i) {
      ok = false;
      return false;
    }
    if (*i < minimum) {
      diags.error(e->loc, std::string("'") + key + "' of " + what + " must be at least " +
                              std::to_string(minimum) + ", not " + std::to_string(*i));
      ok = false;
      return false;
    }
    out = *i;
    return true;
  };
  bool haveBatch = intKey("batch", t.batch, true, 1);
  bool haveMicro = intKey("micro", t.micro, false, 1);
  bool haveSeq = intKey("seq", t.seq, false, 1);
  intKey("steps", t.steps, true, 1);
  intKey("seed", t.seed, false, 0);

  // parallel roles
  std::vector<AxisUse> uses;
  const ast::Entry *parallelEntry = sec.section("parallel");
  ast::Loc tensorLoc, pipelineLoc, sequenceLoc, zeroLoc, bucketLoc;
  bool bucketSet = false;
  std::vector<ast::Loc> dataLocs;
  if (parallelEntry) {
    Section par(*this, parallelEntry->children, "the parallel section",
                {"data", "zero", "tensor", "pipeline", "sequence", "replicate", "bucket"});
    auto names = [&](const char *key, const char *role, std::vector<std::string> &out,
                     std::vector<ast::Loc> *locs) {
      const Expr *e = par.value(key);
      if (!e)
        return;
      Value v = eval(*e, nullptr);
      if (v.kind == Value::Kind::None)
        return;
      auto list = toNameList(v, std::string("'") + key + "' of the parallel section");
      if (!list) {
        ok = false;
        return;
      }
      for (auto &[n, l] : *list) {
        out.push_back(n);
        uses.push_back({n, role, l});
        if (locs)
          locs->push_back(l);
      }
    };
    names("data", "data", t.parallel.dataAxes, &dataLocs);
    names("replicate", "replicate", t.parallel.replicate, nullptr);
    std::vector<std::string> tensor;
    names("tensor", "tensor", tensor, nullptr);
    if (tensor.size() > 1) {
      diags.error(par.get("tensor")->loc, "'tensor' takes one mesh axis");
      ok = false;
    } else if (tensor.size() == 1) {
      t.parallel.tensorAxis = tensor[0];
      tensorLoc = par.get("tensor")->loc;
    }
    if (const Expr *e = par.value("zero")) {
      zeroLoc = e->loc;
      if (auto z = toInt(eval(*e, nullptr), "'zero'")) {
        if (*z < 0 || *z > 3) {
          diags.error(e->loc, "ZeRO stage must be 0, 1, 2 or 3, not " + std::to_string(*z))
              .note("0 = DDP; 1 shards optimizer state; 2 also gradients; 3 also parameters");
          ok = false;
        } else {
          t.parallel.zero = int(*z);
        }
      } else {
        ok = false;
      }
    }
    if (const Expr *e = par.value("bucket")) {
      bucketLoc = e->loc;
      bucketSet = true;
      Value v = eval(*e, nullptr);
      if (v.kind == Value::Kind::None) {
        t.parallel.bucketBytes = 0;
      } else if (auto q = toQuantity(v, units::Dim::Bytes, "'bucket' of the parallel section")) {
        if (!(*q >= 4) || *q > 9.2e18) {
          diags.error(e->loc, "'bucket' of the parallel section must be at least 4 bytes (one gradient)")
              .note("write a size such as 'bucket = 25 MiB', or 'bucket = none' for one all-reduce after "
                    "the backward pass");
          ok = false;
        } else {
          t.parallel.bucketBytes = int64_t(*q);
        }
      } else {
        ok = false;
      }
    }
    if (const Expr *e = par.value("sequence")) {
      sequenceLoc = e->loc;
      if (auto b = toBool(eval(*e, nullptr), "'sequence'"))
        t.parallel.sequence = *b;
      else
        ok = false;
    }
    if (const Expr *e = par.value("pipeline")) {
      pipelineLoc = e->loc;
      Value v = eval(*e, nullptr);
      if (v.kind == Value::Kind::Name) {
        t.parallel.pipelineAxis = v.s;
        uses.push_back({v.s, "pipeline", v.loc});
        t.parallel.stages = 0;  // the axis size, below
      } else if (v.kind == Value::Kind::Call) {
        t.parallel.pipelineAxis = v.s;
        uses.push_back({v.s, "pipeline", v.loc});
        t.parallel.stages = 0;
        if (auto args = bindArgs(*this, {v.s, {{"stages", false}, {"schedule", false}}}, v)) {
          if (args->count("stages")) {
            if (auto s = toPositiveInt((*args)["stages"], "'stages'"))
              t.parallel.stages = *s;
            else
              ok = false;
          }
          if (args->count("schedule")) {
            auto s = toChoice((*args)["schedule"], "pipeline schedule",
                              {"gpipe", "1f1b", "interleaved"});
            if (!s)
              ok = false;
            else
              t.parallel.schedule = *s == "gpipe" ? sema::PipelineSchedule::GPipe
                                    : *s == "1f1b" ? sema::PipelineSchedule::OneFOneB
                                                   : sema::PipelineSchedule::Interleaved;
          }
        } else {
          ok = false;
        }
      } else if (v.kind != Value::Kind::None) {
        typeError(v, "'pipeline'", "none, an axis, or axis(stages: N, schedule: 1f1b)");
        ok = false;
      }
    }
  }

  // Every use names a mesh axis, each axis has one role, every axis > 1 has a role.
  if (mesh) {
    std::map<std::string, const AxisUse *> byAxis;
    std::vector<std::string> axisNames;
    for (auto &a : mesh->axes)
      axisNames.push_back(a.name);
    std::set<std::string> suggestedAxes;
    for (const AxisUse &u : uses) {
      const sema::MeshAxis *axis = mesh->axis(u.axis);
      if (!axis) {
        std::string best = closestMatch(u.axis, axisNames);
        suggestedAxes.insert(best);
        std::string list;
        for (size_t i = 0; i < axisNames.size(); ++i)
          list += (i ? ", " : "") + axisNames[i];
        diags.error(u.loc, "unknown mesh axis '" + u.axis + "'" +
                               (best.empty() ? "" : "; did you mean '" + best + "'?"))
            .note(mesh->loc, "mesh '" + mesh->name + "' has the axes " + list);
        ok = false;
        continue;
      }
      auto [it, inserted] = byAxis.insert({u.axis, &u});
      if (!inserted) {
        diags.error(u.loc, "mesh axis '" + u.axis + "' is used by two roles, " +
                               it->second->role + " and " + u.role)
            .note(it->second->loc, "first used for " + it->second->role + " here")
            .note("each mesh axis has exactly one role: data, tensor, pipeline or replicate");
        ok = false;
      }
    }
    for (const sema::MeshAxis &a : mesh->axes)
      if (!byAxis.count(a.name) && !suggestedAxes.count(a.name)) {
        diags.error(parallelEntry ? parallelEntry->loc : decl.nameLoc,
                    "mesh axis '" + a.name + "' (size " + std::to_string(a.size) +
                        ") has no role in " + what)
            .note(a.loc, "declared here")
            .note("use it for data, tensor or pipeline, or write 'replicate = " + a.name +
                  "' to keep copies on it");
        ok = false;
      }
    auto size = [&](const std::string &n) -> int64_t {
      const sema::MeshAxis *a = mesh->axis(n);
      return a ? a->size : 1;
    };
    for (auto &a : t.parallel.dataAxes)
      t.dataParallel *= size(a);
    if (!t.parallel.tensorAxis.empty())
      t.tensorParallel = size(t.parallel.tensorAxis);
    if (!t.parallel.pipelineAxis.empty())
      t.pipelineParallel = size(t.parallel.pipelineAxis);
    if (t.parallel.stages == 0)
      t.parallel.stages = t.pipelineParallel;
  }

  if (!bucketSet) {
    t.parallel.bucketBytes = mesh && !(t.parallel.zero == 1 && t.parallel.sequence)
                                 ? sema::defaultBucketBytes(mesh->kind, t.dataParallel, t.parallel.zero,
                                                            t.tensorParallel, t.pipelineParallel)
                                 : 0;
  } else if (t.parallel.bucketBytes > 0) {
    // Buckets are DDP's (gradients) and ZeRO-3's (parameter gathers): refused by name
    // where the schedule has none.
    std::string why = t.parallel.dataAxes.empty() ? "the plan has no data axis"
                      : t.parallel.zero == 2
                          ? std::string("ZeRO-2 reduces its gradients whole, once per micro-batch (bucketed ZeRO-2 "
                                        "is not implemented in this version of planc)")
                      : t.parallel.zero == 1 && t.parallel.sequence
                          ? std::string("ZeRO-1 with sequence parallelism reduces its gradients whole (its buckets "
                                        "would scatter the gradients of replicated parameters before the tensor "
                                        "axis sums them; not implemented in this version of planc)")
                      : t.pipelineParallel > 1
                          ? "a pipeline stage reduces its gradients whole (bucketed pipeline stages are not "
                            "implemented in this version of planc)"
                      : mesh && mesh->kind == sema::DeviceKind::CUDA && t.tensorParallel > 1
                          ? "on a cuda mesh with tensor parallelism the buckets' NCCL collectives would run "
                            "beside the tensor-parallel ones on a second communicator, which NCCL does not "
                            "promise to complete (not implemented in this version of planc)"
                          : "";
    if (!why.empty()) {
      diags.error(bucketLoc, "'bucket' sets the size of the gradient buckets (ZeRO-3: of the parameter "
                             "gathers), but " + why)
          .note("buckets need 'data = <axis>', 'zero' 0, 1 or 3, no pipeline, no sequence parallelism with "
                "ZeRO-1 and, on a cuda mesh, no tensor axis; write 'bucket = none' or leave it out");
      ok = false;
    }
  }
  if (t.parallel.zero > 0 && t.parallel.dataAxes.empty() && parallelEntry) {
    diags.error(zeroLoc, "zero = " + std::to_string(t.parallel.zero) +
                             " shards over the data axis, but the plan has none")
        .note("add 'data = <axis>' to the parallel section");
    ok = false;
  }
  if (t.parallel.sequence && t.parallel.tensorAxis.empty()) {
    diags.error(sequenceLoc, "sequence parallel splits the sequence over the tensor axis, but "
                             "the plan has none");
    ok = false;
  }

  // Accumulation: batch = micro × data-parallel size × accumulation.
  if (haveBatch && mesh) {
    if (!haveMicro) {
      if (t.batch % t.dataParallel == 0) {
        t.micro = t.batch / t.dataParallel;
      } else {
        diags.error(sec.get("batch")->loc, "batch " + std::to_string(t.batch) +
                                               " is not divisible by the data-parallel size " +
                                               std::to_string(t.dataParallel));
        ok = false;
      }
    }
    int64_t per;
    if (t.micro > 0 && !__builtin_mul_overflow(t.micro, t.dataParallel, &per) && per > 0 &&
        t.batch % per == 0 && t.batch >= per)
      t.accumulation = t.batch / per;
  }

  if (model) {
    if (!haveSeq && !sec.get("seq")) {
      if (model->maxSeq > 0) {
        t.seq = model->maxSeq;
      } else {
        diags.error(decl.nameLoc, what + " needs 'seq': model '" + model->name +
                                      "' has no positional table to take it from");
        ok = false;
      }
    } else if (haveSeq && model->maxSeq > 0 && t.seq > model->maxSeq) {
      diags.error(sec.get("seq")->loc, "seq " + std::to_string(t.seq) + " exceeds the " +
                                           std::to_string(model->maxSeq) +
                                           " positions of model '" + model->name + "'")
          .note(model->loc, "model declared here");
      ok = false;
    }
  }

  // Logical dims → mesh axes: Megatron defaults for the tensor axis, then overrides.
  if (!t.parallel.tensorAxis.empty())
    for (const std::string &d : sema::defaultTensorDims())
      t.shard[d] = t.parallel.tensorAxis;
  if (const Expr *e = sec.value("shard")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::List || (!v.items.empty() && v.items.front().key.empty())) {
      typeError(v, "'shard' of " + what, "a list of logical dims to axes, as in [vocab: tp]");
      ok = false;
    } else if (model) {
      std::vector<std::string> dims;
      for (const sema::Parameter &p : model->params)
        for (const std::string &d : p.dims)
          if (std::find(dims.begin(), dims.end(), d) == dims.end())
            dims.push_back(d);
      for (const Value::Item &it : v.items) {
        if (std::find(dims.begin(), dims.end(), it.key) == dims.end()) {
          std::string best = closestMatch(it.key, dims);
          std::string list;
          for (size_t i = 0; i < dims.size(); ++i)
            list += (i ? ", " : "") + dims[i];
          diags.error(it.keyLoc, "model '" + model->name + "' has no logical dim '" + it.key + "'" +
                                     (best.empty() ? "" : "; did you mean '" + best + "'?"))
              .note("its logical dims are " + list);
          ok = false;
          continue;
        }
        auto w = toWord(*it.value, "the axis of '" + it.key + "'");
        if (!w) {
          ok = false;
        } else if (*w == "_" || *w == "none") {
          t.shard[it.key] = "";
        } else if (*w != t.parallel.tensorAxis) {
          auto d = diags.error(it.value->loc,
                               t.parallel.tensorAxis.empty()
                                   ? "logical dim '" + it.key + "' is mapped to '" + *w +
                                         "', but the plan has no tensor axis to split it over"
                                   : "logical dim '" + it.key + "' can be split only over the tensor axis '" +
                                         t.parallel.tensorAxis + "', not '" + *w + "'");
          d.note("write '_' to replicate it; sharding over the data axis is what zero = 3 does");
          ok = false;
        } else {
          t.shard[it.key] = *w;
        }
      }
    }
  }

  // The layout rules (sema::checkLayout), each reported where the plan sets it.
  if (mesh && haveBatch && t.micro > 0) {
    std::string axis = "the tensor axis '" + t.parallel.tensorAxis + "' (" +
                       std::to_string(t.tensorParallel) + ")";
    for (const sema::Violation &v : sema::checkLayout(model, sema::layoutOf(t))) {
      ok = false;
      std::string value = std::to_string(v.value), divisor = std::to_string(v.divisor);
      switch (v.kind) {
      case sema::Violation::Kind::BatchNotDivisible: {
        int64_t product;
        if (__builtin_mul_overflow(t.micro, t.dataParallel, &product)) {
          diags.error(sec.get("micro")->loc, "micro " + std::to_string(t.micro) + " × data-parallel size " +
                                                 std::to_string(t.dataParallel) + " does not fit in 64 bits");
          break;
        }
        auto d = diags.error(sec.get("batch")->loc,
                             "batch " + value + " is not a whole multiple of micro × data-parallel size = " +
                                 std::to_string(t.micro) + " × " + std::to_string(t.dataParallel) +
                                 " = " + divisor);
        if (sec.get("micro"))
          d.note(sec.get("micro")->loc, "micro is set here");
        if (!dataLocs.empty())
          d.note(dataLocs.front(), "the data axes are set here");
        d.note("gradient accumulation steps = batch / (micro × data-parallel size) must be a whole number ≥ 1");
        break;
      }
      case sema::Violation::Kind::Heads:
        diags.error(tensorLoc, "the " + value + " heads of attention '" + v.op->layer +
                                   "' are not divisible by " + axis)
            .note(v.op->bindingLoc, "the attention is declared here");
        break;
      case sema::Violation::Kind::KvHeads:
        diags.error(tensorLoc, "the " + value + " kv_heads of attention '" + v.op->layer +
                                   "' are not divisible by " + axis)
            .note(v.op->bindingLoc, "the attention is declared here")
            .note("grouped-query attention splits whole key/value heads over the tensor axis");
        break;
      case sema::Violation::Kind::Dim: {
        const std::string &d = v.param->dims[v.dimIndex];
        auto diag = diags.error(tensorLoc, "the " + d + " dim of '" + v.param->path + "' (" + value +
                                               ") is not divisible by " + axis);
        diag.note(v.param->loc, "the parameter is declared here");
        if (d == "vocab") {
          int64_t multiple = v.value >= 64 * v.divisor ? 64 * v.divisor : v.divisor;
          int64_t padded = (v.value + multiple - 1) / multiple * multiple;
          diag.note("pad the vocabulary to a multiple of " + std::to_string(multiple) + " (e.g. " +
                    std::to_string(padded) + "), or replicate it with 'shard = [vocab: _]'");
        } else {
          diag.note("replicate it with 'shard = [" + d + ": _]', or change the model");
        }
        break;
      }
      case sema::Violation::Kind::DoubleSplit: {
        std::string dims;
        for (const std::string &d : v.param->dims)
          if (t.shard.count(d) && t.shard.at(d) == t.parallel.tensorAxis)
            dims += (dims.empty() ? "'" : " and '") + d + "'";
        // Suggest dropping the split that is not one of Megatron's defaults.
        std::string keep = v.param->dims[v.dimIndex];
        for (const std::string &d : v.param->dims)
          if (t.shard.count(d) && t.shard.at(d) == t.parallel.tensorAxis && !sema::defaultTensorDims().count(d))
            keep = d;
        diags.error(tensorLoc, "'" + v.param->path + "' would be split over " + axis + " on both " + dims +
                                   "; a tensor is split along one dim")
            .note(v.param->loc, "the parameter is declared here")
            .note("split only one of them: map '" + keep + "' to '_' in 'shard' (or leave it out of 'shard')");
        break;
      }
      case sema::Violation::Kind::Sequence:
        diags.error(sequenceLoc, "seq " + value + " is not divisible by " + axis +
                                     ", which sequence parallel splits it over");
        break;
      case sema::Violation::Kind::StagesUneven:
        diags.error(pipelineLoc, value + " pipeline stages do not divide evenly over the " + divisor +
                                     " ranks of axis '" + t.parallel.pipelineAxis + "'");
        break;
      case sema::Violation::Kind::StagesNeedInterleaved:
        diags.error(pipelineLoc, value + " stages on a pipeline axis of " + divisor +
                                     " need schedule: interleaved");
        break;
      case sema::Violation::Kind::InterleavedTooFewStages:
        diags.error(pipelineLoc, "an interleaved schedule needs at least two stages per rank: stages ≥ " +
                                     divisor);
        break;
      case sema::Violation::Kind::LayersFewerThanStages:
        diags.error(pipelineLoc, "model '" + model->name + "' has " + value +
                                     " repeated layers, fewer than the " + divisor + " pipeline stages")
            .note(model->loc, "model declared here");
        break;
      case sema::Violation::Kind::MicroBatchesFewerThanStages:
        diags.error(pipelineLoc, "each step has " + value + (v.value == 1 ? " micro-batch" : " micro-batches") +
                                     " per pipeline, fewer than its " + divisor + " pipeline ranks")
            .note("micro-batches = batch / (micro × data-parallel size); raise batch or lower micro");
        break;
      case sema::Violation::Kind::InterleavedMicroBatches:
        diags.error(pipelineLoc, "an interleaved schedule needs the micro-batches per step (" + value +
                                     ") to be a multiple of the " + divisor + " pipeline ranks");
        break;
      }
    }
  }

  // Precision and loss scaling.
  bool precisionOk = true;
  if (const Expr *e = sec.value("precision")) {
    auto p = toChoice(eval(*e, nullptr), "precision", {"fp32", "bf16", "fp16"});
    precisionOk = p.has_value();
    if (!p)
      ok = false;
    else
      t.precision = *p == "fp32" ? sema::Precision::FP32
                    : *p == "bf16" ? sema::Precision::BF16 : sema::Precision::FP16;
  }
  if (t.precision == sema::Precision::FP16)
    t.lossScale = sema::LossScale::Dynamic;
  if (const Expr *e = sec.value("loss_scale")) {
    Value v = eval(*e, nullptr);
    if (v.kind == Value::Kind::None && t.precision != sema::Precision::FP16) {
      // `loss_scale = none` states what fp32 and bf16 do anyway.
    } else if (t.precision != sema::Precision::FP16 && !v.isError()) {
      if (precisionOk)
        diags.error(e->loc, "loss_scale applies only to precision = fp16");
      ok = false;
    } else if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Float) {
      if (!(v.f >= 1)) {
        diags.error(e->loc, "a static loss scale must be at least 1");
        ok = false;
      }
      t.lossScale = sema::LossScale::Static;
      t.staticLossScale = v.f;
    } else if (auto c = toChoice(v, "loss_scale", {"dynamic", "none"})) {
      if (*c == "none") {
        diags.error(e->loc, "fp16 training without loss scaling underflows small gradients to zero")
            .note("use 'loss_scale = dynamic', a static scale such as 'loss_scale = 1024', or precision = bf16");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (const Expr *e = sec.value("recompute")) {
    auto r = toChoice(eval(*e, nullptr), "recompute mode", {"none", "full", "selective"});
    if (!r)
      ok = false;
    else
      t.recompute = *r == "none" ? sema::Recompute::None
                    : *r == "full" ? sema::Recompute::Full : sema::Recompute::Selective;
  }

  // Optimizer.
  if (const Expr *e = sec.value("optimizer")) {
    Value v = eval(*e, nullptr);
    if (v.kind == Value::Kind::Call && v.s == "adamw") {
      if (auto args = bindArgs(*this, {"adamw", {{"lr", true}, {"betas", false}, {"eps", false},
                                                 {"weight_decay", false}}}, v)) {
        auto &a = *args;
        if (auto lr = toFloat(a["lr"], "'lr'")) {
          t.optimizer.lr = *lr;
          if (!(*lr > 0)) {
            diags.error(a["lr"].loc, "the learning rate must be positive");
            ok = false;
          }
        } else {
          ok = false;
        }
        if (a.count("betas")) {
          Value &b = a["betas"];
          if (b.kind != Value::Kind::List || b.items.size() != 2 || !b.items[0].key.empty()) {
            typeError(b, "'betas'", "a list of two numbers, as in [0.9, 0.95]");
            ok = false;
          } else {
            auto b1 = toFloat(*b.items[0].value, "beta1");
            auto b2 = toFloat(*b.items[1].value, "beta2");
            if (b1 && b2 && *b1 >= 0 && *b1 < 1 && *b2 >= 0 && *b2 < 1) {
              t.optimizer.beta1 = *b1;
              t.optimizer.beta2 = *b2;
            } else {
              if (b1 && b2)
                diags.error(b.loc, "betas must lie in [0, 1)");
              ok = false;
            }
          }
        }
        if (a.count("eps")) {
          auto eps = toFloat(a["eps"], "'eps'");
          if (eps && *eps > 0)
            t.optimizer.eps = *eps;
          else {
            if (eps)
              diags.error(a["eps"].loc, "'eps' must be positive");
            ok = false;
          }
        }
        if (a.count("weight_decay")) {
          auto wd = toFloat(a["weight_decay"], "'weight_decay'");
          if (wd && *wd >= 0)
            t.optimizer.weightDecay = *wd;
          else {
            if (wd)
              diags.error(a["weight_decay"].loc, "'weight_decay' must not be negative");
            ok = false;
          }
        }
      } else {
        ok = false;
      }
    } else if (!v.isError()) {
      std::string name = v.kind == Value::Kind::Call || v.kind == Value::Kind::Name ? v.s : "";
      auto d = diags.error(e->loc, name.empty() ? "the optimizer is written 'adamw(lr: …)'"
                                                : "optimizer '" + name + "' is not implemented");
      d.note("planc implements adamw(lr, betas: [b1, b2], eps, weight_decay)");
      ok = false;
    } else {
      ok = false;
    }
  } else if (!sec.get("optimizer")) {
    diags.error(decl.nameLoc, what + " needs 'optimizer', as in 'optimizer = adamw(lr: 3e-4)'");
    ok = false;
  }

  // Learning-rate schedule.
  if (const Expr *e = sec.value("schedule")) {
    Value v = eval(*e, nullptr);
    std::string kind = v.kind == Value::Kind::Name || v.kind == Value::Kind::Call ? v.s : "";
    if (kind != "constant" && kind != "linear" && kind != "cosine") {
      if (!v.isError()) {
        std::string best = closestMatch(kind, {"constant", "linear", "cosine"});
        diags.error(e->loc, "unknown schedule" + (kind.empty() ? std::string() : " '" + kind + "'") +
                                (best.empty() ? "" : "; did you mean '" + best + "'?"))
            .note("schedules are constant, linear(warmup: N, min_lr: x) and cosine(warmup: N, min_lr: x)");
      }
      ok = false;
    } else {
      t.schedule.kind = kind == "constant" ? sema::LRSchedule::Constant
                        : kind == "linear" ? sema::LRSchedule::Linear : sema::LRSchedule::Cosine;
      if (v.kind == Value::Kind::Call) {
        Signature sig{kind, {{"warmup", false}, {"min_lr", false}}};
        if (kind == "constant")
          sig.params.pop_back();
        if (auto args = bindArgs(*this, sig, v)) {
          if (args->count("warmup")) {
            auto w = toInt((*args)["warmup"], "'warmup'");
            if (w && *w >= 0)
              t.schedule.warmup = *w;
            else {
              if (w)
                diags.error((*args)["warmup"].loc, "'warmup' must not be negative");
              ok = false;
            }
          }
          if (args->count("min_lr")) {
            auto m = toFloat((*args)["min_lr"], "'min_lr'");
            if (m && *m >= 0 && *m <= t.optimizer.lr)
              t.schedule.minLr = *m;
            else {
              if (m)
                diags.error((*args)["min_lr"].loc, "'min_lr' must lie between 0 and the learning rate");
              ok = false;
            }
          }
        } else {
          ok = false;
        }
      }
      if (t.steps > 0 && t.schedule.warmup > t.steps) {
        diags.error(e->loc, "warmup of " + std::to_string(t.schedule.warmup) +
                                " steps is longer than the " + std::to_string(t.steps) + " steps of training");
        ok = false;
      }
    }
  }

  if (const Expr *e = sec.value("clip")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::None) {
      auto c = toFloat(v, "'clip'");
      if (c && *c > 0)
        t.clip = *c;
      else {
        if (c)
          diags.error(e->loc, "'clip' must be positive (or none)");
        ok = false;
      }
    }
  }

  if (const ast::Entry *ev = sec.section("eval")) {
    Section s(*this, ev->children, "the eval section", {"every", "batches"});
    for (auto [key, out] : {std::pair<const char *, int64_t *>{"every", &t.evalEvery},
                            {"batches", &t.evalBatches}}) {
      const Expr *e = s.value(key);
      if (!e) {
        if (!s.get(key))
          diags.error(ev->loc, std::string("the eval section needs '") + key + "'");
        ok = false;
        continue;
      }
      if (auto i = toPositiveInt(eval(*e, nullptr), std::string("'") + key + "' of eval"))
        *out = *i;
      else
        ok = false;
    }
    if (t.val.empty()) {
      diags.error(ev->loc, "eval needs validation data: add 'val = tokens(\"…\")'");
      ok = false;
    }
  }

  if (const ast::Entry *ck = sec.section("checkpoint")) {
    Section s(*this, ck->children, "the checkpoint section", {"every", "dir", "keep"});
    if (const Expr *e = s.value("every")) {
      if (auto i = toPositiveInt(eval(*e, nullptr), "'every' of checkpoint"))
        t.checkpointEvery = *i;
      else
        ok = false;
    } else if (!s.get("every")) {
      diags.error(ck->loc, "the checkpoint section needs 'every'");
      ok = false;
    }
    if (const Expr *e = s.value("dir")) {
      if (auto str = toString(eval(*e, nullptr), "'dir' of checkpoint")) {
        if (str->empty()) {
          diags.error(e->loc, "'dir' of checkpoint is empty");
          ok = false;
        }
        t.checkpointDir = *str;
      } else {
        ok = false;
      }
    } else if (!s.get("dir")) {
      diags.error(ck->loc, "the checkpoint section needs 'dir'");
      ok = false;
    }
    if (const Expr *e = s.value("keep")) {
      if (auto i = toPositiveInt(eval(*e, nullptr), "'keep' of checkpoint"))
        t.checkpointKeep = *i;
      else
        ok = false;
    }
  }

  if (ok && diags.errorCount() == 0)
    program.trains.push_back(std::move(t));
}

void Sema::checkRetrieval(const ast::Decl &decl) {
  std::string what = "retrieval '" + decl.name + "'";
  Section sec(*this, decl.entries, what,
              {"corpus", "chunk", "embed", "index", "search", "rerank", "guard", "store"});
  sema::Retrieval r;
  r.name = decl.name;
  r.loc = decl.nameLoc;
  r.baseDir = baseDir(decl.loc);
  bool ok = true;
  auto call = [&](const char *key, const std::vector<std::string> &kinds, bool required,
                  const char *example) -> std::optional<Value> {
    const Expr *e = sec.value(key);
    if (!e) {
      if (required && !sec.get(key)) {
        diags.error(decl.nameLoc, what + " needs '" + key + "', as in '" + key + " = " + example + "'");
        ok = false;
      }
      return std::nullopt;
    }
    Value v = eval(*e, nullptr);
    if (v.isError()) {
      ok = false;
      return std::nullopt;
    }
    // Bare names (`rerank = none`, `chunk = paragraphs`) are calls without arguments.
    if (v.kind == Value::Kind::None)
      v.s = "none";
    if (v.kind == Value::Kind::Name || v.kind == Value::Kind::None)
      v.kind = Value::Kind::Call;
    if (v.kind != Value::Kind::Call) {
      typeError(v, std::string("'") + key + "' of " + what, std::string("a call, as in ") + example);
      ok = false;
      return std::nullopt;
    }
    Value name = v;
    name.kind = Value::Kind::Name;
    if (!toChoice(name, std::string(key) + " kind", kinds)) {
      ok = false;
      return std::nullopt;
    }
    return v;
  };
  auto modelArg = [&](Value &v, int &out) {
    if (v.kind != Value::Kind::Name) {
      typeError(v, "the model", "a model name");
      ok = false;
      return;
    }
    if (auto idx = modelIndex(v.s, v.loc))
      out = *idx;
    else
      ok = false;
  };
  auto posInt = [&](std::map<std::string, Value> &a, const char *key, int64_t &out) {
    if (!a.count(key))
      return;
    if (auto i = toPositiveInt(a[key], std::string("'") + key + "'"))
      out = *i;
    else
      ok = false;
  };

  if (auto v = call("corpus", {"files"}, true, "files(\"docs/**/*.md\", manifest: \"docs/MANIFEST.sha256\")")) {
    if (auto a = bindArgs(*this, {"files", {{"glob", true}, {"manifest", true}}}, *v)) {
      if (auto g = toString((*a)["glob"], "the corpus glob"))
        r.corpus.push_back(*g);
      else
        ok = false;
      Value &m = (*a)["manifest"];
      if (m.kind == Value::Kind::None)
        r.manifest = "";
      else if (auto s = toString(m, "the manifest"))
        r.manifest = *s;
      else
        ok = false;
    } else {
      ok = false;
    }
  }
  if (auto v = call("chunk", {"tokens", "sentences", "paragraphs"}, false, "tokens(256, overlap: 32)")) {
    r.chunk.kind = v->s == "tokens" ? sema::ChunkKind::Tokens
                   : v->s == "sentences" ? sema::ChunkKind::Sentences : sema::ChunkKind::Paragraphs;
    if (auto a = bindArgs(*this, {v->s, {{"size", v->s == "tokens"}, {"overlap", false}}}, *v)) {
      posInt(*a, "size", r.chunk.size);
      if (a->count("overlap")) {
        auto o = toInt((*a)["overlap"], "'overlap'");
        if (o && *o >= 0 && *o < r.chunk.size)
          r.chunk.overlap = *o;
        else {
          if (o)
            diags.error((*a)["overlap"].loc, "the overlap must be at least 0 and smaller than the chunk size " +
                                                 std::to_string(r.chunk.size));
          ok = false;
        }
      }
    } else {
      ok = false;
    }
  }
  if (auto v = call("embed", {"hashing", "model"}, false, "hashing(dim: 384)")) {
    if (v->s == "hashing") {
      r.embed.kind = sema::EmbedKind::Hashing;
      if (auto a = bindArgs(*this, {"hashing", {{"dim", true}}}, *v))
        posInt(*a, "dim", r.embed.dim);
      else
        ok = false;
    } else {
      r.embed.kind = sema::EmbedKind::Model;
      if (auto a = bindArgs(*this, {"model", {{"model", true}, {"checkpoint", true}, {"pool", false}}}, *v)) {
        modelArg((*a)["model"], r.embed.model);
        if (auto s = toString((*a)["checkpoint"], "'checkpoint'"))
          r.embed.checkpoint = *s;
        else
          ok = false;
        if (a->count("pool")) {
          if (auto p = toChoice((*a)["pool"], "pooling", {"mean", "last"}))
            r.embed.pool = *p;
          else
            ok = false;
        }
      } else {
        ok = false;
      }
    }
  }
  if (auto v = call("index", {"faiss"}, false, "faiss(\"IVF64,Flat\", metric: ip, nprobe: 8)")) {
    if (auto a = bindArgs(*this, {"faiss", {{"factory", true}, {"metric", false}, {"nprobe", false}}}, *v)) {
      if (auto s = toString((*a)["factory"], "the FAISS factory string")) {
        if (s->empty()) {
          diags.error((*a)["factory"].loc, "the FAISS factory string is empty");
          ok = false;
        }
        r.index.factory = *s;
      } else {
        ok = false;
      }
      if (a->count("metric")) {
        if (auto m = toChoice((*a)["metric"], "metric", {"ip", "l2"}))
          r.index.metric = *m == "ip" ? sema::Metric::InnerProduct : sema::Metric::L2;
        else
          ok = false;
      }
      posInt(*a, "nprobe", r.index.nprobe);
    } else {
      ok = false;
    }
  }
  if (auto v = call("search", {"hybrid", "vector", "keyword"}, false, "hybrid(vector: 0.7, keyword: 0.3, top: 20)")) {
    r.search.kind = v->s == "hybrid" ? sema::SearchKind::Hybrid
                    : v->s == "vector" ? sema::SearchKind::Vector : sema::SearchKind::Keyword;
    Signature sig{v->s, {{"top", false}}};
    if (v->s == "hybrid")
      sig.params = {{"vector", false}, {"keyword", false}, {"top", false}, {"fusion", false}, {"k", false}};
    if (auto a = bindArgs(*this, sig, *v)) {
      posInt(*a, "top", r.search.top);
      for (auto [key, out] : {std::pair<const char *, double *>{"vector", &r.search.vectorWeight},
                              {"keyword", &r.search.keywordWeight}}) {
        if (!a->count(key))
          continue;
        auto f = toFloat((*a)[key], std::string("the ") + key + " weight");
        if (f && *f >= 0)
          *out = *f;
        else {
          if (f)
            diags.error((*a)[key].loc, "weights must not be negative");
          ok = false;
        }
      }
      if (v->s == "hybrid" && !(r.search.vectorWeight + r.search.keywordWeight > 0)) {
        diags.error(v->loc, "the hybrid weights add up to zero");
        ok = false;
      }
      if (a->count("fusion")) {
        if (auto f = toChoice((*a)["fusion"], "fusion", {"weighted", "rrf"}))
          r.search.fusion = *f == "rrf" ? sema::Fusion::RRF : sema::Fusion::Weighted;
        else
          ok = false;
      }
      posInt(*a, "k", r.search.rrfK);
    } else {
      ok = false;
    }
  }
  if (auto v = call("rerank", {"none", "model"}, false, "model(tiny, checkpoint: \"ckpt/tiny\", top: 5)")) {
    if (v->s == "model") {
      r.rerank.enabled = true;
      if (auto a = bindArgs(*this, {"model", {{"model", true}, {"checkpoint", true}, {"top", false}}}, *v)) {
        modelArg((*a)["model"], r.rerank.model);
        if (auto s = toString((*a)["checkpoint"], "'checkpoint'"))
          r.rerank.checkpoint = *s;
        else
          ok = false;
        posInt(*a, "top", r.rerank.top);
        if (r.rerank.top > r.search.top) {
          diags.error(v->loc, "rerank keeps " + std::to_string(r.rerank.top) + " results but search finds only " +
                                  std::to_string(r.search.top));
          ok = false;
        }
      } else {
        ok = false;
      }
    }
  }
  if (const Expr *e = sec.value("guard")) {
    if (auto g = toChoice(eval(*e, nullptr), "guard", {"quarantine", "off"}))
      r.quarantine = *g == "quarantine";
    else
      ok = false;
  }
  if (const Expr *e = sec.value("store")) {
    if (auto s = toString(eval(*e, nullptr), "'store'")) {
      if (s->empty()) {
        diags.error(e->loc, "'store' of " + what + " is empty");
        ok = false;
      }
      r.store = *s;
    } else {
      ok = false;
    }
  } else if (!sec.get("store")) {
    diags.error(decl.nameLoc, what + " needs 'store', as in 'store = \"index/" + decl.name + "\"'");
    ok = false;
  }
  if (ok && diags.errorCount() == 0)
    program.retrievals.push_back(std::move(r));
}

void Sema::checkGenerate(const ast::Decl &decl) {
  std::string what = "generate '" + decl.name + "'";
  Section sec(*this, decl.entries, what,
              {"model", "checkpoint", "context", "max_tokens", "temperature", "top_k", "seed", "window"});
  sema::Generate g;
  g.name = decl.name;
  g.loc = decl.nameLoc;
  g.baseDir = baseDir(decl.loc);
  bool ok = true;
  if (const Expr *e = sec.value("model")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::Name) {
      typeError(v, "'model'", "a model name");
      ok = false;
    } else if (auto idx = modelIndex(v.s, v.loc)) {
      g.model = *idx;
    } else {
      ok = false;
    }
  } else if (!sec.get("model")) {
    diags.error(decl.nameLoc, what + " needs 'model'");
    ok = false;
  }
  if (const Expr *e = sec.value("checkpoint")) {
    if (auto s = toString(eval(*e, nullptr), "'checkpoint'")) {
      if (s->empty()) {
        diags.error(e->loc, "'checkpoint' of " + what + " is empty");
        ok = false;
      }
      g.checkpoint = *s;
    } else {
      ok = false;
    }
  } else if (!sec.get("checkpoint")) {
    diags.error(decl.nameLoc, what + " needs 'checkpoint', the directory a train plan wrote");
    ok = false;
  }
  if (const Expr *e = sec.value("context")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::None) {
      const ast::Decl *d = v.kind == Value::Kind::Name ? decls.lookup(v.s) : nullptr;
      if (!d || d->kind != ast::Decl::Kind::Retrieval) {
        if (v.kind == Value::Kind::Name) {
          std::string best = closestMatch(v.s, decls.names([](const ast::Decl &x) {
            return x.kind == ast::Decl::Kind::Retrieval;
          }));
          diags.error(v.loc, "unknown retrieval graph '" + v.s + "'" +
                                 (best.empty() ? "" : "; did you mean '" + best + "'?"));
        } else {
          typeError(v, "'context'", "the name of a retrieval graph");
        }
        ok = false;
      } else {
        for (size_t i = 0; i < program.retrievals.size(); ++i)
          if (program.retrievals[i].name == v.s)
            g.context = int(i);
        if (g.context < 0)
          ok = false;  // that retrieval has errors of its own
      }
    }
  }
  if (const Expr *e = sec.value("max_tokens")) {
    if (auto i = toPositiveInt(eval(*e, nullptr), "'max_tokens'"))
      g.maxTokens = *i;
    else
      ok = false;
  }
  if (const Expr *e = sec.value("temperature")) {
    auto f = toFloat(eval(*e, nullptr), "'temperature'");
    if (f && *f >= 0)
      g.temperature = *f;
    else {
      if (f)
        diags.error(e->loc, "'temperature' must not be negative (0 = greedy)");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("top_k")) {
    auto i = toInt(eval(*e, nullptr), "'top_k'");
    if (i && *i >= 0)
      g.topK = *i;
    else {
      if (i)
        diags.error(e->loc, "'top_k' must not be negative (0 = off)");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("seed")) {
    auto i = toInt(eval(*e, nullptr), "'seed'");
    if (i && *i >= 0)
      g.seed = *i;
    else {
      if (i)
        diags.error(e->loc, "'seed' must not be negative");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("window")) {
    if (auto i = toPositiveInt(eval(*e, nullptr), "'window'")) {
      g.window = *i;
      const sema::Model *m = g.model >= 0 ? &program.models[size_t(g.model)] : nullptr;
      if (m && m->maxSeq > 0 && g.window > m->maxSeq) {
        diags.error(e->loc, "'window' " + std::to_string(g.window) + " exceeds model '" + m->name +
                                "''s context of " + std::to_string(m->maxSeq) + " positions (its positional table)");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (g.model >= 0) {
    g.window = program.models[size_t(g.model)].maxSeq;
    if (g.window == 0) {
      diags.error(decl.nameLoc, what + " needs 'window', the positions its key/value cache holds: model '" +
                                    program.models[size_t(g.model)].name + "' has no positional table to bound them");
      ok = false;
    }
  }
  if (ok && diags.errorCount() == 0)
    program.generates.push_back(std::move(g));
}
