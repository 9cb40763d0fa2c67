// A library call needs every extent: an nn op with a dynamic result is an error at the op
// when it bufferizes (LibraryCalls.cpp), never a call with a wrong size.
// RUN: planc-opt %s -split-input-file -one-shot-bufferize -verify-diagnostics

func.func @matmul(%xm: memref<?x3x8xf32>, %wm: memref<8x24xf32>) -> memref<?x3x24xf32> {
  %x = bufferization.to_tensor %xm restrict : memref<?x3x8xf32> to tensor<?x3x8xf32>
  %w = bufferization.to_tensor %wm restrict : memref<8x24xf32> to tensor<8x24xf32>
  // expected-error @+2 {{'nn.matmul' op needs static shapes to become a library call (run plan-train-step, which fixes batch and sequence), not 'tensor<?x3x8xf32>'}}
  // expected-error @+1 {{failed to bufferize op}}
  %y = nn.matmul %x, %w : (tensor<?x3x8xf32>, tensor<8x24xf32>) -> tensor<?x3x24xf32>
  %r = bufferization.to_buffer %y : tensor<?x3x24xf32> to memref<?x3x24xf32>
  return %r : memref<?x3x24xf32>
}

// -----

// The first dynamic result of an op with several.
func.func @layernorm_grad(%dym: memref<2x?x8xf32>, %xm: memref<2x?x8xf32>, %gm: memref<8xf32>) -> memref<8xf32> {
  %dy = bufferization.to_tensor %dym restrict : memref<2x?x8xf32> to tensor<2x?x8xf32>
  %x = bufferization.to_tensor %xm restrict : memref<2x?x8xf32> to tensor<2x?x8xf32>
  %g = bufferization.to_tensor %gm restrict : memref<8xf32> to tensor<8xf32>
  // expected-error @+2 {{'nn.layernorm_grad' op needs static shapes to become a library call (run plan-train-step, which fixes batch and sequence), not 'tensor<2x?x8xf32>'}}
  // expected-error @+1 {{failed to bufferize op}}
  %dx, %dw, %db = nn.layernorm_grad %dy, %x, %g {eps = 1.0e-05 : f64} : tensor<2x?x8xf32>, tensor<8xf32>
  %r = bufferization.to_buffer %dw : tensor<8xf32> to memref<8xf32>
  return %r : memref<8xf32>
}

// -----

func.func @sdpa(%qm: memref<?x?x24xf32>) -> memref<?x?x8xf32> {
  %q = bufferization.to_tensor %qm restrict : memref<?x?x24xf32> to tensor<?x?x24xf32>
  // expected-error @+2 {{'nn.sdpa' op needs static shapes to become a library call (run plan-train-step, which fixes batch and sequence), not 'tensor<?x?x24xf32>'}}
  // expected-error @+1 {{failed to bufferize op}}
  %y = nn.sdpa %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  %r = bufferization.to_buffer %y : tensor<?x?x8xf32> to memref<?x?x8xf32>
  return %r : memref<?x?x8xf32>
}
