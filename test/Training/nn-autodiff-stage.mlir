// nn-autodiff of a pipeline stage (nn.stage): a function that returns an activation, not a
// loss. Its _grad takes the activation's cotangent as its last argument (nn.cotangent),
// seeds the backward pass with it, and returns the forward result, the parameters'
// gradients (nn.grad) and then the gradient of the stage's input (nn.activation ->
// nn.grad_input): the vector-Jacobian product a stage's backward step computes.
// RUN: planc-opt %s -nn-autodiff | FileCheck %s
// RUN: planc-opt %s -nn-autodiff | planc-opt > /dev/null

// CHECK-LABEL: func.func @stage_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32> {nn.activation = "h.0"}, %[[W:[^:]*]]: tensor<8x16xf32> {nn.param = "fc.weight"},
// CHECK-SAME: %[[B:[^:]*]]: tensor<16xf32> {nn.param = "fc.bias"}, %[[DY:[^:]*]]: tensor<2x4x16xf32> {nn.cotangent})
// CHECK-SAME: -> (tensor<2x4x16xf32>, tensor<8x16xf32> {nn.grad = "fc.weight"}, tensor<16xf32> {nn.grad = "fc.bias"},
// CHECK-SAME: tensor<2x4x8xf32> {nn.grad_input = "h.0"})
// The forward pass, cloned.
// CHECK: %[[M:.*]] = nn.matmul %[[X]], %[[W]]
// CHECK: %[[Y:.*]] = nn.bias_add %[[M]], %[[B]]
// CHECK: %[[Z:.*]] = nn.gelu %[[Y]]
// The backward pass starts from the cotangent argument, not from 1.
// CHECK-NOT: arith.constant dense<1.0
// CHECK: %[[DZ:.*]] = nn.gelu_grad %[[DY]], %[[Y]]
// CHECK: %[[DB:.*]] = nn.sum_rows %[[DZ]]
// CHECK: %[[DX:.*]] = nn.matmul %[[DZ]], %[[W]] {transpose_w}
// CHECK: %[[DW:.*]] = nn.matmul_wgrad %[[X]], %[[DZ]]
// CHECK: return %[[Z]], %[[DW]], %[[DB]], %[[DX]]
func.func @stage(%x: tensor<2x4x8xf32> {nn.activation = "h.0"}, %w: tensor<8x16xf32> {nn.param = "fc.weight"},
                 %b: tensor<16xf32> {nn.param = "fc.bias"}) -> tensor<2x4x16xf32> attributes {nn.stage} {
  %m = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %y = nn.bias_add %m, %b : tensor<2x4x16xf32>, tensor<16xf32>
  %z = nn.gelu %y : tensor<2x4x16xf32>
  return %z : tensor<2x4x16xf32>
}
