// The verifiers of the backward and optimizer ops, and the type agreements they declare.
// RUN: planc-opt %s -split-input-file -verify-diagnostics

func.func @f(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x24xf32>) {
  // expected-error @+1 {{the gradient of a weight 'tensor<7x24xf32>' needs x [batch, seq, 7] and dy [batch, seq, 24], not 'tensor<2x4x8xf32>' and 'tensor<2x4x24xf32>'}}
  %dw = nn.matmul_wgrad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<7x24xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x24xf32>) {
  // expected-error @+1 {{the gradient of a weight 'tensor<8x24xf32>' needs x [batch, seq, 24] and dy [batch, seq, 8]}}
  %dw = nn.matmul_wgrad %x, %dy {transpose_w} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<8x24xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %dy: tensor<2x5x24xf32>) {
  // expected-error @+1 {{the gradient of a weight 'tensor<8x24xf32>' needs x [batch, seq, 8] and dy [batch, seq, 24], not 'tensor<2x4x8xf32>' and 'tensor<2x5x24xf32>'}}
  %dw = nn.matmul_wgrad %x, %dy : (tensor<2x4x8xf32>, tensor<2x5x24xf32>) -> tensor<8x24xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x24xf32>) {
  // expected-error @+1 {{sums rows of 24 features into 'tensor<8xf32>'}}
  %db = nn.sum_rows %dy : tensor<2x4x24xf32> -> tensor<8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{result #0 must be 1D tensor of floating-point values}}
  %db = nn.sum_rows %dy : tensor<2x4x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>) {
  // expected-error @+1 {{scatters 'tensor<2x4x8xf32>' by 'tensor<2x4xi32>' into 'tensor<16x9xf32>'}}
  %dt = nn.embedding_grad %dy, %ids : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x9xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %ids: tensor<3x4xi32>) {
  // expected-error @+1 {{scatters 'tensor<2x4x8xf32>' by 'tensor<3x4xi32>' into 'tensor<16x8xf32>'}}
  %dt = nn.embedding_grad %dy, %ids : (tensor<2x4x8xf32>, tensor<3x4xi32>) -> tensor<16x8xf32>
  return
}

// -----

// add/sub/mul take any ranked float tensor, but one type for both operands and the result.
func.func @f(%a: tensor<8x24xf32>, %b: tensor<24x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs, result} have same type}}
  %s = "nn.add"(%a, %b) : (tensor<8x24xf32>, tensor<24x8xf32>) -> tensor<8x24xf32>
  return
}

// -----

func.func @f(%a: tensor<24xf32>) {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs, result} have same type}}
  %s = "nn.mul"(%a, %a) : (tensor<24xf32>, tensor<24xf32>) -> tensor<24xbf16>
  return
}

// -----

func.func @f(%a: tensor<24xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %s = nn.sub %a, %a : tensor<24xi32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, result} have same type}}
  %s = "nn.scale"(%x) {factor = 2.0 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf16>
  return
}

// -----

func.func @f(%dy: tensor<2x4x16xf32>, %x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {dy, x, result} have same type}}
  %dx = "nn.gelu_grad"(%dy, %x) : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{failed to verify that all of {dy, x, result} have same type}}
  %dx = "nn.relu_grad"(%dy, %x) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x?xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{failed to verify that all of {weight, dweight, dbias} have same type}}
  %dx, %dw, %db = "nn.layernorm_grad"(%dy, %x, %w) {eps = 1.0e-05 : f64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<3x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{failed to verify that all of {dy, x, dx} have same type}}
  %dx, %dw = "nn.rmsnorm_grad"(%dy, %x, %w) {eps = 1.0e-06 : f64}
      : (tensor<2x4x8xf32>, tensor<3x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{failed to verify that all of {qkv, result} have same type}}
  %d = "nn.sdpa_grad"(%dy, %qkv) {heads = 2 : i64, kv_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%dl: tensor<f32>, %logits: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{failed to verify that all of {logits, result} have same type}}
  %d = "nn.cross_entropy_grad"(%dl, %logits, %t)
      : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%g: tensor<8x24xf32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values}}
  %s = nn.sumsq %g : tensor<8x24xf32> -> tensor<1xf32>
  return
}

// -----

func.func @f(%p: tensor<8x24xf32>, %m: tensor<24x8xf32>, %lr: f64, %s: f32, %bc1: f64, %bc2: f64) {
  // expected-error @+1 {{failed to verify that all of {param, grad, m, v, new_param, new_m, new_v} have same type}}
  %p2, %m2, %v2 = "nn.adamw"(%p, %p, %m, %p, %lr, %s, %bc1, %bc2)
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64}
      : (tensor<8x24xf32>, tensor<8x24xf32>, tensor<24x8xf32>, tensor<8x24xf32>, f64, f32, f64, f64)
      -> (tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>)
  return
}

