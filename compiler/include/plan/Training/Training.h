// Building the training step from a model's forward function: shape
// specialisation, reverse-mode autodiff over the nn ops' VJPs, and the
// optimizer update.
#ifndef PLAN_TRAINING_TRAINING_H
#define PLAN_TRAINING_TRAINING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace plan::training {

/// Clones `forward` as `name` with batch and sequence made static: the token
/// arguments become tensor<batch x seq x i32> and every activation's leading
/// [batch, seq] extents follow. Inserted after `forward`.
mlir::func::FuncOp specialize(mlir::func::FuncOp forward, llvm::StringRef name, int64_t batch,
                              int64_t seq);

/// Reverse mode over a forward function (arguments: tokens, targets, then the
/// parameters marked `nn.param`; one 0-d result, the loss). Creates `name`
/// with the same arguments returning (loss, one gradient per parameter, in
/// argument order; result attribute `nn.grad` = the parameter's path).
/// Fails, with an error at the op, when an op has no VJP.
mlir::FailureOr<mlir::func::FuncOp> differentiate(mlir::func::FuncOp forward, llvm::StringRef name);

} // namespace plan::training

#endif // PLAN_TRAINING_TRAINING_H
