// plan-train-abi: the step functions inlined into planc_grad / planc_sumsq / planc_update /
// planc_eval on flat f32 buffers (sumsq and update on one piece per optimizer group: the
// whole group, or this rank's share of it under ZeRO) and [micro, seq] token buffers, and the
// manifest the runtime and plan-schedule read (groups, mesh, data-parallel size, ZeRO stage).
// The layout (training::layoutOf): the matrices (group "decay") in argument order, then the
// vectors (group "no_decay"), each parameter at a multiple of 16 floats (64 bytes); a
// group's span includes the padding after each of its parameters and is padded to a multiple
// of 16 × the data-parallel size, so that it splits into equal aligned pieces.
// RUN: planc-opt %s -split-input-file -plan-train-step -plan-train-abi -plan-emit-manifest | FileCheck %s
// The stage-grad output of a real plan: 16 × 128 tokens, the stdlib GPT's parameter table.
// RUN: planc emit %examples/licenses_char.plan --stage grad | planc-opt -plan-train-abi -plan-emit-manifest | FileCheck %s --check-prefix=CHAR
// Until plan-emit-manifest writes it, the manifest is a sched.manifest: a dictionary the
// passes after this one read and extend (plan-schedule, plan-memory-plan).
// RUN: planc emit %examples/licenses_char.plan --stage grad | planc-opt -plan-train-abi | FileCheck %s --check-prefix=TYPED
// TYPED: sched.manifest @planc_manifest {format = "planc-train-1", groups = {{\[\[}}0, 835584], [835584, 842496]],
// TYPED-SAME: num_floats = 842496 : i64,
// TYPED-NOT: llvm.mlir.global {{.*}}@planc_manifest
// DDP gradient buckets (the plan's `bucket`, here 256 bytes on the bigram model of
// plan-schedule's inputs): each gradient is added to G right after the op that computes it,
// and planrt_grad_ready(k) follows the last gradient of bucket k; the buckets' ranges cover G.
// RUN: planc emit %S/../Schedule/Inputs/layouts.plan --stage grad --entry ddpb | planc-opt -plan-train-abi -plan-emit-manifest | FileCheck %s --check-prefix=BUCKETS
// ZeRO-3 parameter buckets (128 bytes, the same model): each parameter is read from P right
// before its first reader, and planrt_params_ready(k) precedes the first read of bucket k;
// the gradients are accumulated whole, after the backward pass.
// RUN: planc emit %S/../Schedule/Inputs/layouts.plan --stage grad --entry z3b | planc-opt -plan-train-abi -plan-emit-manifest | FileCheck %s --check-prefix=PREFETCH

