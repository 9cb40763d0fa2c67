// plan-train-step: a train plan's model becomes @<plan>_forward (static [micro, seq]),
// @<plan>_grad and @<plan>_update (norm from the global sum of squares it is given,
// clipping, schedule, AdamW over the two parameter groups, each this data-parallel rank's
// piece of a flat span of the parameter buffers: the whole span without ZeRO).
// RUN: planc-opt %s -split-input-file -plan-train-step | FileCheck %s
// RUN: planc-opt %s -split-input-file -plan-train-step | FileCheck %s --check-prefix=PLAIN

// Cosine schedule with warmup, clipping, weight decay.
// The model stays, dynamic.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: tensor<?x?xi32>
// CHECK-SAME: attributes {nn.model, nn.vocab = 16 : i64}

// CHECK-LABEL: func.func private @t_forward(
// CHECK-SAME: %{{[^:]*}}: tensor<2x8xi32> {nn.input = "tokens"}, %{{[^:]*}}: tensor<2x8xi32> {nn.input = "targets"},
// CHECK-SAME: tensor<16x8xf32> {nn.param = "wte.weight"}
// CHECK-SAME: -> tensor<f32> attributes {nn.forward, nn.vocab = 16 : i64}
// CHECK: nn.embedding {{.*}} : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
// CHECK: nn.layernorm {{.*}} : tensor<2x8x8xf32>, tensor<8xf32>
// CHECK: nn.matmul {{.*}} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
// CHECK: nn.bias_add {{.*}} : tensor<2x8x8xf32>, tensor<8xf32>
// CHECK: nn.matmul {{.*}} {transpose_w} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
// CHECK: nn.cross_entropy {{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
// CHECK-NOT: ?x

// CHECK-LABEL: func.func private @t_grad(
// CHECK-SAME: tensor<2x8xi32>
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {nn.grad = "wte.weight"}, tensor<8xf32> {nn.grad = "ln.weight"}, tensor<8x8xf32> {nn.grad = "fc.weight"}, tensor<8xf32> {nn.grad = "fc.bias"})
// CHECK-SAME: attributes {nn.train_grad}
// CHECK: nn.cross_entropy_grad {{.*}} : tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>
// CHECK: nn.embedding_grad {{.*}} : (tensor<2x8x8xf32>, tensor<2x8xi32>) -> tensor<16x8xf32>

