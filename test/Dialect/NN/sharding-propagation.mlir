// The nn ops carry upstream's ShardingInterface: sharding-propagation follows their
// indexing maps. A batch-split input (data parallel) reaches every activation of a linear
// layer and its GELU; a weight split along its output columns (Megatron's column-parallel
// linear) splits the matmul's result and the bias along the same axis.
// RUN: planc-opt %s --pass-pipeline="builtin.module(func.func(sharding-propagation))" | FileCheck %s

shard.grid @grid(shape = 2)

// CHECK-LABEL: func.func @data_parallel(
func.func @data_parallel(%x: tensor<4x8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<4x8x32xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8x16xf32>
  // The weight and the bias stay replicated; the batch split reaches every result.
  // CHECK: %[[WR:.*]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
  // CHECK-NEXT: shard.shard %arg1 to %[[WR]] annotate_for_users : tensor<16x32xf32>
  // CHECK-NEXT: %[[Y:.*]] = nn.matmul
  // CHECK-NEXT: %[[YS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %[[Y]] to %[[YS]] : tensor<4x8x32xf32>
  %y = nn.matmul %xs, %w : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  // CHECK: %[[BR:.*]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
  // CHECK-NEXT: shard.shard %arg2 to %[[BR]] annotate_for_users : tensor<32xf32>
  // CHECK-NEXT: %[[Z:.*]] = nn.bias_add
  // CHECK-NEXT: %[[ZS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %[[Z]] to %[[ZS]] : tensor<4x8x32xf32>
  %z = nn.bias_add %y, %b : tensor<4x8x32xf32>, tensor<32xf32>
  // CHECK: %[[G:.*]] = nn.gelu
  // CHECK-NEXT: %[[GS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %[[G]] to %[[GS]] : tensor<4x8x32xf32>
  %g = nn.gelu %z : tensor<4x8x32xf32>
  return %g : tensor<4x8x32xf32>
}

// CHECK-LABEL: func.func @column_parallel(
func.func @column_parallel(%x: tensor<4x8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<4x8x32xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<16x32xf32>
  // The input stays replicated; the result is split along its features, and so is the bias.
  // CHECK: %[[XR:.*]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
  // CHECK-NEXT: shard.shard %arg0 to %[[XR]] annotate_for_users : tensor<4x8x16xf32>
  // CHECK: %[[Y:.*]] = nn.matmul
  // CHECK-NEXT: %[[YS:.*]] = shard.sharding @grid split_axes = {{\[\[}}], [], [0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %[[Y]] to %[[YS]] : tensor<4x8x32xf32>
  %y = nn.matmul %x, %ws : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  // CHECK: %[[BS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %arg2 to %[[BS]] annotate_for_users : tensor<32xf32>
  // CHECK-NEXT: nn.bias_add
  %z = nn.bias_add %y, %b : tensor<4x8x32xf32>, tensor<32xf32>
  return %z : tensor<4x8x32xf32>
}
