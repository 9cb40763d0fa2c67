// The upstream ShardingInterface models of the nn ops.
#ifndef PLAN_DIALECT_NN_IR_SHARDING_H
#define PLAN_DIALECT_NN_IR_SHARDING_H

#include "mlir/IR/DialectRegistry.h"

namespace plan::nn {
/// Attaches mlir::shard::ShardingInterface to the elementwise ops, bias_add, matmul,
/// matmul_wgrad, sum_rows, embedding, positions, the norms, attention and
/// cross-entropy.
void registerShardingModels(mlir::DialectRegistry &registry);
} // namespace plan::nn

#endif // PLAN_DIALECT_NN_IR_SHARDING_H
