// nn-pipeline-split refuses cuts a pipeline cannot make, at the function, with notes.
// RUN: planc-opt %s -split-input-file -nn-pipeline-split=stages=2 -verify-diagnostics

// A skip connection: layer 0's projection is read after layer 1 too, so two values of
// stage 0 (layer 0) cross the cut to stage 1 (layer 1). (The embedding, which reads no
// layer's parameters, would not count: each stage that reads it computes it again.)
// expected-error @+1 {{'func.func' op cannot be cut between stages 0 and 1: 2 values cross the cut, and a pipeline stage hands on one (the residual stream)}}
func.func @skip(%tok: tensor<2x4xi32> {nn.input = "tokens"}, %tgt: tensor<2x4xi32> {nn.input = "targets"},
                %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %w0: tensor<8x8xf32> {nn.param = "h.0.fc.weight"},
                %w1: tensor<8x8xf32> {nn.param = "h.1.fc.weight"}) -> tensor<f32> attributes {nn.forward} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-note @+1 {{crossing here}}
  %m0 = nn.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-note @+1 {{crossing here}}
  %r0 = nn.add %x, %m0 : tensor<2x4x8xf32>
  %m1 = nn.matmul %r0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = nn.add %m0, %m1 : tensor<2x4x8xf32>
  %l = nn.matmul %r, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// One layer cannot fill two stages.
// expected-error @+1 {{'func.func' op has 1 layer, fewer than the 2 pipeline stages}}
func.func @one(%tok: tensor<2x4xi32> {nn.input = "tokens"}, %tgt: tensor<2x4xi32> {nn.input = "targets"},
               %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %w0: tensor<8x8xf32> {nn.param = "h.0.fc.weight"})
    -> tensor<f32> attributes {nn.forward} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %m0 = nn.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = nn.matmul %m0, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
