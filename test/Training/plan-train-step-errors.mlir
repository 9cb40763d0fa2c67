// plan-train-step fails on a plan whose model is not in nn form, cannot be differentiated, or
// whose step functions' names are taken.
// RUN: planc-opt %s -split-input-file -plan-train-step -verify-diagnostics

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
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The error is at the op of the specialised forward function, which keeps the model's locations.
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.dropout' op with p > 0 cannot be trained in this version}}
  %d = nn.dropout %x {p = 0.5 : f64} : tensor<?x?x8xf32>
  %l = nn.matmul %d, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The step functions are named after the plan: a symbol already called <plan>_forward,
// <plan>_grad or <plan>_update is an error at the plan with a note at that symbol.
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-note @+1 {{'t_forward' is declared here}}
func.func private @t_forward(tensor<4xf32>) -> tensor<4xf32>
// expected-error @+1 {{train 't' needs the name 't_forward' for its step function, but it is taken; rename one of them}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// Any symbol counts, here a mesh.
// expected-note @+1 {{'t_grad' is declared here}}
plan.mesh @t_grad {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{train 't' needs the name 't_grad' for its step function, but it is taken; rename one of them}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @t_grad, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// -----

// The model itself may be the clash.
plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
// expected-note @+1 {{'t_update' is declared here}}
func.func @t_update(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
                    %wte: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32> attributes {nn.model, nn.vocab = 16 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
// expected-error @+1 {{train 't' needs the name 't_update' for its step function, but it is taken; rename one of them}}
plan.train @t {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @t_update, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}
