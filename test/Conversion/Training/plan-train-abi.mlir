// plan-train-abi: the step functions inlined into planc_grad / planc_update / planc_eval on
// flat f32 buffers (each parameter 64-byte aligned) and [micro, seq] token buffers, and the
// manifest the runtime reads.
// RUN: planc-opt %s -split-input-file -plan-train-step -plan-train-abi | FileCheck %s
// The stage-grad output of a real plan: 16 × 128 tokens, the stdlib GPT's parameter table.
// RUN: planc emit %examples/licenses_char.plan --stage grad | planc-opt -plan-train-abi | FileCheck %s --check-prefix=CHAR

// Parameters: wte.weight 16×8 at 0, ln.weight 8 at 128, fc.weight 8×8 at 144 (136 rounded up
// to 16 floats), fc.bias 8 at 208; 216 floats rounded up to 224.
// Nothing of the plan or of the tensor functions is left.
// CHECK-NOT: plan.
// CHECK-NOT: func.func {{.*}}@{{m|t_forward|t_grad|t_update}}(
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: %[[P:[^:]*]]: memref<224xf32>, %[[G:[^:]*]]: memref<224xf32>, %[[TOK:[^:]*]]: memref<2x8xi32>, %[[TGT:[^:]*]]: memref<2x8xi32>, %[[LOSS:[^:]*]]: memref<1xf32>) {
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[TOK]] restrict : memref<2x8xi32> to tensor<2x8xi32>
// CHECK: %[[Y:.*]] = bufferization.to_tensor %[[TGT]] restrict : memref<2x8xi32> to tensor<2x8xi32>
// CHECK: %[[SV0:.*]] = memref.subview %[[P]][0] [128] [1] : memref<224xf32> to memref<128xf32, strided<[1]>>
// CHECK: %[[F0:.*]] = bufferization.to_tensor %[[SV0]] restrict : memref<128xf32, strided<[1]>> to tensor<128xf32>
// CHECK: %[[WTE:.*]] = tensor.expand_shape %[[F0]] {{\[\[}}0, 1]] output_shape [16, 8] : tensor<128xf32> into tensor<16x8xf32>
// CHECK: memref.subview %[[P]][128] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 128>>
// CHECK: memref.subview %[[P]][144] [64] [1] : memref<224xf32> to memref<64xf32, strided<[1], offset: 144>>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK: memref.subview %[[P]][208] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 208>>
// The inlined gradient function reads the token tensors and the parameters.
// CHECK: nn.embedding %[[WTE]], %[[T]] : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
// CHECK: nn.cross_entropy %{{.*}}, %[[Y]] : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
// G += ∇ / accumulation (2), written back in place.
// CHECK: %[[DWTE:.*]] = nn.scale %{{.*}} {factor = 5.000000e-01 : f64} : tensor<16x8xf32>
// CHECK: %[[GSV:.*]] = memref.subview %[[G]][0] [128] [1]
// CHECK: %[[GF:.*]] = bufferization.to_tensor %[[GSV]] restrict
// CHECK: %[[GOLD:.*]] = tensor.expand_shape %[[GF]]
// CHECK: %[[GSUM:.*]] = nn.add %[[GOLD]], %[[DWTE]] : tensor<16x8xf32>
// CHECK: %[[GFLAT:.*]] = tensor.collapse_shape %[[GSUM]] {{\[\[}}0, 1]] : tensor<16x8xf32> into tensor<128xf32>
// CHECK: %[[GDST:.*]] = memref.subview %[[G]][0] [128] [1]
// CHECK: bufferization.materialize_in_destination %[[GFLAT]] in restrict writable %[[GDST]] : (tensor<128xf32>, memref<128xf32, strided<[1]>>) -> ()
// A vector needs no reshaping.
// CHECK: nn.scale %{{.*}} {factor = 5.000000e-01 : f64} : tensor<8xf32>
// CHECK: memref.subview %[[G]][128] [8] [1]
// CHECK: %[[GDST1:.*]] = memref.subview %[[G]][128] [8] [1]
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[GDST1]] : (tensor<8xf32>, memref<8xf32, strided<[1], offset: 128>>) -> ()
// CHECK: memref.subview %[[G]][144] [64] [1]
// CHECK: memref.subview %[[G]][208] [8] [1]
// loss += loss / accumulation.
// CHECK: %[[L:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK: %[[OLD:.*]] = memref.load %[[LOSS]][%{{.*}}] : memref<1xf32>
// CHECK: %[[HALF:.*]] = arith.mulf %[[L]], %{{.*}} : f32
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[HALF]] : f32
// CHECK: memref.store %[[NEW]], %[[LOSS]][%{{.*}}] : memref<1xf32>
// CHECK: return

// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: %[[UP:[^:]*]]: memref<224xf32>, %[[UG:[^:]*]]: memref<224xf32>, %[[UM:[^:]*]]: memref<224xf32>, %[[UV:[^:]*]]: memref<224xf32>, %[[STEP:[^:]*]]: i64, %[[STATS:[^:]*]]: memref<2xf32>) {
// CHECK: memref.subview %[[UP]][0] [128] [1]
// CHECK: memref.subview %[[UG]][0] [128] [1]
// CHECK: memref.subview %[[UM]][0] [128] [1]
// CHECK: memref.subview %[[UV]][208] [8] [1]
// CHECK: %[[NORM:.*]] = math.sqrt
// CHECK: arith.sitofp %[[STEP]] : i64 to f64
// CHECK: %[[LR:.*]] = arith.select
// CHECK: %[[NP:[^,]*]], %[[NM:[^,]*]], %[[NV:[^ ]*]] = nn.adamw {{.*}} : tensor<16x8xf32>
// Parameters back into P, first moments into M, second moments into V.
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[NP]] {{\[\[}}0, 1]] : tensor<16x8xf32> into tensor<128xf32>
// CHECK: %[[D:.*]] = memref.subview %[[UP]][0] [128] [1]
// CHECK: bufferization.materialize_in_destination %[[C]] in restrict writable %[[D]]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[NM]]
// CHECK: %[[D:.*]] = memref.subview %[[UM]][0] [128] [1]
// CHECK: bufferization.materialize_in_destination %[[C]] in restrict writable %[[D]]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[NV]]
// CHECK: %[[D:.*]] = memref.subview %[[UV]][0] [128] [1]
// CHECK: bufferization.materialize_in_destination %[[C]] in restrict writable %[[D]]
// stats = [grad norm, lr as f32].
// CHECK: memref.store %[[NORM]], %[[STATS]][%{{.*}}] : memref<2xf32>
// CHECK: %[[LR32:.*]] = arith.truncf %[[LR]] : f64 to f32
// CHECK: memref.store %[[LR32]], %[[STATS]][%{{.*}}] : memref<2xf32>
// CHECK: return

// CHECK-LABEL: func.func @planc_eval(
// CHECK-SAME: %[[EP:[^:]*]]: memref<224xf32>, %[[ETOK:[^:]*]]: memref<2x8xi32>, %[[ETGT:[^:]*]]: memref<2x8xi32>, %[[ELOSS:[^:]*]]: memref<1xf32>) {
// CHECK: bufferization.to_tensor %[[ETOK]] restrict
// CHECK: bufferization.to_tensor %[[ETGT]] restrict
// CHECK-NOT: _grad
// CHECK-NOT: nn.adamw
// CHECK: %[[EL:.*]] = nn.cross_entropy
// CHECK-NOT: nn.cross_entropy_grad
// CHECK: %[[E:.*]] = tensor.extract %[[EL]][] : tensor<f32>
// CHECK: memref.store %[[E]], %[[ELOSS]][%{{.*}}] : memref<1xf32>
// CHECK: return

