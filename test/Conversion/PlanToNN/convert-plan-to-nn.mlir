// convert-plan-to-nn: each plan.model becomes a forward function of nn primitives.
// RUN: planc-opt %s -convert-plan-to-nn | FileCheck %s

// CHECK-NOT: plan.model
// CHECK-LABEL: func.func @m(
// CHECK-SAME: %[[TOK:.*]]: tensor<?x?xi32> {nn.input = "tokens"}, %[[TGT:.*]]: tensor<?x?xi32> {nn.input = "targets"},
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {nn.dims = ["vocab", "embed"], nn.init = "normal", nn.param = "wte.weight", nn.std = 2.000000e-02 : f64},
// CHECK-SAME: %[[QW:[^:]*]]: tensor<8x24xf32> {nn.dims = ["embed", "qkv"], nn.init = "normal", nn.param = "attn.c_attn.weight"
// CHECK-SAME: %[[PW:[^:]*]]: tensor<8x8xf32> {nn.dims = ["heads", "embed"], nn.init = "normal", nn.param = "attn.c_proj.weight", nn.residual, nn.std = 1.000000e-02 : f64}
// CHECK-SAME: %[[LW:[^:]*]]: tensor<8x8xf32> {{.*}}nn.param = "fc.weight"
// CHECK-SAME: %[[LB:[^:]*]]: tensor<8xf32> {{.*}}nn.param = "fc.bias"
// CHECK-SAME: -> tensor<f32>
// CHECK-SAME: attributes {nn.layers = 0 : i64, nn.max_seq = 0 : i64, nn.model, nn.num_params = 456 : i64, nn.vocab = 16 : i64}
// CHECK: %[[X:.*]] = nn.embedding %[[WTE]], %[[TOK]]
// CHECK: %[[Q:.*]] = nn.matmul %[[X]], %[[QW]] : (tensor<?x?x8xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
// CHECK: %[[O:.*]] = nn.sdpa %[[Q]] {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
// CHECK: %[[A:.*]] = nn.matmul %[[O]], %[[PW]]
// CHECK: %[[L:.*]] = nn.matmul %[[A]], %[[LW]]
// CHECK: %[[LB2:.*]] = nn.bias_add %[[L]], %[[LB]]
// CHECK: %[[G:.*]] = nn.gelu %[[LB2]]
// CHECK: %[[S:.*]] = nn.add %[[X]], %[[G]]
// CHECK: %[[H:.*]] = nn.matmul %[[S]], %[[WTE]] {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[LOSS:.*]] = nn.cross_entropy %[[H]], %[[TGT]]
// CHECK: return %[[LOSS]] : tensor<f32>
// The train plan still verifies: it now refers to the forward function.
// CHECK: plan.train @t {{.*}}model = @m

plan.mesh @mesh {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 456 : i64, vocab = 16 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<16x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  plan.param @attn.c_attn.weight : tensor<8x24xf32> dims ["embed", "qkv"] init normal std 2.0e-02
  plan.param @attn.c_proj.weight : tensor<8x8xf32> dims ["heads", "embed"] init normal std 1.0e-02 residual
  plan.param @fc.weight : tensor<8x8xf32> dims ["embed", "mlp"] init normal std 2.0e-02
  plan.param @fc.bias : tensor<8xf32> dims ["mlp"] init zeros std 0.0
  %x = plan.apply embedding [@wte.weight](%tokens) {layer = "wte"} : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %a = plan.apply attention [@attn.c_attn.weight, @attn.c_proj.weight](%x) {layer = "attn", heads = 2 : i64, kv_heads = 2 : i64, causal = true} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %l = plan.apply linear [@fc.weight, @fc.bias](%a) {layer = "fc"} : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %g = plan.apply gelu [](%l) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %s = plan.apply add [](%x, %g) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %h = plan.apply attend [@wte.weight](%s) {layer = "wte"} : (tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %loss = plan.apply cross_entropy [](%h, %targets) : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %loss : tensor<f32>
}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @mesh, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}
