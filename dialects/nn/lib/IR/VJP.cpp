// Vector-Jacobian products of the forward ops, built from the backward ops.
// `nn-autodiff` composes them in reverse; each is checked against central
// finite differences and PyTorch (test/unit/KernelsTest.cpp, test/ops).
#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace plan::nn;

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({EmbeddingGradOp::create(b, getLoc(), getTable().getType(), dy[0], getIds(), getOffset()), Value()});
  if (getOffset())
    grads.push_back(Value());
  return success();
}

LogicalResult DequantizeNF4Op::buildVJP(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &grads) {
  grads.assign({Value()}); // the frozen base has no gradient
  return success();
}

LogicalResult PositionsOp::buildVJP(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &grads) {
  grads.assign(getNumOperands(), Value());
  return success();
}

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // dx = dy · wᵀ is a matmul with the other transposition of the same weight.
  auto dx =
      MatmulOp::create(b, getLoc(), getX().getType(), dy[0], getW(), getTransposeW() ? UnitAttr() : b.getUnitAttr());
  auto dw = MatmulWGradOp::create(b, getLoc(), getW().getType(), getX(), dy[0], getTransposeWAttr());
  grads.assign({dx, dw});
  return success();
}

LogicalResult BiasAddOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({dy[0], SumRowsOp::create(b, getLoc(), getBias().getType(), dy[0])});
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  auto g = LayerNormGradOp::create(b, getLoc(), getX().getType(), getWeight().getType(), getWeight().getType(), dy[0],
                                   getX(), getWeight(), getEpsAttr());
  grads.assign({g.getDx(), g.getDweight()});
  if (getBias())
    grads.push_back(g.getDbias());
  return success();
}

LogicalResult RMSNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  auto g = RMSNormGradOp::create(b, getLoc(), getX().getType(), getWeight().getType(), dy[0], getX(), getWeight(),
                                 getEpsAttr());
  grads.assign({g.getDx(), g.getDweight()});
  return success();
}

LogicalResult SDPAOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({SDPAGradOp::create(b, getLoc(), getQkv().getType(), dy[0], getQkv(), getHeadsAttr(), getKvHeadsAttr(),
                                   getCausalAttr(), getRopeAttr(), getRopeThetaAttr())});
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({GeluGradOp::create(b, getLoc(), getX().getType(), dy[0], getX())});
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({SiluGradOp::create(b, getLoc(), getX().getType(), dy[0], getX())});
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({ReluGradOp::create(b, getLoc(), getX().getType(), dy[0], getX())});
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  if (getP().convertToDouble() != 0.0)
    return emitOpError() << "with p > 0 cannot be trained in this version: dropout's random mask "
                            "is not implemented (use p = 0)";
  grads.assign({dy[0]});
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({dy[0], dy[0]});
  return success();
}

LogicalResult ScaleOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({ScaleOp::create(b, getLoc(), dy[0].getType(), dy[0], getFactorAttr())});
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({dy[0], ScaleOp::create(b, getLoc(), dy[0].getType(), dy[0], b.getF64FloatAttr(-1.0))});
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({MulOp::create(b, getLoc(), dy[0].getType(), dy[0], getRhs()),
                MulOp::create(b, getLoc(), dy[0].getType(), dy[0], getLhs())});
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign(
      {CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), dy[0], getLogits(), getTargets()), Value()});
  return success();
}

LogicalResult RoundOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // The gradient flows through (straight-through), held in the same precision. One
  // already rounded to it (the gradient an add or a bias passes on unchanged) flows on as
  // it is: rounding to nearest even is idempotent, so the results are the same bits with
  // one pass over the tensor fewer.
  if (auto rounded = dy[0].getDefiningOp<RoundOp>(); rounded && rounded.getTo() == getTo()) {
    grads.assign({dy[0]});
    return success();
  }
  grads.assign({RoundOp::create(b, getLoc(), dy[0].getType(), dy[0], getToAttr())});
  return success();
}

LogicalResult AllReduceOp::buildVJP(OpBuilder &, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // The result is replicated over the group, so its gradient is too: each rank's
  // partial input contributed to it with weight one.
  if (getReduce() != "sum")
    return emitOpError() << "reducing by \"" << getReduce() << "\" has no gradient in this version";
  grads.assign({dy[0]});
  return success();
}

LogicalResult AllReduceBackwardOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({AllReduceOp::create(b, getLoc(), dy[0].getType(), dy[0], getAxisAttr(), b.getStringAttr("sum"),
                                    getPurposeAttr())});
  return success();
}

LogicalResult VocabParallelCrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // The log-sum-exp is kept for this gradient only (the verifier sees to it): it gets none.
  grads.assign({VocabParallelCrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), dy[0], getLogits(),
                                                        getTargets(), getLse(), getOffset()),
                Value(), Value()});
  return success();
}

LogicalResult AllGatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({ReduceScatterOp::create(b, getLoc(), getX().getType(), dy[0], getAxisAttr(), getPurposeAttr())});
  return success();
}

LogicalResult ReduceScatterOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({AllGatherOp::create(b, getLoc(), getX().getType(), dy[0], getAxisAttr(), getPurposeAttr())});
  return success();
}

LogicalResult SequenceSliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({SequenceUnsliceOp::create(b, getLoc(), getX().getType(), dy[0], getOffset()), Value()});
  return success();
}

LogicalResult Conv2dOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // The input gradient of a model's images is never used: DCE drops it.
  auto dx = Conv2dGradDataOp::create(b, getLoc(), getX().getType(), dy[0], getW(), getStrideAttr(), getPadAttr());
  auto wt = cast<RankedTensorType>(getW().getType());
  auto dbType = RankedTensorType::get({wt.getDimSize(0)}, wt.getElementType());
  auto f = Conv2dGradFilterOp::create(b, getLoc(), wt, dbType, dy[0], getX(), getStrideAttr(), getPadAttr());
  grads.assign({dx, f.getDw()});
  if (getBias())
    grads.push_back(f.getDb());
  return success();
}

LogicalResult MaxPool2dOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({MaxPool2dGradOp::create(b, getLoc(), getX().getType(), dy[0], getX(), getKernelAttr(), getStrideAttr(),
                                        getPadAttr())});
  return success();
}

LogicalResult AvgPoolOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({AvgPoolGradOp::create(b, getLoc(), getX().getType(), dy[0])});
  return success();
}

LogicalResult FlattenOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  grads.assign({UnflattenOp::create(b, getLoc(), getX().getType(), dy[0])});
  return success();
}

LogicalResult BatchNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &grads) {
  // The statistics are read by the running-statistics update only: no gradient flows
  // back through them (dy[1] is zero); the input gradient counts their dependence on x.
  auto g = BatchNormGradOp::create(b, getLoc(), getX().getType(), getWeight().getType(), getWeight().getType(), dy[0],
                                   getX(), getStats(), getWeight(), getEpsAttr(), getAxisAttr(), getRanksAttr());
  grads.assign({g.getDx(), g.getDweight(), g.getDbias()});
  return success();
}
