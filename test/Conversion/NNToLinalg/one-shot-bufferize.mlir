// one-shot-bufferize of the library ops (LibraryCalls.cpp): each result gets a fresh
// 64-byte-aligned buffer and the op becomes one call, GEMMs to cblas_sgemm (row-major),
// the rest to the runtime's kernels, with pointers to the buffers' first elements.
// RUN: planc-opt %s -one-shot-bufferize | FileCheck %s
// RUN: planc-opt %s -one-shot-bufferize | FileCheck %s --check-prefix=DECL
// RUN: planc-opt %s -one-shot-bufferize -canonicalize | FileCheck %s --check-prefix=CANON

// Each callee is declared once, privately, whatever the number of calls.
// DECL-COUNT-1: func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
// DECL-NOT: func.func private @cblas_sgemm(
// DECL-NOT: nn.

// CHECK-DAG: func.func private @planrt_k_layernorm(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32)
// CHECK-DAG: func.func private @planrt_k_sdpa(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32)
// CHECK-DAG: func.func private @planrt_k_cross_entropy(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32)

// Nothing in this module is of the LLVM dialect: nn loads it (a dependent dialect) for the
// pointers of the calls (llvm.inttoptr), which would otherwise fail to be created.

// y[6, 24] = x[6, 8] · w[8, 24]: M = 6 rows (2 × 3), N = 24, K = 8, lda = 8, ldb = 24, ldc = 24.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32>, %[[W:[^:]*]]: memref<8x24xf32>, %[[Y:[^:]*]]: memref<2x3x24xf32>)
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x24xf32>
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 111 : i32
// CHECK: %[[TB:.*]] = arith.constant 111 : i32
// CHECK: %[[M:.*]] = arith.constant 6 : i32
// CHECK: %[[N:.*]] = arith.constant 24 : i32
// CHECK: %[[K:.*]] = arith.constant 8 : i32
// CHECK: %[[ALPHA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[XI:.*]] = memref.extract_aligned_pointer_as_index %[[X]] : memref<2x3x8xf32> -> index
// CHECK: %[[BASE:.*]], %[[OFF:.*]], %{{.*}}:3, %{{.*}}:3 = memref.extract_strided_metadata %[[X]]
// CHECK: %[[BYTES:.*]] = arith.constant 4 : index
// CHECK: %[[OFFB:.*]] = arith.muli %[[OFF]], %[[BYTES]] : index
// CHECK: %[[ADDR:.*]] = arith.addi %[[XI]], %[[OFFB]] : index
// CHECK: %[[ADDR64:.*]] = arith.index_cast %[[ADDR]] : index to i64
// CHECK: %[[A:.*]] = llvm.inttoptr %[[ADDR64]] : i64 to !llvm.ptr
// CHECK: %[[LDA:.*]] = arith.constant 8 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: %[[B:.*]] = llvm.inttoptr
// CHECK: %[[LDB:.*]] = arith.constant 24 : i32
// CHECK: %[[BETA:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[C:.*]] = llvm.inttoptr
// CHECK: %[[LDC:.*]] = arith.constant 24 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %[[ALPHA]], %[[A]], %[[LDA]], %[[B]], %[[LDB]], %[[BETA]], %[[C]], %[[LDC]])
// CHECK: memref.copy %[[OUT]], %[[Y]] : memref<2x3x24xf32> to memref<2x3x24xf32>
func.func @matmul(%xm: memref<2x3x8xf32>, %wm: memref<8x24xf32>, %ym: memref<2x3x24xf32>) {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %w = bufferization.to_tensor %wm restrict : memref<8x24xf32> to tensor<8x24xf32>
  %y = nn.matmul %x, %w : (tensor<2x3x8xf32>, tensor<8x24xf32>) -> tensor<2x3x24xf32>
  bufferization.materialize_in_destination %y in restrict writable %ym : (tensor<2x3x24xf32>, memref<2x3x24xf32>) -> ()
  return
}

