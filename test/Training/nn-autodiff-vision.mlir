// nn-autodiff of a small image classifier: conv → batchnorm → relu → maxpool → conv
// (stride 2, no bias) → avgpool → flatten → linear → cross-entropy. Each vision op's VJP
// is its gradient op; the images need no gradient, so the first convolution has no
// conv2d_grad_data once dead code is gone.
// RUN: planc-opt %s -nn-autodiff -canonicalize | FileCheck %s

func.func @cnn(%img: tensor<4x1x8x8xf32> {nn.input = "tokens"}, %lbl: tensor<4x1xi32> {nn.input = "targets"},
               %w1: tensor<8x1x3x3xf32> {nn.param = "conv1.weight"}, %b1: tensor<8xf32> {nn.param = "conv1.bias"},
               %g: tensor<8xf32> {nn.param = "bn1.weight"}, %s: tensor<8xf32> {nn.param = "bn1.bias"},
               %w2: tensor<16x8x3x3xf32> {nn.param = "conv2.weight"},
               %fw: tensor<16x10xf32> {nn.param = "fc.weight"}, %fb: tensor<10xf32> {nn.param = "fc.bias"})
    -> tensor<f32> attributes {nn.model} {
  %c = nn.conv2d %img, %w1, %b1 {stride = 1 : i64, pad = 1 : i64} : (tensor<4x1x8x8xf32>, tensor<8x1x3x3xf32>, tensor<8xf32>) -> tensor<4x8x8x8xf32>
  %n, %stats = nn.batchnorm %c, %g, %s {eps = 1.0e-05 : f64} : tensor<4x8x8x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %r = nn.relu %n : tensor<4x8x8x8xf32>
  %m = nn.maxpool2d %r {kernel = 2 : i64, stride = 2 : i64, pad = 0 : i64} : tensor<4x8x8x8xf32> -> tensor<4x8x4x4xf32>
  %c2 = nn.conv2d %m, %w2 {stride = 2 : i64, pad = 1 : i64} : (tensor<4x8x4x4xf32>, tensor<16x8x3x3xf32>) -> tensor<4x16x2x2xf32>
  %p = nn.avgpool %c2 : tensor<4x16x2x2xf32> -> tensor<4x16x1x1xf32>
  %f = nn.flatten %p : tensor<4x16x1x1xf32> -> tensor<4x1x16xf32>
  %l0 = nn.matmul %f, %fw : (tensor<4x1x16xf32>, tensor<16x10xf32>) -> tensor<4x1x10xf32>
  %l = nn.bias_add %l0, %fb : tensor<4x1x10xf32>, tensor<10xf32>
  %loss = nn.cross_entropy %l, %lbl : (tensor<4x1x10xf32>, tensor<4x1xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @cnn_grad(
// CHECK-SAME: -> (tensor<f32>, tensor<8x1x3x3xf32> {nn.grad = "conv1.weight"}, tensor<8xf32> {nn.grad = "conv1.bias"},
// CHECK-SAME: tensor<8xf32> {nn.grad = "bn1.weight"}, tensor<8xf32> {nn.grad = "bn1.bias"},
// CHECK-SAME: tensor<16x8x3x3xf32> {nn.grad = "conv2.weight"}, tensor<16x10xf32> {nn.grad = "fc.weight"}, tensor<10xf32> {nn.grad = "fc.bias"})
// CHECK: %[[C:.*]] = nn.conv2d %arg0, %arg2, %arg3
// CHECK: %[[N:.*]], %[[ST:.*]] = nn.batchnorm %[[C]], %arg4, %arg5
// CHECK: %[[R:.*]] = nn.relu %[[N]]
// CHECK: %[[M:.*]] = nn.maxpool2d %[[R]]
// CHECK: %[[C2:.*]] = nn.conv2d %[[M]], %arg6 {pad = 1 : i64, stride = 2 : i64}
// CHECK: %[[P:.*]] = nn.avgpool %[[C2]]
// CHECK: %[[F:.*]] = nn.flatten %[[P]]
// CHECK: %[[DL:.*]] = nn.cross_entropy_grad
// CHECK: %[[DF:.*]] = nn.matmul %[[DL]], %arg7 {transpose_w}
// CHECK: %[[DP:.*]] = nn.unflatten %[[DF]] : tensor<4x1x16xf32> -> tensor<4x16x1x1xf32>
// CHECK: %[[DC2:.*]] = nn.avgpool_grad %[[DP]] : tensor<4x16x1x1xf32> -> tensor<4x16x2x2xf32>
// CHECK: %[[DM:.*]] = nn.conv2d_grad_data %[[DC2]], %arg6 {pad = 1 : i64, stride = 2 : i64} : (tensor<4x16x2x2xf32>, tensor<16x8x3x3xf32>) -> tensor<4x8x4x4xf32>
// CHECK: %[[DW2:.*]], %{{.*}} = nn.conv2d_grad_filter %[[DC2]], %[[M]] {pad = 1 : i64, stride = 2 : i64}
// CHECK: %[[DR:.*]] = nn.maxpool2d_grad %[[DM]], %[[R]] {kernel = 2 : i64, pad = 0 : i64, stride = 2 : i64}
// CHECK: %[[DN:.*]] = nn.relu_grad %[[DR]], %[[N]]
// CHECK: %[[DC:.*]], %[[DG:.*]], %[[DS:.*]] = nn.batchnorm_grad %[[DN]], %[[C]], %[[ST]], %arg4
// CHECK-NOT: nn.conv2d_grad_data
// CHECK: %[[DW1:.*]], %[[DB1:.*]] = nn.conv2d_grad_filter %[[DC]], %arg0 {pad = 1 : i64, stride = 1 : i64}
// CHECK: return %{{.*}}, %[[DW1]], %[[DB1]], %[[DG]], %[[DS]], %[[DW2]]