// -----

func.func @f(%p: tensor<24xf32>, %lr: f32, %s: f32, %bc1: f64, %bc2: f64) {
  // expected-error @+1 {{operand #4 must be 64-bit float}}
  %p2, %m2, %v2 = "nn.adamw"(%p, %p, %p, %p, %lr, %s, %bc1, %bc2)
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64}
      : (tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, f32, f32, f64, f64)
      -> (tensor<24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// -----

// nn.sdpa_grad follows nn.sdpa's shape rules, with dy in the place of the result.
func.func @f(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op needs heads ≥ 1 and kv_heads ≥ 1 dividing them, not 4 and 3}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 4 : i64, kv_heads = 3 : i64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op needs heads ≥ 1 and kv_heads ≥ 1 dividing them, not 0 and 1}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 0 : i64, kv_heads = 1 : i64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x7xf32>, %qkv: tensor<2x4x21xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op result width 7 must be a static multiple of the 2 heads}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x4x7xf32>, tensor<2x4x21xf32>
  return
}

// -----

// A dynamic width cannot be split into heads.
func.func @f(%dy: tensor<?x?x?xf32>, %qkv: tensor<?x?x24xf32>) {
  // expected-error @+1 {{result width must be static (a multiple of the 2 heads)}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 2 : i64} : tensor<?x?x?xf32>, tensor<?x?x24xf32>
  return
}

// -----

// 2 query heads and 1 key/value head of 4: (2 + 2·1)·4 = 16 wide.
func.func @f(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op packed q, k, v must be (heads + 2·kv_heads)·head_dim = 16 wide, not 24}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 1 : i64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x5x8xf32>, %qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op result rows must match the input's}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x5x8xf32>, tensor<2x4x24xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x6xf32>, %qkv: tensor<2x4x18xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op rotary embeddings need an even head_dim, not 3}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 2 : i64, rope} : tensor<2x4x6xf32>, tensor<2x4x18xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{'nn.sdpa_grad' op rope_theta must be positive}}
  %d = nn.sdpa_grad %dy, %qkv {heads = 2 : i64, kv_heads = 2 : i64, rope, rope_theta = 0.0 : f64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  return
}

// -----

// The norms' gradients: the scale has the input's features, eps is positive.
func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'nn.layernorm_grad' op scale and bias must have the 8 features of the input}}
  %dx, %dw, %db = nn.layernorm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : tensor<2x4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layernorm_grad' op eps must be positive}}
  %dx, %dw, %db = nn.layernorm_grad %dy, %x, %w {eps = 0.0 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<9xf32>) {
  // expected-error @+1 {{'nn.rmsnorm_grad' op scale and bias must have the 8 features of the input}}
  %dx, %dw = nn.rmsnorm_grad %dy, %x, %w {eps = 1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<9xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rmsnorm_grad' op eps must be positive}}
  %dx, %dw = nn.rmsnorm_grad %dy, %x, %w {eps = -1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  return
}

// -----

// nn.cross_entropy_grad: one target per row of logits.
func.func @f(%dl: tensor<f32>, %logits: tensor<2x4x16xf32>, %t: tensor<2x5xi32>) {
  // expected-error @+1 {{'nn.cross_entropy_grad' op targets 'tensor<2x5xi32>' do not match the rows of the logits 'tensor<2x4x16xf32>'}}
  %d = nn.cross_entropy_grad %dl, %logits, %t : tensor<f32>, tensor<2x4x16xf32>, tensor<2x5xi32>
  return
}

// -----

// Dynamic extents agree with anything; the static ones must match.
func.func @f(%dl: tensor<f32>, %logits: tensor<?x4x16xf32>, %t: tensor<3x?xi32>, %u: tensor<3x5xi32>) {
  %d = nn.cross_entropy_grad %dl, %logits, %t : tensor<f32>, tensor<?x4x16xf32>, tensor<3x?xi32>
  // expected-error @+1 {{'nn.cross_entropy_grad' op targets 'tensor<3x5xi32>' do not match the rows of the logits 'tensor<?x4x16xf32>'}}
  %e = nn.cross_entropy_grad %dl, %logits, %u : tensor<f32>, tensor<?x4x16xf32>, tensor<3x5xi32>
  return
}

// -----

func.func @round_to_f64(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{rounds to bf16 or f16, not 'f64'}}
  %y = nn.round %x {to = f64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @round_from_f16(%x: tensor<8xf16>) -> tensor<8xf16> {
  // expected-error @+1 {{rounds f32 values, not 'f16'}}
  %y = nn.round %x {to = bf16} : tensor<8xf16>
  return %y : tensor<8xf16>
}
