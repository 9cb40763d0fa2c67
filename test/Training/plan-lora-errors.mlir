// plan-lora's errors: a model not yet in nn form, a matrix the model multiplies by twice
// (one adapter could not stand for both uses), and a matrix it multiplies by only transposed
// (a tied head: no x·W to add x·a·b to). Each at the train or model it concerns.
// RUN: planc-opt %s -split-input-file -plan-lora -verify-diagnostics

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64, num_params = 128 : i64, vocab = 16 : i64} {
^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
  plan.param @wte.weight : tensor<16x8xf32> dims ["vocab", "embed"] init normal std 2.0e-02
  %0 = plan.apply embedding [@wte.weight](%tokens) : (tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %1 = plan.apply attend [@wte.weight](%0) : (tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %2 = plan.apply cross_entropy [](%1, %targets) : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  plan.return %2 : tensor<f32>
}
// expected-error @+1 {{'plan.train' op needs its model expanded to nn first (convert-plan-to-nn)}}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["wte.weight"], rank = 4 : i64, targets = ["x"]}, accumulation = 2 : i64, base_dir = ".", batch = 4 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.5 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu1, micro = 2 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 100 : i64, val = [], warmup = 10 : i64, weight_decay = 1.0e-01 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.dims = ["vocab", "embed"]},
             %w: tensor<8x8xf32> {nn.param = "fc.weight", nn.dims = ["embed", "mlp"]})
    -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %y = nn.matmul %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.matmul' op multiplies by 'fc.weight' a second time; LoRA adapts a matrix used once}}
  %z = nn.matmul %y, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %z, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["fc.weight"], rank = 4 : i64, targets = ["x"]}, accumulation = 2 : i64, base_dir = ".", batch = 4 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.5 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu1, micro = 2 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 100 : i64, val = [], warmup = 10 : i64, weight_decay = 1.0e-01 : f64}

// -----

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-error @+1 {{'func.func' op has no untransposed nn.matmul by 'wte.weight', which 'adapt' targets}}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.dims = ["vocab", "embed"]},
             %w: tensor<8x8xf32> {nn.param = "fc.weight", nn.dims = ["embed", "mlp"]})
    -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %y = nn.matmul %x, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %y, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @t {adapt = {alpha = 8.0 : f64, matrices = ["wte.weight"], rank = 4 : i64, targets = ["x"]}, accumulation = 2 : i64, base_dir = ".", batch = 4 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.5 : f64, data = ["train.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu1, micro = 2 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 1337 : i64, seq = 8 : i64, shard = {}, steps = 100 : i64, val = [], warmup = 10 : i64, weight_decay = 1.0e-01 : f64}
