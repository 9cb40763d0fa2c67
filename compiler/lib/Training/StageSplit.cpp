// The cuts of a pipeline stage's gradient function: for `keep: activations`, and for
// the zero-bubble schedule (StageSplit.h).
#include "plan/Training/StageSplit.h"

#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace plan::training {
namespace {
/// What a value depends on, by the kind of argument: parameters (nn.param, nn.frozen),
/// the micro-batch (tokens, targets, the activation in), the cotangent.
enum Deps : unsigned { kParams = 1, kMicroBatch = 2, kCotangent = 4 };

unsigned argDeps(func::FuncOp f, unsigned i) {
  if (f.getArgAttr(i, "nn.cotangent"))
    return kCotangent;
  if (f.getArgAttr(i, "nn.activation") || f.getArgAttr(i, "nn.input"))
    return kMicroBatch;
  return kParams;
}

bool isF32Tensor(Type t) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  return ranked && ranked.hasStaticShape() && ranked.getElementType().isF32();
}

/// What each value of `grad`'s body depends on (Deps); with `recomputedInBackward`, what
/// recompute computes again (nn.recomputed) counts as reading the cotangent.
llvm::DenseMap<Value, unsigned> dependencies(func::FuncOp grad, bool recomputedInBackward) {
  Block &body = grad.getBody().front();
  llvm::DenseMap<Value, unsigned> deps;
  for (BlockArgument a : body.getArguments())
    deps[a] = argDeps(grad, a.getArgNumber());
  for (Operation &op : body.without_terminator()) {
    unsigned d = 0;
    for (Value v : op.getOperands())
      d |= deps.lookup(v);
    if (recomputedInBackward && op.hasAttr("nn.recomputed"))
      d |= kCotangent;
    for (Value r : op.getResults())
      deps[r] = d;
  }
  return deps;
}

/// Appends v to the residuals at the next offset.
template <typename Split> void addResidual(Split &out, Value v) {
  out.residuals.push_back(v);
  out.offsets.push_back(out.floats);
  out.floats += cast<RankedTensorType>(v.getType()).getNumElements();
}

/// Clones the ops of `body` that `take` selects, in order, after mapping `args` (null
/// ones left unmapped); returns the terminator's operands through the mapping, null where
/// unmapped.
SmallVector<Value> cloneSelected(OpBuilder &b, Block &body, ValueRange args, IRMapping &map,
                                 llvm::function_ref<bool(Operation &)> take,
                                 llvm::function_ref<void(Operation &)> after) {
  for (auto [a, v] : llvm::zip(body.getArguments(), args))
    if (v)
      map.map(a, v);
  for (Operation &op : body.without_terminator())
    if (take(op)) {
      b.clone(op, map);
      after(op);
    }
  SmallVector<Value> out;
  for (Value v : body.getTerminator()->getOperands())
    out.push_back(map.lookupOrNull(v));
  return out;
}
} // namespace

StageSplit splitStage(func::FuncOp grad) {
  StageSplit out;
  out.grad = grad;
  Block &body = grad.getBody().front();
  // What recompute (selective or full) computes again stays in the backward pass.
  llvm::DenseMap<Value, unsigned> deps = dependencies(grad, /*recomputedInBackward=*/true);
  for (Operation &op : body.without_terminator())
    if (op.getNumResults() > 0 && (deps.lookup(op.getResult(0)) & kCotangent))
      out.backward.insert(&op);
  // Each forward value the backward pass reads (or returns: a parameter whose gradient is
  // a constant) is kept or computed again.
  llvm::DenseSet<Value> kept;
  SmallVector<Value> needed;
  auto need = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && !out.backward.contains(def))
      needed.push_back(v);
  };
  for (Operation *op : out.backward)
    for (Value v : op->getOperands())
      need(v);
  for (Value v : body.getTerminator()->getOperands().drop_front())
    need(v);
  while (!needed.empty()) {
    Value v = needed.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (kept.contains(v) || out.recomputed.contains(def))
      continue;
    // Computed again: what reads only parameters and constants, and what the saved buffer
    // cannot hold (not f32, or of a dynamic shape), from operands kept or computed again
    // in turn.
    unsigned d = deps.lookup(v);
    if ((d & ~unsigned(kParams)) == 0 || !isF32Tensor(v.getType())) {
      out.recomputed.insert(def);
      for (Value operand : def->getOperands())
        need(operand);
      continue;
    }
    kept.insert(v);
  }
  // In the order the forward pass computes them; an op computed again for one result
  // gives the backward pass its others too.
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults())
      if (kept.contains(r) && !out.recomputed.contains(&op))
        addResidual(out, r);
  return out;
}

