// The parallel section of a train plan: each mesh axis's role (data, tensor,
// pipeline, replicate), ZeRO, gradient buckets, sequence parallelism and where the
// state lives (offload).
#include "Train.h"

#include <cmath>

using namespace plan;
using namespace plan::lang;
using ast::Expr;

void TrainCheck::checkParallel() {
  parallelEntry = sec.section("parallel");
  if (parallelEntry) {
    Section par(sema, parallelEntry->children, "the parallel section",
                {"data", "zero", "tensor", "pipeline", "sequence", "replicate", "bucket", "offload", "federated",
                 "batchnorm"});
    if (const Expr *e = par.value("batchnorm")) {
      t.parallel.batchnormLoc = e->loc;
      if (auto b = sema.toChoice(sema.eval(*e, nullptr), "'batchnorm'", {"sync", "local"}))
        t.parallel.batchnormSync = *b == "sync";
      else
        ok = false;
    }
    auto names = [&](const char *key, const char *role, std::vector<std::string> &out, std::vector<ast::Loc> *locs) {
      const Expr *e = par.value(key);
      if (!e)
        return;
      Value v = sema.eval(*e, nullptr);
      if (v.kind == Value::Kind::None)
        return;
      auto list = sema.toNameList(v, std::string("'") + key + "' of the parallel section");
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
    // An entry that names one mesh axis at most: the axis and the entry's location.
    auto oneAxis = [&](const char *key, const char *error, std::string &axis, ast::Loc &loc) {
      std::vector<std::string> named;
      names(key, key, named, nullptr);
      if (named.size() > 1) {
        diags.error(par.get(key)->loc, error);
        ok = false;
      } else if (named.size() == 1) {
        axis = named[0];
        loc = par.get(key)->loc;
      }
    };
    oneAxis("tensor", "'tensor' takes one mesh axis", t.parallel.tensorAxis, tensorLoc);
    oneAxis("federated", "'federated' takes one mesh axis: its coordinates are the clients", t.federated.axis,
            federatedLoc);
    if (const Expr *e = par.value("zero")) {
      zeroLoc = e->loc;
      if (auto z = sema.toInt(sema.eval(*e, nullptr), "'zero'")) {
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
      Value v = sema.eval(*e, nullptr);
      if (v.kind == Value::Kind::None) {
        t.parallel.bucketBytes = 0;
      } else if (auto q = sema.toQuantity(v, units::Dim::Bytes, "'bucket' of the parallel section")) {
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
      if (auto b = sema.toBool(sema.eval(*e, nullptr), "'sequence'"))
        t.parallel.sequence = *b;
      else
        ok = false;
    }
    checkPipeline(par);
    checkOffload(par);
  }
}

void TrainCheck::checkOffload(const Section &par) {
  const ast::Entry *entry = par.section("offload");
  if (!entry)
    return;
  Section off(sema, entry->children, "the offload section", {"optimizer", "params"});
  auto target = [&](const char *key, sema::Offload &out) {
    const Expr *e = off.value(key);
    if (!e)
      return;
    out.loc = e->loc;
    Value v = sema.eval(*e, nullptr);
    const char *expected = "none, cpu, or nvme(\"DIR\") (optionally nvme(\"DIR\", buffer: 4 MiB))";
    if (v.kind == Value::Kind::None)
      return;
    if (v.kind == Value::Kind::Name && (v.s == "cpu" || v.s == "nvme")) {
      if (v.s == "cpu") {
        out.target = sema::OffloadTarget::CPU;
        return;
      }
      diags.error(e->loc, std::string("'") + key + " = nvme' needs the directory its files go in")
          .note("write nvme(\"/local/nvme/planc\")");
      ok = false;
      return;
    }
    if (v.kind != Value::Kind::Call || v.s != "nvme") {
      if (v.kind == Value::Kind::Name)
        sema.toChoice(v, std::string("'") + key + "' of the offload section", {"none", "cpu", "nvme"});
      else
        sema.typeError(v, std::string("'") + key + "' of the offload section", expected);
      ok = false;
      return;
    }
    auto args = bindArgs(sema, {"nvme", {{"dir", true}, {"buffer", false}}}, v);
    if (!args) {
      ok = false;
      return;
    }
    auto dir = sema.toString((*args)["dir"], "the directory of nvme(…)");
    if (!dir) {
      ok = false;
      return;
    }
    if (dir->empty()) {
      diags.error((*args)["dir"].loc, "the directory of nvme(…) is empty").note("write a path, as in nvme(\"/local/nvme/planc\")");
      ok = false;
      return;
    }
    out.target = sema::OffloadTarget::NVMe;
    out.dir = *dir;
    out.bufferBytes = sema::kDefaultOffloadBufferBytes;
    if (args->count("buffer")) {
      const Value &b = (*args)["buffer"];
      auto q = sema.toQuantity(b, units::Dim::Bytes, "'buffer' of nvme(…)");
      if (!q) {
        ok = false;
      } else if (constexpr double align = double(planrt::manifest::offload::kAlign);
                 !(*q >= align) || *q > double(sema::kMaxOffloadBufferBytes) || std::fmod(*q, align) != 0) {
        diags.error(b.loc, "'buffer' of nvme(…) must be a multiple of 4 KiB between 4 KiB and 256 MiB")
            .note("it is the bytes of one moment's chunk the update reads or writes at a time, aligned for direct "
                  "I/O; 4 MiB by default");
        ok = false;
      } else {
        out.bufferBytes = int64_t(*q);
      }
    }
  };
  target("optimizer", t.parallel.optimizerOffload);
  target("params", t.parallel.paramsOffload);
}

void TrainCheck::checkPipeline(const Section &par) {
  if (const Expr *e = par.value("pipeline")) {
    pipelineLoc = e->loc;
    Value v = sema.eval(*e, nullptr);
    if (v.kind == Value::Kind::Name) {
      t.parallel.pipelineAxis = v.s;
      uses.push_back({v.s, "pipeline", v.loc});
      t.parallel.stages = 0; // the axis size, below
    } else if (v.kind == Value::Kind::Call) {
      t.parallel.pipelineAxis = v.s;
      uses.push_back({v.s, "pipeline", v.loc});
      t.parallel.stages = 0;
      if (auto args = bindArgs(sema, {v.s, {{"stages", false}, {"schedule", false}, {"keep", false}}}, v))
        checkPipelineArgs(*args);
      else
        ok = false;
    } else if (v.kind != Value::Kind::None) {
      sema.typeError(v, "'pipeline'", "none, an axis, or axis(stages: N, schedule: 1f1b, keep: inputs)");
      ok = false;
    }
  }
}

void TrainCheck::checkPipelineArgs(std::map<std::string, Value> &args) {
  if (args.count("stages")) {
    if (auto s = sema.toPositiveInt(args["stages"], "'stages'"))
      t.parallel.stages = *s;
    else
      ok = false;
  }
  if (args.count("schedule")) {
    auto s = sema.toChoice(args["schedule"], "pipeline schedule", {"gpipe", "1f1b", "interleaved", "zb", "zbv"});
    if (!s) {
      ok = false;
    } else if (*s == "zbv") {
      diags.error(args["schedule"].loc, "the ZB-V schedule ('zbv': two stages per rank in a V) is not implemented "
                                        "in this version of planc")
          .note("'zb' (ZB-H1, one stage per rank) builds");
      ok = false;
    } else {
      t.parallel.schedule = *s == "gpipe"         ? sema::PipelineSchedule::GPipe
                            : *s == "1f1b"        ? sema::PipelineSchedule::OneFOneB
                            : *s == "interleaved" ? sema::PipelineSchedule::Interleaved
                                                  : sema::PipelineSchedule::ZeroBubble;
    }
  }
  // zb's weight passes run after its input passes: keeping the forward's activations
  // for both is its default; `keep: inputs` computes the forward again in each input pass
  // and keeps only what the weight pass reads.
  bool zb = t.parallel.schedule == sema::PipelineSchedule::ZeroBubble;
  t.parallel.keepActivations = zb;
  if (args.count("keep")) {
    if (auto s = sema.toChoice(args["keep"], "pipeline keep mode", {"inputs", "activations"}))
      t.parallel.keepActivations = *s == "activations";
    else
      ok = false;
  }
}

void TrainCheck::checkAxisRoles() {
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
        diags
            .error(u.loc, "unknown mesh axis '" + u.axis + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"))
            .note(mesh->loc, "mesh '" + mesh->name + "' has the axes " + list);
        ok = false;
        continue;
      }
      auto [it, inserted] = byAxis.insert({u.axis, &u});
      if (!inserted) {
        diags.error(u.loc, "mesh axis '" + u.axis + "' is used by two roles, " + it->second->role + " and " + u.role)
            .note(it->second->loc, "first used for " + it->second->role + " here")
            .note("each mesh axis has exactly one role: data, tensor, pipeline, federated or replicate");
        ok = false;
      }
    }
    for (const sema::MeshAxis &a : mesh->axes)
      if (!byAxis.count(a.name) && !suggestedAxes.count(a.name)) {
        diags
            .error(parallelEntry ? parallelEntry->loc : decl.nameLoc,
                   "mesh axis '" + a.name + "' (size " + std::to_string(a.size) + ") has no role in " + what)
            .note(a.loc, "declared here")
            .note("use it for data, tensor or pipeline, or write 'replicate = " + a.name + "' to keep copies on it");
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
    if (t.federated.any())
      t.federated.clients = size(t.federated.axis);
  }
}

void TrainCheck::checkParallelRules() {
  // Tensor parallelism communicates in every layer: across nodes it waits on the network.
  if (mesh && t.tensorParallel > 1)
    for (size_t a = 0; a < mesh->axes.size(); ++a)
      if (mesh->axes[a].name == t.parallel.tensorAxis && !mesh->axisWithinNode(a))
        diags
            .warning(tensorLoc, "the tensor axis '" + t.parallel.tensorAxis + "' crosses nodes of mesh '" +
                                    mesh->name + "' (" + std::to_string(mesh->perNode) +
                                    " devices a node): its collectives, several in every layer, take the network link")
            .note(mesh->axes[a].loc, "ranks are placed node-major: an axis stays in a node when its size times the "
                                     "sizes of the axes after it divides the node; put the tensor axis last and "
                                     "within a node, as Megatron and torchtitan do");
  if (!bucketSet) {
    t.parallel.bucketBytes = mesh && !((t.parallel.zero == 1 || t.parallel.zero == 2) && t.parallel.sequence)
                                 ? sema::defaultBucketBytes(mesh->kind, t.dataParallel, t.parallel.zero,
                                                            t.tensorParallel, t.pipelineParallel)
                                 : 0;
  } else if (t.parallel.bucketBytes > 0) {
    // Buckets are the gradients' (DDP, ZeRO-1 and 2, ZeRO-3 without sequence
    // parallelism) and ZeRO-3's parameter gathers: refused by name where the schedule has
    // none.
    std::string why = t.parallel.dataAxes.empty() ? "the plan has no data axis"
                      : (t.parallel.zero == 1 || t.parallel.zero == 2) && t.parallel.sequence
                          ? "ZeRO-" + std::to_string(t.parallel.zero) +
                                " with sequence parallelism reduces its gradients whole (its buckets would scatter "
                                "the gradients of replicated parameters before the tensor axis sums them; not "
                                "implemented in this version of planc)"
                      : t.pipelineParallel > 1
                          ? "a pipeline stage reduces its gradients whole (bucketed pipeline stages are not "
                            "implemented in this version of planc)"
                          : "";
    if (!why.empty()) {
      diags
          .error(bucketLoc, "'bucket' sets the size of the gradient buckets (ZeRO-3: of the parameter "
                            "gathers), but " +
                                why)
          .note("buckets need 'data = <axis>', no pipeline and no sequence parallelism with ZeRO-1 or 2 (and, "
                "built for --target cuda, no tensor axis); write 'bucket = none' or leave it out");
      ok = false;
    }
  }
  if (t.parallel.zero > 0 && t.parallel.dataAxes.empty() && parallelEntry) {
    diags
        .error(zeroLoc,
               "zero = " + std::to_string(t.parallel.zero) + " shards over the data axis, but the plan has none")
        .note("add 'data = <axis>' to the parallel section");
    ok = false;
  }
  checkOffloadRules();
  if (t.parallel.sequence && t.parallel.tensorAxis.empty()) {
    diags.error(sequenceLoc, "sequence parallel splits the sequence over the tensor axis, but "
                             "the plan has none");
    ok = false;
  }
}

void TrainCheck::checkOffloadRules() {
  const sema::Offload &opt = t.parallel.optimizerOffload, &params = t.parallel.paramsOffload;
  if (mesh && mesh->kind == sema::DeviceKind::CPU) {
    for (const sema::Offload *o : {&opt, &params})
      if (o->target == sema::OffloadTarget::CPU) {
        diags
            .error(o->loc, std::string("'") + (o == &opt ? "optimizer" : "params") +
                               " = cpu' offloads to the host, but on a cpu mesh the device is the host")
            .note("on a cpu mesh only nvme(\"DIR\") moves state out of the processes' memory");
        ok = false;
      }
  }
  if (params.any() && t.parallel.zero != 3) {
    diags
        .error(params.loc, "'params' offload moves the parameter shards off the device, which needs zero = 3, not " +
                               std::to_string(t.parallel.zero))
        .note("only ZeRO-3 holds parameters as shards between their uses; set 'zero = 3' or offload 'optimizer' only");
    ok = false;
  }
}
