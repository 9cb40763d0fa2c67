// plan-cuda-half-storage: a buffer written only by roundings to bf16 (an element-wise op
// yielding extf(truncf(x)), a GEMM marked plan.round_result) and read only by element-wise
// ops and GEMMs of that precision becomes a bf16 buffer: the writers yield the truncated
// value, the readers widen, and the GEMMs get plan.half_storage (PLANRT_GEMM_HALF_A 32,
// _B 64, _C 128), which their precision argument carries. Every other buffer stays.
// RUN: planc-opt %s -split-input-file -plan-cuda-half-storage | FileCheck %s
// RUN: planc-opt %s -split-input-file -plan-cuda-half-storage -plan-cuda-library-calls | FileCheck %s --check-prefix=DEVICE
// RUN: planc-opt %s -split-input-file -plan-cuda-half-storage -plan-precision-audit | FileCheck %s --check-prefix=AUDIT

#id = affine_map<(d0, d1) -> (d0, d1)>

// The activation h: rounded by the op that writes it, read by an element-wise op and as
// the A operand of a bf16 GEMM through a reshape.
// CHECK-LABEL: func.func @activation(
// CHECK: %[[H:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xbf16>
// CHECK: linalg.generic {{.*}} outs(%[[H]] : memref<4x8xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: bf16):
// CHECK: %[[T:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: linalg.yield %[[T]] : bf16
// CHECK: linalg.generic {{.*}} ins(%[[H]] : memref<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: arith.mulf %[[W]], %[[W]]
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %[[H]] {{.*}} : memref<4x8xbf16> into memref<32xbf16>
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[FLAT]] : memref<32xbf16> -> index
// CHECK: memref.extract_strided_metadata %[[FLAT]] : memref<32xbf16> -> memref<bf16>, index, index, index
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16", plan.half_storage = 32 : i32}
// CHECK: memref.dealloc %[[H]] : memref<4x8xbf16>
// DEVICE-LABEL: func.func @activation(
// DEVICE: %[[C:.*]] = arith.constant 33 : i32
// DEVICE: call @planrt_cuda_gemm(%{{.*}}, %[[C]])
// AUDIT-LABEL: func.func @activation(
// AUDIT: %[[C:.*]] = arith.constant 33 : i32
// AUDIT: call @planrt_audit_gemm(%{{.*}}, %[[C]])
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @activation(%x: memref<4x8xf32>, %w: memref<16x8xf32>, %y: memref<4x8xf32>, %c: memref<4x16xf32>) {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c112 = arith.constant 112 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %c16 = arith.constant 16 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %h = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%h : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %g = arith.addf %in, %in : f32
    %t = arith.truncf %g : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  }
  %flat = memref.collapse_shape %h [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %hi = memref.extract_aligned_pointer_as_index %flat : memref<32xf32> -> index
  %base, %off, %size, %stride = memref.extract_strided_metadata %flat : memref<32xf32> -> memref<f32>, index, index, index
  %four = arith.constant 4 : index
  %offb = arith.muli %off, %four : index
  %ha = arith.addi %hi, %offb : index
  %hl = arith.index_cast %ha : index to i64
  %hp = llvm.inttoptr %hl : i64 to !llvm.ptr
  %wi = memref.extract_aligned_pointer_as_index %w : memref<16x8xf32> -> index
  %wl = arith.index_cast %wi : index to i64
  %wp = llvm.inttoptr %wl : i64 to !llvm.ptr
  %ci = memref.extract_aligned_pointer_as_index %c : memref<4x16xf32> -> index
  %cl = arith.index_cast %ci : index to i64
  %cp = llvm.inttoptr %cl : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c112, %c4, %c16, %c8, %one, %hp, %c8, %wp, %c8, %zero, %cp, %c16)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  memref.dealloc %h : memref<4x8xf32>
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A GEMM's rounded result (plan.round_result) that an element-wise op reads: C is 16-bit,
// and the pointer into a subview counts 2-byte elements.
// CHECK-LABEL: func.func @rounded_result(
// CHECK: %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xbf16>
// CHECK: %[[SUB:.*]] = memref.subview %[[R]][4, 0] [4, 16] [1, 1] : memref<8x16xbf16> to memref<4x16xbf16, strided<[16, 1], offset: 64>>
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[SUB]]
// CHECK: %{{.*}}, %[[OFF:[a-z_0-9]+]], %{{.*}} = memref.extract_strided_metadata %[[SUB]]
// CHECK: %[[TWO:.*]] = arith.constant 2 : index
// CHECK: arith.muli %[[OFF]], %[[TWO]] : index
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16", plan.half_storage = 128 : i32, plan.round_result}
// CHECK: linalg.generic {{.*}} ins(%[[R]] : memref<8x16xbf16>)
// DEVICE-LABEL: func.func @rounded_result(
// DEVICE: %[[C:.*]] = arith.constant 145 : i32
// DEVICE: call @planrt_cuda_gemm(%{{.*}}, %[[C]])
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @rounded_result(%x: memref<4x8xf32>, %w: memref<16x8xf32>, %y: memref<8x16xf32>) {
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
  %r = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
  %sub = memref.subview %r[4, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: 64>>
  %ri = memref.extract_aligned_pointer_as_index %sub : memref<4x16xf32, strided<[16, 1], offset: 64>> -> index
  %four = arith.constant 256 : index
  %rs = arith.addi %ri, %four : index
  %rl = arith.index_cast %rs : index to i64
  %rp = llvm.inttoptr %rl : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c112, %c4, %c16, %c8, %one, %xp, %c8, %wp, %c8, %zero, %rp, %c16)
      {plan.gemm_precision = "bf16", plan.round_result}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : memref<8x16xf32>) outs(%y : memref<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %r : memref<8x16xf32>
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Left float32: a buffer a library kernel reads (%a); one an op writes without rounding
// (%b); one rounded to bf16 but read by an f16 GEMM (%c); one whose writer also reads it
// (%d); one rounded to bf16 and to f16 (%e); one never written (%f).
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: bf16>
// CHECK-NOT: plan.half_storage
// CHECK: return
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @planrt_k_layernorm(!llvm.ptr)
func.func @kept(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %z: memref<4x16xf32>) {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c112 = arith.constant 112 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %c16 = arith.constant 16 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4x8xf32>
  %b = memref.alloc() : memref<4x8xf32>
  %c = memref.alloc() : memref<4x8xf32>
  %d = memref.alloc() : memref<4x8xf32>
  %e = memref.alloc() : memref<4x8xf32>
  %f = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%a, %b, %c, %d : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  ^bb0(%in: f32, %oa: f32, %ob: f32, %oc: f32, %od: f32):
    %t = arith.truncf %in : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    %s = arith.addf %r, %od : f32
    linalg.yield %r, %in, %r, %s : f32, f32, f32, f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%e : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%e : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %in : f32 to f16
    %r = arith.extf %t : f16 to f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %d, %e, %f : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>)
      outs(%y : memref<4x8xf32>) {
  ^bb0(%ia: f32, %ib: f32, %id: f32, %ie: f32, %if: f32, %out: f32):
    %s = arith.addf %ia, %ib : f32
    linalg.yield %s : f32
  }
  %ai = memref.extract_aligned_pointer_as_index %a : memref<4x8xf32> -> index
  %al = arith.index_cast %ai : index to i64
  %ap = llvm.inttoptr %al : i64 to !llvm.ptr
  call @planrt_k_layernorm(%ap) : (!llvm.ptr) -> ()
  %ci = memref.extract_aligned_pointer_as_index %c : memref<4x8xf32> -> index
  %cl = arith.index_cast %ci : index to i64
  %cp = llvm.inttoptr %cl : i64 to !llvm.ptr
  %zi = memref.extract_aligned_pointer_as_index %z : memref<4x16xf32> -> index
  %zl = arith.index_cast %zi : index to i64
  %zp = llvm.inttoptr %zl : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c112, %c4, %c16, %c8, %one, %cp, %c8, %cp, %c8, %zero, %zp, %c16)
      {plan.gemm_precision = "f16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  return
}