// Parameters in argument order: wte.weight 16×8, ln.weight 8, fc.weight 8×8, fc.bias 8.
// "decay": wte.weight 128 floats at 0, fc.weight 64 at 128; [0, 192).
// "no_decay": ln.weight 8 at 192, fc.bias 8 at 208 (200 rounded up to 16 floats), 216
// rounded up to 224; [192, 224), 32 floats.
// Nothing of the plan or of the tensor functions is left.
// CHECK-NOT: plan.
// CHECK-NOT: func.func {{.*}}@{{m|t_forward|t_grad|t_update}}(
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: %[[P:[^:]*]]: memref<224xf32>, %[[G:[^:]*]]: memref<224xf32>, %[[TOK:[^:]*]]: memref<2x8xi32>, %[[TGT:[^:]*]]: memref<2x8xi32>, %[[LOSS:[^:]*]]: memref<1xf32>, %{{[^:]*}}: memref<8xf32>) {
// CHECK-NEXT: %[[T:.*]] = bufferization.to_tensor %[[TOK]] restrict : memref<2x8xi32> to tensor<2x8xi32>
// CHECK-NEXT: %[[Y:.*]] = bufferization.to_tensor %[[TGT]] restrict : memref<2x8xi32> to tensor<2x8xi32>
// Each parameter read from its slice of P, in argument order.
// CHECK-NEXT: %[[SV0:.*]] = memref.subview %[[P]][0] [128] [1] : memref<224xf32> to memref<128xf32, strided<[1]>>
// CHECK-NEXT: %[[F0:.*]] = bufferization.to_tensor %[[SV0]] restrict : memref<128xf32, strided<[1]>> to tensor<128xf32>
// CHECK-NEXT: %[[WTE:.*]] = tensor.expand_shape %[[F0]] {{\[\[}}0, 1]] output_shape [16, 8] : tensor<128xf32> into tensor<16x8xf32>
// CHECK-NEXT: %[[SV1:.*]] = memref.subview %[[P]][192] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 192>>
// CHECK-NEXT: %[[LNW:.*]] = bufferization.to_tensor %[[SV1]] restrict : memref<8xf32, strided<[1], offset: 192>> to tensor<8xf32>
// CHECK-NEXT: %[[SV2:.*]] = memref.subview %[[P]][128] [64] [1] : memref<224xf32> to memref<64xf32, strided<[1], offset: 128>>
// CHECK-NEXT: %[[F2:.*]] = bufferization.to_tensor %[[SV2]] restrict : memref<64xf32, strided<[1], offset: 128>> to tensor<64xf32>
// CHECK-NEXT: %[[FCW:.*]] = tensor.expand_shape %[[F2]] {{\[\[}}0, 1]] output_shape [8, 8] : tensor<64xf32> into tensor<8x8xf32>
// CHECK-NEXT: %[[SV3:.*]] = memref.subview %[[P]][208] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 208>>
// CHECK-NEXT: %[[FCB:.*]] = bufferization.to_tensor %[[SV3]] restrict : memref<8xf32, strided<[1], offset: 208>> to tensor<8xf32>
// The inlined gradient function reads the token tensors and the parameters.
// CHECK-NEXT: nn.embedding %[[WTE]], %[[T]] : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: nn.layernorm %{{.*}}, %[[LNW]] {eps = 1.000000e-05 : f64} : tensor<2x8x8xf32>, tensor<8xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[FCW]] : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: nn.bias_add %{{.*}}, %[[FCB]] : tensor<2x8x8xf32>, tensor<8xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[WTE]] {transpose_w} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[CE:.*]] = nn.cross_entropy %{{.*}}, %[[Y]] : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
// The gradients of fc.bias, fc.weight, ln.weight and the tied table, in reverse order.
// CHECK: %[[DFCB:.*]] = nn.sum_rows %{{.*}} : tensor<2x8x8xf32> -> tensor<8xf32>
// CHECK: %[[DFCW:.*]] = nn.matmul_wgrad %{{.*}}, %{{.*}} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<8x8xf32>
// CHECK: %{{[^,]*}}, %[[DLNW:[^,]*]], %{{[^ ]*}} = nn.layernorm_grad
// CHECK: %[[DWTE:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<16x8xf32>
// G += ∇ / accumulation (2), each parameter's slice read and written in place by one
// elementwise op whose init is the slice itself (no new buffer for the sum), in argument
// order: wte.weight flattened into [0, 128),
// CHECK-NEXT: %[[C0:.*]] = tensor.collapse_shape %[[DWTE]] {{\[\[}}0, 1]] : tensor<16x8xf32> into tensor<128xf32>
// CHECK-NEXT: %[[GS0:.*]] = memref.subview %[[G]][0] [128] [1] : memref<224xf32> to memref<128xf32, strided<[1]>>
// CHECK-NEXT: %[[GO0:.*]] = bufferization.to_tensor %[[GS0]] restrict writable : memref<128xf32, strided<[1]>> to tensor<128xf32>
// CHECK-NEXT: %[[GN0:.*]] = linalg.generic {{.*}} ins(%[[C0]] : tensor<128xf32>) outs(%[[GO0]] : tensor<128xf32>)
// CHECK-NEXT: ^bb0(%[[IN0:.*]]: f32, %[[OUT0:.*]]: f32):
// CHECK-NEXT: %[[K0:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[M0:.*]] = arith.mulf %[[IN0]], %[[K0]] : f32
// CHECK-NEXT: %[[A0:.*]] = arith.addf %[[OUT0]], %[[M0]] : f32
// CHECK-NEXT: linalg.yield %[[A0]] : f32
// CHECK-NEXT: } -> tensor<128xf32>
// CHECK-NEXT: %[[GD0:.*]] = memref.subview %[[G]][0] [128] [1] : memref<224xf32> to memref<128xf32, strided<[1]>>
// CHECK-NEXT: bufferization.materialize_in_destination %[[GN0]] in restrict writable %[[GD0]] : (tensor<128xf32>, memref<128xf32, strided<[1]>>) -> ()
// ln.weight into [192, 200) (a vector needs no reshaping),
// CHECK-NEXT: %[[GS1:.*]] = memref.subview %[[G]][192] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 192>>
// CHECK-NEXT: %[[GO1:.*]] = bufferization.to_tensor %[[GS1]] restrict writable : memref<8xf32, strided<[1], offset: 192>> to tensor<8xf32>
// CHECK-NEXT: %[[GN1:.*]] = linalg.generic {{.*}} ins(%[[DLNW]] : tensor<8xf32>) outs(%[[GO1]] : tensor<8xf32>)
// CHECK: %[[GD1:.*]] = memref.subview %[[G]][192] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 192>>
// CHECK-NEXT: bufferization.materialize_in_destination %[[GN1]] in restrict writable %[[GD1]] : (tensor<8xf32>, memref<8xf32, strided<[1], offset: 192>>) -> ()
// fc.weight into [128, 192),
// CHECK-NEXT: %[[C2:.*]] = tensor.collapse_shape %[[DFCW]] {{\[\[}}0, 1]] : tensor<8x8xf32> into tensor<64xf32>
// CHECK-NEXT: %[[GS2:.*]] = memref.subview %[[G]][128] [64] [1] : memref<224xf32> to memref<64xf32, strided<[1], offset: 128>>
// CHECK-NEXT: %[[GO2:.*]] = bufferization.to_tensor %[[GS2]] restrict writable
// CHECK-NEXT: %[[GN2:.*]] = linalg.generic {{.*}} ins(%[[C2]] : tensor<64xf32>) outs(%[[GO2]] : tensor<64xf32>)
// CHECK: %[[GD2:.*]] = memref.subview %[[G]][128] [64] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[GN2]] in restrict writable %[[GD2]] : (tensor<64xf32>, memref<64xf32, strided<[1], offset: 128>>) -> ()
// fc.bias into [208, 216).
// CHECK-NEXT: %[[GS3:.*]] = memref.subview %[[G]][208] [8] [1] : memref<224xf32> to memref<8xf32, strided<[1], offset: 208>>
// CHECK-NEXT: %[[GO3:.*]] = bufferization.to_tensor %[[GS3]] restrict writable
// CHECK-NEXT: %[[GN3:.*]] = linalg.generic {{.*}} ins(%[[DFCB]] : tensor<8xf32>) outs(%[[GO3]] : tensor<8xf32>)
// CHECK: %[[GD3:.*]] = memref.subview %[[G]][208] [8] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[GN3]] in restrict writable %[[GD3]] : (tensor<8xf32>, memref<8xf32, strided<[1], offset: 208>>) -> ()
// loss += loss / accumulation.
// CHECK-NEXT: %[[L:.*]] = tensor.extract %[[CE]][] : tensor<f32>
// CHECK: %[[OLD:.*]] = memref.load %[[LOSS]][%{{.*}}] : memref<1xf32>
// CHECK: %[[HALF:.*]] = arith.mulf %[[L]], %{{.*}} : f32
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[HALF]] : f32
// CHECK: memref.store %[[NEW]], %[[LOSS]][%{{.*}}] : memref<1xf32>
// CHECK-NEXT: return