// The manifest: parameter table, data paths resolved against the plan's directory
// (absolute ones kept), batch, schedule and checkpoints; NUL-terminated.
// CHECK: llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22,\22model\22:\22m\22,\22num_floats\22:224,
// CHECK-SAME: \22params\22:[{\22count\22:128,\22init\22:\22normal\22,\22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[16,8],\22std\22:0.02},
// CHECK-SAME: {\22count\22:8,\22init\22:\22ones\22,\22name\22:\22ln.weight\22,\22offset\22:128,\22shape\22:[8],\22std\22:0},
// CHECK-SAME: {\22count\22:64,\22init\22:\22normal\22,\22name\22:\22fc.weight\22,\22offset\22:144,\22shape\22:[8,8],\22std\22:0.01},
// CHECK-SAME: {\22count\22:8,\22init\22:\22zeros\22,\22name\22:\22fc.bias\22,\22offset\22:208,\22shape\22:[8],\22std\22:0}],
// CHECK-SAME: \22plan\22:\22t\22,
// CHECK-SAME: \22accumulation\22:2,\22batch\22:4,
// CHECK-SAME: \22checkpoint\22:{\22dir\22:\22/data/run/ckpt\22,\22every\22:50,\22keep\22:2},\22clip\22:1,
// CHECK-SAME: \22data\22:[\22/data/run/train.bin\22,\22/abs/more.bin\22],\22data_parallel\22:1,
// CHECK-SAME: \22eval_batches\22:3,\22eval_every\22:25,\22lr\22:0.001,\22micro\22:2,\22min_lr\22:0.0001,
// CHECK-SAME: \22precision\22:\22fp32\22,\22schedule\22:\22cosine\22,\22seed\22:7,\22seq\22:8,\22steps\22:100,
// CHECK-SAME: \22val\22:[\22/data/run/val.bin\22],\22vocab\22:16,\22warmup\22:10,
// CHECK-SAME: }}\00")
// CHECK-NOT: plan.

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
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
plan.train @t {accumulation = 2 : i64, base_dir = "/data/run", batch = 4 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "ckpt", checkpoint_every = 50 : i64, checkpoint_keep = 2 : i64, clip = 1.0 : f64, data = ["train.bin", "/abs/more.bin"], eps = 1.0e-08 : f64, eval_batches = 3 : i64, eval_every = 25 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule cosine>, mesh = @cpu1, micro = 2 : i64, min_lr = 1.0e-04 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 7 : i64, seq = 8 : i64, shard = {}, steps = 100 : i64, val = ["val.bin"], warmup = 10 : i64, weight_decay = 1.0e-01 : f64}

// -----

// Without accumulation the gradients are added unscaled, and the loss times 1.
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: memref<16xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: memref<3x4xi32>, %{{[^:]*}}: memref<3x4xi32>, %{{[^:]*}}: memref<1xf32>)
// CHECK-NOT: nn.scale
// CHECK: nn.add
// CHECK-NOT: nn.scale
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-LABEL: func.func @planc_update(
// An empty checkpoint directory stays empty; no validation data.
// CHECK: @planc_manifest({{.*}}\22num_floats\22:16,{{.*}}\22checkpoint\22:{\22dir\22:\22\22,\22every\22:0,\22keep\22:0}
// CHECK-SAME: \22val\22:[]

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<4x2xf32> {nn.param = "wte.weight", nn.init = "normal", nn.std = 2.0e-02 : f64})
    -> tensor<f32> attributes {nn.model, nn.vocab = 4 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<4x2xf32>, tensor<?x?xi32>) -> tensor<?x?x2xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @one {accumulation = 1 : i64, base_dir = ".", batch = 3 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 3 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.0 : f64}

// CHAR-LABEL: func.func @planc_grad(
// CHAR-SAME: memref<842496xf32>, %{{[^:]*}}: memref<842496xf32>, %{{[^:]*}}: memref<16x128xi32>, %{{[^:]*}}: memref<16x128xi32>, %{{[^:]*}}: memref<1xf32>)
// CHAR: func.func @planc_update({{.*}}: memref<842496xf32>, {{.*}}: memref<842496xf32>, {{.*}}: memref<842496xf32>, {{.*}}: memref<842496xf32>, {{.*}}: i64, {{.*}}: memref<2xf32>)
// CHAR: func.func @planc_eval({{.*}}: memref<842496xf32>, {{.*}}: memref<16x128xi32>, {{.*}}: memref<16x128xi32>, {{.*}}: memref<1xf32>)
// CHAR: @planc_manifest("{\22format\22:\22planc-train-1\22,\22model\22:\22char_gpt\22,\22num_floats\22:842496,
// CHAR-SAME: \22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[256,128]
// CHAR-SAME: \22name\22:\22h.3.mlp.c_proj.bias\22
// CHAR-SAME: \22name\22:\22ln_f.bias\22
// CHAR-SAME: \22plan\22:\22licenses_char\22
// CHAR-SAME: \22schedule\22:\22cosine\22,\22seed\22:1337,\22seq\22:128,\22steps\22:300