// -----

// The logits: the head's GEMM writes them rounded, the cross-entropy reads them, its
// backward writes their rounded gradient over them, which the next GEMM reads. All bf16:
// the GEMMs' plan.half_storage 128 (C) and 32 (A), the cross-entropy's storage 1 (bf16
// logits) and its backward's 5 (bf16 logits, bf16 gradient).
// CHECK-LABEL: func.func @logits(
// CHECK: %[[L:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16xbf16>
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16", plan.half_storage = 128 : i32, plan.round_result}
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_k_cross_entropy(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]])
// CHECK: %[[FIVE:.*]] = arith.constant 5 : i32
// CHECK: call @planrt_k_cross_entropy_bwd(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FIVE]])
// CHECK: call @cblas_sgemm({{.*}}) {plan.gemm_precision = "bf16", plan.half_storage = 32 : i32}
// DEVICE-LABEL: func.func @logits(
// DEVICE: call @planrt_cuda_cross_entropy(
// DEVICE: call @planrt_cuda_cross_entropy_bwd(
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @planrt_k_cross_entropy(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32)
func.func private @planrt_k_cross_entropy_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32)
func.func @logits(%x: memref<4x8xf32>, %w: memref<16x8xf32>, %t: memref<4xi32>, %s: memref<f32>, %dx: memref<4x8xf32>) {
  %c101 = arith.constant 101 : i32
  %c111 = arith.constant 111 : i32
  %c112 = arith.constant 112 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %c16 = arith.constant 16 : i32
  %r4 = arith.constant 4 : i64
  %v16 = arith.constant 16 : i64
  %zero32 = arith.constant 0 : i32
  %bf16 = arith.constant 1 : i32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %xi = memref.extract_aligned_pointer_as_index %x : memref<4x8xf32> -> index
  %xl = arith.index_cast %xi : index to i64
  %xp = llvm.inttoptr %xl : i64 to !llvm.ptr
  %wi = memref.extract_aligned_pointer_as_index %w : memref<16x8xf32> -> index
  %wl = arith.index_cast %wi : index to i64
  %wp = llvm.inttoptr %wl : i64 to !llvm.ptr
  %ti = memref.extract_aligned_pointer_as_index %t : memref<4xi32> -> index
  %tl = arith.index_cast %ti : index to i64
  %tp = llvm.inttoptr %tl : i64 to !llvm.ptr
  %si = memref.extract_aligned_pointer_as_index %s : memref<f32> -> index
  %sl = arith.index_cast %si : index to i64
  %sp = llvm.inttoptr %sl : i64 to !llvm.ptr
  %di = memref.extract_aligned_pointer_as_index %dx : memref<4x8xf32> -> index
  %dl = arith.index_cast %di : index to i64
  %dp = llvm.inttoptr %dl : i64 to !llvm.ptr
  %l = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  %li = memref.extract_aligned_pointer_as_index %l : memref<4x16xf32> -> index
  %ll = arith.index_cast %li : index to i64
  %lp = llvm.inttoptr %ll : i64 to !llvm.ptr
  call @cblas_sgemm(%c101, %c111, %c112, %c4, %c16, %c8, %one, %xp, %c8, %wp, %c8, %zero, %lp, %c16)
      {plan.gemm_precision = "bf16", plan.round_result}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @planrt_k_cross_entropy(%lp, %tp, %sp, %r4, %v16, %zero32)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32) -> ()
  call @planrt_k_cross_entropy_bwd(%sp, %lp, %tp, %lp, %r4, %v16, %bf16, %zero32)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  call @cblas_sgemm(%c101, %c111, %c111, %c4, %c8, %c16, %one, %lp, %c16, %wp, %c8, %zero, %dp, %c8)
      {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  memref.dealloc %l : memref<4x16xf32>
  return
}
