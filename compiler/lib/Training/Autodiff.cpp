// Reverse-mode automatic differentiation over nn ops: the forward ops are
// cloned, then walked backwards, each op's VJPOpInterface building the
// gradients of its operands from those of its results; a value used twice
// (a residual stream, a tied embedding) gets the sum of its gradients.
#include "plan/Training/Training.h"

#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>
#include <map>

using namespace mlir;

namespace plan::training {

/// Batch and sequence made static in one type: dims 0 and 1 of a rank 2 or 3 tensor; of
/// images [batch, channels, height, width], the batch (specializeImages does the rest).
static Type withRows(Type t, int64_t batch, int64_t seq) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || rt.getRank() < 2)
    return t;
  SmallVector<int64_t> shape(rt.getShape());
  if (ShapedType::isDynamic(shape[0]))
    shape[0] = batch;
  if (ShapedType::isDynamic(shape[1]) && rt.getRank() < 4)
    shape[1] = seq;
  return RankedTensorType::get(shape, rt.getElementType());
}

func::FuncOp specialize(func::FuncOp forward, StringRef name, int64_t batch, int64_t seq) {
  OpBuilder b(forward->getContext());
  b.setInsertionPointAfter(forward);
  auto clone = cast<func::FuncOp>(b.clone(*forward));
  clone.setName(name);
  Block &body = clone.getBody().front();
  // Only the token inputs are dynamic among the arguments; parameters are static.
  SmallVector<Type> inputs;
  for (BlockArgument arg : body.getArguments()) {
    arg.setType(withRows(arg.getType(), batch, seq));
    inputs.push_back(arg.getType());
  }
  clone.walk([&](Operation *op) {
    for (Value r : op->getResults())
      r.setType(withRows(r.getType(), batch, seq));
  });
  clone.setFunctionType(b.getFunctionType(inputs, clone.getResultTypes()));
  return clone;
}

void emulatePrecision(func::FuncOp forward, FloatType to) {
  OpBuilder b(forward->getContext());
  auto attr = TypeAttr::get(to);
  auto rounded = [&](Value v) -> bool {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() > 0 && t.getElementType().isF32();
  };
  auto round = [&](Value v, Location loc) {
    auto r = nn::RoundOp::create(b, loc, v.getType(), v, attr);
    v.replaceAllUsesExcept(r, r);
  };
  Block &body = forward.getBody().front();
  b.setInsertionPointToStart(&body);
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    // Not a fine-tuning plan's frozen base: the runtime rounds it once as it places it.
    if (forward.getArgAttr(i, "nn.param") && rounded(body.getArgument(i)))
      round(body.getArgument(i), forward.getLoc());
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (isa<nn::RoundOp>(op))
      continue;
    b.setInsertionPointAfter(&op);
    for (Value r : op.getResults())
      if (rounded(r) && !r.use_empty()) // a value nothing reads (the log-sum-exp kept for a VJP) stays
        round(r, op.getLoc());
  }
}

int64_t layerOf(StringRef path) {
  SmallVector<StringRef> parts;
  path.split(parts, '.');
  for (StringRef p : parts) {
    int64_t n;
    if (!p.empty() && !p.getAsInteger(10, n))
      return n;
  }
  return -1;
}

