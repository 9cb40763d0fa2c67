// The upstream ShardingInterface (shard dialect) on the nn ops where it is meaningful:
// each op's iteration space and indexing maps, so that sharding propagation can carry a
// layout through a model. Elementwise ops partition trivially (upstream's model); the
// others are partitioned as fully replicated until the parallel layouts specialise them.
// LayerNorm, RMSNorm, attention, embedding and cross-entropy are not given the interface
// yet: their partitioning (Megatron's vocab-parallel embedding and cross-entropy,
// head-parallel attention) needs more than indexing maps.
#include "plan/Dialect/NN/IR/Sharding.h"

#include "plan/Dialect/NN/IR/NN.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/AffineMap.h"

using namespace mlir;
using namespace mlir::shard;
using plan::nn::NNDialect;
namespace nn = plan::nn;

namespace {

using Iter = utils::IteratorType;

AffineMap map(MLIRContext *ctx, unsigned dims, ArrayRef<unsigned> results) {
  SmallVector<AffineExpr> exprs;
  for (unsigned r : results)
    exprs.push_back(getAffineDimExpr(r, ctx));
  return AffineMap::get(dims, 0, exprs, ctx);
}

/// x [b, s, k] · w → y [b, s, n]; loops (b, s, n, k), k a sum.
struct MatmulSharding : ShardingInterface::ExternalModel<MatmulSharding, nn::MatmulOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::parallel, Iter::parallel, Iter::parallel, Iter::reduction};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const { return {ReductionKind::Sum}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    bool t = cast<nn::MatmulOp>(op).getTransposeW();
    return {map(ctx, 4, {0, 1, 3}), t ? map(ctx, 4, {2, 3}) : map(ctx, 4, {3, 2}), map(ctx, 4, {0, 1, 2})};
  }
};

/// dw [k, n] (or [n, k]) = Σ_{b,s} x [b, s, k] · dy [b, s, n]; loops (k, n, b, s).
struct MatmulWGradSharding : ShardingInterface::ExternalModel<MatmulWGradSharding, nn::MatmulWGradOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::parallel, Iter::parallel, Iter::reduction, Iter::reduction};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum, ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    bool t = cast<nn::MatmulWGradOp>(op).getTransposeW();
    return {map(ctx, 4, {2, 3, 0}), map(ctx, 4, {2, 3, 1}), t ? map(ctx, 4, {1, 0}) : map(ctx, 4, {0, 1})};
  }
};

/// y [b, s, f] = x [b, s, f] + bias [f]; loops (b, s, f).
struct BiasAddSharding : ShardingInterface::ExternalModel<BiasAddSharding, nn::BiasAddOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const { return {Iter::parallel, Iter::parallel, Iter::parallel}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 3, {0, 1, 2}), map(ctx, 3, {2}), map(ctx, 3, {0, 1, 2})};
  }
};

/// db [f] = Σ_{b,s} dy [b, s, f]; loops (b, s, f).
struct SumRowsSharding : ShardingInterface::ExternalModel<SumRowsSharding, nn::SumRowsOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const { return {Iter::reduction, Iter::reduction, Iter::parallel}; }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum, ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 3, {0, 1, 2}), map(ctx, 3, {2})};
  }
};

template <typename... Ops>
void elementwise(MLIRContext *ctx) {
  (Ops::template attachInterface<ElementwiseShardingInterface<Ops>>(*ctx), ...);
}

} // namespace

void plan::nn::registerShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, NNDialect *) {
    elementwise<nn::AddOp, nn::SubOp, nn::MulOp, nn::ScaleOp, nn::GeluOp, nn::SiluOp, nn::ReluOp, nn::GeluGradOp,
                nn::SiluGradOp, nn::ReluGradOp, nn::RoundOp>(ctx);
    nn::MatmulOp::attachInterface<MatmulSharding>(*ctx);
    nn::MatmulWGradOp::attachInterface<MatmulWGradSharding>(*ctx);
    nn::BiasAddOp::attachInterface<BiasAddSharding>(*ctx);
    nn::SumRowsOp::attachInterface<SumRowsSharding>(*ctx);
  });
}