// The tied head: w is [24, 8], read transposed (ldb = K = 8).
// CHECK-LABEL: func.func @matmul_transposed(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32>, %[[W:[^:]*]]: memref<24x8xf32>
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 111 : i32
// CHECK: %[[TB:.*]] = arith.constant 112 : i32
// CHECK: %[[M:.*]] = arith.constant 6 : i32
// CHECK: %[[N:.*]] = arith.constant 24 : i32
// CHECK: %[[K:.*]] = arith.constant 8 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[A:.*]] = llvm.inttoptr
// CHECK: %[[LDA:.*]] = arith.constant 8 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: %[[B:.*]] = llvm.inttoptr
// CHECK: %[[LDB:.*]] = arith.constant 8 : i32
// CHECK: %[[C:.*]] = llvm.inttoptr
// CHECK: %[[LDC:.*]] = arith.constant 24 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %{{.*}}, %[[A]], %[[LDA]], %[[B]], %[[LDB]], %{{.*}}, %[[C]], %[[LDC]])
func.func @matmul_transposed(%xm: memref<2x3x8xf32>, %wm: memref<24x8xf32>, %ym: memref<2x3x24xf32>) {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %w = bufferization.to_tensor %wm restrict : memref<24x8xf32> to tensor<24x8xf32>
  %y = nn.matmul %x, %w {transpose_w} : (tensor<2x3x8xf32>, tensor<24x8xf32>) -> tensor<2x3x24xf32>
  bufferization.materialize_in_destination %y in restrict writable %ym : (tensor<2x3x24xf32>, memref<2x3x24xf32>) -> ()
  return
}

// dw[8, 24] = xᵀ · dy: M = 8, N = 24, K = 6 rows; A = x (lda 8), B = dy (ldb 24), ldc 24.
// CHECK-LABEL: func.func @matmul_wgrad(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32>, %[[DY:[^:]*]]: memref<2x3x24xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x24xf32>
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 112 : i32
// CHECK: %[[TB:.*]] = arith.constant 111 : i32
// CHECK: %[[M:.*]] = arith.constant 8 : i32
// CHECK: %[[N:.*]] = arith.constant 24 : i32
// CHECK: %[[K:.*]] = arith.constant 6 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[A:.*]] = llvm.inttoptr
// CHECK: %[[LDA:.*]] = arith.constant 8 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[DY]]
// CHECK: %[[B:.*]] = llvm.inttoptr
// CHECK: %[[LDB:.*]] = arith.constant 24 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[C:.*]] = llvm.inttoptr
// CHECK: %[[LDC:.*]] = arith.constant 24 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %{{.*}}, %[[A]], %[[LDA]], %[[B]], %[[LDB]], %{{.*}}, %[[C]], %[[LDC]])
func.func @matmul_wgrad(%xm: memref<2x3x8xf32>, %dym: memref<2x3x24xf32>, %dwm: memref<8x24xf32>) {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %dy = bufferization.to_tensor %dym restrict : memref<2x3x24xf32> to tensor<2x3x24xf32>
  %dw = nn.matmul_wgrad %x, %dy : (tensor<2x3x8xf32>, tensor<2x3x24xf32>) -> tensor<8x24xf32>
  bufferization.materialize_in_destination %dw in restrict writable %dwm : (tensor<8x24xf32>, memref<8x24xf32>) -> ()
  return
}

