// Every verifier of the nn dialect.
// RUN: planc-opt %s -split-input-file -verify-diagnostics

func.func @f(%t: tensor<16x8xf32>, %ids: tensor<?x?xi32>) {
  // expected-error @+1 {{gathers rows of 'tensor<16x8xf32>' by 'tensor<?x?xi32>', which gives [batch, seq, 8], not 'tensor<?x?x9xf32>'}}
  %x = nn.embedding %t, %ids : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x9xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>, %w: tensor<7x4xf32>) {
  // expected-error @+1 {{contracts 8 input features with a weight of 7 rows}}
  %y = nn.matmul %x, %w : (tensor<?x?x8xf32>, tensor<7x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{result must be [batch, seq, 4], not 'tensor<?x?x8xf32>'}}
  %y = nn.matmul %x, %w {transpose_w} : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias of 4 elements for activations of 8 features}}
  %y = nn.bias_add %x, %b : tensor<?x?x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{scale and bias must have the 8 features of the input}}
  %y = nn.layernorm %x, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{eps must be positive}}
  %y = nn.rmsnorm %x, %g {eps = 0.0 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<?x?x24xf32>) {
  // expected-error @+1 {{needs heads ≥ 1 and kv_heads ≥ 1 dividing them, not 4 and 3}}
  %o = nn.sdpa %qkv {heads = 4 : i64, kv_heads = 3 : i64} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<?x?x20xf32>) {
  // expected-error @+1 {{packed q, k, v must be (heads + 2·kv_heads)·head_dim = 16 wide, not 20}}
  %o = nn.sdpa %qkv {heads = 4 : i64, kv_heads = 2 : i64} : tensor<?x?x20xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<?x?x9xf32>) {
  // expected-error @+1 {{rotary embeddings need an even head_dim, not 3}}
  %o = nn.sdpa %qkv {heads = 1 : i64, kv_heads = 1 : i64, rope} : tensor<?x?x9xf32> -> tensor<?x?x3xf32>
  return
}

// -----

func.func @f(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{probability must lie in [0, 1), not 1}}
  %y = nn.dropout %x {p = 1.0 : f64} : tensor<?x?x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x1x24xf32>, %cache: tensor<1x16x12xf32>, %pos: i64) {
  // expected-error @+1 {{cache rows must be 2·kv_heads·head_dim = 16 wide (keys then values), not 12}}
  %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x1x24xf32>, tensor<1x16x12xf32> -> tensor<1x1x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x32x24xf32>, %cache: tensor<1x16x16xf32>, %pos: i64) {
  // expected-error @+1 {{a chunk of 32 positions does not fit a window of 16}}
  %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 2 : i64, kv_heads = 2 : i64} : tensor<1x32x24xf32>, tensor<1x16x16xf32> -> tensor<1x32x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x1x24xf32>, %cache: tensor<1x16x16xf32>, %pos: i64) {
  // expected-error @+1 {{cache batch 1 differs from the chunk's 2}}
  %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x1x24xf32>, tensor<1x16x16xf32> -> tensor<2x1x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<1x1x24xf32>, %cache: tensor<1x16x16xf32>, %pos: i64) {
  // expected-error @+1 {{needs heads ≥ 1 and kv_heads ≥ 1 dividing them, not 2 and 3}}
  %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 2 : i64, kv_heads = 3 : i64} : tensor<1x1x24xf32>, tensor<1x16x16xf32> -> tensor<1x1x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2000xf32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{stores 'tensor<128x128xf32>' in blocks of 64 with double quantization in 2114 words (planrt_nf4.h), not 'tensor<2000xf32>'}}
  %w = nn.dequantize_nf4 %q {block = 64 : i64, double_quant} : tensor<2000xf32> -> tensor<128x128xf32>
  return %w : tensor<128x128xf32>
}

// -----

func.func @f(%q: tensor<2114xf32>) -> tensor<128x128xf32> {
  // expected-error @+1 {{block must be at least 1, not 0}}
  %w = nn.dequantize_nf4 %q {block = 0 : i64, double_quant} : tensor<2114xf32> -> tensor<128x128xf32>
  return %w : tensor<128x128xf32>
}