// The update works on two parameter groups, as PyTorch's param groups: each argument is
// this rank's piece of one group's span in the flat buffers (training::layoutOf; on one
// device the whole span). Matrices first, in argument order, each at a multiple of 16
// floats: wte.weight 128 floats at 0, fc.weight 64 at 128, so "decay" is [0, 192); then the
// vectors: ln.weight 8 at 192, fc.bias 8 at 208 (200 rounded up), so "no_decay" is
// [192, 224), 32 floats with the padding. The second argument is the global sum of squared
// gradients (nn.sumsq): the schedule computes it (planc_sumsq on each rank's pieces, then an
// all-reduce), so the update itself sums no squares.
// CHECK-LABEL: func.func private @t_update(
// CHECK-SAME: %[[STEP:[^:]*]]: i64, %[[SUMSQ:[^:]*]]: f32 {nn.sumsq},
// CHECK-SAME: %[[P0:[^:]*]]: tensor<192xf32> {nn.params = "decay"}, %[[P1:[^:]*]]: tensor<32xf32> {nn.params = "no_decay"},
// CHECK-SAME: %[[G0:[^:]*]]: tensor<192xf32> {nn.grads = "decay"}, %[[G1:[^:]*]]: tensor<32xf32> {nn.grads = "no_decay"},
// CHECK-SAME: %[[M0:[^:]*]]: tensor<192xf32> {nn.exp_avg = "decay"}, %[[M1:[^:]*]]: tensor<32xf32> {nn.exp_avg = "no_decay"},
// CHECK-SAME: %[[V0:[^:]*]]: tensor<192xf32> {nn.exp_avg_sq = "decay"}, %[[V1:[^:]*]]: tensor<32xf32> {nn.exp_avg_sq = "no_decay"})
// CHECK-SAME: -> (f32, f64, tensor<192xf32>, tensor<32xf32>, tensor<192xf32>, tensor<32xf32>, tensor<192xf32>, tensor<32xf32>) {
// The global gradient norm is the square root of the sum handed in.
// CHECK-NEXT: %[[NORM:.*]] = math.sqrt %[[SUMSQ]] : f32
// CHECK-NOT: nn.sumsq
// Clipping as clip_grad_norm_: min(clip / (norm + 1e-6), 1) with clip = 0.5. (The order
// of constants among an op's operands follows C++ argument evaluation: DAG groups.)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TINY:.*]] = arith.constant 9.99999997E-7 : f32
// CHECK-DAG: %[[CLIP:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[DEN:.*]] = arith.addf %[[NORM]], %[[TINY]] : f32
// CHECK-DAG: %[[COEF:.*]] = arith.divf %[[CLIP]], %[[DEN]] : f32
// CHECK-DAG: %[[SCALE:.*]] = arith.minimumf %[[COEF]], %[[ONE]] : f32
// CHECK: %[[S:.*]] = arith.sitofp %[[STEP]] : i64 to f64
// Cosine decay from lr 1e-3 to min_lr 1e-4 over steps 10..100:
// min_lr + (lr − min_lr) · ½(1 + cos(π · min((s − 10) / 90, 1))).
// CHECK-DAG: arith.constant 1.000000e-03 : f64
// CHECK-DAG: %[[W1:.*]] = arith.constant 1.000000e+01 : f64
// CHECK-DAG: %[[SPAN:.*]] = arith.constant 9.000000e+01 : f64
// CHECK-DAG: %[[SUB:.*]] = arith.subf %[[S]], %[[W1]] : f64
// CHECK-DAG: %[[FRAC:.*]] = arith.divf %[[SUB]], %[[SPAN]] : f64
// CHECK-DAG: %[[ONE1:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[PROG:.*]] = arith.minimumf %[[FRAC]], %[[ONE1]] : f64
// CHECK-DAG: %[[PI:.*]] = arith.constant 3.1415926535897931 : f64
// CHECK-DAG: %[[ANGLE:.*]] = arith.mulf %[[PI]], %[[PROG]] : f64
// CHECK-DAG: %[[COS:.*]] = math.cos %[[ANGLE]] : f64
// CHECK-DAG: %[[ONE2:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[COS1:.*]] = arith.addf %[[ONE2]], %[[COS]] : f64
// CHECK-DAG: %[[HALFC:.*]] = arith.constant 5.000000e-01 : f64
// CHECK-DAG: %[[HALF:.*]] = arith.mulf %[[HALFC]], %[[COS1]] : f64
// CHECK-DAG: %[[RANGE:.*]] = arith.constant 9.000000e-04 : f64
// CHECK-DAG: %[[SCALED:.*]] = arith.mulf %[[RANGE]], %[[HALF]] : f64
// CHECK-DAG: %[[MINLR:.*]] = arith.constant 1.000000e-04 : f64
// CHECK-DAG: %[[DECAYED:.*]] = arith.addf %[[MINLR]], %[[SCALED]] : f64
// Linear warmup over the first 10 steps: lr · (s + 1) / 10 while s < 10.
// CHECK-DAG: %[[W2:.*]] = arith.constant 1.000000e+01 : f64
// CHECK-DAG: %[[ONE3:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[S1:.*]] = arith.addf %[[S]], %[[ONE3]] : f64
// CHECK-DAG: %[[LR0:.*]] = arith.constant 1.000000e-03 : f64
// CHECK-DAG: %[[WL:.*]] = arith.mulf %[[LR0]], %[[S1]] : f64
// CHECK-DAG: %[[WARMLR:.*]] = arith.divf %[[WL]], %[[W2]] : f64
// CHECK-DAG: %[[W3:.*]] = arith.constant 1.000000e+01 : f64
// CHECK-DAG: %[[IN:.*]] = arith.cmpf olt, %[[S]], %[[W3]] : f64
// CHECK: %[[LR:.*]] = arith.select %[[IN]], %[[WARMLR]], %[[DECAYED]] : f64
// Bias corrections of step t = step + 1: 1 − β^t.
// CHECK: %[[T1:.*]] = arith.addi %[[STEP]], %{{.*}} : i64
// CHECK: %[[T:.*]] = arith.sitofp %[[T1]] : i64 to f64
// CHECK-DAG: %[[B1:.*]] = arith.constant 9.000000e-01 : f64
// CHECK-DAG: %[[B1T:.*]] = math.powf %[[B1]], %[[T]] : f64
// CHECK-DAG: %[[BC1:.*]] = arith.subf %{{.*}}, %[[B1T]] : f64
// CHECK-DAG: %[[B2:.*]] = arith.constant 0.94999999999999996 : f64
// CHECK-DAG: %[[B2T:.*]] = math.powf %[[B2]], %[[T]] : f64
// CHECK-DAG: %[[BC2:.*]] = arith.subf %{{.*}}, %[[B2T]] : f64
// One AdamW per group, with weight decay on the matrices (the table, the linear weight)
// and none on the vectors (the norm's scale, the bias), whatever the plan's weight_decay.
// CHECK-NOT: nn.adamw
// CHECK: %[[NP0:[^,]*]], %[[NM0:[^,]*]], %[[NV0:[^ ]*]] = nn.adamw %[[P0]], %[[G0]], %[[M0]], %[[V0]], %[[LR]], %[[SCALE]], %[[BC1]], %[[BC2]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<192xf32>
// CHECK-NEXT: %[[NP1:[^,]*]], %[[NM1:[^,]*]], %[[NV1:[^ ]*]] = nn.adamw %[[P1]], %[[G1]], %[[M1]], %[[V1]], %[[LR]], %[[SCALE]], %[[BC1]], %[[BC2]] {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : tensor<32xf32>
// CHECK-NEXT: return %[[NORM]], %[[LR]], %[[NP0]], %[[NP1]], %[[NM0]], %[[NM1]], %[[NV0]], %[[NV1]] : f32, f64, tensor<192xf32>, tensor<32xf32>, tensor<192xf32>, tensor<32xf32>, tensor<192xf32>, tensor<32xf32>
// The plan stays for the later passes.
// CHECK: plan.train @t

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %g: tensor<8xf32> {nn.param = "ln.weight"},
             %w: tensor<8x8xf32> {nn.param = "fc.weight"}, %b: tensor<8xf32> {nn.param = "fc.bias"})
    -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %n = nn.layernorm %x, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  %y0 = nn.matmul %n, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = nn.bias_add %y0, %b : tensor<?x?x8xf32>, tensor<8xf32>
  %l = nn.matmul %y, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @t {accumulation = 2 : i64, base_dir = ".", batch = 4 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.5 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu1, micro = 2 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 100 : i64, val = [], warmup = 10 : i64, weight_decay = 1.0e-01 : f64}

