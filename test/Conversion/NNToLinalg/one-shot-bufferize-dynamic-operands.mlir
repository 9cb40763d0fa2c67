// The static-shape check of library calls covers operands as well as results: an op whose
// result is static but whose operands are not (the 0-d loss of nn.cross_entropy, the weight
// gradient of nn.matmul_wgrad) gets the same error as one-shot-bufferize-errors.mlir.
// RUN: planc-opt %s -split-input-file -one-shot-bufferize -verify-diagnostics

func.func @cross_entropy(%lm: memref<?x?x16xf32>, %tm: memref<?x?xi32>) -> memref<f32> {
  %l = bufferization.to_tensor %lm restrict : memref<?x?x16xf32> to tensor<?x?x16xf32>
  %t = bufferization.to_tensor %tm restrict : memref<?x?xi32> to tensor<?x?xi32>
  // expected-error @+2 {{'nn.cross_entropy' op needs static shapes to become a library call}}
  // expected-error @+1 {{failed to bufferize op}}
  %c = nn.cross_entropy %l, %t : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  %r = bufferization.to_buffer %c : tensor<f32> to memref<f32>
  return %r : memref<f32>
}

// -----

func.func @matmul_wgrad(%xm: memref<?x3x8xf32>, %dym: memref<?x3x24xf32>) -> memref<8x24xf32> {
  %x = bufferization.to_tensor %xm restrict : memref<?x3x8xf32> to tensor<?x3x8xf32>
  %dy = bufferization.to_tensor %dym restrict : memref<?x3x24xf32> to tensor<?x3x24xf32>
  // expected-error @+2 {{'nn.matmul_wgrad' op needs static shapes to become a library call}}
  // expected-error @+1 {{failed to bufferize op}}
  %dw = nn.matmul_wgrad %x, %dy : (tensor<?x3x8xf32>, tensor<?x3x24xf32>) -> tensor<8x24xf32>
  %r = bufferization.to_buffer %dw : tensor<8x24xf32> to memref<8x24xf32>
  return %r : memref<8x24xf32>
}
