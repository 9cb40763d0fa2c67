// plan-train-abi compiles one plan on one device in fp32 without recompute; anything
// else is an error that names the feature.
// RUN: planc-opt %s -split-input-file -plan-train-abi -verify-diagnostics

plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 2>], devices_per_node = 4 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{training on 4 devices (mesh 'cpu4') is not implemented in this version of planc: executables run on one device; use a one-device mesh such as cpu1}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "tp", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{precision bf16 is not implemented by the code generator in this version of planc; use precision = fp32}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision bf16>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32>, %tgt: tensor<?x?xi32>, %wte: tensor<4x2xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{recompute = full is not implemented by the code generator in this version of planc}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute full>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

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
