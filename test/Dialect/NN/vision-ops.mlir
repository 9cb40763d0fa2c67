// Round trip of the vision ops: images [N, C, H, W], filters [K, C, k, k].
// RUN: planc-opt %s | planc-opt | FileCheck %s

// CHECK-LABEL: func.func @cnn
func.func @cnn(%x: tensor<?x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>, %g: tensor<16xf32>,
               %s: tensor<16xf32>) -> tensor<?x1x16xf32> {
  // CHECK: nn.conv2d %{{.*}}, %{{.*}}, %{{.*}} {pad = 1 : i64, stride = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<?x16x32x32xf32>
  %c = nn.conv2d %x, %w, %b {stride = 1 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<?x16x32x32xf32>
  // CHECK: nn.conv2d %{{.*}}, %{{.*}} {pad = 0 : i64, stride = 2 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<?x16x15x15xf32>
  %c2 = nn.conv2d %x, %w {stride = 2 : i64, pad = 0 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<?x16x15x15xf32>
  // CHECK: nn.batchnorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %n, %stats = nn.batchnorm %c, %g, %s {eps = 1.0e-05 : f64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  // Running statistics: layer 0's, updated in training and read in evaluation.
  // CHECK: nn.batchnorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, momentum = 1.000000e-01 : f64, running = 0 : i64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %n2, %stats2 = nn.batchnorm %c, %g, %s {eps = 1.0e-05 : f64, momentum = 0.1 : f64, running = 0 : i64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  // CHECK: nn.batchnorm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, inference, momentum = 1.000000e-01 : f64, running = 0 : i64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %n3, %stats3 = nn.batchnorm %c, %g, %s {eps = 1.0e-05 : f64, momentum = 0.1 : f64, running = 0 : i64, inference} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
  // CHECK: nn.relu %{{.*}} : tensor<?x16x32x32xf32>
  %r = nn.relu %n : tensor<?x16x32x32xf32>
  // CHECK: nn.maxpool2d %{{.*}} {kernel = 3 : i64, pad = 1 : i64, stride = 2 : i64} : tensor<?x16x32x32xf32> -> tensor<?x16x16x16xf32>
  %m = nn.maxpool2d %r {kernel = 3 : i64, stride = 2 : i64, pad = 1 : i64} : tensor<?x16x32x32xf32> -> tensor<?x16x16x16xf32>
  // CHECK: nn.add %{{.*}}, %{{.*}} : tensor<?x16x16x16xf32>
  %a = nn.add %m, %m : tensor<?x16x16x16xf32>
  // CHECK: nn.avgpool %{{.*}} : tensor<?x16x16x16xf32> -> tensor<?x16x1x1xf32>
  %p = nn.avgpool %a : tensor<?x16x16x16xf32> -> tensor<?x16x1x1xf32>
  // CHECK: nn.flatten %{{.*}} : tensor<?x16x1x1xf32> -> tensor<?x1x16xf32>
  %f = nn.flatten %p : tensor<?x16x1x1xf32> -> tensor<?x1x16xf32>
  return %f : tensor<?x1x16xf32>
}

// CHECK-LABEL: func.func @backward
func.func @backward(%dy: tensor<4x16x8x8xf32>, %x: tensor<4x3x8x8xf32>, %w: tensor<16x3x3x3xf32>,
                    %stats: tensor<2x16xf32>, %g: tensor<16xf32>, %df: tensor<4x1x1024xf32>) {
  // CHECK: nn.conv2d_grad_data %{{.*}}, %{{.*}} {pad = 1 : i64, stride = 1 : i64} : (tensor<4x16x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<4x3x8x8xf32>
  %dx = nn.conv2d_grad_data %dy, %w {stride = 1 : i64, pad = 1 : i64} : (tensor<4x16x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<4x3x8x8xf32>
  // CHECK: nn.conv2d_grad_filter %{{.*}}, %{{.*}} {pad = 1 : i64, stride = 1 : i64} : (tensor<4x16x8x8xf32>, tensor<4x3x8x8xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
  %dw, %db = nn.conv2d_grad_filter %dy, %x {stride = 1 : i64, pad = 1 : i64} : (tensor<4x16x8x8xf32>, tensor<4x3x8x8xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
  // CHECK: nn.batchnorm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<4x16x8x8xf32>, tensor<2x16xf32>, tensor<16xf32>
  %bx, %bw, %bb = nn.batchnorm_grad %dy, %dy, %stats, %g {eps = 1.0e-05 : f64} : tensor<4x16x8x8xf32>, tensor<2x16xf32>, tensor<16xf32>
  // CHECK: nn.maxpool2d_grad %{{.*}}, %{{.*}} {kernel = 2 : i64, pad = 0 : i64, stride = 2 : i64} : tensor<4x16x4x4xf32>, tensor<4x16x8x8xf32>
  %m = nn.avgpool_grad %dy : tensor<4x16x8x8xf32> -> tensor<4x16x8x8xf32>
  %half = nn.maxpool2d %dy {kernel = 2 : i64, stride = 2 : i64, pad = 0 : i64} : tensor<4x16x8x8xf32> -> tensor<4x16x4x4xf32>
  %mx = nn.maxpool2d_grad %half, %dy {kernel = 2 : i64, stride = 2 : i64, pad = 0 : i64} : tensor<4x16x4x4xf32>, tensor<4x16x8x8xf32>
  // CHECK: nn.unflatten %{{.*}} : tensor<4x1x1024xf32> -> tensor<4x16x8x8xf32>
  %u = nn.unflatten %df : tensor<4x1x1024xf32> -> tensor<4x16x8x8xf32>
  return
}
