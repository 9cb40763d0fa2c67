// nn-pipeline-split: a forward function cut into stage functions. Layer k of L runs on
// stage floor(k*S/L); other ops on the latest stage of their operands. Stage 0 reads the
// tokens and the embedding and hands on the residual stream after its layers; stage 1
// takes that activation (nn.activation), its layer, the final norm and the tied head (the
// embedding table is an argument of both stages) and returns the loss. nn-autodiff then
// differentiates each: stage 0 against the cotangent of its activation, stage 1 from its
// loss, also returning the gradient of its input activation.
// RUN: planc-opt %s -nn-pipeline-split=stages=2 | FileCheck %s
// RUN: planc-opt %s -nn-pipeline-split=stages=2 -nn-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not planc-opt %s -nn-pipeline-split=stages=3 2>&1 | FileCheck %s --check-prefix=THREE

// CHECK-LABEL: func.func private @f_stage0(
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<2x4xi32> {nn.input = "tokens"}, %[[WTE:[^:]*]]: tensor<16x8xf32> {nn.param = "wte.weight"},
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x8xf32> {nn.param = "h.0.fc.weight"}) -> tensor<2x4x8xf32> attributes {nn.stage = 0 : i64}
// CHECK-NEXT: %[[X:.*]] = nn.embedding %[[WTE]], %[[TOK]]
// CHECK-NEXT: %[[M0:.*]] = nn.matmul %[[X]], %[[W0]]
// CHECK-NEXT: %[[G0:.*]] = nn.gelu %[[M0]]
// CHECK-NEXT: %[[R0:.*]] = nn.add %[[X]], %[[G0]]
// CHECK-NEXT: return %[[R0]] : tensor<2x4x8xf32>
// CHECK-LABEL: func.func private @f_stage1(
// CHECK-SAME: %[[TGT:[^:]*]]: tensor<2x4xi32> {nn.input = "targets"}, %[[WTE1:[^:]*]]: tensor<16x8xf32> {nn.param = "wte.weight"},
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x8xf32> {nn.param = "h.1.fc.weight"}, %[[LN:[^:]*]]: tensor<8xf32> {nn.param = "ln_f.weight"},
// CHECK-SAME: %[[IN:[^:]*]]: tensor<2x4x8xf32> {nn.activation = "stage0"}) -> tensor<f32> attributes {nn.stage = 1 : i64}
// CHECK-NEXT: %[[M1:.*]] = nn.matmul %[[IN]], %[[W1]]
// CHECK-NEXT: %[[G1:.*]] = nn.gelu %[[M1]]
// CHECK-NEXT: %[[R1:.*]] = nn.add %[[IN]], %[[G1]]
// CHECK-NEXT: %[[N:.*]] = nn.rmsnorm %[[R1]], %[[LN]]
// CHECK-NEXT: %[[L:.*]] = nn.matmul %[[N]], %[[WTE1]] {transpose_w}
// CHECK-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[L]], %[[TGT]]
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// Stage 0's backward starts from the cotangent of its activation; stage 1's from its loss,
// and returns the gradient of its input activation last.
// GRAD-LABEL: func.func @f_stage0_grad(
// GRAD-SAME: %{{[^:]*}}: tensor<2x4x8xf32> {nn.cotangent})
// GRAD-SAME: -> (tensor<2x4x8xf32>, tensor<16x8xf32> {nn.grad = "wte.weight"}, tensor<8x8xf32> {nn.grad = "h.0.fc.weight"})
// GRAD-LABEL: func.func @f_stage1_grad(
// GRAD-SAME: -> (tensor<f32>, tensor<16x8xf32> {nn.grad = "wte.weight"}, tensor<8x8xf32> {nn.grad = "h.1.fc.weight"},
// GRAD-SAME: tensor<8xf32> {nn.grad = "ln_f.weight"}, tensor<2x4x8xf32> {nn.grad_input = "stage0"})

// THREE: error: 'func.func' op has 2 layers, fewer than the 3 pipeline stages
func.func @f(%tok: tensor<2x4xi32> {nn.input = "tokens"}, %tgt: tensor<2x4xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %w0: tensor<8x8xf32> {nn.param = "h.0.fc.weight"},
             %w1: tensor<8x8xf32> {nn.param = "h.1.fc.weight"}, %ln: tensor<8xf32> {nn.param = "ln_f.weight"})
    -> tensor<f32> attributes {nn.forward} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %m0 = nn.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g0 = nn.gelu %m0 : tensor<2x4x8xf32>
  %r0 = nn.add %x, %g0 : tensor<2x4x8xf32>
  %m1 = nn.matmul %r0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g1 = nn.gelu %m1 : tensor<2x4x8xf32>
  %r1 = nn.add %r0, %g1 : tensor<2x4x8xf32>
  %n = nn.rmsnorm %r1, %ln {eps = 1.0e-6 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %l = nn.matmul %n, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// An op that reads no layer's parameters is computed again by each stage that reads it: the
// token embedding, read by layer 0 (stage 0) and by a skip connection after layer 1 (stage 1),
// is in both stages, and the cut carries the residual stream only.
// CHECK-LABEL: func.func private @skip_stage0(
// CHECK:      nn.embedding
// CHECK-LABEL: func.func private @skip_stage1(
// CHECK-SAME: %[[TOK1:[^:]*]]: tensor<2x4xi32> {nn.input = "tokens"}, %{{[^:]*}}: tensor<2x4xi32> {nn.input = "targets"}, %[[WTE2:[^:]*]]: tensor<16x8xf32> {nn.param = "wte.weight"},
// CHECK-SAME: %{{[^:]*}}: tensor<8x8xf32> {nn.param = "h.1.fc.weight"}, %{{[^:]*}}: tensor<2x4x8xf32> {nn.activation = "stage0"})
// CHECK-NEXT: %[[X1:.*]] = nn.embedding %[[WTE2]], %[[TOK1]]
// CHECK:      nn.add %[[X1]],
func.func @skip(%tok: tensor<2x4xi32> {nn.input = "tokens"}, %tgt: tensor<2x4xi32> {nn.input = "targets"},
                %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %w0: tensor<8x8xf32> {nn.param = "h.0.fc.weight"},
                %w1: tensor<8x8xf32> {nn.param = "h.1.fc.weight"}) -> tensor<f32> attributes {nn.forward} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %m0 = nn.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %m1 = nn.matmul %m0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = nn.add %x, %m1 : tensor<2x4x8xf32>
  %l = nn.matmul %r, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