// planc_sumsq(G0, G1, stats): stats[6] = the sum of the squares of the two groups' spans
// (here, on one device, each whole group: [0, 192) and [192, 224) passed as their own
// buffers); the padding is zero, so it adds nothing.
// CHECK-LABEL: func.func @planc_sumsq(
// CHECK-SAME: %[[SG0:[^:]*]]: memref<192xf32>, %[[SG1:[^:]*]]: memref<32xf32>, %[[SST:[^:]*]]: memref<8xf32>) {
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[SG0]][0] [192] [1] : memref<192xf32> to memref<192xf32, strided<[1]>>
// CHECK-NEXT: %[[T0:.*]] = bufferization.to_tensor %[[S]] restrict
// CHECK-NEXT: %[[Q0:.*]] = nn.sumsq %[[T0]] : tensor<192xf32> -> tensor<f32>
// CHECK-NEXT: %[[E0:.*]] = tensor.extract %[[Q0]][] : tensor<f32>
// CHECK-NEXT: %[[A0:.*]] = arith.addf %[[Z]], %[[E0]] : f32
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[SG1]][0] [32] [1] : memref<32xf32> to memref<32xf32, strided<[1]>>
// CHECK-NEXT: %[[T1:.*]] = bufferization.to_tensor %[[S]] restrict
// CHECK-NEXT: %[[Q1:.*]] = nn.sumsq %[[T1]] : tensor<32xf32> -> tensor<f32>
// CHECK-NEXT: %[[E1:.*]] = tensor.extract %[[Q1]][] : tensor<f32>
// CHECK-NEXT: %[[A1:.*]] = arith.addf %[[A0]], %[[E1]] : f32
// CHECK-NEXT: %[[C6:.*]] = arith.constant 6 : index
// CHECK-NEXT: memref.store %[[A1]], %[[SST]][%[[C6]]] : memref<8xf32>
// CHECK-NEXT: return

// planc_update(P0, P1, G0, G1, M0, M1, V0, V1, step, stats) reads and writes the two
// groups' pieces (whole groups on one device), whatever the number of parameters; the
// norm comes from stats[6], the global sum of squares, and no sum of squares is left here.
// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: %[[UP0:[^:]*]]: memref<192xf32>, %[[UP1:[^:]*]]: memref<32xf32>, %[[UG0:[^:]*]]: memref<192xf32>, %[[UG1:[^:]*]]: memref<32xf32>,
// CHECK-SAME: %[[UM0:[^:]*]]: memref<192xf32>, %[[UM1:[^:]*]]: memref<32xf32>, %[[UV0:[^:]*]]: memref<192xf32>, %[[UV1:[^:]*]]: memref<32xf32>,
// CHECK-SAME: %[[STEP:[^:]*]]: i64, %[[STATS:[^:]*]]: memref<8xf32>) {
// CHECK-NEXT: %[[C6:.*]] = arith.constant 6 : index
// CHECK-NEXT: %[[SUMSQ:.*]] = memref.load %[[STATS]][%[[C6]]] : memref<8xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UP0]][0] [192] [1] : memref<192xf32> to memref<192xf32, strided<[1]>>
// CHECK-NEXT: %[[P0:.*]] = bufferization.to_tensor %[[S]] restrict : memref<192xf32, strided<[1]>> to tensor<192xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UP1]][0] [32] [1] : memref<32xf32> to memref<32xf32, strided<[1]>>
// CHECK-NEXT: %[[P1:.*]] = bufferization.to_tensor %[[S]] restrict : memref<32xf32, strided<[1]>> to tensor<32xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UG0]][0] [192] [1]
// CHECK-NEXT: %[[G0:.*]] = bufferization.to_tensor %[[S]] restrict : memref<192xf32, strided<[1]>> to tensor<192xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UG1]][0] [32] [1]
// CHECK-NEXT: %[[G1:.*]] = bufferization.to_tensor %[[S]] restrict : memref<32xf32, strided<[1]>> to tensor<32xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UM0]][0] [192] [1]
// CHECK-NEXT: %[[M0:.*]] = bufferization.to_tensor %[[S]] restrict : memref<192xf32, strided<[1]>> to tensor<192xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UM1]][0] [32] [1]
// CHECK-NEXT: %[[M1:.*]] = bufferization.to_tensor %[[S]] restrict : memref<32xf32, strided<[1]>> to tensor<32xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UV0]][0] [192] [1]
// CHECK-NEXT: %[[V0:.*]] = bufferization.to_tensor %[[S]] restrict : memref<192xf32, strided<[1]>> to tensor<192xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UV1]][0] [32] [1]
// CHECK-NEXT: %[[V1:.*]] = bufferization.to_tensor %[[S]] restrict : memref<32xf32, strided<[1]>> to tensor<32xf32>
// CHECK-NEXT: %[[NORM:.*]] = math.sqrt %[[SUMSQ]] : f32
// CHECK-NOT: nn.sumsq
// CHECK: arith.sitofp %[[STEP]] : i64 to f64
// CHECK: %[[LR:.*]] = arith.select
// One AdamW per group; weight decay (0.1) on the matrices' group only.
// CHECK-NOT: nn.adamw
// CHECK: %[[NP0:[^,]*]], %[[NM0:[^,]*]], %[[NV0:[^ ]*]] = nn.adamw %[[P0]], %[[G0]], %[[M0]], %[[V0]], %[[LR]], {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<192xf32>
// CHECK-NEXT: %[[NP1:[^,]*]], %[[NM1:[^,]*]], %[[NV1:[^ ]*]] = nn.adamw %[[P1]], %[[G1]], %[[M1]], %[[V1]], %[[LR]], {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<32xf32>
// Parameters back into P0/P1, first moments into M0/M1, second moments into V0/V1; the
// gradients are only read.
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UP0]][0] [192] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NP0]] in restrict writable %[[D]] : (tensor<192xf32>, memref<192xf32, strided<[1]>>) -> ()
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UP1]][0] [32] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NP1]] in restrict writable %[[D]] : (tensor<32xf32>, memref<32xf32, strided<[1]>>) -> ()
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UM0]][0] [192] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NM0]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UM1]][0] [32] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NM1]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UV0]][0] [192] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NV0]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UV1]][0] [32] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NV1]] in restrict writable %[[D]]
// stats = [grad norm, lr as f32].
// CHECK-NEXT: %{{.*}} = arith.constant 0 : index
// CHECK-NEXT: memref.store %[[NORM]], %[[STATS]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT: %[[LR32:.*]] = arith.truncf %[[LR]] : f64 to f32
// CHECK-NEXT: %{{.*}} = arith.constant 1 : index
// CHECK-NEXT: memref.store %[[LR32]], %[[STATS]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT: return

