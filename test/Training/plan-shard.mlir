// plan-shard (planc emit --stage sharded): the train plan's global program — the model at the
// step's global micro-batch, 4 per data rank × 2 data ranks — on a shard.grid of the plan's
// mesh ([dp: 2, tp: 2]), each argument annotated with the executable's layout: the tokens and
// targets split along the batch over "dp" (grid axis 0), each parameter nn-tensor-parallel
// splits along its split dim over "tp" (axis 1): the vocabulary of the tied embedding, the
// columns of c_attn (per q/k/v block, nn.split) and c_fc, the rows of the projections; the
// rest replicated. Upstream sharding-propagation then carries the layout through the ops.
// RUN: planc emit %examples/tiny_3d.plan --stage sharded | FileCheck %s
// The per-rank forward functions (planc emit --stage spmd): plan-train-step stops after
// nn-tensor-parallel, with the collectives explicit and no gradient.
// RUN: planc emit %examples/tiny_3d.plan --stage spmd | FileCheck %s --check-prefix=SPMD
// Under a pipeline each parameter also carries the stages that hold it, as nn-pipeline-split
// cuts the program (Inputs/pipeline.plan, 3 stages of one layer: the tied embedding on the
// first and the last, the final norm on the last), and the spmd stage shows the stage
// functions.
// RUN: planc emit %S/../Schedule/Inputs/pipeline.plan --entry onef --stage sharded | FileCheck %s --check-prefix=PIPE
// RUN: planc emit %S/../Schedule/Inputs/pipeline.plan --entry onef --stage spmd | FileCheck %s --check-prefix=PIPE-SPMD

// CHECK: shard.grid @cpu4_grid(shape = 2x2)
// CHECK-LABEL: func.func private @tiny_3d_sharded(
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<8x64xi32> {nn.input = "tokens"}
// CHECK-SAME: %{{[^:]*}}: tensor<256x64xf32> {{{.*}}nn.param = "wte.weight", nn.split = {blocks = array<i64: 256>, dim = 0 : i64, parts = 2 : i64}
// CHECK-SAME: %{{[^:]*}}: tensor<64x192xf32> {{{.*}}nn.param = "h.0.attn.c_attn.weight", nn.split = {blocks = array<i64: 64, 64, 64>, dim = 1 : i64, parts = 2 : i64}
// CHECK-SAME: nn.sharded
// CHECK-NEXT: %[[S0:.*]] = shard.sharding @cpu4_grid split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: shard.shard %[[TOK]] to %[[S0]] annotate_for_users : tensor<8x64xi32>
// CHECK-NEXT: %[[S1:.*]] = shard.sharding @cpu4_grid split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: shard.shard %arg1 to %[[S1]] annotate_for_users : tensor<8x64xi32>
// CHECK-NEXT: %[[S2:.*]] = shard.sharding @cpu4_grid split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK-NEXT: shard.shard %arg2 to %[[S2]] annotate_for_users : tensor<256x64xf32>
// CHECK-NEXT: %[[S3:.*]] = shard.sharding @cpu4_grid split_axes = [] : !shard.sharding
// CHECK-NEXT: shard.shard %arg3 to %[[S3]] annotate_for_users : tensor<64x64xf32>
// CHECK:      shard.sharding @cpu4_grid split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-NEXT: shard.shard %arg6 to
// The propagated layout: the token embedding's result keeps the batch split; c_attn's
// result is split along its columns over "tp".
// CHECK:      nn.embedding
// CHECK-NEXT: shard.sharding @cpu4_grid split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK:      nn.matmul
// CHECK-NEXT: shard.sharding @cpu4_grid split_axes = {{\[\[}}], [], [1]] : !shard.sharding

// SPMD-LABEL: func.func private @tiny_3d_forward(
// SPMD-SAME: tensor<4x64xi32> {nn.input = "tokens"}
// SPMD-SAME: tensor<128x64xf32> {{{.*}}nn.param = "wte.weight", nn.split = {blocks = array<i64: 256>, dim = 0 : i64, parts = 2 : i64}
// SPMD:      nn.all_reduce %{{.*}} {axis = 1 : i64, purpose = "embedding output", reduce = "sum"}
// SPMD:      nn.vocab_parallel_cross_entropy
// SPMD-NOT:  func.func private @tiny_3d_grad

// PIPE: shard.grid @dp2pp3_grid(shape = 3x2)
// PIPE-LABEL: func.func private @onef_sharded(
// PIPE-SAME: tensor<2x8xi32> {nn.input = "tokens"}
// PIPE-SAME: nn.param = "wte.weight", nn.pipeline_stages = array<i64: 0, 2>
// PIPE-SAME: nn.param = "h.0.ln_1.weight", nn.pipeline_stages = array<i64: 0>
// PIPE-SAME: nn.param = "h.1.ln_1.weight", nn.pipeline_stages = array<i64: 1>
// PIPE-SAME: nn.param = "h.2.ln_1.weight", nn.pipeline_stages = array<i64: 2>
// PIPE-SAME: nn.param = "ln_f.weight", nn.pipeline_stages = array<i64: 2>
// PIPE-NEXT: shard.sharding @dp2pp3_grid split_axes = {{\[\[}}1]] : !shard.sharding

// PIPE-SPMD-LABEL: func.func private @onef_forward_stage0(
// PIPE-SPMD-LABEL: func.func private @onef_forward_stage1(
// PIPE-SPMD-SAME: {nn.activation = "stage0"}) -> tensor<1x8x8xf32> attributes {nn.stage = 1 : i64}
// PIPE-SPMD-LABEL: func.func private @onef_forward_stage2(
// PIPE-SPMD-NOT: _grad
