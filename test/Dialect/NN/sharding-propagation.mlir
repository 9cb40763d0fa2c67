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

// The embedding, the norms, attention and the loss have models too: a batch-split token
// batch reaches the embedding's rows, a layernorm and attention keep it; a vocab-split table
// (Megatron's vocab-parallel embedding) makes the vocabulary a reduction of the lookup.
// CHECK-LABEL: func.func @embedding_norm_attention(
func.func @embedding_norm_attention(%t: tensor<4x8xi32>, %table: tensor<16x6xf32>, %w: tensor<6xf32>,
                                    %y: tensor<4x8xi32>) -> tensor<f32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %s : tensor<4x8xi32>
  // CHECK: %[[E:.*]] = nn.embedding
  // CHECK-NEXT: %[[ES:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  // CHECK-NEXT: shard.shard %[[E]] to %[[ES]] : tensor<4x8x6xf32>
  %e = nn.embedding %table, %ts : (tensor<16x6xf32>, tensor<4x8xi32>) -> tensor<4x8x6xf32>
  // CHECK: %[[N:.*]] = nn.rmsnorm
  // CHECK-NEXT: %[[NS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  %n = nn.rmsnorm %e, %w {eps = 1.0e-6 : f64} : tensor<4x8x6xf32>, tensor<6xf32>
  // CHECK: %[[A:.*]] = nn.sdpa
  // CHECK-NEXT: %[[AS:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
  %a = nn.sdpa %n {causal, heads = 1 : i64, kv_heads = 1 : i64} : tensor<4x8x6xf32> -> tensor<4x8x2xf32>
  // CHECK: nn.cross_entropy
  %l = nn.cross_entropy %a, %y : (tensor<4x8x2xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @vocab_parallel_embedding(
func.func @vocab_parallel_embedding(%t: tensor<4x8xi32>, %table: tensor<16x6xf32>) -> tensor<4x8x6xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %tab = shard.shard %table to %s : tensor<16x6xf32>
  // The ids stay whole; each rank looks up the rows it holds, and the result is the sum of
  // those partial results (replicated after the sum).
  // CHECK: %[[E:.*]] = nn.embedding
  // CHECK-NEXT: %[[ES:.*]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
  %e = nn.embedding %tab, %t : (tensor<16x6xf32>, tensor<4x8xi32>) -> tensor<4x8x6xf32>
  return %e : tensor<4x8x6xf32>
}
