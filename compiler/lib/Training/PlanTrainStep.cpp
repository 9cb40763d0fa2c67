// `plan-train-step`: a train plan's model becomes three functions on tensors of
// static shape: the forward pass (eval), its gradient (autodiff) and the optimizer
// update (clipping, schedule, AdamW).
#include "plan/Training/Training.h"

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace plan {
#define GEN_PASS_DEF_PLANTRAINSTEP
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

training::BufferLayout training::layoutOf(ArrayRef<RankedTensorType> params, int64_t shards) {
  std::vector<int64_t> counts;
  std::vector<bool> decay;
  for (RankedTensorType t : params) {
    counts.push_back(t.getNumElements());
    decay.push_back(decayed(t));
  }
  return flatLayout(counts, decay, shards);
}

int64_t training::dataParallelSize(pl::TrainOp train) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  int64_t d = 1;
  if (mesh)
    for (Attribute a : train.getParallel().getData())
      d *= std::max<int64_t>(1, mesh.getAxisSize(cast<StringAttr>(a).getValue()));
  return d;
}

training::Pipeline training::pipelineOf(pl::TrainOp train) {
  Pipeline out;
  pl::ParallelAttr par = train.getParallel();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  StringRef axis = par.getPipeline() ? par.getPipeline().getValue() : StringRef();
  if (!mesh || axis.empty() || mesh.getAxisSize(axis) <= 1)
    return out;
  out.axis = axis.str();
  out.size = mesh.getAxisSize(axis);
  out.stages = par.getStages();
  out.schedule = par.getSchedule();
  out.keepActivations = par.getKeepActivations();
  return out;
}

int64_t training::deviceCount(pl::TrainOp train) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  int64_t devices = 1;
  if (mesh)
    for (auto axis : mesh.getAxes().getAsRange<pl::AxisAttr>())
      devices *= axis.getSize();
  return devices;
}

SmallVector<int64_t> training::stagesOfRank(int64_t rank, int64_t ranks, int64_t stages) {
  SmallVector<int64_t> out;
  for (int64_t k = rank; k < stages; k += ranks)
    out.push_back(k);
  return out;
}

SmallVector<std::pair<func::FuncOp, unsigned>> training::rankParameters(ArrayRef<func::FuncOp> fns, StringRef attr) {
  SmallVector<std::pair<func::FuncOp, unsigned>> out;
  llvm::StringSet<> seen;
  for (func::FuncOp f : fns)
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto name = f.getArgAttrOfType<StringAttr>(i, attr); name && seen.insert(name.getValue()).second)
        out.push_back({f, i});
  return out;
}

namespace {

/// f64 constant.
Value f64(OpBuilder &b, Location loc, double v) { return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v)); }

/// The learning rate of 0-based step `s` (f64): linear warmup over `warmup`
/// steps to `lr`, then constant, linear or cosine decay to `min_lr` at `steps`.
Value learningRate(OpBuilder &b, Location loc, pl::TrainOp train, Value step) {
  double lr = train.getLr().convertToDouble(), minLr = train.getMinLr().convertToDouble();
  int64_t warmup = int64_t(train.getWarmupAttr().getInt()), steps = int64_t(train.getStepsAttr().getInt());
  Value s = arith::SIToFPOp::create(b, loc, b.getF64Type(), step);
  Value decayed = f64(b, loc, lr);
  if (train.getLrSchedule() != pl::LRSchedule::constant) {
    Value p = arith::DivFOp::create(b, loc, arith::SubFOp::create(b, loc, s, f64(b, loc, double(warmup))),
                                    f64(b, loc, double(std::max<int64_t>(1, steps - warmup))));
    p = arith::MinimumFOp::create(b, loc, p, f64(b, loc, 1.0));
    if (train.getLrSchedule() == pl::LRSchedule::linear) {
      decayed =
          arith::AddFOp::create(b, loc, f64(b, loc, lr), arith::MulFOp::create(b, loc, f64(b, loc, minLr - lr), p));
    } else {
      Value c = math::CosOp::create(b, loc, arith::MulFOp::create(b, loc, f64(b, loc, M_PI), p));
      Value half = arith::MulFOp::create(b, loc, f64(b, loc, 0.5), arith::AddFOp::create(b, loc, f64(b, loc, 1.0), c));
      decayed = arith::AddFOp::create(b, loc, f64(b, loc, minLr),
                                      arith::MulFOp::create(b, loc, f64(b, loc, lr - minLr), half));
    }
  }
  if (warmup == 0)
    return decayed;
  Value warm = arith::DivFOp::create(
      b, loc, arith::MulFOp::create(b, loc, f64(b, loc, lr), arith::AddFOp::create(b, loc, s, f64(b, loc, 1.0))),
      f64(b, loc, double(warmup)));
  Value inWarmup = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, s, f64(b, loc, double(warmup)));
  return arith::SelectOp::create(b, loc, inWarmup, warm, decayed);
}

