// Round trip of every nn op.
// RUN: planc-opt %s | planc-opt | FileCheck %s

// CHECK-LABEL: func.func @all
func.func @all(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>, %table: tensor<16x8xf32>,
               %w: tensor<8x24xf32>, %b: tensor<24xf32>, %proj: tensor<8x8xf32>, %g: tensor<8xf32>)
    -> tensor<f32> attributes {nn.model} {
  // CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %x = nn.embedding %table, %tokens : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  // CHECK: nn.positions %{{.*}} : tensor<?x?xi32>
  %p = nn.positions %tokens : tensor<?x?xi32>
  // CHECK: nn.layernorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>
  %n = nn.layernorm %x, %g, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: nn.rmsnorm %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  %r = nn.rmsnorm %n, %g {eps = 1.0e-06 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
  %qkv0 = nn.matmul %r, %w : (tensor<?x?x8xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
  // CHECK: nn.bias_add %{{.*}}, %{{.*}} : tensor<?x?x24xf32>, tensor<24xf32>
  %qkv = nn.bias_add %qkv0, %b : tensor<?x?x24xf32>, tensor<24xf32>
  // CHECK: nn.sdpa %{{.*}} {causal, heads = 2 : i64, kv_heads = 2 : i64, rope} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  %o = nn.sdpa %qkv {causal, heads = 2 : i64, kv_heads = 2 : i64, rope} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  %y = nn.matmul %o, %proj : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: nn.gelu
  %g1 = nn.gelu %y : tensor<?x?x8xf32>
  // CHECK: nn.silu
  %s1 = nn.silu %g1 : tensor<?x?x8xf32>
  // CHECK: nn.relu
  %r1 = nn.relu %s1 : tensor<?x?x8xf32>
  // CHECK: nn.dropout %{{.*}} {p = 1.000000e-01 : f64} : tensor<?x?x8xf32>
  %d = nn.dropout %r1 {p = 1.0e-01 : f64} : tensor<?x?x8xf32>
  // CHECK: nn.add
  %a = nn.add %x, %d : tensor<?x?x8xf32>
  // CHECK: nn.sub
  %s = nn.sub %a, %x : tensor<?x?x8xf32>
  // CHECK: nn.mul
  %m = nn.mul %s, %a : tensor<?x?x8xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %logits = nn.matmul %m, %table {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Decoding: positions from an offset, attention over a key/value cache.
// CHECK-LABEL: func.func @decode
func.func @decode(%tokens: tensor<1x1xi32>, %qkv: tensor<1x1x24xf32>, %cache: tensor<1x16x16xf32>, %pos: i64)
    -> (tensor<1x1xi32>, tensor<1x1x8xf32>, tensor<1x16x16xf32>) {
  // CHECK: nn.positions %{{.*}} from %{{.*}} : tensor<1x1xi32>
  %p = nn.positions %tokens from %pos : tensor<1x1xi32>
  // CHECK: %{{.*}}, %{{.*}} = nn.sdpa_cached %{{.*}}, %{{.*}}, %{{.*}} {heads = 2 : i64, kv_heads = 2 : i64, rope} : tensor<1x1x24xf32>, tensor<1x16x16xf32> -> tensor<1x1x8xf32>
  %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 2 : i64, kv_heads = 2 : i64, rope} : tensor<1x1x24xf32>, tensor<1x16x16xf32> -> tensor<1x1x8xf32>
  return %p, %o, %c : tensor<1x1xi32>, tensor<1x1x8xf32>, tensor<1x16x16xf32>
}

// QLoRA: a 128×128 matrix in blocks of 64 with double quantization takes 2114 words.
func.func @dequantize(%q: tensor<2114xf32>, %s: tensor<2304xf32>) -> (tensor<128x128xf32>, tensor<128x128xf32>) {
  // CHECK: nn.dequantize_nf4 %{{.*}} {block = 64 : i64, double_quant} : tensor<2114xf32> -> tensor<128x128xf32>
  %w = nn.dequantize_nf4 %q {block = 64 : i64, double_quant} : tensor<2114xf32> -> tensor<128x128xf32>
  // CHECK: nn.dequantize_nf4 %{{.*}} {block = 64 : i64} : tensor<2304xf32> -> tensor<128x128xf32>
  %v = nn.dequantize_nf4 %s {block = 64 : i64} : tensor<2304xf32> -> tensor<128x128xf32>
  return %w, %v : tensor<128x128xf32>, tensor<128x128xf32>
}