// dw[24, 8] = dyᵀ · x: M = 24, N = 8, K = 6; A = dy (lda 24), B = x (ldb 8), ldc 8.
// CHECK-LABEL: func.func @matmul_wgrad_transposed(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32>, %[[DY:[^:]*]]: memref<2x3x24xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<24x8xf32>
// CHECK: %[[ORDER:.*]] = arith.constant 101 : i32
// CHECK: %[[TA:.*]] = arith.constant 112 : i32
// CHECK: %[[TB:.*]] = arith.constant 111 : i32
// CHECK: %[[M:.*]] = arith.constant 24 : i32
// CHECK: %[[N:.*]] = arith.constant 8 : i32
// CHECK: %[[K:.*]] = arith.constant 6 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[DY]]
// CHECK: %[[A:.*]] = llvm.inttoptr
// CHECK: %[[LDA:.*]] = arith.constant 24 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[B:.*]] = llvm.inttoptr
// CHECK: %[[LDB:.*]] = arith.constant 8 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[C:.*]] = llvm.inttoptr
// CHECK: %[[LDC:.*]] = arith.constant 8 : i32
// CHECK: call @cblas_sgemm(%[[ORDER]], %[[TA]], %[[TB]], %[[M]], %[[N]], %[[K]], %{{.*}}, %[[A]], %[[LDA]], %[[B]], %[[LDB]], %{{.*}}, %[[C]], %[[LDC]])
func.func @matmul_wgrad_transposed(%xm: memref<2x3x8xf32>, %dym: memref<2x3x24xf32>, %dwm: memref<24x8xf32>) {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %dy = bufferization.to_tensor %dym restrict : memref<2x3x24xf32> to tensor<2x3x24xf32>
  %dw = nn.matmul_wgrad %x, %dy {transpose_w} : (tensor<2x3x8xf32>, tensor<2x3x24xf32>) -> tensor<24x8xf32>
  bufferization.materialize_in_destination %dw in restrict writable %dwm : (tensor<24x8xf32>, memref<24x8xf32>) -> ()
  return
}

