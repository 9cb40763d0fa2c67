// nn-tensor-parallel refuses what Megatron's layout cannot split, at the op or parameter.
// RUN: planc-opt %s -split-input-file -verify-diagnostics -nn-tensor-parallel="axis=0 size=2 dims=heads,qkv,mlp,vocab"

// A split dim that does not divide over the group.
// expected-error @+2 {{parameter 'wte.weight': its dim 'vocab' of 15 does not divide over the 2 ranks of the tensor axis}}
func.func @odd(%tokens: tensor<2x4xi32> {nn.input = "tokens"},
               %wte: tensor<15x8xf32> {nn.param = "wte.weight", nn.dims = ["vocab", "embed"]}) -> tensor<2x4x8xf32>
    attributes {nn.model} {
  %x = nn.embedding %wte, %tokens : (tensor<15x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

// Three heads over two ranks.
func.func @heads(%x: tensor<2x4x8xf32> {nn.input = "x"},
                 %w: tensor<8x36xf32> {nn.param = "h.0.attn.c_attn.weight", nn.dims = ["embed", "qkv"]}) -> tensor<2x4x12xf32>
    attributes {nn.model} {
  %qkv = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x36xf32>) -> tensor<2x4x36xf32>
  // expected-error @+1 {{'nn.sdpa' op cannot be split over the tensor axis: 3 query and 3 key/value heads do not divide over 2 ranks}}
  %a = nn.sdpa %qkv {causal, heads = 3 : i64, kv_heads = 3 : i64} : tensor<2x4x36xf32> -> tensor<2x4x12xf32>
  return %a : tensor<2x4x12xf32>
}

// -----

// A norm over features split across the ranks.
func.func @norm(%x: tensor<2x4x8xf32> {nn.input = "x"},
                %w: tensor<8x32xf32> {nn.param = "h.0.mlp.c_fc.weight", nn.dims = ["embed", "mlp"]},
                %g: tensor<32xf32> {nn.param = "h.0.ln.weight", nn.dims = ["mlp_norm"]}) -> tensor<2x4x32xf32>
    attributes {nn.model} {
  %h = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  // expected-error @+1 {{'nn.rmsnorm' op cannot be split over the tensor axis: a norm over features split across the ranks}}
  %n = nn.rmsnorm %h, %g {eps = 1.0e-05 : f64} : tensor<2x4x32xf32>, tensor<32xf32>
  return %n : tensor<2x4x32xf32>
}

// -----

// A split value meeting a replicated one.
func.func @mixed(%x: tensor<2x4x8xf32> {nn.input = "x"},
                 %w: tensor<8x32xf32> {nn.param = "h.0.mlp.c_fc.weight", nn.dims = ["embed", "mlp"]},
                 %v: tensor<8x32xf32> {nn.param = "h.0.mlp.gate.weight", nn.dims = ["embed", "hidden"]}) -> tensor<2x4x32xf32>
    attributes {nn.model} {
  %a = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  %b = nn.matmul %x, %v : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  // expected-error @+1 {{'nn.mul' op cannot be split over the tensor axis: one operand is split and the other replicated}}
  %m = nn.mul %a, %b : tensor<2x4x32xf32>
  return %m : tensor<2x4x32xf32>
}
