// plan-quantize's errors: a model not yet in nn form, a quantize dictionary without its
// fields, a named matrix that is not a 2-D frozen argument, and one the model lacks.
// RUN: planc-opt %s -split-input-file -plan-quantize -verify-diagnostics

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 128 : i64, vocab = 16 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<16x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  %0 = plan.apply embedding [@wte.weight](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply attend [@wte.weight](%0) : (tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %2 = plan.apply cross_entropy [](%1, %targets) : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %2 : tensor<f32>
}
// expected-error @+1 {{'plan.train' op needs its model expanded to nn and adapted first (convert-plan-to-nn, plan-lora)}}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["fc.weight"], rank = 4 : i64, targets = ["fc"], quantize = {format = "nf4", block = 64 : i64, double = true, matrices = ["fc.weight"]}}, accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 2 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-error @+1 {{'func.func' op has a quantize dictionary without format "nf4", a positive block, double and matrices}}
func.func private @m(%w: tensor<8x8xf32> {nn.frozen = "fc.weight"}) attributes {nn.model} {
  return
}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["fc.weight"], rank = 4 : i64, targets = ["fc"], quantize = {format = "int8", block = 64 : i64, double = true, matrices = ["fc.weight"]}}, accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 2 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-error @+1 {{'func.func' op quantizes 'fc.bias', which is 'tensor<8xf32>', not a static f32 matrix}}
func.func private @m(%b: tensor<8xf32> {nn.frozen = "fc.bias"}) attributes {nn.model} {
  return
}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["fc.weight"], rank = 4 : i64, targets = ["fc"], quantize = {format = "nf4", block = 64 : i64, double = true, matrices = ["fc.bias"]}}, accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 2 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-error @+1 {{'func.func' op has no frozen argument 'fc.weight', which 'quantize' names; run plan-lora first}}
func.func private @m(%w: tensor<8x8xf32> {nn.param = "fc.weight"}) attributes {nn.model} {
  return
}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["fc.weight"], rank = 4 : i64, targets = ["fc"], quantize = {format = "nf4", block = 64 : i64, double = true, matrices = ["fc.weight"]}}, accumulation = 1 : i64, base_dir = ".", batch = 2 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 2 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}
