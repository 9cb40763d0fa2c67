// one-shot-bufferize of the vision ops (LibraryCalls.cpp, emitVisionCall): each becomes
// calls of the runtime's kernels with N, C, H, W and the window (k, stride, pad) as
// constants; batchnorm is its statistics, then the normalisation; its gradient the
// (dbias, dweight) sums into a scratch buffer (freed by plan-free-buffers), the input
// gradient from them, and the two rows copied out.
// RUN: planc-opt %s -one-shot-bufferize -canonicalize | FileCheck %s

// CHECK-LABEL: func.func @conv(
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// N = 4, C = 3, H = W = 8, K = 16, k = 3, stride 2, pad 1.
// CHECK: call @planrt_k_conv2d(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C3]], %[[C8]], %[[C8]], %[[C16]], %[[C3]], %[[C2]], %[[C1]])
// CHECK: call @planrt_k_conv2d_bwd_data(%{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C3]], %[[C8]], %[[C8]], %[[C16]], %[[C3]], %[[C2]], %[[C1]])
// CHECK: call @planrt_k_conv2d_bwd_filter(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C3]], %[[C8]], %[[C8]], %[[C16]], %[[C3]], %[[C2]], %[[C1]])
func.func @conv(%x: tensor<4x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>, %dy: tensor<4x16x4x4xf32>)
    -> (tensor<4x16x4x4xf32>, tensor<4x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) {
  %y = nn.conv2d %x, %w, %b {stride = 2 : i64, pad = 1 : i64} : (tensor<4x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<4x16x4x4xf32>
  %dx = nn.conv2d_grad_data %dy, %w {stride = 2 : i64, pad = 1 : i64} : (tensor<4x16x4x4xf32>, tensor<16x3x3x3xf32>) -> tensor<4x3x8x8xf32>
  %dw, %db = nn.conv2d_grad_filter %dy, %x {stride = 2 : i64, pad = 1 : i64} : (tensor<4x16x4x4xf32>, tensor<4x3x8x8xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
  return %y, %dx, %dw, %db : tensor<4x16x4x4xf32>, tensor<4x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
}

// A convolution without bias passes a null pointer.
// CHECK-LABEL: func.func @conv_no_bias(
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @planrt_k_conv2d(%{{.*}}, %{{.*}}, %[[NULL]],
func.func @conv_no_bias(%x: tensor<4x3x8x8xf32>, %w: tensor<16x3x1x1xf32>) -> tensor<4x16x8x8xf32> {
  %y = nn.conv2d %x, %w {stride = 1 : i64, pad = 0 : i64} : (tensor<4x3x8x8xf32>, tensor<16x3x1x1xf32>) -> tensor<4x16x8x8xf32>
  return %y : tensor<4x16x8x8xf32>
}

// CHECK-LABEL: func.func @pool(
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i64
// CHECK: call @planrt_k_maxpool2d(%{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C8:.*]], %[[C8]], %[[C2]], %[[C2]], %[[C0]])
// CHECK: call @planrt_k_maxpool2d_bwd(%{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C8]], %[[C8]], %[[C2]], %[[C2]], %[[C0]])
// CHECK: call @planrt_k_avgpool(%{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]])
// CHECK: call @planrt_k_avgpool_bwd(%{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]])
func.func @pool(%x: tensor<4x16x8x8xf32>, %dy: tensor<4x16x4x4xf32>, %dp: tensor<4x16x1x1xf32>)
    -> (tensor<4x16x4x4xf32>, tensor<4x16x8x8xf32>, tensor<4x16x1x1xf32>, tensor<4x16x8x8xf32>) {
  %m = nn.maxpool2d %x {kernel = 2 : i64, stride = 2 : i64, pad = 0 : i64} : tensor<4x16x8x8xf32> -> tensor<4x16x4x4xf32>
  %dm = nn.maxpool2d_grad %dy, %x {kernel = 2 : i64, stride = 2 : i64, pad = 0 : i64} : tensor<4x16x4x4xf32>, tensor<4x16x8x8xf32>
  %p = nn.avgpool %x : tensor<4x16x8x8xf32> -> tensor<4x16x1x1xf32>
  %dx = nn.avgpool_grad %dp : tensor<4x16x1x1xf32> -> tensor<4x16x8x8xf32>
  return %m, %dm, %p, %dx : tensor<4x16x4x4xf32>, tensor<4x16x8x8xf32>, tensor<4x16x1x1xf32>, tensor<4x16x8x8xf32>
}

// Batch statistics over N·H·W = 4·8·8 = 256 elements per channel.
// CHECK-LABEL: func.func @batchnorm(
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK: %[[STATS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16xf32>
// CHECK: call @planrt_k_batchnorm_stats(%{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]])
// CHECK: call @planrt_k_batchnorm_fwd(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]], %[[EPS]])
// CHECK: %[[DSTATS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16xf32>
// CHECK: call @planrt_k_batchnorm_bwd_stats(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]], %[[EPS]])
// CHECK: call @planrt_k_batchnorm_bwd_data(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C4]], %[[C16]], %[[C64]], %[[C256]], %[[EPS]])
// dbias is row 0 of the sums, dweight row 1.
// CHECK: %[[R0:.*]] = memref.subview %[[DSTATS]][0, 0] [1, 16] [1, 1]
// CHECK: %[[F0:.*]] = memref.collapse_shape %[[R0]]
// CHECK: memref.copy %[[F0]], %[[DB:.*]] :
// CHECK: %[[R1:.*]] = memref.subview %[[DSTATS]][1, 0] [1, 16] [1, 1]
// CHECK: %[[F1:.*]] = memref.collapse_shape %[[R1]]
// CHECK: memref.copy %[[F1]], %[[DW:.*]] :
// CHECK-NOT: memref.dealloc
func.func @batchnorm(%x: tensor<4x16x8x8xf32>, %g: tensor<16xf32>, %s: tensor<16xf32>, %dy: tensor<4x16x8x8xf32>)
    -> (tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>) {
  %y, %stats = nn.batchnorm %x, %g, %s {eps = 1.0e-05 : f64} : tensor<4x16x8x8xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %dx, %dw, %db = nn.batchnorm_grad %dy, %x, %stats, %g {eps = 1.0e-05 : f64} : tensor<4x16x8x8xf32>, tensor<2x16xf32>, tensor<16xf32>
  return %y, %dx, %dw, %db : tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>
}

// Running statistics (layer 3 of the step's table): a training batchnorm hands its
// statistics on after normalising, with the 256 elements per channel they cover and
// the momentum; a recomputation does not; in evaluation the running statistics
// normalise, and nothing else runs.
// CHECK-LABEL: func.func @running(
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[M:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK: call @planrt_k_batchnorm_stats(
// CHECK: call @planrt_k_batchnorm_fwd(
// CHECK: call @planrt_k_batchnorm_observe(%{{.*}}, %[[C3]], %[[C16]], %[[C256]], %[[M]])
// CHECK: call @planrt_k_batchnorm_stats(
// CHECK: call @planrt_k_batchnorm_fwd(
// CHECK-NOT: call @planrt_k_batchnorm_observe
// CHECK: call @planrt_k_batchnorm_infer(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C3]], %[[C4]], %[[C16]], %[[C64]], %[[EPS]])
// CHECK-NOT: call @planrt_k_batchnorm_
func.func @running(%x: tensor<4x16x8x8xf32>, %g: tensor<16xf32>, %s: tensor<16xf32>)
    -> (tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<2x16xf32>) {
  %y, %stats = nn.batchnorm %x, %g, %s {eps = 1.0e-05 : f64, momentum = 0.25 : f64, running = 3 : i64} : tensor<4x16x8x8xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %y2, %stats2 = nn.batchnorm %x, %g, %s {eps = 1.0e-05 : f64, momentum = 0.25 : f64, running = 3 : i64, nn.recomputed} : tensor<4x16x8x8xf32>, tensor<16xf32> -> tensor<2x16xf32>
  %y3, %stats3 = nn.batchnorm %x, %g, %s {eps = 1.0e-05 : f64, momentum = 0.25 : f64, running = 3 : i64, inference} : tensor<4x16x8x8xf32>, tensor<16xf32> -> tensor<2x16xf32>
  return %y, %y2, %y3, %stats3 : tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>, tensor<2x16xf32>
}