void cloneForward(OpBuilder &b, const StageSplit &split, ValueRange args, IRMapping &map,
                  llvm::function_ref<void(size_t, Value)> keep) {
  Block &body = func::FuncOp(split.grad).getBody().front();
  for (auto [a, v] : llvm::zip(body.getArguments(), args))
    if (v)
      map.map(a, v);
  llvm::DenseMap<Value, size_t> residual;
  for (auto [i, v] : llvm::enumerate(split.residuals))
    residual[v] = i;
  for (Operation &op : body.without_terminator()) {
    if (split.backward.contains(&op))
      continue;
    b.clone(op, map);
    for (Value r : op.getResults())
      if (auto it = residual.find(r); it != residual.end())
        keep(it->second, map.lookup(r));
  }
}

namespace {
bool madeByWeightPass(const WeightSplit &split, Value v) {
  Operation *def = v.getDefiningOp();
  return def && split.weight.contains(def);
}
} // namespace

SmallVector<Value> cloneBackward(OpBuilder &b, const StageSplit &split, ValueRange args, ValueRange residuals,
                                 const WeightSplit *weight, llvm::function_ref<void(size_t, Value)> keep,
                                 bool *allKept) {
  Block &body = func::FuncOp(split.grad).getBody().front();
  IRMapping map;
  map.map(body.getArguments(), args);
  map.map(split.residuals, residuals);
  llvm::DenseMap<Value, size_t> residual;
  size_t kept = 0;
  if (weight)
    for (auto [i, v] : llvm::enumerate(weight->residuals)) {
      if (map.contains(v)) {
        keep(i, map.lookup(v));
        ++kept;
      } else {
        residual[v] = i;
      }
    }
  for (Operation &op : body.without_terminator()) {
    if (!split.recomputed.contains(&op) && !split.backward.contains(&op))
      continue;
    if (weight && weight->weight.contains(&op))
      continue;
    b.clone(op, map);
    for (Value r : op.getResults())
      if (auto it = residual.find(r); it != residual.end()) {
        keep(it->second, map.lookup(r));
        ++kept;
      }
  }
  // A value W reads that neither the saved values nor the backward part have (a forward
  // value only W's ops read) is not written: the caller refuses the plan.
  if (allKept)
    *allKept = !weight || kept == weight->residuals.size();
  SmallVector<Value> out;
  for (Value v : body.getTerminator()->getOperands())
    out.push_back(weight && madeByWeightPass(*weight, v) ? Value() : map.lookupOrNull(v));
  return out;
}