// planc_eval reads the parameters at the same offsets.
// CHECK-LABEL: func.func @planc_eval(
// CHECK-SAME: %[[EP:[^:]*]]: memref<224xf32>, %[[ETOK:[^:]*]]: memref<2x8xi32>, %[[ETGT:[^:]*]]: memref<2x8xi32>, %[[ELOSS:[^:]*]]: memref<1xf32>) {
// CHECK-NEXT: bufferization.to_tensor %[[ETOK]] restrict
// CHECK-NEXT: bufferization.to_tensor %[[ETGT]] restrict
// CHECK-NEXT: memref.subview %[[EP]][0] [128] [1]
// CHECK: memref.subview %[[EP]][192] [8] [1]
// CHECK: memref.subview %[[EP]][128] [64] [1]
// CHECK: memref.subview %[[EP]][208] [8] [1]
// CHECK-NOT: _grad
// CHECK-NOT: nn.adamw
// CHECK: %[[EL:.*]] = nn.cross_entropy
// CHECK-NOT: nn.cross_entropy_grad
// CHECK: %[[E:.*]] = tensor.extract %[[EL]][] : tensor<f32>
// CHECK: memref.store %[[E]], %[[ELOSS]][%{{.*}}] : memref<1xf32>
// CHECK: return

// The manifest: the groups' spans, the mesh (one device; data over "dp"), parameter table
// in argument order with the offsets above, data paths resolved against the plan's
// directory (absolute ones kept), batch, schedule, checkpoints, data-parallel size and ZeRO
// stage; NUL-terminated.
// CHECK: llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,192],[192,224]],
// CHECK-SAME: \22mesh\22:{\22axes\22:[\22dp\22],\22data\22:[\22dp\22],\22name\22:\22cpu1\22,\22per_node\22:1,\22sizes\22:[1],\22tensor\22:\22\22},\22model\22:\22m\22,\22num_floats\22:224,
// CHECK-SAME: \22params\22:[{\22count\22:128,\22init\22:\22normal\22,\22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[16,8],\22std\22:0.02},
// CHECK-SAME: {\22count\22:8,\22init\22:\22ones\22,\22name\22:\22ln.weight\22,\22offset\22:192,\22shape\22:[8],\22std\22:0},
// CHECK-SAME: {\22count\22:64,\22init\22:\22normal\22,\22name\22:\22fc.weight\22,\22offset\22:128,\22shape\22:[8,8],\22std\22:0.01},
// CHECK-SAME: {\22count\22:8,\22init\22:\22zeros\22,\22name\22:\22fc.bias\22,\22offset\22:208,\22shape\22:[8],\22std\22:0}],
// CHECK-SAME: \22plan\22:\22t\22,
// CHECK-SAME: \22accumulation\22:2,\22batch\22:4,
// CHECK-SAME: \22checkpoint\22:{\22dir\22:\22/data/run/ckpt\22,\22every\22:50,\22keep\22:2},\22clip\22:1,
// CHECK-SAME: \22data\22:[\22/data/run/train.bin\22,\22/abs/more.bin\22],\22data_parallel\22:1,
// CHECK-SAME: \22eval_batches\22:3,\22eval_every\22:25,\22loss_scale\22:{\22init\22:1,\22kind\22:\22none\22},\22lr\22:0.001,\22micro\22:2,\22min_lr\22:0.0001,
// CHECK-SAME: \22precision\22:\22fp32\22,\22schedule\22:\22cosine\22,\22seed\22:7,\22seq\22:8,\22sequence_parallel\22:false,\22steps\22:100,
// CHECK-SAME: \22val\22:[\22/data/run/val.bin\22],\22vocab\22:16,\22warmup\22:10,\22weight_decay\22:0.10000000000000001,\22zero\22:0
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

// Without accumulation the gradients are added unscaled, and the loss times 1. One 4×2
// matrix and no vector: 8 floats padded to 16, the "decay" group alone.
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: memref<16xf32>, %[[G:[^:]*]]: memref<16xf32>, %{{[^:]*}}: memref<3x4xi32>, %{{[^:]*}}: memref<3x4xi32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<8xf32>)
// CHECK-NOT: nn.scale
// CHECK: %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<4x2xf32> into tensor<8xf32>
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[G]][0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[S]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<8xf32>) outs(%[[O]] : tensor<8xf32>)
// CHECK-NOT: arith.mulf
// CHECK: %[[D:.*]] = memref.subview %[[G]][0] [8] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]]
// CHECK-NOT: nn.scale
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// The one group is the whole buffer; the empty "no_decay" group keeps its place in the
// signatures as a 0-float piece (the runtime passes eight pieces whatever the model), and
// nothing reads or writes it. Weight decay 0 as the plan says.
// CHECK-LABEL: func.func @planc_sumsq(
// CHECK-SAME: %[[SG0:[^:]*]]: memref<16xf32>, %[[SG1:[^:]*]]: memref<0xf32>, %{{[^:]*}}: memref<8xf32>) {
// CHECK: memref.subview %[[SG0]][0] [16] [1]
// CHECK: nn.sumsq %{{.*}} : tensor<16xf32> -> tensor<f32>
// CHECK-NOT: nn.sumsq
// CHECK-NOT: %[[SG1]]
// CHECK: return
// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: %[[UP:[^:]*]]: memref<16xf32>, %[[UP1:[^:]*]]: memref<0xf32>, %[[UG:[^:]*]]: memref<16xf32>, %[[UG1:[^:]*]]: memref<0xf32>,
// CHECK-SAME: %[[UM:[^:]*]]: memref<16xf32>, %[[UM1:[^:]*]]: memref<0xf32>, %[[UV:[^:]*]]: memref<16xf32>, %[[UV1:[^:]*]]: memref<0xf32>,
// CHECK-NEXT: arith.constant 6 : index
// CHECK-NEXT: memref.load
// CHECK-NEXT: memref.subview %[[UP]][0] [16] [1] : memref<16xf32> to memref<16xf32, strided<[1]>>
// CHECK-NEXT: bufferization.to_tensor
// CHECK-NEXT: memref.subview %[[UG]][0] [16] [1]
// CHECK-NEXT: bufferization.to_tensor
// CHECK-NEXT: memref.subview %[[UM]][0] [16] [1]
// CHECK-NEXT: bufferization.to_tensor
// CHECK-NEXT: memref.subview %[[UV]][0] [16] [1]
// CHECK-NEXT: bufferization.to_tensor
// CHECK-NOT: memref.subview
// CHECK-NOT: nn.sumsq
// CHECK: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<16xf32>
// CHECK-NOT: nn.adamw
// CHECK: memref.subview %[[UP]][0] [16] [1]
// CHECK: memref.subview %[[UM]][0] [16] [1]
// CHECK: memref.subview %[[UV]][0] [16] [1]
// CHECK-NOT: memref.subview
// CHECK: return
// An empty checkpoint directory stays empty; no validation data; group 1 is the empty span
// [16, 16).
// CHECK: @planc_manifest({{.*}}\22groups\22:{{\[\[}}0,16],[16,16]],{{.*}}\22num_floats\22:16,\22params\22:[{\22count\22:8,{{.*}}\22offset\22:0,\22shape\22:[4,2],
// CHECK-SAME: \22checkpoint\22:{\22dir\22:\22\22,\22every\22:0,\22keep\22:0}
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