// planrt_k_layernorm(x, weight, bias or null, out, rows, dim, eps).
// CHECK-LABEL: func.func @layernorm(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32>, %[[G:[^:]*]]: memref<8xf32>, %[[B:[^:]*]]: memref<8xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[PX:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[PG:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[PB:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[PO:.*]] = llvm.inttoptr
// CHECK: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK: %[[DIM:.*]] = arith.constant 8 : i64
// CHECK: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK: call @planrt_k_layernorm(%[[PX]], %[[PG]], %[[PB]], %[[PO]], %[[ROWS]], %[[DIM]], %[[EPS]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
// Without a bias: a null pointer.
// CHECK: %[[OUT2:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[PX2:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[PG2:.*]] = llvm.inttoptr
// CHECK-NEXT: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT2]]
// CHECK: %[[PO2:.*]] = llvm.inttoptr
// CHECK: %[[EPS2:.*]] = arith.constant 9.99999997E-7 : f32
// CHECK: call @planrt_k_layernorm(%[[PX2]], %[[PG2]], %[[NULL]], %[[PO2]], %{{.*}}, %{{.*}}, %[[EPS2]])
func.func @layernorm(%xm: memref<2x3x8xf32>, %gm: memref<8xf32>, %bm: memref<8xf32>, %o1: memref<2x3x8xf32>, %o2: memref<2x3x8xf32>) {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %g = bufferization.to_tensor %gm restrict : memref<8xf32> to tensor<8xf32>
  %b = bufferization.to_tensor %bm restrict : memref<8xf32> to tensor<8xf32>
  %y1 = nn.layernorm %x, %g, %b {eps = 1.0e-05 : f64} : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>
  %y2 = nn.layernorm %x, %g {eps = 1.0e-06 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  bufferization.materialize_in_destination %y1 in restrict writable %o1 : (tensor<2x3x8xf32>, memref<2x3x8xf32>) -> ()
  bufferization.materialize_in_destination %y2 in restrict writable %o2 : (tensor<2x3x8xf32>, memref<2x3x8xf32>) -> ()
  return
}

// planrt_k_sdpa(qkv, out, B, S, H, KVH, D, causal, rope, theta): 2 query heads on 1 key/value
// head of 4, (2 + 2·1)·4 = 16 wide.
// CHECK-LABEL: func.func @sdpa(
// CHECK-SAME: %[[Q:[^:]*]]: memref<2x3x16xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK: %[[PQ:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[PO:.*]] = llvm.inttoptr
// CHECK: %[[BATCH:.*]] = arith.constant 2 : i64
// CHECK: %[[SEQ:.*]] = arith.constant 3 : i64
// CHECK: %[[H:.*]] = arith.constant 2 : i64
// CHECK: %[[KVH:.*]] = arith.constant 1 : i64
// CHECK: %[[D:.*]] = arith.constant 4 : i64
// CHECK: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK: %[[ROPE:.*]] = arith.constant 1 : i32
// CHECK: %[[THETA:.*]] = arith.constant 5.000000e+05 : f32
// CHECK: call @planrt_k_sdpa(%[[PQ]], %[[PO]], %[[BATCH]], %[[SEQ]], %[[H]], %[[KVH]], %[[D]], %[[CAUSAL]], %[[ROPE]], %[[THETA]])
// Not causal, no rope, the default theta.
// CHECK: %[[D2:.*]] = arith.constant 4 : i64
// CHECK: %[[CAUSAL2:.*]] = arith.constant 0 : i32
// CHECK: %[[ROPE2:.*]] = arith.constant 0 : i32
// CHECK: %[[THETA2:.*]] = arith.constant 1.000000e+04 : f32
// CHECK: call @planrt_k_sdpa(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D2]], %[[CAUSAL2]], %[[ROPE2]], %[[THETA2]])
func.func @sdpa(%qm: memref<2x3x16xf32>, %o1: memref<2x3x8xf32>, %q2m: memref<2x3x24xf32>, %o2: memref<2x3x8xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<2x3x16xf32> to tensor<2x3x16xf32>
  %y = nn.sdpa %q {causal, heads = 2 : i64, kv_heads = 1 : i64, rope, rope_theta = 5.0e+05 : f64} : tensor<2x3x16xf32> -> tensor<2x3x8xf32>
  bufferization.materialize_in_destination %y in restrict writable %o1 : (tensor<2x3x8xf32>, memref<2x3x8xf32>) -> ()
  %q2 = bufferization.to_tensor %q2m restrict : memref<2x3x24xf32> to tensor<2x3x24xf32>
  %y2 = nn.sdpa %q2 {heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  bufferization.materialize_in_destination %y2 in restrict writable %o2 : (tensor<2x3x8xf32>, memref<2x3x8xf32>) -> ()
  return
}

// planrt_k_sdpa_cached(qkv, cache, out, B, n, T, offset, H, KVH, D, rope, theta): the
// cache is written in place, in the caller's buffer: no copy of it before the call, and
// after it only the self-copy of materializing it in its own buffer, which canonicalize
// erases (CANON).
// CHECK-LABEL: func.func @sdpa_cached(
// CHECK-SAME: %[[Q:[^:]*]]: memref<1x2x16xf32>, %[[C:[^:]*]]: memref<1x8x8xf32>, %[[POS:[^:]*]]: i64
// CHECK-NOT: memref.copy
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK: %[[PQ:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[PC:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[PO:.*]] = llvm.inttoptr
// CHECK: %[[B:.*]] = arith.constant 1 : i64
// CHECK: %[[N:.*]] = arith.constant 2 : i64
// CHECK: %[[T:.*]] = arith.constant 8 : i64
// CHECK: %[[H:.*]] = arith.constant 2 : i64
// CHECK: %[[KVH:.*]] = arith.constant 1 : i64
// CHECK: %[[D:.*]] = arith.constant 4 : i64
// CHECK: %[[ROPE:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_k_sdpa_cached(%[[PQ]], %[[PC]], %[[PO]], %[[B]], %[[N]], %[[T]], %[[POS]], %[[H]], %[[KVH]], %[[D]], %[[ROPE]], %{{.*}})
// CHECK-NEXT: memref.copy %[[OUT]], %{{.*}}
// CHECK-NEXT: memref.copy %[[C]], %[[C]]
// CHECK-NEXT: return
// CANON-LABEL: func.func @sdpa_cached(
// CANON: call @planrt_k_sdpa_cached(
// CANON-NEXT: memref.copy %{{.*}}, %arg3
// CANON-NEXT: return
func.func @sdpa_cached(%qm: memref<1x2x16xf32>, %cm: memref<1x8x8xf32>, %pos: i64, %o: memref<1x2x8xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<1x2x16xf32> to tensor<1x2x16xf32>
  %c = bufferization.to_tensor %cm restrict writable : memref<1x8x8xf32> to tensor<1x8x8xf32>
  %y, %c2 = nn.sdpa_cached %q, %c, %pos {heads = 2 : i64, kv_heads = 1 : i64, rope} : tensor<1x2x16xf32>, tensor<1x8x8xf32> -> tensor<1x2x8xf32>
  bufferization.materialize_in_destination %y in restrict writable %o : (tensor<1x2x8xf32>, memref<1x2x8xf32>) -> ()
  bufferization.materialize_in_destination %c2 in restrict writable %cm : (tensor<1x8x8xf32>, memref<1x8x8xf32>) -> ()
  return
}

// planrt_k_cross_entropy(logits, targets, loss, rows, vocab, storage 0: float32), the loss a 0-d buffer.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[L:[^:]*]]: memref<2x3x16xf32>, %[[T:[^:]*]]: memref<2x3xi32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<f32>
// CHECK: memref.extract_aligned_pointer_as_index %[[L]]
// CHECK: %[[PL:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[T]]
// CHECK: %[[PT:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]] : memref<f32>
// CHECK: %[[PO:.*]] = llvm.inttoptr
// CHECK: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK: %[[V:.*]] = arith.constant 16 : i64
// CHECK: call @planrt_k_cross_entropy(%[[PL]], %[[PT]], %[[PO]], %[[ROWS]], %[[V]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32) -> ()
func.func @cross_entropy(%lm: memref<2x3x16xf32>, %tm: memref<2x3xi32>, %loss: memref<f32>) {
  %l = bufferization.to_tensor %lm restrict : memref<2x3x16xf32> to tensor<2x3x16xf32>
  %t = bufferization.to_tensor %tm restrict : memref<2x3xi32> to tensor<2x3xi32>
  %c = nn.cross_entropy %l, %t : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  bufferization.materialize_in_destination %c in restrict writable %loss : (tensor<f32>, memref<f32>) -> ()
  return
}

// The backward kernels, and the rest of the forward ones.
// CHECK-LABEL: func.func @kernels(
// CHECK: call @planrt_k_embedding(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
// CHECK: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-NEXT: %[[DIM:.*]] = arith.constant 8 : i64
// CHECK-NEXT: %[[VOCAB:.*]] = arith.constant 16 : i64
// CHECK-NEXT: call @planrt_k_embedding_bwd(%{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]], %[[DIM]], %[[VOCAB]])
// Three outputs: dx, dweight, dbias.
// CHECK: %[[DX:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK-NEXT: %[[DW:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT: %[[DB:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
// CHECK: call @planrt_k_layernorm_bwd({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
// CHECK: call @planrt_k_rmsnorm({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
// CHECK: call @planrt_k_rmsnorm_bwd({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
// CHECK: %[[D:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[ROPE:.*]] = arith.constant 0 : i32
// CHECK: call @planrt_k_sdpa_bwd(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %[[CAUSAL]], %[[ROPE]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32) -> ()
// CHECK: call @planrt_k_cross_entropy_bwd({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
// CHECK-NOT: nn.
// CHECK: return
func.func @kernels(%tm: memref<2x3xi32>, %wm: memref<16x8xf32>, %xm: memref<2x3x8xf32>, %gm: memref<8xf32>,
                   %qm: memref<2x3x24xf32>, %lm: memref<2x3x16xf32>, %dl: memref<f32>) -> memref<2x3x16xf32> {
  %t = bufferization.to_tensor %tm restrict : memref<2x3xi32> to tensor<2x3xi32>
  %w = bufferization.to_tensor %wm restrict : memref<16x8xf32> to tensor<16x8xf32>
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %g = bufferization.to_tensor %gm restrict : memref<8xf32> to tensor<8xf32>
  %q = bufferization.to_tensor %qm restrict : memref<2x3x24xf32> to tensor<2x3x24xf32>
  %l = bufferization.to_tensor %lm restrict : memref<2x3x16xf32> to tensor<2x3x16xf32>
  %d = bufferization.to_tensor %dl restrict : memref<f32> to tensor<f32>
  %e = nn.embedding %w, %t : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %de = nn.embedding_grad %e, %t : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<16x8xf32>
  %dx, %dg, %db = nn.layernorm_grad %x, %e, %g {eps = 1.0e-05 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %r = nn.rmsnorm %dx, %g {eps = 1.0e-06 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %rx, %rg = nn.rmsnorm_grad %r, %x, %dg {eps = 1.0e-06 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %dq = nn.sdpa_grad %rx, %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x3x8xf32>, tensor<2x3x24xf32>
  %dlog = nn.cross_entropy_grad %d, %l, %t : tensor<f32>, tensor<2x3x16xf32>, tensor<2x3xi32>
  %out = bufferization.to_buffer %dlog : tensor<2x3x16xf32> to memref<2x3x16xf32>
  return %out : memref<2x3x16xf32>
}

// An operand that is not contiguous is copied into a fresh buffer first.
// CHECK-LABEL: func.func @strided(
// CHECK-SAME: %[[X:[^:]*]]: memref<2x3x8xf32, strided<[48, 16, 1]>>
// CHECK: %[[COPY:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK-NEXT: memref.copy %[[X]], %[[COPY]] : memref<2x3x8xf32, strided<[48, 16, 1]>> to memref<2x3x8xf32>
// CHECK-NEXT: memref.extract_aligned_pointer_as_index %[[COPY]]
// CHECK: call @cblas_sgemm(
func.func @strided(%xm: memref<2x3x8xf32, strided<[48, 16, 1]>>, %wm: memref<8x24xf32>) -> memref<2x3x24xf32> {
  %x = bufferization.to_tensor %xm restrict : memref<2x3x8xf32, strided<[48, 16, 1]>> to tensor<2x3x8xf32>
  %w = bufferization.to_tensor %wm restrict : memref<8x24xf32> to tensor<8x24xf32>
  %y = nn.matmul %x, %w : (tensor<2x3x8xf32>, tensor<8x24xf32>) -> tensor<2x3x24xf32>
  %r = bufferization.to_buffer %y : tensor<2x3x24xf32> to memref<2x3x24xf32>
  return %r : memref<2x3x24xf32>
}

// planrt_k_dequant_nf4(q, w, n, block, double): QLoRA's matrix made from its storage.
// CHECK-LABEL: func.func @dequantize_nf4(
// CHECK: %[[W:.*]] = memref.alloc() {alignment = 64 : i64} : memref<128x128xf32>
// CHECK: %[[N:.*]] = arith.constant 16384 : i64
// CHECK: %[[BLOCK:.*]] = arith.constant 64 : i64
// CHECK: %[[DBL:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_k_dequant_nf4(%{{.*}}, %{{.*}}, %[[N]], %[[BLOCK]], %[[DBL]])
func.func @dequantize_nf4(%qm: memref<2114xf32>, %o: memref<128x128xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<2114xf32> to tensor<2114xf32>
  %w = nn.dequantize_nf4 %q {block = 64 : i64, double_quant} : tensor<2114xf32> -> tensor<128x128xf32>
  bufferization.materialize_in_destination %w in restrict writable %o : (tensor<128x128xf32>, memref<128x128xf32>) -> ()
  return
}