/// The forward ops (clones in `order`, arguments of `body`) whose results the
/// backward pass recomputes instead of keeping.
static llvm::SmallPtrSet<Operation *, 32> recomputed(ArrayRef<Operation *> order, func::FuncOp forward,
                                                     Recompute mode) {
  llvm::SmallPtrSet<Operation *, 32> out;
  // Mixed precision reads a parameter through its rounded copy (roundValues: every one
  // made as the forward pass starts): an op reading that copy reads the parameter.
  auto throughRound = [](Value v) {
    if (auto r = v.getDefiningOp<nn::RoundOp>())
      return r.getOperand();
    return v;
  };
  if (mode == Recompute::Full) {
    // Each layer's span: from the first to the last op reading one of its parameters
    // (not counting the roundings of the parameters themselves).
    std::map<int64_t, std::pair<size_t, size_t>> span;
    for (size_t i = 0; i < order.size(); ++i)
      for (Value v : isa<nn::RoundOp>(order[i]) ? ValueRange() : ValueRange(order[i]->getOperands()))
        if (auto arg = dyn_cast<BlockArgument>(throughRound(v)))
          if (auto name = parameterPath(forward, arg.getArgNumber()))
            if (int64_t l = layerOf(name.getValue()); l >= 0) {
              auto [it, inserted] = span.try_emplace(l, i, i);
              it->second.second = std::max(it->second.second, i);
            }
    for (auto &[layer, range] : span)
      for (size_t i = range.first; i <= range.second; ++i)
        out.insert(order[i]);
  } else if (mode == Recompute::Selective) {
    for (Operation *op : order) {
      // (In mixed precision through the value's rounded copy.)
      auto isMatmul = [](Operation *u) { return isa<nn::MatmulOp>(u); };
      bool feedsMatmul = llvm::any_of(op->getUsers(), [&](Operation *u) {
        return isMatmul(u) || (isa<nn::RoundOp>(u) && llvm::any_of(u->getUsers(), isMatmul));
      });
      if (isa<nn::SDPAOp>(op) || (feedsMatmul && isa<nn::GeluOp, nn::SiluOp, nn::ReluOp, nn::MulOp>(op)))
        out.insert(op);
    }
  }
  // Collectives are never computed twice: their results are kept, so that a recomputed
  // layer communicates no more than the forward pass did (and as `planc explain` counts).
  for (Operation *op : order)
    if (isa<nn::AllReduceOp, nn::ReduceScatterOp, nn::VocabParallelCrossEntropyOp>(op))
      out.erase(op);
    else if (auto bn = dyn_cast<nn::BatchNormOp>(op); bn && bn.getRanks()) // SyncBatchNorm gathers
      out.erase(op);
  // ...except a sequence-parallel gather, which the backward pass repeats in every mode
  // rather than keep the whole sequence (Megatron's sequence parallelism; `planc explain`).
  // A QLoRA base matrix is dequantized again too: keeping every dequantized matrix for
  // the backward pass would hold the base unquantized.
  for (Operation *op : order)
    if (isa<nn::AllGatherOp, nn::DequantizeNF4Op>(op))
      out.insert(op);
  // Mixed precision rounds every value as it is made: a recomputed value is rounded again
  // rather than kept rounded.
  for (Operation *op : order)
    if (Operation *def = isa<nn::RoundOp>(op) ? op->getOperand(0).getDefiningOp() : nullptr; def && out.contains(def))
      out.insert(op);
  return out;
}

/// A zero of the given static type.
static Value zeros(OpBuilder &b, Location loc, Type t) {
  auto rt = cast<RankedTensorType>(t);
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(rt, b.getFloatAttr(rt.getElementType(), 0.0)));
}

