// The cuts of a pipeline stage's gradient function (its forward pass, then the
// vector-Jacobian product from the cotangent of its output), used by plan-train-abi:
// - StageSplit, for `keep: activations`: what the forward pass computes, which runs in
//   the stage's forward entry point and saves the values the backward pass reads (the
//   residuals), and the backward pass alone, which reads them back instead of computing
//   the forward pass again;
// - WeightSplit, for the zero-bubble schedule: the input pass and the weight pass.
#ifndef PLAN_TRAINING_STAGESPLIT_H
#define PLAN_TRAINING_STAGESPLIT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace plan::training {

struct StageSplit {
  mlir::func::FuncOp grad;
  /// The ops that read the cotangent (transitively), and those recompute computes again
  /// (nn.recomputed) with what reads them: the backward pass.
  llvm::DenseSet<mlir::Operation *> backward;
  /// Forward ops the backward pass computes again rather than keeps: those that read
  /// only parameters and constants (a weight's transpose or rounding), and those whose
  /// value is not a static f32 tensor (positions), from operands kept or computed again.
  llvm::DenseSet<mlir::Operation *> recomputed;
  /// The forward pass's f32 values that the backward pass reads, in the order the
  /// forward pass computes them; each kept at its offset (floats) in the saved buffer.
  llvm::SmallVector<mlir::Value> residuals;
  llvm::SmallVector<int64_t> offsets;
  int64_t floats = 0; ///< the residuals' floats, one micro-batch's
};

/// Cuts `grad` (one block; its arguments marked nn.param, nn.frozen, nn.input,
/// nn.activation or nn.cotangent).
StageSplit splitStage(mlir::func::FuncOp grad);

/// Clones the forward part of the split at the builder's point, `grad`'s arguments
/// replaced by `args` (the cotangent's may be null); `map` holds the clones. `keep(i, v)`
/// is called with residual i's clone as soon as it is computed, so that it can be stored
/// where it is made rather than copied at the end.
void cloneForward(mlir::OpBuilder &b, const StageSplit &split, mlir::ValueRange args, mlir::IRMapping &map,
                  llvm::function_ref<void(size_t, mlir::Value)> keep);

struct WeightSplit;

/// Clones the backward part: `args` for `grad`'s arguments, `residuals` (in the split's
/// order) for the kept values, the recomputed ops it reads, then every backward op.
/// Returns what `grad` returns; a forward value it does not need (the stage's output) is
/// null. With `weight` (the zero-bubble schedule) it leaves out W's ops, whose results
/// are null, calls `keep(i, v)` with W's residual i as soon as it has it, and sets
/// `*allKept` to whether it had every one (a forward value that only W's ops read is
/// neither saved nor computed again by the backward part).
llvm::SmallVector<mlir::Value> cloneBackward(mlir::OpBuilder &b, const StageSplit &split, mlir::ValueRange args,
                                             mlir::ValueRange residuals, const WeightSplit *weight = nullptr,
                                             llvm::function_ref<void(size_t, mlir::Value)> keep = {},
                                             bool *allKept = nullptr);

/// A pipeline stage's gradient function cut for the zero-bubble schedule (ZB-H1, Qi et
/// al. 2023): the input pass B, every op the loss, the stage's output and its input's
/// gradient need (the forward pass, the chain of activation gradients, and the ops that
/// make a parameter's gradient beside an activation's, such as layernorm_grad), and the
/// weight pass W, the ops that only parameters' gradients need (a linear layer's
/// weight-gradient GEMM, a bias's row sums), but the head's: an op that reads the logits'
/// gradient stays in B, which would otherwise keep tokens × vocabulary floats for W. B
/// writes the values W reads (its residuals) to a slot; W runs later, when the schedule
/// has nothing else to do.
struct WeightSplit {
  mlir::func::FuncOp grad;
  /// The ops of W, and the ops of B that W computes again rather than reads: those that
  /// read only parameters and constants, and those whose value is not a static f32
  /// tensor, from operands read or computed again.
  llvm::DenseSet<mlir::Operation *> weight, again;
  /// The values W reads from B (results of B's ops, or the stage's input activation and
  /// cotangent), in the order B computes them, each at its offset (floats) in the slot.
  llvm::SmallVector<mlir::Value> residuals;
  llvm::SmallVector<int64_t> offsets;
  int64_t floats = 0;
};

/// Cuts `grad` (as splitStage: one block, marked arguments); a result with nn.grad is a
/// parameter's gradient.
WeightSplit splitWeightGradients(mlir::func::FuncOp grad);

/// Clones B at the builder's point with `grad`'s arguments replaced by `args`, calling
/// `keep(i, v)` with residual i as soon as it is computed. Returns what `grad` returns;
/// what W makes is null.
llvm::SmallVector<mlir::Value> cloneInputPass(mlir::OpBuilder &b, const WeightSplit &split, mlir::ValueRange args,
                                              llvm::function_ref<void(size_t, mlir::Value)> keep);

/// Clones W: `args` for `grad`'s arguments (the input activation's and the cotangent's
/// may be null), `residuals` in the split's order. Returns what `grad` returns; what B
/// makes is null.
llvm::SmallVector<mlir::Value> cloneWeightPass(mlir::OpBuilder &b, const WeightSplit &split, mlir::ValueRange args,
                                               mlir::ValueRange residuals);

} // namespace plan::training

#endif // PLAN_TRAINING_STAGESPLIT_H
