// The upstream ShardingInterface (shard dialect) on the nn ops of a forward program: each
// op's iteration space and indexing maps, so that sharding propagation can carry a layout
// through a model (`planc emit --stage sharded`). Elementwise ops partition trivially
// (upstream's model). The executable's partitioning is nn-tensor-parallel's, which also
// knows what indexing maps cannot say (the vocab-parallel loss's reductions, the q/k/v
// blocks of a packed projection).
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
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::reduction, Iter::reduction, Iter::parallel};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum, ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 3, {0, 1, 2}), map(ctx, 3, {2})};
  }
};

/// table [V, H], ids [B, S] → [B, S, H]; loops (b, s, h, v), v a sum: a vocab-split table
/// gives each rank the rows it holds and zeros elsewhere, summed over the ranks (Megatron's
/// vocab-parallel embedding).
struct EmbeddingSharding : ShardingInterface::ExternalModel<EmbeddingSharding, nn::EmbeddingOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::parallel, Iter::parallel, Iter::parallel, Iter::reduction};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const { return {ReductionKind::Sum}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 4, {3, 2}), map(ctx, 4, {0, 1}), map(ctx, 4, {0, 1, 2})};
  }
};

/// tokens [B, S] → positions [B, S]; loops (b, s).
struct PositionsSharding : ShardingInterface::ExternalModel<PositionsSharding, nn::PositionsOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const { return {Iter::parallel, Iter::parallel}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 2, {0, 1}), map(ctx, 2, {0, 1})};
  }
};

/// x [B, S, H], weight [H] (and bias [H]) → [B, S, H]; loops (b, s, h). The statistics are
/// over h, so a split of h would need them reduced over it: nn-tensor-parallel refuses such
/// a layout, and the layouts planc builds split the batch and the sequence only.
template <typename Norm> struct NormSharding : ShardingInterface::ExternalModel<NormSharding<Norm>, Norm> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const { return {Iter::parallel, Iter::parallel, Iter::parallel}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    SmallVector<AffineMap> maps{map(ctx, 3, {0, 1, 2})};
    for (unsigned i = 1; i < op->getNumOperands(); ++i)
      maps.push_back(map(ctx, 3, {2}));
    maps.push_back(map(ctx, 3, {0, 1, 2}));
    return maps;
  }
};

/// qkv [B, S, F] → [B, S, E] (F the packed q, k, v features, E the output's); loops
/// (b, s, f, e). Attention mixes the positions of a sequence, so the layouts planc builds
/// split the batch and the heads (nn-tensor-parallel), never the sequence here.
struct SDPASharding : ShardingInterface::ExternalModel<SDPASharding, nn::SDPAOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::parallel, Iter::parallel, Iter::parallel, Iter::parallel};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 4, {0, 1, 2}), map(ctx, 4, {0, 1, 3})};
  }
};

/// logits [B, S, V], targets [B, S] → the mean loss; loops (b, s, v), all reduced: the
/// batch's partial sums over the data axes, the vocabulary's over the tensor axis (where the
/// executable's vocab-parallel loss reduces the maximum, the sum of exponentials and the
/// target logit: nn.vocab_parallel_cross_entropy).
struct CrossEntropySharding : ShardingInterface::ExternalModel<CrossEntropySharding, nn::CrossEntropyOp> {
  SmallVector<Iter> getLoopIteratorTypes(Operation *) const {
    return {Iter::reduction, Iter::reduction, Iter::reduction};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum, ReductionKind::Sum, ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    return {map(ctx, 3, {0, 1, 2}), map(ctx, 3, {0, 1}), map(ctx, 3, {})};
  }
};

template <typename... Ops> void elementwise(MLIRContext *ctx) {
  (Ops::template attachInterface<ElementwiseShardingInterface<Ops>>(*ctx), ...);
}

} // namespace

void plan::nn::registerShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, NNDialect *) {
    elementwise<nn::AddOp, nn::SubOp, nn::MulOp, nn::ScaleOp, nn::GeluOp, nn::SiluOp, nn::ReluOp, nn::GeluGradOp,
                nn::SiluGradOp, nn::ReluGradOp, nn::RoundOp, nn::DropoutOp>(ctx);
    nn::EmbeddingOp::attachInterface<EmbeddingSharding>(*ctx);
    nn::PositionsOp::attachInterface<PositionsSharding>(*ctx);
    nn::LayerNormOp::attachInterface<NormSharding<nn::LayerNormOp>>(*ctx);
    nn::RMSNormOp::attachInterface<NormSharding<nn::RMSNormOp>>(*ctx);
    nn::SDPAOp::attachInterface<SDPASharding>(*ctx);
    nn::CrossEntropyOp::attachInterface<CrossEntropySharding>(*ctx);
    nn::MatmulOp::attachInterface<MatmulSharding>(*ctx);
    nn::MatmulWGradOp::attachInterface<MatmulWGradSharding>(*ctx);
    nn::BiasAddOp::attachInterface<BiasAddSharding>(*ctx);
    nn::SumRowsOp::attachInterface<SumRowsSharding>(*ctx);
  });
}
