// The cut of a pipeline stage's gradient function for `keep: activations`
// (StageSplit.h).
#include "plan/Training/StageSplit.h"

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
} // namespace

StageSplit splitStage(func::FuncOp grad) {
  StageSplit out;
  out.grad = grad;
  Block &body = grad.getBody().front();
  llvm::DenseMap<Value, unsigned> deps;
  for (BlockArgument a : body.getArguments())
    deps[a] = argDeps(grad, a.getArgNumber());
  for (Operation &op : body.without_terminator()) {
    unsigned d = 0;
    for (Value v : op.getOperands())
      d |= deps.lookup(v);
    // What recompute (selective or full) computes again stays in the backward pass.
    if (op.hasAttr("nn.recomputed"))
      d |= kCotangent;
    for (Value r : op.getResults())
      deps[r] = d;
    if (d & kCotangent)
      out.backward.insert(&op);
  }
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
      if (kept.contains(r) && !out.recomputed.contains(&op)) {
        out.residuals.push_back(r);
        out.offsets.push_back(out.floats);
        out.floats += cast<RankedTensorType>(r.getType()).getNumElements();
      }
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

SmallVector<Value> cloneBackward(OpBuilder &b, const StageSplit &split, ValueRange args, ValueRange residuals) {
  Block &body = func::FuncOp(split.grad).getBody().front();
  IRMapping map;
  map.map(body.getArguments(), args);
  map.map(split.residuals, residuals);
  for (Operation &op : body.without_terminator())
    if (split.recomputed.contains(&op) || split.backward.contains(&op))
      b.clone(op, map);
  SmallVector<Value> out;
  for (Value v : body.getTerminator()->getOperands())
    out.push_back(map.lookupOrNull(v));
  return out;
}

} // namespace plan::training