// -----

// Sizes that are not multiples of 16, a vector first in argument order, and weight decay
// 0.05. "decay": wte.weight 15 floats at 0, fc1.weight 21 at 16, fc2.weight 21 at 48
// (37 rounded up), ending at 80 (69 rounded up). "no_decay": ln.weight 3 at 80,
// fc1.bias 7 at 96 (83 rounded up), fc2.bias 3 at 112 (103 rounded up), ending at 128
// (115 rounded up): [80, 128), 48 floats.
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: %[[P:[^:]*]]: memref<128xf32>, %[[G:[^:]*]]: memref<128xf32>, %{{[^:]*}}: memref<1x2xi32>
// CHECK: memref.subview %[[P]][80] [3] [1] : memref<128xf32> to memref<3xf32, strided<[1], offset: 80>>
// CHECK: memref.subview %[[P]][0] [15] [1] : memref<128xf32> to memref<15xf32, strided<[1]>>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [5, 3] : tensor<15xf32> into tensor<5x3xf32>
// CHECK: memref.subview %[[P]][16] [21] [1] : memref<128xf32> to memref<21xf32, strided<[1], offset: 16>>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [3, 7] : tensor<21xf32> into tensor<3x7xf32>
// CHECK: memref.subview %[[P]][96] [7] [1] : memref<128xf32> to memref<7xf32, strided<[1], offset: 96>>
// CHECK: memref.subview %[[P]][48] [21] [1] : memref<128xf32> to memref<21xf32, strided<[1], offset: 48>>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [7, 3] : tensor<21xf32> into tensor<7x3xf32>
// CHECK: memref.subview %[[P]][112] [3] [1] : memref<128xf32> to memref<3xf32, strided<[1], offset: 112>>
// Each gradient written into its own slice of G, padding untouched.
// CHECK: %[[R:.*]] = memref.subview %[[G]][80] [3] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<3xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][80] [3] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<3xf32>, memref<3xf32, strided<[1], offset: 80>>) -> ()
// CHECK: %[[R:.*]] = memref.subview %[[G]][0] [15] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<15xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][0] [15] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<15xf32>, memref<15xf32, strided<[1]>>) -> ()
// CHECK: %[[R:.*]] = memref.subview %[[G]][16] [21] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<21xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][16] [21] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<21xf32>, memref<21xf32, strided<[1], offset: 16>>) -> ()
// CHECK: %[[R:.*]] = memref.subview %[[G]][96] [7] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<7xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][96] [7] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<7xf32>, memref<7xf32, strided<[1], offset: 96>>) -> ()
// CHECK: %[[R:.*]] = memref.subview %[[G]][48] [21] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<21xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][48] [21] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<21xf32>, memref<21xf32, strided<[1], offset: 48>>) -> ()
// CHECK: %[[R:.*]] = memref.subview %[[G]][112] [3] [1]
// CHECK-NEXT: %[[O:.*]] = bufferization.to_tensor %[[R]] restrict writable
// CHECK-NEXT: %[[N:.*]] = linalg.generic {{.*}} outs(%[[O]] : tensor<3xf32>)
// CHECK: %[[D:.*]] = memref.subview %[[G]][112] [3] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[N]] in restrict writable %[[D]] : (tensor<3xf32>, memref<3xf32, strided<[1], offset: 112>>) -> ()
// CHECK-NOT: bufferization.materialize_in_destination
// CHECK: return
// The sum of squares and the update on the groups' spans [0, 80) and [80, 128).
// CHECK-LABEL: func.func @planc_sumsq(
// CHECK-SAME: %{{[^:]*}}: memref<80xf32>, %{{[^:]*}}: memref<48xf32>, %{{[^:]*}}: memref<8xf32>) {
// CHECK: nn.sumsq %{{.*}} : tensor<80xf32> -> tensor<f32>
// CHECK: nn.sumsq %{{.*}} : tensor<48xf32> -> tensor<f32>
// CHECK-NOT: nn.sumsq
// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: %[[UP0:[^:]*]]: memref<80xf32>, %[[UP1:[^:]*]]: memref<48xf32>, %[[UG0:[^:]*]]: memref<80xf32>, %[[UG1:[^:]*]]: memref<48xf32>,
// CHECK-SAME: %[[UM0:[^:]*]]: memref<80xf32>, %[[UM1:[^:]*]]: memref<48xf32>, %[[UV0:[^:]*]]: memref<80xf32>, %[[UV1:[^:]*]]: memref<48xf32>,
// CHECK-NEXT: arith.constant 6 : index
// CHECK-NEXT: memref.load
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UP0]][0] [80] [1] : memref<80xf32> to memref<80xf32, strided<[1]>>
// CHECK-NEXT: %[[P0:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UP1]][0] [48] [1] : memref<48xf32> to memref<48xf32, strided<[1]>>
// CHECK-NEXT: %[[P1:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UG0]][0] [80] [1]
// CHECK-NEXT: %[[G0:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UG1]][0] [48] [1]
// CHECK-NEXT: %[[G1:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UM0]][0] [80] [1]
// CHECK-NEXT: %[[M0:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UM1]][0] [48] [1]
// CHECK-NEXT: %[[M1:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UV0]][0] [80] [1]
// CHECK-NEXT: %[[V0:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NEXT: %[[S:.*]] = memref.subview %[[UV1]][0] [48] [1]
// CHECK-NEXT: %[[V1:.*]] = bufferization.to_tensor %[[S]]
// CHECK-NOT: nn.sumsq
// CHECK-NOT: nn.adamw
// CHECK: %[[NP0:[^,]*]], %[[NM0:[^,]*]], %[[NV0:[^ ]*]] = nn.adamw %[[P0]], %[[G0]], %[[M0]], %[[V0]], {{.*}}weight_decay = 5.000000e-02 : f64} : tensor<80xf32>
// CHECK-NEXT: %[[NP1:[^,]*]], %[[NM1:[^,]*]], %[[NV1:[^ ]*]] = nn.adamw %[[P1]], %[[G1]], %[[M1]], %[[V1]], {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<48xf32>
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UP0]][0] [80] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NP0]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UP1]][0] [48] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NP1]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UM0]][0] [80] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NM0]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UM1]][0] [48] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NM1]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UV0]][0] [80] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NV0]] in restrict writable %[[D]]
// CHECK-NEXT: %[[D:.*]] = memref.subview %[[UV1]][0] [48] [1]
// CHECK-NEXT: bufferization.materialize_in_destination %[[NV1]] in restrict writable %[[D]]
// The manifest: the groups' spans, argument order, each parameter's offset and count (no
// padding).
// CHECK: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,80],[80,128]],{{.*}}\22model\22:\22mlp\22,\22num_floats\22:128,
// CHECK-SAME: \22params\22:[{\22count\22:3,\22init\22:\22ones\22,\22name\22:\22ln.weight\22,\22offset\22:80,\22shape\22:[3],\22std\22:0},
// CHECK-SAME: {\22count\22:15,\22init\22:\22normal\22,\22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[5,3],\22std\22:0.02},
// CHECK-SAME: {\22count\22:21,\22init\22:\22normal\22,\22name\22:\22fc1.weight\22,\22offset\22:16,\22shape\22:[3,7],\22std\22:0.02},
// CHECK-SAME: {\22count\22:7,\22init\22:\22zeros\22,\22name\22:\22fc1.bias\22,\22offset\22:96,\22shape\22:[7],\22std\22:0},
// CHECK-SAME: {\22count\22:21,\22init\22:\22normal\22,\22name\22:\22fc2.weight\22,\22offset\22:48,\22shape\22:[7,3],\22std\22:0.01},
// CHECK-SAME: {\22count\22:3,\22init\22:\22zeros\22,\22name\22:\22fc2.bias\22,\22offset\22:112,\22shape\22:[3],\22std\22:0}],