WeightSplit splitWeightGradients(func::FuncOp grad) {
  WeightSplit out;
  out.grad = grad;
  Block &body = grad.getBody().front();
  Operation *ret = body.getTerminator();
  // B: every op that a result other than a parameter's gradient needs.
  llvm::DenseSet<Operation *> input;
  SmallVector<Value> work;
  for (OpOperand &r : ret->getOpOperands())
    if (!grad.getResultAttr(r.getOperandNumber(), "nn.grad"))
      work.push_back(r.get());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && input.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  // The head's weight gradient stays in B: waiting for W, it would keep the logits'
  // gradient (tokens × vocabulary floats) rather than a layer's activations. So does
  // every op reading that gradient, or a copy of it (a rounding, a reshape), and what it reads.
  llvm::DenseSet<Value> logitsGrad;
  for (Operation &op : body.without_terminator()) {
    if (isa<nn::CrossEntropyGradOp, nn::VocabParallelCrossEntropyGradOp>(op))
      logitsGrad.insert(op.getResult(0));
    else if (op.getNumOperands() == 1 && op.getNumResults() == 1 && logitsGrad.contains(op.getOperand(0)))
      logitsGrad.insert(op.getResult(0));
  }
  for (Operation &op : body.without_terminator())
    if (!input.contains(&op) && llvm::any_of(op.getOperands(), [&](Value v) { return logitsGrad.contains(v); })) {
      input.insert(&op);
      llvm::append_range(work, op.getOperands());
    }
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && input.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : body.without_terminator())
    if (!input.contains(&op))
      out.weight.insert(&op);
  // What W reads of B: kept in the slot, or computed again (as splitStage decides).
  llvm::DenseMap<Value, unsigned> deps = dependencies(grad, /*recomputedInBackward=*/false);
  llvm::DenseSet<Value> kept;
  for (Operation *op : out.weight)
    llvm::append_range(work, op->getOperands());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (kept.contains(v) || out.weight.contains(def) || out.again.contains(def))
      continue;
    unsigned d = deps.lookup(v);
    if (!def) { // an argument: parameters and tokens are W's too, the activations kept
      if (d & ~unsigned(kParams))
        if (!grad.getArgAttr(cast<BlockArgument>(v).getArgNumber(), "nn.input"))
          kept.insert(v);
      continue;
    }
    if ((d & ~unsigned(kParams)) == 0 || !isF32Tensor(v.getType())) {
      out.again.insert(def);
      llvm::append_range(work, def->getOperands());
      continue;
    }
    kept.insert(v);
  }
  for (BlockArgument a : body.getArguments())
    if (kept.contains(a))
      addResidual(out, a);
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults())
      if (kept.contains(r) && !out.again.contains(&op))
        addResidual(out, r);
  return out;
}

SmallVector<Value> cloneInputPass(OpBuilder &b, const WeightSplit &split, ValueRange args,
                                  llvm::function_ref<void(size_t, Value)> keep) {
  Block &body = func::FuncOp(split.grad).getBody().front();
  llvm::DenseMap<Value, size_t> residual;
  for (auto [i, v] : llvm::enumerate(split.residuals))
    residual[v] = i;
  IRMapping map;
  for (auto [a, v] : llvm::zip(body.getArguments(), args))
    if (auto it = residual.find(a); it != residual.end())
      keep(it->second, v);
  SmallVector<Value> out = cloneSelected(
      b, body, args, map, [&](Operation &op) { return !split.weight.contains(&op); },
      [&](Operation &op) {
        for (Value r : op.getResults())
          if (auto it = residual.find(r); it != residual.end())
            keep(it->second, map.lookup(r));
      });
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
    if (madeByWeightPass(split, v))
      out[i] = Value();
  return out;
}

SmallVector<Value> cloneWeightPass(OpBuilder &b, const WeightSplit &split, ValueRange args, ValueRange residuals) {
  Block &body = func::FuncOp(split.grad).getBody().front();
  IRMapping map;
  map.map(split.residuals, residuals);
  SmallVector<Value> out = cloneSelected(
      b, body, args, map,
      [&](Operation &op) { return split.again.contains(&op) || split.weight.contains(&op); }, [](Operation &) {});
  // Only what W's own ops make is W's: B makes the rest (the loss, the output, the
  // input's gradient, and parameters' gradients made beside an activation's).
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
    if (!madeByWeightPass(split, v))
      out[i] = Value();
  return out;
}

} // namespace plan::training
