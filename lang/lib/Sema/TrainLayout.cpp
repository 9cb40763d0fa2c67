// The layout of a train plan: which logical dims the tensor axis splits, and the
// divisibility and pipeline rules of sema::checkLayout, each reported where the
// plan sets what breaks it.
#include "Train.h"

#include "plan/Lang/Layout.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

void TrainCheck::checkShard() {
  if (!t.parallel.tensorAxis.empty())
    for (const std::string &d : sema::defaultTensorDims())
      t.shard[d] = t.parallel.tensorAxis;
  if (const Expr *e = sec.value("shard")) {
    Value v = sema.eval(*e, nullptr);
    if (v.kind != Value::Kind::List || (!v.items.empty() && v.items.front().key.empty())) {
      sema.typeError(v, "'shard' of " + what, "a list of logical dims to axes, as in [vocab: tp]");
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
          diags
              .error(it.keyLoc, "model '" + model->name + "' has no logical dim '" + it.key + "'" +
                                    (best.empty() ? "" : "; did you mean '" + best + "'?"))
              .note("its logical dims are " + list);
          ok = false;
          continue;
        }
        auto w = sema.toWord(*it.value, "the axis of '" + it.key + "'");
        if (!w) {
          ok = false;
        } else if (*w == "_" || *w == "none") {
          t.shard[it.key] = "";
        } else if (*w != t.parallel.tensorAxis) {
          auto d =
              diags.error(it.value->loc, t.parallel.tensorAxis.empty()
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
}

void TrainCheck::checkLayoutRules() {
  if (mesh && haveBatch && t.micro > 0) {
    std::string axis = "the tensor axis '" + t.parallel.tensorAxis + "' (" + std::to_string(t.tensorParallel) + ")";
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
                                 std::to_string(t.micro) + " × " + std::to_string(t.dataParallel) + " = " + divisor);
        if (sec.get("micro"))
          d.note(sec.get("micro")->loc, "micro is set here");
        if (!dataLocs.empty())
          d.note(dataLocs.front(), "the data axes are set here");
        d.note("gradient accumulation steps = batch / (micro × data-parallel size) must be a whole number ≥ 1");
        break;
      }
      case sema::Violation::Kind::Heads:
        diags
            .error(tensorLoc, "the " + value + " heads of attention '" + v.op->layer + "' are not divisible by " + axis)
            .note(v.op->bindingLoc, "the attention is declared here");
        break;
      case sema::Violation::Kind::KvHeads:
        diags
            .error(tensorLoc,
                   "the " + value + " kv_heads of attention '" + v.op->layer + "' are not divisible by " + axis)
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
        diags
            .error(tensorLoc, "'" + v.param->path + "' would be split over " + axis + " on both " + dims +
                                  "; a tensor is split along one dim")
            .note(v.param->loc, "the parameter is declared here")
            .note("split only one of them: map '" + keep + "' to '_' in 'shard' (or leave it out of 'shard')");
        break;
      }
      case sema::Violation::Kind::Sequence:
        diags.error(sequenceLoc,
                    "seq " + value + " is not divisible by " + axis + ", which sequence parallel splits it over");
        break;
      case sema::Violation::Kind::StagesUneven:
        diags.error(pipelineLoc, value + " pipeline stages do not divide evenly over the " + divisor +
                                     " ranks of axis '" + t.parallel.pipelineAxis + "'");
        break;
      case sema::Violation::Kind::StagesNeedInterleaved:
        diags.error(pipelineLoc, value + " stages on a pipeline axis of " + divisor + " need schedule: interleaved");
        break;
      case sema::Violation::Kind::InterleavedTooFewStages:
        diags.error(pipelineLoc, "an interleaved schedule needs at least two stages per rank: stages ≥ " + divisor);
        break;
      case sema::Violation::Kind::LayersFewerThanStages:
        diags
            .error(pipelineLoc, "model '" + model->name + "' has " + value + " repeated layers, fewer than the " +
                                    divisor + " pipeline stages")
            .note(model->loc, "model declared here");
        break;
      case sema::Violation::Kind::MicroBatchesFewerThanStages:
        diags
            .error(pipelineLoc, "each step has " + value + (v.value == 1 ? " micro-batch" : " micro-batches") +
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
}