plan.mesh @cpu1 {axes = [#plan.axis<"dp", 1>], devices_per_node = 1 : i64, kind = #plan<device_kind cpu>, nodes = 1 : i64}
func.func @mlp(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
               %g: tensor<3xf32> {nn.param = "ln.weight", nn.init = "ones", nn.std = 0.0 : f64},
               %wte: tensor<5x3xf32> {nn.param = "wte.weight", nn.init = "normal", nn.std = 2.0e-02 : f64},
               %w1: tensor<3x7xf32> {nn.param = "fc1.weight", nn.init = "normal", nn.std = 2.0e-02 : f64},
               %b1: tensor<7xf32> {nn.param = "fc1.bias", nn.init = "zeros", nn.std = 0.0 : f64},
               %w2: tensor<7x3xf32> {nn.param = "fc2.weight", nn.init = "normal", nn.std = 1.0e-02 : f64},
               %b2: tensor<3xf32> {nn.param = "fc2.bias", nn.init = "zeros", nn.std = 0.0 : f64})
    -> tensor<f32> attributes {nn.model, nn.vocab = 5 : i64} {
  %x = nn.embedding %wte, %tok : (tensor<5x3xf32>, tensor<?x?xi32>) -> tensor<?x?x3xf32>
  %n = nn.layernorm %x, %g {eps = 1.0e-05 : f64} : tensor<?x?x3xf32>, tensor<3xf32>
  %h0 = nn.matmul %n, %w1 : (tensor<?x?x3xf32>, tensor<3x7xf32>) -> tensor<?x?x7xf32>
  %h = nn.bias_add %h0, %b1 : tensor<?x?x7xf32>, tensor<7xf32>
  %y0 = nn.matmul %h, %w2 : (tensor<?x?x7xf32>, tensor<7x3xf32>) -> tensor<?x?x3xf32>
  %y = nn.bias_add %y0, %b2 : tensor<?x?x3xf32>, tensor<3xf32>
  %l = nn.matmul %y, %wte {transpose_w} : (tensor<?x?x3xf32>, tensor<5x3xf32>) -> tensor<?x?x5xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<?x?x5xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
plan.train @odd {accumulation = 1 : i64, base_dir = ".", batch = 1 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 0.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu1, micro = 1 : i64, min_lr = 0.0 : f64, model = @mlp, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 2 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 5.0e-02 : f64}

// -----

// Data parallel over 4 ranks, DDP (zero 0), accumulation 2: the model of the first case,
// each group padded to a multiple of 16 × 4 = 64 floats so that it splits into 4 aligned
// pieces. "decay": wte.weight at 0, fc.weight at 128, 192 floats (already 3 × 64).
// "no_decay": ln.weight at 192, fc.bias at 208, 216 rounded up to 192 + 64 = 256.
// Each rank's gradient is pre-divided by accumulation × data-parallel size = 2 × 4, so that
// the sum over the ranks (the schedule's all-reduce) is the mean over the global batch; the
// loss only by the accumulation (the schedule averages it over the ranks).
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: memref<256xf32>, %{{[^:]*}}: memref<256xf32>, %{{[^:]*}}: memref<1x4xi32>, %{{[^:]*}}: memref<1x4xi32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<8xf32>)
// CHECK: memref.subview %{{.*}}[0] [128] [1]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<128xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.constant 1.250000e-01 : f32
// CHECK: memref.subview %{{.*}}[192] [8] [1]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.constant 1.250000e-01 : f32
// CHECK: memref.subview %{{.*}}[128] [64] [1]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<64xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.constant 1.250000e-01 : f32
// CHECK: memref.subview %{{.*}}[208] [8] [1]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.constant 1.250000e-01 : f32
// CHECK-NOT: nn.scale
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: arith.mulf %{{.*}}, %[[HALF]] : f32
// CHECK: return
// Without ZeRO every rank updates the whole groups (padding included).
// CHECK-LABEL: func.func @planc_sumsq(
// CHECK-SAME: memref<192xf32>, %{{[^:]*}}: memref<64xf32>, %{{[^:]*}}: memref<8xf32>)
// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: memref<192xf32>, %{{[^:]*}}: memref<64xf32>, %{{[^:]*}}: memref<192xf32>, %{{[^:]*}}: memref<64xf32>, %{{[^:]*}}: memref<192xf32>, %{{[^:]*}}: memref<64xf32>, %{{[^:]*}}: memref<192xf32>, %{{[^:]*}}: memref<64xf32>, %{{[^:]*}}: i64, %{{[^:]*}}: memref<8xf32>)
// CHECK: nn.adamw {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<192xf32>
// CHECK-NEXT: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<64xf32>
// CHECK-LABEL: func.func @planc_eval(
// CHECK-SAME: memref<256xf32>
// The manifest: the padded groups, the 4-rank mesh, data_parallel 4 and zero 0.
// CHECK: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,192],[192,256]],
// CHECK-SAME: \22mesh\22:{\22axes\22:[\22dp\22],\22data\22:[\22dp\22],\22name\22:\22cpu4\22,\22per_node\22:4,\22sizes\22:[4],\22tensor\22:\22\22},\22model\22:\22m\22,\22num_floats\22:256,
// CHECK-SAME: \22accumulation\22:2,\22batch\22:8,
// CHECK-SAME: \22data_parallel\22:4,
// CHECK-SAME: \22zero\22:0}}\00")

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
plan.train @t {accumulation = 2 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 1.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 0, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.1 : f64}

// -----

// The same with ZeRO-1: the flat layout and the gradient scaling are the same, but each rank
// updates only its piece of each group: 192 / 4 = 48 floats of "decay", 64 / 4 = 16 of
// "no_decay" (the schedule scatters the gradients into, and gathers the parameters from,
// these pieces).
// CHECK-LABEL: func.func @planc_grad(
// CHECK-SAME: memref<256xf32>, %{{[^:]*}}: memref<256xf32>,
// CHECK-COUNT-4: arith.constant 1.250000e-01 : f32
// CHECK-NOT: arith.constant 1.250000e-01 : f32
// CHECK-LABEL: func.func @planc_sumsq(
// CHECK-SAME: %[[G0:[^:]*]]: memref<48xf32>, %[[G1:[^:]*]]: memref<16xf32>, %{{[^:]*}}: memref<8xf32>)
// CHECK: memref.subview %[[G0]][0] [48] [1]
// CHECK: nn.sumsq %{{.*}} : tensor<48xf32> -> tensor<f32>
// CHECK: memref.subview %[[G1]][0] [16] [1]
// CHECK: nn.sumsq %{{.*}} : tensor<16xf32> -> tensor<f32>
// CHECK-LABEL: func.func @planc_update(
// CHECK-SAME: memref<48xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: memref<48xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: memref<48xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: memref<48xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: i64, %{{[^:]*}}: memref<8xf32>)
// CHECK-NOT: nn.sumsq
// CHECK: nn.adamw {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<48xf32>
// CHECK-NEXT: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<16xf32>
// Evaluation reads the full parameters.
// CHECK-LABEL: func.func @planc_eval(
// CHECK-SAME: memref<256xf32>
// CHECK: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,192],[192,256]],
// CHECK-SAME: \22num_floats\22:256,
// CHECK-SAME: \22data_parallel\22:4,
// CHECK-SAME: \22zero\22:1}}\00")

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
plan.train @t {accumulation = 2 : i64, base_dir = ".", batch = 8 : i64, beta1 = 9.0e-01 : f64, beta2 = 9.5e-01 : f64, checkpoint_dir = "", checkpoint_every = 0 : i64, checkpoint_keep = 0 : i64, clip = 1.0 : f64, data = ["x.bin"], eps = 1.0e-08 : f64, eval_batches = 0 : i64, eval_every = 0 : i64, loss_scale = #plan<loss_scale none>, lr = 1.0e-03 : f64, lr_schedule = #plan<lr_schedule constant>, mesh = @cpu4, micro = 1 : i64, min_lr = 0.0 : f64, model = @m, parallel = #plan.parallel<data = ["dp"], zero = 1, tensor = "", pipeline = "", stages = 1, schedule = one_f_one_b, sequence = false, replicate = []>, precision = #plan<precision fp32>, recompute = #plan<recompute none>, seed = 0 : i64, seq = 4 : i64, shard = {}, steps = 1 : i64, val = [], warmup = 0 : i64, weight_decay = 0.1 : f64}

// CHAR-LABEL: func.func @planc_grad(
// CHAR-SAME: memref<842496xf32>, %{{[^:]*}}: memref<842496xf32>, %{{[^:]*}}: memref<16x128xi32>, %{{[^:]*}}: memref<16x128xi32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<8xf32>)
// The 2 embedding tables and 4 × 4 weight matrices (835584 floats) decay, the 34 vectors
// (6912 floats, every size a multiple of 16) do not: planc_sumsq and planc_update take one
// piece per group (each whole group on one device).
// CHAR: func.func @planc_sumsq(%{{[^:]*}}: memref<835584xf32>, %{{[^:]*}}: memref<6912xf32>, %{{[^:]*}}: memref<8xf32>)
// CHAR: func.func @planc_update(%[[CP0:[^:]*]]: memref<835584xf32>, %[[CP1:[^:]*]]: memref<6912xf32>, {{.*}}: memref<835584xf32>, {{.*}}: memref<6912xf32>, {{.*}}: memref<835584xf32>, {{.*}}: memref<6912xf32>, {{.*}}: memref<835584xf32>, {{.*}}: memref<6912xf32>, {{.*}}: i64, {{.*}}: memref<8xf32>)
// CHAR: memref.subview %[[CP0]][0] [835584] [1]
// CHAR-NEXT: bufferization.to_tensor
// CHAR-NEXT: memref.subview %[[CP1]][0] [6912] [1]
// CHAR: nn.adamw {{.*}}weight_decay = 1.000000e-01 : f64} : tensor<835584xf32>
// CHAR-NEXT: nn.adamw {{.*}}weight_decay = 0.000000e+00 : f64} : tensor<6912xf32>
// CHAR: func.func @planc_eval({{.*}}: memref<842496xf32>, {{.*}}: memref<16x128xi32>, {{.*}}: memref<16x128xi32>, {{.*}}: memref<1xf32>)
// CHAR: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,835584],[835584,842496]],
// CHAR-SAME: \22mesh\22:{\22axes\22:[\22dp\22],\22data\22:[\22dp\22],\22name\22:\22cpu1\22,\22per_node\22:1,\22sizes\22:[1],\22tensor\22:\22\22},\22model\22:\22char_gpt\22,\22num_floats\22:842496,
// CHAR-SAME: \22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[256,128]
// CHAR-SAME: \22name\22:\22wpe.weight\22,\22offset\22:32768,\22shape\22:[128,128]
// CHAR-SAME: \22name\22:\22h.0.ln_1.weight\22,\22offset\22:835584,\22shape\22:[128]
// CHAR-SAME: \22name\22:\22h.0.attn.c_attn.weight\22,\22offset\22:49152,\22shape\22:[128,384]
// CHAR-SAME: \22name\22:\22h.3.mlp.c_proj.bias\22
// CHAR-SAME: \22name\22:\22ln_f.bias\22
// CHAR-SAME: \22plan\22:\22licenses_char\22
// CHAR-SAME: \22schedule\22:\22cosine\22,\22seed\22:1337,\22seq\22:128,\22sequence_parallel\22:false,\22steps\22:300

// BUCKETS: func.func private @planrt_grad_ready(i64)
// BUCKETS-LABEL: func.func @planc_grad(
// BUCKETS-SAME: plan.grad_buckets = [array<i64: 48, 80, 160, 32>, array<i64: 0, 48, 128, 32>]
// BUCKETS: nn.cross_entropy_grad
// BUCKETS: bufferization.materialize_in_destination %{{.*}} in restrict writable %{{.*}} : (tensor<10xf32>, memref<10xf32, strided<[1], offset: 160>>) -> ()
// BUCKETS: nn.matmul_wgrad
// BUCKETS: bufferization.materialize_in_destination %{{.*}} in restrict writable %{{.*}} : (tensor<40xf32>, memref<40xf32, strided<[1], offset: 48>>) -> ()
// BUCKETS-NEXT: %[[K0:.*]] = arith.constant 0 : i64
// BUCKETS-NEXT: call @planrt_grad_ready(%[[K0]]) : (i64) -> ()
// BUCKETS-NEXT: nn.layernorm_grad
// BUCKETS: offset: 128>>) -> ()
// BUCKETS: offset: 144>>) -> ()
// BUCKETS-NEXT: nn.embedding_grad
// BUCKETS: bufferization.materialize_in_destination %{{.*}} in restrict writable %{{.*}} : (tensor<40xf32>, memref<40xf32, strided<[1]>>) -> ()
// BUCKETS-NEXT: %[[K1:.*]] = arith.constant 1 : i64
// BUCKETS-NEXT: call @planrt_grad_ready(%[[K1]]) : (i64) -> ()
// BUCKETS-NOT: planrt_grad_ready
// BUCKETS: return

// PREFETCH: func.func private @planrt_params_ready(i64)
// PREFETCH: func.func private @planrt_params_release(i64)
// PREFETCH-LABEL: func.func @planc_grad(
// PREFETCH-SAME: %[[P:[^:]*]]: memref<192xf32>
// PREFETCH-SAME: plan.param_buckets = [array<i64: 0, 48>, array<i64: 128, 32>, array<i64: 48, 80>, array<i64: 160, 32>]
// PREFETCH-SAME: plan.param_regather = [2, 1, 0, 3]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: %[[K0:.*]] = arith.constant 0 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K0]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][0] [40] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: tensor.expand_shape
// PREFETCH-NEXT: nn.embedding
// Each bucket is released after the forward pass's last read of it.
// PREFETCH-NEXT: %[[R0:.*]] = arith.constant 0 : i64
// PREFETCH-NEXT: call @planrt_params_release(%[[R0]]) : (i64) -> ()
// PREFETCH-NEXT: %[[K1:.*]] = arith.constant 1 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K1]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][128] [4] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: memref.subview %[[P]][144] [4] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: %[[LN:.*]] = nn.layernorm
// PREFETCH-NEXT: arith.constant 1 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NEXT: %[[K2:.*]] = arith.constant 2 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K2]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][48] [40] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: tensor.expand_shape
// PREFETCH-NEXT: nn.matmul
// PREFETCH-NEXT: arith.constant 2 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NEXT: %[[K3:.*]] = arith.constant 3 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K3]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][160] [10] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: nn.bias_add
// The bias_add's result has one use, but a call (the cross-entropy), which elementwise
// fusion does not merge it into: the bucket is released right after it.
// PREFETCH-NEXT: arith.constant 3 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NEXT: nn.cross_entropy
// The backward pass gathers the head's weight again (bucket 4) and reads it from P anew,
// then the layer norm's (bucket 5); wte and the head's bias, which it does not read, come
// last (buckets 6 and 7), gathered and released at once. The gradients go to G bucket by
// bucket between them (planrt_grad_ready).
// PREFETCH: call @planrt_grad_ready
// PREFETCH-NEXT: %[[K4:.*]] = arith.constant 4 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K4]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][48] [40] [1]
// PREFETCH-NEXT: bufferization.to_tensor
// PREFETCH-NEXT: %[[W:.*]] = tensor.expand_shape
// PREFETCH-NEXT: nn.matmul %{{.*}}, %[[W]] {transpose_w}
// PREFETCH-NEXT: arith.constant 4 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NEXT: nn.matmul_wgrad
// PREFETCH: call @planrt_grad_ready
// PREFETCH-NEXT: %[[K5:.*]] = arith.constant 5 : i64
// PREFETCH-NEXT: call @planrt_params_ready(%[[K5]]) : (i64) -> ()
// PREFETCH-NEXT: memref.subview %[[P]][128] [4] [1]
// PREFETCH-NEXT: %[[G:.*]] = bufferization.to_tensor
// PREFETCH-NEXT: nn.layernorm_grad %{{.*}}, %{{.*}}, %[[G]]
// PREFETCH-NOT: memref.subview %[[P]]
// PREFETCH: arith.constant 5 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NOT: memref.subview %[[P]]
// PREFETCH: arith.constant 6 : i64
// PREFETCH-NEXT: call @planrt_params_ready
// PREFETCH-NEXT: arith.constant 6 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NEXT: arith.constant 7 : i64
// PREFETCH-NEXT: call @planrt_params_ready
// PREFETCH-NEXT: arith.constant 7 : i64
// PREFETCH-NEXT: call @planrt_params_release
// PREFETCH-NOT: planrt_params
// PREFETCH-NOT: memref.subview %[[P]]
// PREFETCH: return
