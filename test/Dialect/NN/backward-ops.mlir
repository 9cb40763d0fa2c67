// Round trip of the backward and optimizer ops, and of add/sub/mul on tensors of any rank.
// RUN: planc-opt %s | planc-opt | FileCheck %s
// RUN: planc-opt %s -mlir-print-op-generic | planc-opt | FileCheck %s

// CHECK-LABEL: func.func @backward
func.func @backward(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x24xf32>, %w: tensor<8x24xf32>,
                    %ids: tensor<2x4xi32>, %g: tensor<8xf32>, %qkv: tensor<2x4x24xf32>,
                    %do: tensor<2x4x8xf32>, %logits: tensor<2x4x16xf32>, %dloss: tensor<f32>,
                    %gqa: tensor<2x4x16xf32>) {
  // CHECK: nn.scale %{{.*}} {factor = -1.000000e+00 : f64} : tensor<2x4x8xf32>
  %s = nn.scale %x {factor = -1.0 : f64} : tensor<2x4x8xf32>
  // CHECK: nn.matmul_wgrad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<8x24xf32>
  %dw = nn.matmul_wgrad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<8x24xf32>
  // CHECK: nn.matmul_wgrad %{{.*}}, %{{.*}} {transpose_w} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<24x8xf32>
  %dwt = nn.matmul_wgrad %x, %dy {transpose_w} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<24x8xf32>
  // CHECK: nn.sum_rows %{{.*}} : tensor<2x4x24xf32> -> tensor<24xf32>
  %db = nn.sum_rows %dy : tensor<2x4x24xf32> -> tensor<24xf32>
  // CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  %dt = nn.embedding_grad %x, %ids : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = nn.layernorm_grad %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %ldx, %ldw, %ldb = nn.layernorm_grad %do, %x, %g {eps = 1.0e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: %{{.*}}, %{{.*}} = nn.rmsnorm_grad %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %rdx, %rdw = nn.rmsnorm_grad %do, %x, %g {eps = 1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: nn.sdpa_grad %{{.*}}, %{{.*}} {causal, heads = 2 : i64, kv_heads = 1 : i64, rope, rope_theta = 5.000000e+05 : f64} : tensor<2x4x8xf32>, tensor<2x4x16xf32>
  %dq = nn.sdpa_grad %do, %gqa {causal, heads = 2 : i64, kv_heads = 1 : i64, rope, rope_theta = 5.0e+05 : f64} : tensor<2x4x8xf32>, tensor<2x4x16xf32>
  // The default rope_theta is elided.
  // CHECK: nn.sdpa_grad %{{.*}}, %{{.*}} {heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  %dq2 = nn.sdpa_grad %do, %qkv {heads = 2 : i64, kv_heads = 2 : i64, rope_theta = 1.0e+04 : f64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  // CHECK: nn.gelu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %gg = nn.gelu_grad %do, %x : tensor<2x4x8xf32>
  // CHECK: nn.silu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %sg = nn.silu_grad %do, %x : tensor<2x4x8xf32>
  // CHECK: nn.relu_grad %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  %rg = nn.relu_grad %do, %x : tensor<2x4x8xf32>
  // CHECK: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>
  %dl = nn.cross_entropy_grad %dloss, %logits, %ids : tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>
  return
}

// The gradients of parameters are summed (tied weights) and scaled with the
// elementwise ops, at the rank of the parameter.
// CHECK-LABEL: func.func @any_rank
func.func @any_rank(%m: tensor<8x24xf32>, %v: tensor<24xf32>, %s: tensor<f32>, %h: tensor<4x4xbf16>) {
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<8x24xf32>
  %a = nn.add %m, %m : tensor<8x24xf32>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : tensor<24xf32>
  %b = nn.sub %v, %v : tensor<24xf32>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : tensor<f32>
  %c = nn.mul %s, %s : tensor<f32>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<4x4xbf16>
  %d = nn.add %h, %h : tensor<4x4xbf16>
  // CHECK: nn.scale %{{.*}} {factor = 2.500000e-01 : f64} : tensor<8x24xf32>
  %e = nn.scale %a {factor = 0.25 : f64} : tensor<8x24xf32>
  return
}

// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%p: tensor<8x24xf32>, %g: tensor<8x24xf32>, %m: tensor<8x24xf32>, %v: tensor<8x24xf32>,
                     %b: tensor<24xf32>, %lr: f64, %scale: f32, %bc1: f64, %bc2: f64) -> f32 {
  // CHECK: nn.sumsq %{{.*}} : tensor<8x24xf32> -> tensor<f32>
  %s1 = nn.sumsq %g : tensor<8x24xf32> -> tensor<f32>
  // CHECK: nn.sumsq %{{.*}} : tensor<24xf32> -> tensor<f32>
  %s2 = nn.sumsq %b : tensor<24xf32> -> tensor<f32>
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = nn.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<8x24xf32>
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %lr, %scale, %bc1, %bc2
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64} : tensor<8x24xf32>
  // CHECK: nn.adamw {{.*}} weight_decay = 0.000000e+00 : f64} : tensor<24xf32>
  %b2, %bm, %bv = nn.adamw %b, %b, %b, %b, %lr, %scale, %bc1, %bc2
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : tensor<24xf32>
  %x = tensor.extract %s1[] : tensor<f32>
  return %x : f32
}

// -----

// nn.round (mixed precision on an f32 target).
// CHECK-LABEL: func.func @round(
// CHECK: nn.round %{{.*}} {to = bf16} : tensor<2x3x8xf32>
// CHECK: nn.round %{{.*}} {to = f16} : tensor<8xf32>
func.func @round(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>) {
  %a = nn.round %x {to = bf16} : tensor<2x3x8xf32>
  %b = nn.round %w {to = f16} : tensor<8xf32>
  return %a, %b : tensor<2x3x8xf32>, tensor<8xf32>
}
