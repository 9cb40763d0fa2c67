// plan-train-abi compiles data-parallel plans (DDP and ZeRO 1-3 over the data axes, of any
// size), times a tensor axis (plan-train-step partitions the model: nn-tensor-parallel.mlir);
// anything else is an error that names the feature and the axis, never a silently different
// program: several pipeline stages a rank without the interleaved schedule, replication outside the data axes, a mesh axis larger than 1
// without a role, offloaded parameters without the optimizer, with another buffer or on one data rank, and
// on a cuda mesh the optimizer in host memory or the parameters offloaded (its moments on nvme build:
// test/e2e/offload.sh runs them on cuda-host). (A pure data-parallel
// plan on 4 devices is accepted: see plan-train-abi.mlir.) The manifest needs every
// parameter's nn.init and nn.std and the model's nn.vocab.
// RUN: planc-opt %s -split-input-file -plan-train-abi -verify-diagnostics

// 4 stages over the 2 ranks of "pp" under 1F1B: several stages a rank are the interleaved schedule's.
plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"pp", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{pipeline 'pp' declares 4 stages over 2 ranks; several stages a rank need the interleaved schedule}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 1, tensor = "", pipeline = "pp", stages = 4, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Replication over an axis that is not a data axis.
plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"r", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{replication outside the data axes (axis 'r' of mesh 'cpu4') is not implemented by the code generator in this version of planc; data-parallel layouts (DDP, ZeRO 1-3), tensor parallelism and GPipe, 1F1B, interleaved and zero-bubble (zb) pipelines are}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = ["r"]>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// An axis of size 2 with no role: its devices would run nothing the plan describes.
plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"x", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{every axis of mesh 'cpu4' larger than 1 needs a role; this version runs data-parallel layouts}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Tensor and pipeline axes of size 1 are no parallelism: they pass this check and the next
// error is the missing step functions.
plan.mesh @cpu2 {axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 1>, #plan.axis<"pp", 1>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{'plan.train' op needs its step functions first (plan-train-step)}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu2, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "tp", pipeline = "pp", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Without plan-train-step first.
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{'plan.train' op needs its step functions first (plan-train-step)}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The manifest's parameter table needs each parameter's initialisation: a parameter without
// nn.init is an error at the forward function (the step functions as plan-train-step builds
// them from this model).
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<4x2xf32> {nn.param = "wte.weight", nn.std = 2.0e-02 : f64}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{'func.func' op parameter 'wte.weight' needs nn.init and nn.std attributes}}
func.func private @t_forward(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.param = "wte.weight", nn.std = 2.000000e-02 : f64}) -> tensor<f32> attributes {nn.forward} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
func.func private @t_grad(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.param = "wte.weight", nn.std = 2.000000e-02 : f64}) -> (tensor<f32>, tensor<4x2xf32> {nn.grad = "wte.weight"}) attributes {nn.train_grad} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  %cst = arith.constant dense<1.000000e+00> : tensor<f32>
  %3 = nn.cross_entropy_grad %cst, %1, %arg1 : tensor<f32>, tensor<1x4x4xf32>, tensor<1x4xi32>
  %4 = nn.matmul %3, %arg2 : (tensor<1x4x4xf32>, tensor<4x2xf32>) -> tensor<1x4x2xf32>
  %5 = nn.matmul_wgrad %0, %3 {transpose_w} : (tensor<1x4x2xf32>, tensor<1x4x4xf32>) -> tensor<4x2xf32>
  %6 = nn.embedding_grad %4, %arg0 : (tensor<1x4x2xf32>, tensor<1x4xi32>) -> tensor<4x2xf32>
  %7 = nn.add %5, %6 : tensor<4x2xf32>
  return %2, %7 : tensor<f32>, tensor<4x2xf32>
}
func.func private @t_update(%arg0: i64, %sumsq: f32 {nn.sumsq}, %arg1: tensor<16xf32> {nn.params = "decay"}, %arg2: tensor<16xf32> {nn.grads = "decay"}, %arg3: tensor<16xf32> {nn.exp_avg = "decay"}, %arg4: tensor<16xf32> {nn.exp_avg_sq = "decay"}) -> (f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %2 = math.sqrt %sumsq : f32
  %cst_0 = arith.constant 1.000000e+00 : f32
  %3 = arith.sitofp %arg0 : i64 to f64
  %cst_1 = arith.constant 1.000000e-03 : f64
  %c1_i64 = arith.constant 1 : i64
  %4 = arith.addi %arg0, %c1_i64 : i64
  %5 = arith.sitofp %4 : i64 to f64
  %cst_2 = arith.constant 9.000000e-01 : f64
  %6 = math.powf %cst_2, %5 : f64
  %cst_3 = arith.constant 1.000000e+00 : f64
  %7 = arith.subf %cst_3, %6 : f64
  %cst_4 = arith.constant 0.94999999999999996 : f64
  %8 = math.powf %cst_4, %5 : f64
  %cst_5 = arith.constant 1.000000e+00 : f64
  %9 = arith.subf %cst_5, %8 : f64
  %new_param, %new_m, %new_v = nn.adamw %arg1, %arg2, %arg3, %arg4, %cst_1, %cst_0, %7, %9 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : tensor<16xf32>
  return %2, %cst_1, %new_param, %new_m, %new_v : f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The manifest's parameter table needs each parameter's initialisation: a parameter without
// nn.std is an error at the forward function (the step functions as plan-train-step builds
// them from this model).
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<4x2xf32> {nn.param = "wte.weight", nn.init = "normal"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{'func.func' op parameter 'wte.weight' needs nn.init and nn.std attributes}}
func.func private @t_forward(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.init = "normal", nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.forward} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
func.func private @t_grad(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.init = "normal", nn.param = "wte.weight"}) -> (tensor<f32>, tensor<4x2xf32> {nn.grad = "wte.weight"}) attributes {nn.train_grad} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  %cst = arith.constant dense<1.000000e+00> : tensor<f32>
  %3 = nn.cross_entropy_grad %cst, %1, %arg1 : tensor<f32>, tensor<1x4x4xf32>, tensor<1x4xi32>
  %4 = nn.matmul %3, %arg2 : (tensor<1x4x4xf32>, tensor<4x2xf32>) -> tensor<1x4x2xf32>
  %5 = nn.matmul_wgrad %0, %3 {transpose_w} : (tensor<1x4x2xf32>, tensor<1x4x4xf32>) -> tensor<4x2xf32>
  %6 = nn.embedding_grad %4, %arg0 : (tensor<1x4x2xf32>, tensor<1x4xi32>) -> tensor<4x2xf32>
  %7 = nn.add %5, %6 : tensor<4x2xf32>
  return %2, %7 : tensor<f32>, tensor<4x2xf32>
}
func.func private @t_update(%arg0: i64, %sumsq: f32 {nn.sumsq}, %arg1: tensor<16xf32> {nn.params = "decay"}, %arg2: tensor<16xf32> {nn.grads = "decay"}, %arg3: tensor<16xf32> {nn.exp_avg = "decay"}, %arg4: tensor<16xf32> {nn.exp_avg_sq = "decay"}) -> (f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %2 = math.sqrt %sumsq : f32
  %cst_0 = arith.constant 1.000000e+00 : f32
  %3 = arith.sitofp %arg0 : i64 to f64
  %cst_1 = arith.constant 1.000000e-03 : f64
  %c1_i64 = arith.constant 1 : i64
  %4 = arith.addi %arg0, %c1_i64 : i64
  %5 = arith.sitofp %4 : i64 to f64
  %cst_2 = arith.constant 9.000000e-01 : f64
  %6 = math.powf %cst_2, %5 : f64
  %cst_3 = arith.constant 1.000000e+00 : f64
  %7 = arith.subf %cst_3, %6 : f64
  %cst_4 = arith.constant 0.94999999999999996 : f64
  %8 = math.powf %cst_4, %5 : f64
  %cst_5 = arith.constant 1.000000e+00 : f64
  %9 = arith.subf %cst_5, %8 : f64
  %new_param, %new_m, %new_v = nn.adamw %arg1, %arg2, %arg3, %arg4, %cst_1, %cst_0, %7, %9 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : tensor<16xf32>
  return %2, %cst_1, %new_param, %new_m, %new_v : f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The manifest needs the vocabulary of the model (set by convert-plan-to-nn).
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<4x2xf32> {nn.param = "wte.weight", nn.init = "normal", nn.std = 2.0e-02 : f64}) -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func private @t_forward(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.init = "normal", nn.param = "wte.weight", nn.std = 2.000000e-02 : f64}) -> tensor<f32> attributes {nn.forward} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
func.func private @t_grad(%arg0: tensor<1x4xi32> {nn.input = "tokens"}, %arg1: tensor<1x4xi32> {nn.input = "targets"}, %arg2: tensor<4x2xf32> {nn.init = "normal", nn.param = "wte.weight", nn.std = 2.000000e-02 : f64}) -> (tensor<f32>, tensor<4x2xf32> {nn.grad = "wte.weight"}) attributes {nn.train_grad} {
  %0 = nn.embedding %arg2, %arg0 : (tensor<4x2xf32>, tensor<1x4xi32>) -> tensor<1x4x2xf32>
  %1 = nn.matmul %0, %arg2 {transpose_w} : (tensor<1x4x2xf32>, tensor<4x2xf32>) -> tensor<1x4x4xf32>
  %2 = nn.cross_entropy %1, %arg1 : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  %cst = arith.constant dense<1.000000e+00> : tensor<f32>
  %3 = nn.cross_entropy_grad %cst, %1, %arg1 : tensor<f32>, tensor<1x4x4xf32>, tensor<1x4xi32>
  %4 = nn.matmul %3, %arg2 : (tensor<1x4x4xf32>, tensor<4x2xf32>) -> tensor<1x4x2xf32>
  %5 = nn.matmul_wgrad %0, %3 {transpose_w} : (tensor<1x4x2xf32>, tensor<1x4x4xf32>) -> tensor<4x2xf32>
  %6 = nn.embedding_grad %4, %arg0 : (tensor<1x4x2xf32>, tensor<1x4xi32>) -> tensor<4x2xf32>
  %7 = nn.add %5, %6 : tensor<4x2xf32>
  return %2, %7 : tensor<f32>, tensor<4x2xf32>
}
func.func private @t_update(%arg0: i64, %sumsq: f32 {nn.sumsq}, %arg1: tensor<16xf32> {nn.params = "decay"}, %arg2: tensor<16xf32> {nn.grads = "decay"}, %arg3: tensor<16xf32> {nn.exp_avg = "decay"}, %arg4: tensor<16xf32> {nn.exp_avg_sq = "decay"}) -> (f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %2 = math.sqrt %sumsq : f32
  %cst_0 = arith.constant 1.000000e+00 : f32
  %3 = arith.sitofp %arg0 : i64 to f64
  %cst_1 = arith.constant 1.000000e-03 : f64
  %c1_i64 = arith.constant 1 : i64
  %4 = arith.addi %arg0, %c1_i64 : i64
  %5 = arith.sitofp %4 : i64 to f64
  %cst_2 = arith.constant 9.000000e-01 : f64
  %6 = math.powf %cst_2, %5 : f64
  %cst_3 = arith.constant 1.000000e+00 : f64
  %7 = arith.subf %cst_3, %6 : f64
  %cst_4 = arith.constant 0.94999999999999996 : f64
  %8 = math.powf %cst_4, %5 : f64
  %cst_5 = arith.constant 1.000000e+00 : f64
  %9 = arith.subf %cst_5, %8 : f64
  %new_param, %new_m, %new_v = nn.adamw %arg1, %arg2, %arg3, %arg4, %cst_1, %cst_0, %7, %9 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : tensor<16xf32>
  return %2, %cst_1, %new_param, %new_m, %new_v : f32, f64, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
// expected-error @+1 {{'plan.train' op needs its model's nn.vocab attribute (set by convert-plan-to-nn)}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Parameters offloaded (ZeRO-Infinity) without the optimizer: the update streams each parameter chunk
// with its moments.
plan.mesh @cpu2 {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{offloading the parameters without the optimizer is not implemented by the code generator in this version of planc: the update streams each parameter chunk with its Adam moments; add 'optimizer = nvme(DIR)' to the offload section}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu2, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 3, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], offload = {params = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}}>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The parameters' chunk must be the optimizer's.
plan.mesh @cpu2 {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{the offloaded parameters' buffer (8192 bytes) differs from the optimizer's (4096 bytes): the update streams each parameter chunk with its moments, in chunks of one size; give both the same buffer}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu2, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 3, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], offload = {optimizer = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}, params = {target = "nvme", dir = "/nvme", buffer = 8192 : i64}}>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// One data rank: nothing to gather the shards over.
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{offloading the parameters of a single data-parallel rank is not implemented by the code generator in this version of planc: the parameters are offloaded as ZeRO-3 shards, gathered over a data axis of more than one rank}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 3, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], offload = {optimizer = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}, params = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}}>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The optimizer offloaded to the host of a cuda mesh (ZeRO-Offload): estimated, not built.
plan.mesh @gpu2 {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cuda>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{the optimizer in host memory on a cuda mesh ('optimizer = cpu', ZeRO-Offload's update on the host's cores) is not implemented by the code generator in this version of planc; planc explain estimates it, and 'optimizer = nvme(DIR)' builds (the moments streamed from files through the device's update)}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @gpu2, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 1, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], offload = {optimizer = {target = "cpu"}}>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The ZeRO-3 parameter shard offloaded on a cuda mesh (ZeRO-Infinity): estimated, not built.
plan.mesh @gpu2 {axes = [#plan.axis<"dp", 2>], devices_per_node = 2 : i64, kind = #plan<device_kind cuda>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{offloading the parameters on a cuda mesh is not implemented by the code generator in this version of planc; planc explain estimates it, and 'optimizer = nvme(DIR)' alone builds on a cuda mesh ('params = nvme(DIR)' with it on a cpu mesh)}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @gpu2, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 3, tensor = "", pipeline = "", stages = 1, schedule = gpipe, sequence = false, replicate = [], offload = {optimizer = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}, params = {target = "nvme", dir = "/nvme", buffer = 4096 : i64}}>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}
