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

// -----

// Past ops that leave the output alone: the rounding of an input gradient's GEMM comes
// after the weight gradient's GEMM and an element-wise op on other buffers; the GEMM
// writes the output itself. An op between that writes the output, or a runtime call
// (which may reach buffers it is not passed), keeps the rounding.
#id = affine_map<(d0, d1) -> (d0, d1)>

// DEVICE-LABEL: func.func @past(
// DEVICE: arith.constant 17 : i32
// CHECK-LABEL: func.func @past(
// CHECK-SAME: %[[X:.*]]: memref<4x4xf32>, %[[W:.*]]: memref<4x4xf32>, %[[Y:.*]]: memref<4x4xf32>, %[[G:.*]]: memref<4x4xf32>, %[[Z:.*]]: memref<4x4xf32>
// CHECK: %[[YB:.*]] = memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16", plan.round_result}
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16"}
// CHECK-NEXT: linalg.generic
// CHECK-SAME: outs(%[[G]]
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK-LABEL: func.func @blocked(
// CHECK-NOT: plan.round_result
// CHECK-COUNT-2: outs(%{{.*}} : memref<4x4xf32>) {
// CHECK-NOT: plan.round_result
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @planrt_grad_ready(i64)
func.func @past(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %y: memref<4x4xf32>, %g: memref<4x4xf32>, %z: memref<4x4xf32>) {
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
  %zi = memref.extract_aligned_pointer_as_index %z : memref<4x4xf32> -> index
  %zl = arith.index_cast %zi : index to i64
  %zp = llvm.inttoptr %zl : i64 to !llvm.ptr
  %c = memref.alloc() : memref<4x4xf32>
  %ci = memref.extract_aligned_pointer_as_index %c : memref<4x4xf32> -> index
  %cl = arith.index_cast %ci : index to i64
  %cp = llvm.inttoptr %cl : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %cp, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %zp, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%z : memref<4x4xf32>) outs(%g : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c : memref<4x4xf32>
  return
}

func.func @blocked(%x: memref<4x4xf32>, %w: memref<4x4xf32>, %y: memref<4x4xf32>) {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c4 = arith.constant 4 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : i64
  %xi = memref.extract_aligned_pointer_as_index %x : memref<4x4xf32> -> index
  %xl = arith.index_cast %xi : index to i64
  %xp = llvm.inttoptr %xl : i64 to !llvm.ptr
  %wi = memref.extract_aligned_pointer_as_index %w : memref<4x4xf32> -> index
  %wl = arith.index_cast %wi : index to i64
  %wp = llvm.inttoptr %wl : i64 to !llvm.ptr

  // the output written between
  %c1 = memref.alloc() : memref<4x4xf32>
  %c1i = memref.extract_aligned_pointer_as_index %c1 : memref<4x4xf32> -> index
  %c1l = arith.index_cast %c1i : index to i64
  %c1p = llvm.inttoptr %c1l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c1p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.fill ins(%one : f32) outs(%y : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c1 : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c1 : memref<4x4xf32>

  // a runtime call between
  %c2 = memref.alloc() : memref<4x4xf32>
  %c2i = memref.extract_aligned_pointer_as_index %c2 : memref<4x4xf32> -> index
  %c2l = arith.index_cast %c2i : index to i64
  %c2p = llvm.inttoptr %c2l : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c4, %c4, %one, %xp, %c4, %wp, %c4, %zero, %c2p, %c4)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @planrt_grad_ready(%c0) : (i64) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %c2 : memref<4x4xf32>
  return
}

// -----

// The cross-entropy's backward whose gradient is rounded to bf16 over the logits (the
// buffer bufferization reuses) writes it there itself, rounded (round_to 1): it reads
// each row whole before it writes it. The same with an offset into the logits, or a
// rounding to f16 into another buffer (round_to 2).
#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME: %[[L:.*]]: memref<4x8xf32>
// CHECK-DAG: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[LI:.*]] = memref.extract_aligned_pointer_as_index %[[L]]
// CHECK: call @planrt_k_cross_entropy_bwd(%{{.*}}, %[[LP:.*]], %{{.*}}, %[[OUT:.*]], %{{.*}}, %{{.*}}, %[[BF16]], %{{.*}})
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK-LABEL: func.func @cross_entropy_f16(
// CHECK: %[[F16:.*]] = arith.constant 2 : i32
// CHECK: call @planrt_k_cross_entropy_bwd(%{{.*}}, %[[F16]], %{{.*}})
// CHECK-NOT: linalg.generic
// CHECK: return
// DEVICE-LABEL: func.func @cross_entropy(
// DEVICE: call @planrt_cuda_cross_entropy_bwd(
func.func private @planrt_k_cross_entropy_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32)
func.func @cross_entropy(%l: memref<4x8xf32>, %t: memref<4xi32>, %s: memref<f32>) {
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %c0 = arith.constant 0 : i32
  %si = memref.extract_aligned_pointer_as_index %s : memref<f32> -> index
  %sl = arith.index_cast %si : index to i64
  %sp = llvm.inttoptr %sl : i64 to !llvm.ptr
  %li = memref.extract_aligned_pointer_as_index %l : memref<4x8xf32> -> index
  %ll = arith.index_cast %li : index to i64
  %lp = llvm.inttoptr %ll : i64 to !llvm.ptr
  %ti = memref.extract_aligned_pointer_as_index %t : memref<4xi32> -> index
  %tl = arith.index_cast %ti : index to i64
  %tp = llvm.inttoptr %tl : i64 to !llvm.ptr
  %g = memref.alloc() : memref<4x8xf32>
  %gi = memref.extract_aligned_pointer_as_index %g : memref<4x8xf32> -> index
  %gl = arith.index_cast %gi : index to i64
  %gp = llvm.inttoptr %gl : i64 to !llvm.ptr
  call @planrt_k_cross_entropy_bwd(%sp, %lp, %tp, %gp, %c4, %c8, %c0, %c0)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<4x8xf32>) outs(%l : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %g : memref<4x8xf32>
  return
}

func.func @cross_entropy_f16(%l: memref<4x8xf32>, %t: memref<4xi32>, %s: memref<f32>, %y: memref<4x8xf32>) {
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %c0 = arith.constant 0 : i32
  %si = memref.extract_aligned_pointer_as_index %s : memref<f32> -> index
  %sl = arith.index_cast %si : index to i64
  %sp = llvm.inttoptr %sl : i64 to !llvm.ptr
  %li = memref.extract_aligned_pointer_as_index %l : memref<4x8xf32> -> index
  %ll = arith.index_cast %li : index to i64
  %lp = llvm.inttoptr %ll : i64 to !llvm.ptr
  %ti = memref.extract_aligned_pointer_as_index %t : memref<4xi32> -> index
  %tl = arith.index_cast %ti : index to i64
  %tp = llvm.inttoptr %tl : i64 to !llvm.ptr
  %g = memref.alloc() : memref<4x8xf32>
  %gi = memref.extract_aligned_pointer_as_index %g : memref<4x8xf32> -> index
  %gl = arith.index_cast %gi : index to i64
  %gp = llvm.inttoptr %gl : i64 to !llvm.ptr
  call @planrt_k_cross_entropy_bwd(%sp, %lp, %tp, %gp, %c4, %c8, %c0, %c0)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to f16
    %e = arith.extf %r : f16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %g : memref<4x8xf32>
  return
}

// -----

// Kept: the gradient rounded into the logits at an offset (a view of them that is not
// where the call reads them from), and a call already asked to round.
#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @cross_entropy_kept(
// CHECK-COUNT-2: linalg.generic
func.func private @planrt_k_cross_entropy_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32)
func.func @cross_entropy_kept(%l: memref<64xf32>, %t: memref<4xi32>, %s: memref<f32>) {
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %si = memref.extract_aligned_pointer_as_index %s : memref<f32> -> index
  %sl = arith.index_cast %si : index to i64
  %sp = llvm.inttoptr %sl : i64 to !llvm.ptr
  %li = memref.extract_aligned_pointer_as_index %l : memref<64xf32> -> index
  %ll = arith.index_cast %li : index to i64
  %lp = llvm.inttoptr %ll : i64 to !llvm.ptr
  %ti = memref.extract_aligned_pointer_as_index %t : memref<4xi32> -> index
  %tl = arith.index_cast %ti : index to i64
  %tp = llvm.inttoptr %tl : i64 to !llvm.ptr
  %g = memref.alloc() : memref<32xf32>
  %gi = memref.extract_aligned_pointer_as_index %g : memref<32xf32> -> index
  %gl = arith.index_cast %gi : index to i64
  %gp = llvm.inttoptr %gl : i64 to !llvm.ptr
  call @planrt_k_cross_entropy_bwd(%sp, %lp, %tp, %gp, %c4, %c8, %c0, %c0)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  %half = memref.subview %l[32] [32] [1] : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : memref<32xf32>) outs(%half : memref<32xf32, strided<[1], offset: 32>>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %g : memref<32xf32>
  %h = memref.alloc() : memref<32xf32>
  %hi = memref.extract_aligned_pointer_as_index %h : memref<32xf32> -> index
  %hl = arith.index_cast %hi : index to i64
  %hp = llvm.inttoptr %hl : i64 to !llvm.ptr
  %y = memref.alloc() : memref<32xf32>
  call @planrt_k_cross_entropy_bwd(%sp, %lp, %tp, %hp, %c4, %c8, %c1, %c0)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%h : memref<32xf32>) outs(%y : memref<32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    linalg.yield %e : f32
  }
  memref.dealloc %h : memref<32xf32>
  return
}
