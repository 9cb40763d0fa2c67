// Building the training step from a model's forward function: shape
// specialisation, reverse-mode autodiff over the nn ops' VJPs, and the
// optimizer update.
#ifndef PLAN_TRAINING_TRAINING_H
#define PLAN_TRAINING_TRAINING_H

#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/DataParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace plan::training {

/// Clones `forward` as `name` with batch and sequence made static: the token
/// arguments become tensor<batch x seq x i32> and every activation's leading
/// [batch, seq] extents follow. Inserted after `forward`.
mlir::func::FuncOp specialize(mlir::func::FuncOp forward, llvm::StringRef name, int64_t batch, int64_t seq);

/// A model over images: [channels, height, width] of the train plan's images; empty for
/// a model over tokens.
llvm::SmallVector<int64_t> imageShapeOf(pl::TrainOp train);
/// Gives a specialized forward function of a model over images the plan's image size:
/// the images argument, then every image value's shape, layer by layer (Images.cpp).
/// Errors at the layer where the size does not fit (a window larger than the image, a
/// flatten wider or narrower than the linear that reads it); under `batchnorm = sync` with
/// data parallelism, its batch normalisations synchronise over the data axis. Nothing
/// for other models.
mlir::LogicalResult specializeImages(mlir::func::FuncOp f, pl::TrainOp train);

/// Mixed precision on a target that computes in f32: rounds every parameter as it
/// is read and every activation (not the scalar loss) to `to` (bf16 or f16) with
/// nn.round; the f32 arguments stay the master weights, and nn.round's VJP rounds
/// the gradients flowing back.
void emulatePrecision(mlir::func::FuncOp forward, mlir::FloatType to);

/// Reverse mode over a forward function (arguments: tokens, targets, then the
/// parameters marked `nn.param`; one 0-d result, the loss). Creates `name`
/// with the same arguments returning (loss, one gradient per parameter, in
/// argument order; result attribute `nn.grad` = the parameter's path).
/// Fails, with an error at the op, when an op has no VJP. With `scaledSeed`, the
/// function takes one more argument, a tensor<f32> `nn.loss_scale`, which seeds the
/// backward pass instead of 1 (loss scaling: every gradient comes out multiplied by it).
/// A function returning a tensor of rank ≥ 1 (a pipeline stage's activation) is
/// differentiated against a cotangent: one more argument of its result's type
/// (`nn.cotangent`) seeds the backward pass; arguments marked `nn.activation` get
/// gradients too, returned after the parameters' (`nn.grad_input`).
///
/// `recompute` trades compute for memory: the forward values it names are not kept
/// for the backward pass but computed again, by clones of their ops placed where
/// the backward pass first needs them, so the originals die with the forward pass.
/// Full: every op of a transformer layer (from the first to the last op reading
/// one of the layer's parameters), keeping only what enters and leaves a layer.
/// Selective: attention (nn.sdpa) and the elementwise activations that feed a
/// matmul (GELU, SiLU, ReLU, products). The values are bitwise the same.
enum class Recompute { None, Full, Selective };
mlir::FailureOr<mlir::func::FuncOp> differentiate(mlir::func::FuncOp forward, llvm::StringRef name,
                                                  bool scaledSeed = false, Recompute recompute = Recompute::None);

/// Tensor parallelism (`nn-tensor-parallel`): rewrites a forward function into
/// what one rank of a group of `size` ranks along mesh axis number `axis` runs
/// (Megatron's layout). Parameters with a logical dim in `dims` (nn.dims) hold
/// 1/size of it (argument attribute nn.split = {dim, parts, blocks}: the split
/// dim, the group size, and the full extents of the blocks each split
/// separately: q, k and v of a packed projection); column-parallel matmuls read
/// their input through nn.all_reduce_backward, row-parallel ones are followed by
/// nn.all_reduce; attention runs on its share of the heads; a vocab-split
/// embedding is a slice lookup plus an all-reduce and a vocab-split loss is
/// nn.vocab_parallel_cross_entropy. With `sequence` (Korthikanti et al. 2022),
/// what lies between the tensor-parallel blocks (norms, residual adds, position
/// embeddings) holds this rank's slice of the sequence: nn.all_gather before a
/// column-parallel matmul, nn.reduce_scatter after a row-parallel one and the
/// embedding. Errors, at the op or parameter, for what this layout cannot split.
mlir::LogicalResult partitionTensorParallel(mlir::func::FuncOp forward, int64_t axis, int64_t size,
                                            llvm::ArrayRef<std::string> dims, bool sequence = false);