// -----

// Constant schedule, no warmup, no clipping (clip = 0), no weight decay: the learning rate
// is the constant and the gradient scale is 1.
// PLAIN-LABEL: func.func private @c_update(
// PLAIN-NOT: {{arith.minimumf|math.cos|arith.cmpf|arith.select}}
// PLAIN: return
// CHECK-LABEL: func.func private @c_forward(
// CHECK-SAME: tensor<3x5xi32>
// One matrix (wte.weight, 128 floats) and no vector: the "decay" group alone, one AdamW;
// weight decay 0 as the plan says.
// CHECK-LABEL: func.func private @c_update(
// CHECK-SAME: %{{[^:]*}}: i64, %[[SQ:[^:]*]]: f32 {nn.sumsq}, %[[P:[^:]*]]: tensor<128xf32> {nn.params = "decay"}, %[[G:[^:]*]]: tensor<128xf32> {nn.grads = "decay"}, %[[M:[^:]*]]: tensor<128xf32> {nn.exp_avg = "decay"}, %[[V:[^:]*]]: tensor<128xf32> {nn.exp_avg_sq = "decay"})
// CHECK-SAME: -> (f32, f64, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>) {
// CHECK-NOT: no_decay
// CHECK-NOT: nn.sumsq
// CHECK: %[[NORM:.*]] = math.sqrt %[[SQ]] : f32
// CHECK-NEXT: %[[SCALE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: arith.sitofp
// CHECK-NEXT: %[[LR:.*]] = arith.constant 2.000000e-03 : f64
// CHECK: %[[NP:[^,]*]], %[[NM:[^,]*]], %[[NV:[^ ]*]] = nn.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[SCALE]], {{.*}} {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64} : tensor<128xf32>
// CHECK-NEXT: return %[[NORM]], %[[LR]], %[[NP]], %[[NM]], %[[NV]] : f32, f64, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @c {accumulation = 1 : i64, base_dir = ".", batch = 3 : i64, beta1 = 8.0e-01 : f64, beta2 = 9.9e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-06 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 2.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 3 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 5 : i64, shard = {}, steps = 10 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Linear decay without warmup: lr + (min_lr − lr) · min(s / steps, 1); no select, no cosine,
// and without clipping the only minimumf is the f64 one of the progress.
// PLAIN-LABEL: func.func private @l_update(
// PLAIN-NOT: {{arith.minimumf .* : f32|math.cos|arith.cmpf|arith.select}}
// PLAIN: return
// CHECK-LABEL: func.func private @l_update(
// CHECK: %[[S:.*]] = arith.sitofp %{{.*}} : i64 to f64
// CHECK-DAG: %[[STEPS:.*]] = arith.constant 5.000000e+01 : f64
// CHECK-DAG: %[[W:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[SUB:.*]] = arith.subf %[[S]], %[[W]] : f64
// CHECK-DAG: %[[FRAC:.*]] = arith.divf %[[SUB]], %[[STEPS]] : f64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-DAG: %[[P:.*]] = arith.minimumf %[[FRAC]], %[[ONE]] : f64
// CHECK-DAG: %[[DELTA:.*]] = arith.constant -0.0090000000000000011 : f64
// CHECK-DAG: %[[MUL:.*]] = arith.mulf %[[DELTA]], %[[P]] : f64
// CHECK-DAG: %[[LR:.*]] = arith.addf %[[LR1:.*]], %[[MUL]] : f64
// CHECK: arith.addi
// The one matrix decays (weight_decay 0.1).
// CHECK: nn.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], {{.*}} weight_decay = 1.000000e-01 : f64} : tensor<128xf32>
// CHECK-NEXT: return %{{.*}}, %[[LR]], %{{.*}}, %{{.*}}, %{{.*}} : f32, f64, tensor<128xf32>, tensor<128xf32>, tensor<128xf32>

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @l {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-02 : f64, lr_schedule = #plan<lr_schedule linear>, mesh = @cpu1, micro = 1 : i64, min_lr = 1.0e-03 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 50 : i64, val = [], warmup = 0 : i64, weight_decay = 0.1 : f64}

// -----

// Data parallel over 4 ranks without ZeRO: every rank updates the whole groups, each padded
// to a multiple of 16 × 4 = 64 floats so that the same layout splits evenly under ZeRO:
// "decay" [0, 192) (already 3 × 64), "no_decay" ln.weight at 192 and fc.bias at 208, 216
// rounded up to 256: 64 floats.
// CHECK-LABEL: func.func private @ddp_update(
// CHECK-SAME: %{{[^:]*}}: i64, %{{[^:]*}}: f32 {nn.sumsq},
// CHECK-SAME: tensor<192xf32> {nn.params = "decay"}, %{{[^:]*}}: tensor<64xf32> {nn.params = "no_decay"},
// CHECK-SAME: tensor<192xf32> {nn.grads = "decay"}, %{{[^:]*}}: tensor<64xf32> {nn.grads = "no_decay"},
// CHECK-SAME: -> (f32, f64, tensor<192xf32>, tensor<64xf32>, tensor<192xf32>, tensor<64xf32>, tensor<192xf32>, tensor<64xf32>)
// CHECK: nn.adamw {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<192xf32>
// CHECK-NEXT: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<64xf32>

plan.mesh @cpu4 {axes = [#plan.axis<"dp", 4>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.init = "normal", nn.std = 2.0e-02 : f64},
             %g: tensor<8xf32> {nn.param = "ln.weight", nn.init = "ones", nn.std = 0.0 : f64},
             %w: tensor<8x8xf32> {nn.param = "fc.weight", nn.init = "normal", nn.std = 1.0e-02 : f64},
             %b: tensor<8xf32> {nn.param = "fc.bias", nn.init = "zeros", nn.std = 0.0 : f64})
    -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %n = nn.layernorm %x, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  %y0 = nn.matmul %n, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = nn.bias_add %y0, %b : tensor<?x?x8xf32>, tensor<8xf32>
  %l = nn.matmul %y, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @ddp {accumulation = 2 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 1.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.1 : f64}

// -----

// The same with ZeRO-3: each rank updates its quarter of each group, 192 / 4 = 48 floats of
// "decay" and 64 / 4 = 16 of "no_decay".
// CHECK-LABEL: func.func private @z3_update(
// CHECK-SAME: %{{[^:]*}}: i64, %{{[^:]*}}: f32 {nn.sumsq},
// CHECK-SAME: tensor<48xf32> {nn.params = "decay"}, %{{[^:]*}}: tensor<16xf32> {nn.params = "no_decay"},
// CHECK-SAME: tensor<48xf32> {nn.grads = "decay"}, %{{[^:]*}}: tensor<16xf32> {nn.grads = "no_decay"},
// CHECK-SAME: tensor<48xf32> {nn.exp_avg = "decay"}, %{{[^:]*}}: tensor<16xf32> {nn.exp_avg = "no_decay"},
// CHECK-SAME: tensor<48xf32> {nn.exp_avg_sq = "decay"}, %{{[^:]*}}: tensor<16xf32> {nn.exp_avg_sq = "no_decay"})
// CHECK-SAME: -> (f32, f64, tensor<48xf32>, tensor<16xf32>, tensor<48xf32>, tensor<16xf32>, tensor<48xf32>, tensor<16xf32>)
// CHECK-NOT: nn.sumsq
// CHECK: nn.adamw {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<48xf32>
// CHECK-NEXT: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<16xf32>

plan.mesh @cpu4 {axes = [#plan.axis<"dp", 4>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.init = "normal", nn.std = 2.0e-02 : f64},
             %g: tensor<8xf32> {nn.param = "ln.weight", nn.init = "ones", nn.std = 0.0 : f64},
             %w: tensor<8x8xf32> {nn.param = "fc.weight", nn.init = "normal", nn.std = 1.0e-02 : f64},
             %b: tensor<8xf32> {nn.param = "fc.bias", nn.init = "zeros", nn.std = 0.0 : f64})
    -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %n = nn.layernorm %x, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  %y0 = nn.matmul %n, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = nn.bias_add %y0, %b : tensor<?x?x8xf32>, tensor<8xf32>
  %l = nn.matmul %y, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @z3 {accumulation = 2 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 1.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 3, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.1 : f64}