FailureOr<func::FuncOp> differentiate(func::FuncOp forward, StringRef name, bool scaledSeed, Recompute recompute) {
  MLIRContext *ctx = forward->getContext();
  Block &fwd = forward.getBody().front();
  auto ret = cast<func::ReturnOp>(fwd.getTerminator());
  // A pipeline stage (nn.stage) may return an activation: it is differentiated against
  // a cotangent argument of its result's type, the vector-Jacobian product.
  bool stage = forward->hasAttr("nn.stage");
  if (ret.getNumOperands() != 1 || !isa<RankedTensorType>(ret.getOperand(0).getType()) ||
      (!stage && cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0))
    return forward.emitOpError() << "can be differentiated only if it returns one scalar loss"
                                 << (stage ? " or one activation" : " (or, marked nn.stage, one activation)");
  bool vectorSeed = cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0;
  if (vectorSeed && scaledSeed)
    return forward.emitOpError() << "a tensor-valued function takes its cotangent as an argument; it has no loss "
                                    "scale";

  SmallVector<unsigned> params, activations;
  SmallVector<Type> results{ret.getOperand(0).getType()};
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, "nn.param")) {
      params.push_back(i);
      results.push_back(forward.getArgument(i).getType());
    }
  // Activation inputs (a stage's input from the previous stage) get gradients too,
  // after the parameters'.
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, "nn.activation")) {
      activations.push_back(i);
      results.push_back(forward.getArgument(i).getType());
    }

  OpBuilder b(ctx);
  b.setInsertionPointAfter(forward);
  SmallVector<Type> inputs(forward.getArgumentTypes());
  auto scalarTy = RankedTensorType::get({}, b.getF32Type());
  if (scaledSeed)
    inputs.push_back(scalarTy);
  if (vectorSeed)
    inputs.push_back(ret.getOperand(0).getType());
  auto grad = func::FuncOp::create(b, forward.getLoc(), name, b.getFunctionType(inputs, results));
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (DictionaryAttr attrs = forward.getArgAttrDict(i))
      grad.setArgAttrs(i, attrs);
  if (scaledSeed)
    grad.setArgAttr(forward.getNumArguments(), "nn.loss_scale", UnitAttr::get(ctx));
  if (vectorSeed)
    grad.setArgAttr(forward.getNumArguments(), "nn.cotangent", UnitAttr::get(ctx));
  for (auto [k, i] : llvm::enumerate(params))
    grad.setResultAttr(k + 1, "nn.grad", forward.getArgAttr(i, "nn.param"));
  for (auto [k, i] : llvm::enumerate(activations))
    grad.setResultAttr(1 + params.size() + k, "nn.grad_input", forward.getArgAttr(i, "nn.activation"));
  grad->setAttr("nn.train_grad", UnitAttr::get(ctx));
  Block *body = grad.addEntryBlock();
  b.setInsertionPointToStart(body);

  // Forward: a clone of every op but the return.
  IRMapping map;
  map.map(fwd.getArguments(), body->getArguments().take_front(fwd.getNumArguments()));
  SmallVector<Operation *> order;
  for (Operation &op : fwd.without_terminator())
    order.push_back(b.clone(op, map));
  Value loss = map.lookup(ret.getOperand(0));

  // Backward: the adjoint of every value that reaches the loss.
  DenseMap<Value, Value> adjoint;
  auto accumulate = [&](Value v, Value g, Location loc) {
    auto [it, inserted] = adjoint.try_emplace(v, g);
    if (!inserted)
      it->second = nn::AddOp::create(b, loc, v.getType(), it->second, g);
  };
  auto one = cast<RankedTensorType>(loss.getType());
  adjoint[loss] = scaledSeed || vectorSeed
                      ? Value(body->getArguments().back())
                      : Value(arith::ConstantOp::create(
                            b, loss.getLoc(), DenseElementsAttr::get(one, b.getFloatAttr(one.getElementType(), 1.0))));
  // Recompute: a value of `again` is computed anew just before the first VJP that
  // reads it, its op cloned with recomputed operands (recursively, so only what a
  // VJP reads is recomputed); the backward pass reads only the clones, so the
  // forward originals die with the forward pass.
  llvm::SmallPtrSet<Operation *, 32> again = recomputed(order, forward, recompute);
  IRMapping fresh;
  std::function<Value(Value)> rec = [&](Value v) -> Value {
    Operation *def = v.getDefiningOp();
    if (!def || !again.contains(def))
      return v;
    if (!fresh.contains(v)) {
      IRMapping operands;
      for (Value o : def->getOperands())
        operands.map(o, rec(o));
      Operation *clone = b.clone(*def, operands);
      // Marked, so that CSE does not fold the recomputation back into the original.
      clone->setAttr("nn.recomputed", b.getUnitAttr());
      fresh.map(def->getResults(), clone->getResults());
    }
    return fresh.lookup(v);
  };
  for (Operation *op : llvm::reverse(order)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return adjoint.count(r); }))
      continue; // does not reach the loss
    if (!isa<nn::VJPOpInterface>(op)) {
      op->emitOpError() << "has no VJP: it cannot be differentiated";
      grad.erase(); // no half-built function left behind
      return failure();
    }
    SmallVector<Value> dys;
    for (Value r : op->getResults())
      dys.push_back(adjoint.count(r) ? adjoint[r] : zeros(b, op->getLoc(), r.getType()));
    // The VJP is built on a twin of the op placed here, then what it reads of the
    // forward pass is redirected: to the originals, or to recomputed values.
    Operation *twin = b.clone(*op);
    SmallVector<Value> dxs;
    if (failed(cast<nn::VJPOpInterface>(twin).buildVJP(b, dys, dxs))) {
      grad.erase();
      return failure();
    }
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(twin);
      SmallVector<Operation *> built;
      for (Operation *o = twin->getNextNode(); o; o = o->getNextNode())
        built.push_back(o);
      for (auto [orig, t] : llvm::zip(op->getResults(), twin->getResults()))
        if (!t.use_empty())
          t.replaceAllUsesWith(rec(orig));
      // The twin's operands are the originals; only those the VJP reads are recomputed.
      for (Value orig : op->getOperands()) {
        bool read = llvm::any_of(built, [&](Operation *o) { return llvm::is_contained(o->getOperands(), orig); });
        if (Value r = read ? rec(orig) : orig; r != orig)
          for (Operation *o : built)
            o->replaceUsesOfWith(orig, r);
      }
      twin->erase();
    }
    for (auto [operand, dx] : llvm::zip(op->getOperands(), dxs))
      if (dx)
        accumulate(operand, dx, op->getLoc());
  }

  SmallVector<Value> outs{loss};
  for (unsigned i : llvm::concat<unsigned>(params, activations)) {
    Value arg = body->getArgument(i);
    outs.push_back(adjoint.count(arg) ? adjoint[arg] : zeros(b, grad.getLoc(), arg.getType()));
  }
  func::ReturnOp::create(b, ret.getLoc(), outs);
  // What no result needs is dropped: the gradients of what is not differentiated (a
  // fine-tuning plan's frozen base: no weight-gradient GEMM, no accumulation).
  SmallVector<Operation *> ops;
  for (Operation &op : body->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
  // Mixed precision: a parameter's gradient is rounded by the VJP of the rounding that
  // made the parameter's copy as the forward pass started, so last of all in the
  // backward pass. Rounded as soon as it is whole instead, its fp32 sum dies there and
  // gradient buckets (plan-train-abi) take it as the backward pass makes it; the values
  // are the same.
  for (Value out : body->getTerminator()->getOperands())
    if (auto r = out.getDefiningOp<nn::RoundOp>())
      if (Operation *def = r.getOperand().getDefiningOp(); def && def->getBlock() == body)
        r->moveAfter(def);
  return grad;
}

} // namespace plan::training