/// The tensor-parallel settings of a train plan: mesh axis number, size (1 when
/// none) and the logical dims split over it (the plan's shard map).
struct TensorParallel {
  int64_t axis = -1, size = 1;
  bool sequence = false;
  llvm::SmallVector<std::string> dims;
};
TensorParallel tensorParallelOf(pl::TrainOp train);

/// Pipeline parallelism (`nn-pipeline-split`): cuts a forward function into
/// `stages` functions `<f>_stage<s>` (attribute nn.stage = s), layer k of L on
/// stage pipelineStageOfLayer(k, L, stages), every other op on the latest stage of
/// its operands (ops without operands are cloned into each stage that reads them).
/// Each takes the arguments it reads (a parameter read on two stages, like a tied
/// embedding, is an argument of both) and, after the first, the previous stage's
/// activation (nn.activation); it returns the activation it hands on, or the loss.
/// Errors when a cut is crossed by more than one value.
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>> splitPipeline(mlir::func::FuncOp forward, int64_t stages);

/// The pipeline-parallel settings of a train plan: the axis, its size (1 when
/// none), the stage count the plan declares and the schedule.
struct Pipeline {
  std::string axis;
  int64_t size = 1, stages = 1;
  pl::PipelineSchedule schedule = pl::PipelineSchedule::one_f_one_b;
  bool keepActivations = false; ///< `keep: activations`
};
Pipeline pipelineOf(pl::TrainOp train);

/// The layer a parameter path belongs to: its first all-digit component
/// ("h.3.attn.c_attn.weight" → 3), or -1 (embeddings, final norm).
int64_t layerOf(llvm::StringRef path);

/// Where the parameters of a forward function lie in the executable's flat
/// buffers (parameters, gradients, Adam moments share one layout), sharded over
/// `shards` data-parallel ranks: training::flatLayout over the parameters' sizes.
using BufferLayout = FlatLayout;
BufferLayout layoutOf(llvm::ArrayRef<mlir::RankedTensorType> params, int64_t shards = 1);
/// The data-parallel size of a train plan: the product of its data axes' sizes.
int64_t dataParallelSize(pl::TrainOp train);
/// The number of devices of a train plan's mesh.
int64_t deviceCount(pl::TrainOp train);
/// The path of argument i of a model function when it is a parameter: `nn.param`
/// (trained) or `nn.frozen` (the base of a fine-tuning plan: read, never written);
/// null for any other argument.
inline mlir::StringAttr parameterPath(mlir::func::FuncOp f, unsigned i) {
  if (auto p = f.getArgAttrOfType<mlir::StringAttr>(i, "nn.param"))
    return p;
  return f.getArgAttrOfType<mlir::StringAttr>(i, "nn.frozen");
}

/// The pipeline stages rank `rank` of `ranks` holds, of `stages` in all: rank, rank +
/// ranks, … (the interleaved schedule's model chunks; one stage a rank otherwise).
llvm::SmallVector<int64_t> stagesOfRank(int64_t rank, int64_t ranks, int64_t stages);

/// The parameters a pipeline rank holds, of the stage functions `fns` it runs (in stage
/// order): each function's arguments marked `attr` (nn.param or nn.frozen) in argument
/// order, one that an earlier function of the rank reads too once, at its first place. A
/// rank keeps them in one flat layout over these, in this order, which every one of its
/// stages' entry points reads (plan-train-step's update, plan-train-abi's tables).
llvm::SmallVector<std::pair<mlir::func::FuncOp, unsigned>> rankParameters(llvm::ArrayRef<mlir::func::FuncOp> fns,
                                                                          llvm::StringRef attr);

/// Whether a parameter of this type gets weight decay (group 0).
inline bool decayed(mlir::RankedTensorType t) { return t.getRank() >= 2; }

} // namespace plan::training

#endif // PLAN_TRAINING_TRAINING_H
