// plan-gemm-precision: under mixed precision (the program has nn.round), a GEMM whose
// two operands are results of nn.round to bf16 (fp16) is marked "bf16" ("f16": tensor
// cores lose nothing converting them); any other GEMM of the program "tf32" (an operand
// a collective produced, a sum, a function argument, two different types). An attention
// (nn.sdpa, nn.sdpa_grad) whose operands are all results of nn.round to bf16 is marked
// "bf16" (its products on bf16 tensor cores); any other stays unmarked (fp32 products).
// A program without nn.round (fp32) is left unmarked: its GEMMs stay fp32.
// RUN: planc-opt %s -split-input-file -plan-gemm-precision | FileCheck %s

// CHECK-LABEL: func.func @bf16(
func.func @bf16(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %dy: tensor<2x8x32xf32>)
    -> (tensor<2x8x32xf32>, tensor<16x32xf32>, tensor<2x8x32xf32>, tensor<16x32xf32>) {
  %xr = nn.round %x {to = bf16} : tensor<2x8x16xf32>
  %wr = nn.round %w {to = bf16} : tensor<16x32xf32>
  %dyr = nn.round %dy {to = bf16} : tensor<2x8x32xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {plan.gemm_precision = "bf16"}
  %y = nn.matmul %xr, %wr : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: nn.matmul_wgrad %{{.*}}, %{{.*}} {plan.gemm_precision = "bf16"}
  %dw = nn.matmul_wgrad %xr, %dyr : (tensor<2x8x16xf32>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
  // The unrounded argument: TF32.
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {plan.gemm_precision = "tf32"}
  %y2 = nn.matmul %x, %wr : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  // A sum of two rounded gradients is not itself a bf16 value: TF32.
  %sum = nn.add %dyr, %dyr : tensor<2x8x32xf32>
  // CHECK: nn.matmul_wgrad %{{.*}}, %{{.*}} {plan.gemm_precision = "tf32"}
  %dw2 = nn.matmul_wgrad %xr, %sum : (tensor<2x8x16xf32>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
  return %y, %dw, %y2, %dw2 : tensor<2x8x32xf32>, tensor<16x32xf32>, tensor<2x8x32xf32>, tensor<16x32xf32>
}

// -----

// CHECK-LABEL: func.func @f16(
func.func @f16(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  %xr = nn.round %x {to = f16} : tensor<2x8x16xf32>
  %wr = nn.round %w {to = f16} : tensor<32x16xf32>
  %wb = nn.round %w {to = bf16} : tensor<32x16xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {plan.gemm_precision = "f16", transpose_w}
  %y = nn.matmul %xr, %wr {transpose_w} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  // Exact in two different types: TF32.
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {plan.gemm_precision = "tf32", transpose_w}
  %y2 = nn.matmul %xr, %wb {transpose_w} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  return %y, %y2 : tensor<2x8x32xf32>, tensor<2x8x32xf32>
}

// -----

// CHECK-LABEL: func.func @attention(
func.func @attention(%qkv: tensor<1x4x48xf32>, %dy: tensor<1x4x16xf32>)
    -> (tensor<1x4x16xf32>, tensor<1x4x48xf32>, tensor<1x4x48xf32>, tensor<1x4x16xf32>) {
  %q = nn.round %qkv {to = bf16} : tensor<1x4x48xf32>
  %d = nn.round %dy {to = bf16} : tensor<1x4x16xf32>
  %h = nn.round %qkv {to = f16} : tensor<1x4x48xf32>
  // CHECK: nn.sdpa %{{.*}} {causal, heads = 2 : i64, kv_heads = 2 : i64, plan.gemm_precision = "bf16"}
  %y = nn.sdpa %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>
  // CHECK: nn.sdpa_grad %{{.*}}, %{{.*}} {causal, heads = 2 : i64, kv_heads = 2 : i64, plan.gemm_precision = "bf16"}
  %g = nn.sdpa_grad %d, %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x4x16xf32>, tensor<1x4x48xf32>
  // An unrounded gradient: fp32's products.
  // CHECK: nn.sdpa_grad %{{.*}}, %{{.*}} {causal, heads = 2 : i64, kv_heads = 2 : i64} :
  %g2 = nn.sdpa_grad %dy, %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x4x16xf32>, tensor<1x4x48xf32>
  // fp16 operands: fp32's products too (bf16 would lose their low bits).
  // CHECK: nn.sdpa %{{.*}} {causal, heads = 2 : i64, kv_heads = 2 : i64} :
  %y2 = nn.sdpa %h {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>
  return %y, %g, %g2, %y2 : tensor<1x4x16xf32>, tensor<1x4x48xf32>, tensor<1x4x48xf32>, tensor<1x4x16xf32>
}

// -----

// fp32: nothing rounds, nothing is marked.
// CHECK-LABEL: func.func @fp32(
// CHECK-NOT: plan.gemm_precision
func.func @fp32(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>) -> tensor<2x8x32xf32> {
  %y = nn.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}
