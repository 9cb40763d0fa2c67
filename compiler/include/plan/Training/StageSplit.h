// A pipeline stage's gradient function (its forward pass, then the vector-Jacobian
// product from the cotangent of its output) cut in two for `keep: activations`: what the
// forward pass computes, which runs in the stage's forward entry point and saves the
// values the backward pass reads (the residuals), and the backward pass alone, which
// reads them back instead of computing the forward pass again. Used by plan-train-abi.
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

/// Clones the backward part: `args` for `grad`'s arguments, `residuals` (in the split's
/// order) for the kept values, the recomputed ops it reads, then every backward op.
/// Returns what `grad` returns; a forward value it does not need (the stage's output) is
/// null.
llvm::SmallVector<mlir::Value> cloneBackward(mlir::OpBuilder &b, const StageSplit &split, mlir::ValueRange args,
                                             mlir::ValueRange residuals);

} // namespace plan::training

#endif // PLAN_TRAINING_STAGESPLIT_H