/// `name(step: i64, sumsq: f32, params[g]…, grads[g]…, m[g]…, v[g]…) -> (grad_norm:
/// f32, lr: f64, params[g]…, m[g]…, v[g]…)` over the optimizer groups g of
/// training::layoutOf: each argument is this data-parallel rank's piece of a group's
/// span of a flat buffer (the whole span without ZeRO), so the update is two
/// elementwise sweeps whatever the number of parameters. `sumsq` is the sum of the
/// squared gradients over every rank (the schedule reduces it), for the global norm.
/// With `chunk` > 0, the same update of group `only` alone, on spans of `chunk` floats:
/// what an offloaded optimizer runs on each chunk of the state it streams. Under a
/// pipeline, `fns` are the functions of one rank's stages, whose parameters it updates
/// (training::rankParameters); inserted after the last.
func::FuncOp buildUpdate(pl::TrainOp train, ArrayRef<func::FuncOp> fns, StringRef name, int only = -1,
                         int64_t chunk = 0) {
  OpBuilder b(train->getContext());
  b.setInsertionPointAfter(fns.back());
  Location loc = train.getLoc();
  SmallVector<RankedTensorType> types;
  for (auto [f, i] : training::rankParameters(fns, "nn.param"))
    types.push_back(cast<RankedTensorType>(f.getArgument(i).getType()));
  int64_t d = training::dataParallelSize(train);
  bool sharded = d > 1 && train.getParallel().getZero() >= 1;
  training::BufferLayout layout = training::layoutOf(types, d);
  SmallVector<int> groups;
  for (int g = 0; g < 2; ++g)
    if (layout.groupEnd[g] > layout.groupBegin[g] && (only < 0 || g == only))
      groups.push_back(g);
  if (only >= 0 && groups.empty())
    return {};
  size_t n = groups.size();
  auto spanType = [&](int g) {
    return RankedTensorType::get({chunk > 0 ? chunk : sharded ? layout.shardFloats(g) : layout.groupFloats(g)},
                                 b.getF32Type());
  };
  bool scaled = train.getPrecision() == pl::Precision::fp16;
  SmallVector<Type> ins{b.getI64Type(), b.getF32Type()}, outs{b.getF32Type(), b.getF64Type()};
  for (int k = 0; k < 4; ++k)
    for (int g : groups)
      ins.push_back(spanType(g));
  for (int k = 0; k < 3; ++k)
    for (int g : groups)
      outs.push_back(spanType(g));
  if (scaled) { // loss scale, good steps and applied steps in; their next values and "skipped" out
    ins.append({b.getF32Type(), b.getF32Type(), b.getF32Type()});
    outs.append({b.getF32Type(), b.getF32Type(), b.getF32Type(), b.getF32Type()});
  }
  auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(ins, outs));
  fn.setPrivate();
  const char *roles[] = {"nn.params", "nn.grads", "nn.exp_avg", "nn.exp_avg_sq"};
  const char *groupNames[] = {"decay", "no_decay"};
  for (int k = 0; k < 4; ++k)
    for (size_t i = 0; i < n; ++i)
      fn.setArgAttr(2 + k * n + i, roles[k], b.getStringAttr(groupNames[groups[i]]));
  fn.setArgAttr(1, "nn.sumsq", b.getUnitAttr());
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto arg = [&](int k, size_t i) { return body->getArgument(2 + k * n + i); };

  // Global gradient norm, before clipping (the padding between parameters is zero).
  Value norm = math::SqrtOp::create(b, loc, body->getArgument(1));
  // Loss scaling (fp16): the gradients come scaled; unscale the norm, and skip the
  // step when it is not finite (an overflow somewhere in the backward pass).
  Value lossScale, good, applied, finite, inv;
  if (scaled) {
    lossScale = body->getArgument(2 + 4 * n);
    good = body->getArgument(3 + 4 * n);
    applied = body->getArgument(4 + 4 * n);
    inv = arith::DivFOp::create(b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0)), lossScale);
    norm = arith::MulFOp::create(b, loc, norm, inv);
    finite = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, norm,
                                   arith::ConstantOp::create(b, loc, b.getF32FloatAttr(INFINITY)));
  }
  // Clipping as torch.nn.utils.clip_grad_norm_: scale = min(1, clip / (norm + 1e-6)).
  Value scale = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0));
  double clip = train.getClip().convertToDouble();
  if (clip > 0) {
    Value coef = arith::DivFOp::create(
        b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(clip))),
        arith::AddFOp::create(b, loc, norm, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1e-6f))));
    scale = arith::MinimumFOp::create(b, loc, coef, scale);
  }
  if (scaled)
    scale = arith::MulFOp::create(b, loc, scale, inv);
  Value step = body->getArgument(0);
  Value lr = learningRate(b, loc, train, step);
  // Bias corrections of 1-based step t: the step's index, or with loss scaling the
  // number of updates applied so far (a skipped step does not count, as with GradScaler,
  // which skips optimizer.step()); the schedule stays on the step's index.
  Value t;
  if (scaled) {
    Value next = arith::AddFOp::create(b, loc, applied, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1)));
    t = arith::ExtFOp::create(b, loc, b.getF64Type(), next);
  } else {
    Value next = arith::AddIOp::create(b, loc, step, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)));
    t = arith::SIToFPOp::create(b, loc, b.getF64Type(), next);
  }
  double beta1 = train.getBeta1().convertToDouble(), beta2 = train.getBeta2().convertToDouble();
  Value bc1 = arith::SubFOp::create(b, loc, f64(b, loc, 1.0), math::PowFOp::create(b, loc, f64(b, loc, beta1), t));
  Value bc2 = arith::SubFOp::create(b, loc, f64(b, loc, 1.0), math::PowFOp::create(b, loc, f64(b, loc, beta2), t));

  SmallVector<Value> results{norm, lr}, newM, newV;
  for (size_t i = 0; i < n; ++i) {
    // Weight decay on matrices (weights and embeddings) only, as nanoGPT.
    double wd = groups[i] == 0 ? train.getWeightDecay().convertToDouble() : 0.0;
    RankedTensorType ty = spanType(groups[i]);
    // With loss scaling, a skipped step leaves parameters and moments as they were.
    if (train.getOptimizer() == "sgd") { // the momentum buffer in exp_avg; exp_avg_sq unused
      auto op = nn::SGDOp::create(b, loc, ty, ty, arg(0, i), arg(1, i), arg(2, i), lr, scale,
                                  scaled ? finite : Value(), train.getMomentumAttr(), b.getF64FloatAttr(wd));
      results.push_back(op.getNewParam());
      newM.push_back(op.getNewBuf());
      newV.push_back(arg(3, i));
      continue;
    }
    auto op = nn::AdamWOp::create(b, loc, ty, ty, ty, arg(0, i), arg(1, i), arg(2, i), arg(3, i), lr, scale, bc1, bc2,
                                  scaled ? finite : Value(), train.getBeta1Attr(), train.getBeta2Attr(),
                                  train.getEpsAttr(), b.getF64FloatAttr(wd));
    results.push_back(op.getNewParam());
    newM.push_back(op.getNewM());
    newV.push_back(op.getNewV());
  }
  results.append(newM);
  results.append(newV);
  if (scaled) {
    // torch.cuda.amp.GradScaler's rule when dynamic: halve on overflow, double after
    // 2000 steps in a row without one. A static scale stays.
    auto c = [&](double x) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(x))); };
    Value zero = c(0), one = c(1);
    Value nextScale = lossScale, nextGood = zero;
    if (train.getLossScale() == pl::LossScale::dynamic) {
      Value good1 = arith::AddFOp::create(b, loc, good, one);
      Value grow = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, good1, c(2000));
      Value grown = arith::SelectOp::create(b, loc, grow, arith::MulFOp::create(b, loc, lossScale, c(2)), lossScale);
      nextScale = arith::SelectOp::create(b, loc, finite, grown, arith::MulFOp::create(b, loc, lossScale, c(0.5)));
      nextGood = arith::SelectOp::create(b, loc, finite, arith::SelectOp::create(b, loc, grow, zero, good1), zero);
    }
    Value nextApplied = arith::SelectOp::create(b, loc, finite, arith::AddFOp::create(b, loc, applied, one), applied);
    results.append({nextScale, nextGood, arith::SelectOp::create(b, loc, finite, zero, one), nextApplied});
  }
  func::ReturnOp::create(b, loc, results);
  return fn;
}

