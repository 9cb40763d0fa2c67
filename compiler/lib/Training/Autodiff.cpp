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

using namespace mlir;

namespace plan::training {

/// Batch and sequence made static in one type: dims 0 and 1 of a rank ≥ 2 tensor.
static Type withRows(Type t, int64_t batch, int64_t seq) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || rt.getRank() < 2)
    return t;
  SmallVector<int64_t> shape(rt.getShape());
  if (ShapedType::isDynamic(shape[0]))
    shape[0] = batch;
  if (ShapedType::isDynamic(shape[1]))
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
    if (forward.getArgAttr(i, "nn.param") && rounded(body.getArgument(i)))
      round(body.getArgument(i), forward.getLoc());
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (isa<nn::RoundOp>(op))
      continue;
    b.setInsertionPointAfter(&op);
    for (Value r : op.getResults())
      if (rounded(r))
        round(r, op.getLoc());
  }
}

/// A zero of the given static type.
static Value zeros(OpBuilder &b, Location loc, Type t) {
  auto rt = cast<RankedTensorType>(t);
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(rt, b.getFloatAttr(rt.getElementType(), 0.0)));
}

FailureOr<func::FuncOp> differentiate(func::FuncOp forward, StringRef name, bool scaledSeed) {
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
  adjoint[loss] = scaledSeed || vectorSeed ? Value(body->getArguments().back())
                             : Value(arith::ConstantOp::create(
                                   b, loss.getLoc(), DenseElementsAttr::get(one, b.getFloatAttr(one.getElementType(), 1.0))));
  for (Operation *op : llvm::reverse(order)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return adjoint.count(r); }))
      continue;  // does not reach the loss
    auto vjp = dyn_cast<nn::VJPOpInterface>(op);
    if (!vjp) {
      op->emitOpError() << "has no VJP: it cannot be differentiated";
      grad.erase();  // no half-built function left behind
      return failure();
    }
    SmallVector<Value> dys;
    for (Value r : op->getResults())
      dys.push_back(adjoint.count(r) ? adjoint[r] : zeros(b, op->getLoc(), r.getType()));
    SmallVector<Value> dxs;
    if (failed(vjp.buildVJP(b, dys, dxs))) {
      grad.erase();
      return failure();
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
  return grad;
}

} // namespace plan::training
