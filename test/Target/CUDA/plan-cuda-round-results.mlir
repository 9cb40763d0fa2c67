// plan-cuda-round-results: a bf16 (f16) GEMM with beta 0 whose fresh result buffer only
// the next op reads, to round it to bf16 (f16) into another buffer, writes that buffer
// itself, marked plan.round_result (PLANRT_GEMM_ROUND_RESULT once plan-cuda-library-calls
// or plan-precision-audit passes its precision); the rounding and the result buffer go,
// and an output allocated after the GEMM is allocated before it. Every other GEMM stays.
// RUN: planc-opt %s -split-input-file -plan-cuda-round-results | FileCheck %s
// RUN: planc-opt %s -split-input-file -plan-cuda-round-results -plan-cuda-library-calls | FileCheck %s --check-prefix=DEVICE

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>, %[[W:.*]]: memref<16x8xf32>
// CHECK: %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK: %[[PTR:.*]] = llvm.inttoptr
// CHECK: call @cblas_sgemm({{.*}}, %[[PTR]], %{{.*}}) {plan.gemm_precision = "bf16", plan.round_result}
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.dealloc
// CHECK: return %[[Y]]
// DEVICE-LABEL: func.func @logits(
// DEVICE: %[[ROUNDED:.*]] = arith.constant 17 : i32
// DEVICE: call @planrt_cuda_gemm(%{{.*}}, %[[ROUNDED]])
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @logits(%x: memref<4x8xf32>, %w: memref<16x8xf32>) -> memref<4x16xf32> {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c112 = arith.constant 112 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %c16 = arith.constant 16 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %xi = memref.extract_aligned_pointer_as_index %x : memref<4x8xf32> -> index
  %xl = arith.index_cast %xi : index to i64
  %xp = llvm.inttoptr %xl : i64 to !llvm.ptr
  %wi = memref.extract_aligned_pointer_as_index %w : memref<16x8xf32> -> index
  %wl = arith.index_cast %wi : index to i64
  %wp = llvm.inttoptr %wl : i64 to !llvm.ptr
  %c = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  %ci = memref.extract_aligned_pointer_as_index %c : memref<4x16xf32> -> index
  %cl = arith.index_cast %ci : index to i64
  %cp = llvm.inttoptr %cl : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c112, %c4, %c16, %c8, %one, %xp, %c8, %wp, %c8, %zero, %cp, %c16)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  %y = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c : memref<4x16xf32>
  return %y : memref<4x16xf32>
}

// -----

// Left as they are: beta 1 (the GEMM adds to C); a rounding to f16 of a bf16 GEMM; a
// rounding that also adds; the result read again after the rounding; an output that
// is an operand of the GEMM; and a rounding of the result in place.
#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @kept(
// CHECK-NOT: plan.round_result
// CHECK-COUNT-6: linalg.generic
// CHECK-NOT: plan.round_result
// DEVICE-LABEL: func.func @kept(
// DEVICE-NOT: arith.constant 17 : i32
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @kept(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c4 = arith.constant 4 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %xi = memref.extract_aligned_pointer_as_index %x : memref<4x4xf32> -> index
  %xl = arith.index_cast %xi : index to i64
  %xp = llvm.inttoptr %xl : i64 to !llvm.ptr
  %wi = memref.extract_aligned_pointer_as_index %w : memref<4x4xf32> -> index
  %wl = arith.index_cast %wi : index to i64
  %wp = llvm.inttoptr %wl : i64 to !llvm.ptr

  // beta 1
  %c1 = memref.alloc() : memref<4x4xf32>
  %c1i = memref.extract_aligned_pointer_as_index %c1 : memref<4x4xf32> -> index
  %c1l = arith.index_cast %c1i : index to i64
  %c1p = llvm.inttoptr %c1l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %one, %c1p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c1 : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c1 : memref<4x4xf32>

  // f16 rounding of a bf16 GEMM
  %c2 = memref.alloc() : memref<4x4xf32>
  %c2i = memref.extract_aligned_pointer_as_index %c2 : memref<4x4xf32> -> index
  %c2l = arith.index_cast %c2i : index to i64
  %c2p = llvm.inttoptr %c2l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c2p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to f16
    %e = arith.extf %t : f16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c2 : memref<4x4xf32>

  // a rounding that adds
  %c3 = memref.alloc() : memref<4x4xf32>
  %c3i = memref.extract_aligned_pointer_as_index %c3 : memref<4x4xf32> -> index
  %c3l = arith.index_cast %c3i : index to i64
  %c3p = llvm.inttoptr %c3l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c3p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c3 : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %in : f32
    %t = arith.truncf %s : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c3 : memref<4x4xf32>

  // the result read again
  %c4b = memref.alloc() : memref<4x4xf32>
  %c4i = memref.extract_aligned_pointer_as_index %c4b : memref<4x4xf32> -> index
  %c4l = arith.index_cast %c4i : index to i64
  %c4p = llvm.inttoptr %c4l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c4p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c4b : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.copy %c4b, %y : memref<4x4xf32> to memref<4x4xf32>
  memref.dealloc %c4b : memref<4x4xf32>

  // the output is operand A
  %c5 = memref.alloc() : memref<4x4xf32>
  %c5i = memref.extract_aligned_pointer_as_index %c5 : memref<4x4xf32> -> index
  %c5l = arith.index_cast %c5i : index to i64
  %c5p = llvm.inttoptr %c5l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c5p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c5 : memref<4x4xf32>) outs(%x : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c5 : memref<4x4xf32>

  // rounded in place
  %c6 = memref.alloc() : memref<4x4xf32>
  %c6i = memref.extract_aligned_pointer_as_index %c6 : memref<4x4xf32> -> index
  %c6l = arith.index_cast %c6i : index to i64
  %c6p = llvm.inttoptr %c6l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c6p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c6 : memref<4x4xf32>) outs(%c6 : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c6 : memref<4x4xf32>
  return
}
