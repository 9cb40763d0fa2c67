// nn-autodiff fails at the op or function it cannot differentiate, or whose gradient's name
// is taken.
// RUN: planc-opt %s -split-input-file -nn-autodiff -verify-diagnostics

func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'nn.dropout' op with p > 0 cannot be trained in this version: dropout's random mask is not implemented (use p = 0)}}
  %d = nn.dropout %x {p = 0.1 : f64} : tensor<2x4x8xf32>
  %l = nn.matmul %d, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A dropout that does not reach the loss needs no VJP.
func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %d = nn.dropout %x {p = 0.1 : f64} : tensor<2x4x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op can be differentiated only if it returns one scalar loss}}
func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> tensor<2x4x16xf32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %l : tensor<2x4x16xf32>
}

// -----

// expected-error @+1 {{'func.func' op can be differentiated only if it returns one scalar loss}}
func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> (tensor<f32>, tensor<f32>) attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %loss : tensor<f32>, tensor<f32>
}

// -----

// The backward ops have no VJP of their own.
func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'nn.sum_rows' op has no VJP: it cannot be differentiated}}
  %s = nn.sum_rows %x : tensor<2x4x8xf32> -> tensor<8xf32>
  %b = nn.bias_add %x, %s : tensor<2x4x8xf32>, tensor<8xf32>
  %l = nn.matmul %b, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The gradient is named <model>_grad; a symbol of that name is an error at the model.
// expected-error @+1 {{'func.func' op cannot be differentiated into 'm_grad': the name is taken}}
func.func @m(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = nn.matmul %x, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func private @m_grad(tensor<4xf32>) -> tensor<4xf32>