/// An offloaded optimizer streams its state: `name`_update_chunk_g<k>, the update of
/// one chunk of group k, per group that has parameters.
void buildChunkUpdates(pl::TrainOp train, ArrayRef<func::FuncOp> grad, StringRef name) {
  if (DictionaryAttr offload = train.getParallel().getOffload())
    if (auto opt = offload.getAs<DictionaryAttr>("optimizer"))
      if (auto buffer = opt.getAs<IntegerAttr>("buffer"))
        for (int g = 0; g < 2; ++g)
          buildUpdate(train, grad, (name + "_update_chunk_g" + std::to_string(g)).str(), g, buffer.getInt() / 4);
}

struct PlanTrainStep : plan::impl::PlanTrainStepBase<PlanTrainStep> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto train : llvm::to_vector(module.getOps<pl::TrainOp>())) {
      auto model = symbols.lookup<func::FuncOp>(train.getModel());
      if (!model || !model->hasAttr("nn.model")) {
        train.emitOpError() << "needs its model expanded to nn first (convert-plan-to-nn)";
        return signalPassFailure();
      }
      std::string base = train.getSymName().str();
      for (const char *suffix : {"_forward", "_grad", "_update", "_update_chunk_g0", "_update_chunk_g1"})
        if (Operation *clash = symbols.lookup(base + suffix)) {
          InFlightDiagnostic d = train.emitError() << "train '" << base << "' needs the name '" << base << suffix
                                                   << "' for its step function, but it is taken; rename one of them";
          d.attachNote(clash->getLoc()) << "'" << base << suffix << "' is declared here";
          return signalPassFailure();
        }
      func::FuncOp fwd = training::specialize(model, base + "_forward", int64_t(train.getMicroAttr().getInt()),
                                              int64_t(train.getSeqAttr().getInt()));
      fwd->removeAttr("nn.model");
      fwd->setAttr("nn.forward", UnitAttr::get(&getContext()));
      fwd.setPrivate();
      if (failed(training::specializeImages(fwd, train)))
        return signalPassFailure();
      // Tensor parallelism: the forward pass of one rank of the tensor group; its
      // gradient and update follow from it.
      if (training::TensorParallel tp = training::tensorParallelOf(train); tp.size > 1) {
        if (failed(training::partitionTensorParallel(fwd, tp.axis, tp.size, tp.dims, tp.sequence)))
          return signalPassFailure();
      }
      if (train.getPrecision() != pl::Precision::fp32) {
        OpBuilder b(&getContext());
        training::emulatePrecision(fwd, train.getPrecision() == pl::Precision::bf16 ? FloatType(b.getBF16Type())
                                                                                    : FloatType(b.getF16Type()));
      }
      training::Recompute recompute = train.getRecompute() == pl::Recompute::full ? training::Recompute::Full
                                      : train.getRecompute() == pl::Recompute::selective
                                          ? training::Recompute::Selective
                                          : training::Recompute::None;
      bool scaled = train.getPrecision() == pl::Precision::fp16;
      // `planc emit --stage spmd`: the per-rank forward functions only.
      if (partitionOnly) {
        if (training::Pipeline pp = training::pipelineOf(train);
            pp.size > 1 && failed(training::splitPipeline(fwd, pp.stages)))
          return signalPassFailure();
        continue;
      }
      // Pipeline parallelism: one forward function per stage, each with its gradient
      // (a vector-Jacobian product but on the last); one update per pipeline rank, of
      // the parameters of the stages it holds (one each but under the interleaved
      // schedule), named after its first stage.
      if (training::Pipeline pp = training::pipelineOf(train); pp.size > 1) {
        FailureOr<SmallVector<func::FuncOp>> stages = training::splitPipeline(fwd, pp.stages);
        if (failed(stages))
          return signalPassFailure();
        SmallVector<func::FuncOp> grads;
        for (auto [k, stage] : llvm::enumerate(*stages)) {
          bool last = k + 1 == stages->size();
          std::string name = base + "_stage" + std::to_string(k);
          FailureOr<func::FuncOp> grad = training::differentiate(stage, name + "_grad", scaled && last, recompute);
          if (failed(grad))
            return signalPassFailure();
          grad->setPrivate();
          grads.push_back(*grad);
        }
        for (int64_t r = 0; r < pp.size; ++r) {
          SmallVector<func::FuncOp> mine;
          for (int64_t k : training::stagesOfRank(r, pp.size, pp.stages))
            mine.push_back(grads[size_t(k)]);
          std::string name = base + "_stage" + std::to_string(r);
          buildUpdate(train, mine, name + "_update");
          buildChunkUpdates(train, mine, name);
        }
        continue;
      }
      FailureOr<func::FuncOp> grad = training::differentiate(fwd, base + "_grad", scaled, recompute);
      if (failed(grad))
        return signalPassFailure();
      grad->setPrivate();
      buildUpdate(train, {*grad}, base + "_update");
      buildChunkUpdates(train, {*grad}, base);
    }
  }
};

} // namespace
