// The static rules of a parallel layout, without diagnostics.
#include "plan/Lang/Layout.h"

#include <tuple>

using namespace plan::sema;

Layout plan::sema::layoutOf(const Train &t) {
  Layout l;
  l.data = t.dataParallel;
  l.tensor = t.tensorParallel;
  l.pipeline = t.pipelineParallel;
  l.stages = t.parallel.stages;
  l.schedule = t.parallel.schedule;
  l.keepActivations = t.parallel.keepActivations;
  l.sequence = t.parallel.sequence;
  l.zero = t.parallel.zero;
  l.bucketBytes = t.parallel.bucketBytes;
  l.optimizerOffload = t.parallel.optimizerOffload;
  l.paramsOffload = t.parallel.paramsOffload;
  l.checkpoints = t.checkpointEvery > 0 && !t.checkpointDir.empty();
  l.recompute = t.recompute;
  l.precision = t.precision;
  l.batch = t.batch;
  l.micro = t.micro;
  l.seq = t.seq;
  if (!t.parallel.tensorAxis.empty())
    for (auto &[dim, axis] : t.shard)
      if (axis == t.parallel.tensorAxis)
        l.tensorDims.insert(dim);
  l.adapt.rank = t.adapt.rank;
  l.adapt.matrices.insert(t.adapt.matrices.begin(), t.adapt.matrices.end());
  l.adapt.quantized.insert(t.adapt.quantize.matrices.begin(), t.adapt.quantize.matrices.end());
  l.adapt.nf4Block = t.adapt.quantize.block;
  l.adapt.nf4Double = t.adapt.quantize.dbl;
  l.images.channels = t.images.channels;
  l.images.height = t.images.height;
  l.images.width = t.images.width;
  l.images.batchnormSync = t.parallel.batchnormSync;
  return l;
}

std::vector<Violation> plan::sema::checkLayout(const Model *modelPtr, const Layout &l) {
  std::vector<Violation> out;
  auto add = [&](Violation::Kind k, int64_t value, int64_t divisor) {
    Violation v;
    v.kind = k;
    v.value = value;
    v.divisor = divisor;
    out.push_back(v);
    return &out.back();
  };
  // Batch = micro × data × micro-batches.
  int64_t per;
  if (__builtin_mul_overflow(l.micro, l.data, &per) || per <= 0 || l.batch % per != 0 || l.batch < per)
    add(Violation::Kind::BatchNotDivisible, l.batch, per);
  if (!modelPtr)
    return out;
  const Model &model = *modelPtr;

  // Tensor axis: whole heads, and whole slices of every split dim.
  if (l.tensor > 1) {
    std::set<std::tuple<uint32_t, uint32_t, uint32_t, std::string>> seen;
    auto once = [&](ast::Loc at, const std::string &what) {
      return seen.insert({at.file, at.line, at.col, what}).second;
    };
    if (l.splits("qkv") || l.splits("heads"))
      for (const GraphOp *op : model.attentions()) {
        if (op->heads % l.tensor != 0) {
          if (once(op->bindingLoc, "heads"))
            add(Violation::Kind::Heads, op->heads, l.tensor)->op = op;
        } else if (op->kvHeads % l.tensor != 0 && once(op->bindingLoc, "kv_heads")) {
          add(Violation::Kind::KvHeads, op->kvHeads, l.tensor)->op = op;
        }
      }
    for (const Parameter &p : model.params) {
      size_t splits = 0, first = 0;
      for (size_t i = 0; i < p.dims.size(); ++i)
        if (l.splits(p.dims[i]) && splits++ == 0)
          first = i;
      if (splits > 1 && once(p.loc, "double")) {
        Violation *v = add(Violation::Kind::DoubleSplit, int64_t(first), l.tensor);
        v->param = &p;
        v->dimIndex = first;
      }
    }
    for (const Parameter &p : model.params)
      for (size_t i = 0; i < p.dims.size(); ++i) {
        const std::string &d = p.dims[i];
        if (d == "qkv" || d == "heads" || !l.splits(d) || p.shape[i] % l.tensor == 0)
          continue; // qkv and heads are whole heads, checked above
        if (!once(p.loc, d))
          continue;
        Violation *v = add(Violation::Kind::Dim, p.shape[i], l.tensor);
        v->param = &p;
        v->dimIndex = i;
      }
    if (l.sequence && l.seq % l.tensor != 0)
      add(Violation::Kind::Sequence, l.seq, l.tensor);
  }

  // Pipeline: stages over ranks, layers over stages, micro-batches to fill them.
  if (l.pipeline > 1 || l.stages > 1) {
    if (l.stages % l.pipeline != 0)
      add(Violation::Kind::StagesUneven, l.stages, l.pipeline);
    else if (l.schedule != PipelineSchedule::Interleaved && l.stages != l.pipeline)
      add(Violation::Kind::StagesNeedInterleaved, l.stages, l.pipeline);
    else if (l.schedule == PipelineSchedule::Interleaved && l.stages < 2 * l.pipeline)
      add(Violation::Kind::InterleavedTooFewStages, l.stages, 2 * l.pipeline);
    if (model.layers < l.stages)
      add(Violation::Kind::LayersFewerThanStages, model.layers, l.stages);
    if (per > 0 && l.batch % per == 0 && l.batch >= per) {
      int64_t m = l.microBatches();
      if (m < l.pipeline)
        add(Violation::Kind::MicroBatchesFewerThanStages, m, l.pipeline);
      else if (l.schedule == PipelineSchedule::Interleaved && m % l.pipeline != 0)
        add(Violation::Kind::InterleavedMicroBatches, m, l.pipeline);
    }
  }
  return out;
}
