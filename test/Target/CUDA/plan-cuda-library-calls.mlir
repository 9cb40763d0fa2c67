// plan-cuda-library-calls: the fused kernels with a device version become calls of
// libplanrt_cuda (planrt_cuda_*), same arguments; the GEMM (cblas_sgemm) becomes
// planrt_cuda_gemm (cuBLASLt), and the attention its device version, with one more
// argument, the planrt_gemm_compute of the call's plan.gemm_precision (0 fp32 where it
// has none, 1 bf16, 2 f16, 3 tf32); the
// tensor-parallel kernels stay the host's (they act on managed memory between
// synchronous launches); a name already taken, or a precision the runtime does not
// have, is an error.
// RUN: planc-opt %s -split-input-file -plan-cuda-library-calls -verify-diagnostics | FileCheck %s

// CHECK-DAG: func.func private @planrt_cuda_gemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32, i32)
// CHECK-DAG: func.func private @planrt_cuda_layernorm(
// CHECK-DAG: func.func private @planrt_cuda_sdpa_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32, i32)
// CHECK-DAG: func.func private @planrt_cuda_sdpa(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32, i32)
// CHECK-DAG: func.func private @planrt_cuda_cross_entropy(
// CHECK-DAG: func.func private @planrt_k_all_reduce(
// CHECK-LABEL: func.func @step(
// CHECK: %[[F32:.*]] = arith.constant 0 : i32
// CHECK: call @planrt_cuda_gemm(%{{.*}}, %[[F32]]) : (
// CHECK: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_cuda_gemm(%{{.*}}, %[[BF16]]) : (
// CHECK: %[[F16:.*]] = arith.constant 2 : i32
// CHECK: call @planrt_cuda_gemm(%{{.*}}, %[[F16]]) : (
// CHECK: %[[TF32:.*]] = arith.constant 3 : i32
// CHECK: call @planrt_cuda_gemm(%{{.*}}, %[[TF32]]) : (
// CHECK: call @planrt_cuda_layernorm(
// CHECK: %[[A32:.*]] = arith.constant 0 : i32
// CHECK: call @planrt_cuda_sdpa_bwd(%{{.*}}, %[[A32]]) : (
// CHECK: %[[ABF16:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_cuda_sdpa(%{{.*}}, %[[ABF16]]) : (
// CHECK: call @planrt_cuda_cross_entropy(
// CHECK: call @planrt_k_all_reduce(
// CHECK-NOT: cblas_sgemm
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @planrt_k_layernorm(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32)
func.func private @planrt_k_sdpa_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32)
func.func private @planrt_k_sdpa(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32)
func.func private @planrt_k_cross_entropy(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32)
func.func private @planrt_k_all_reduce(!llvm.ptr, !llvm.ptr, i64, i32, i32)
func.func @step(%p: !llvm.ptr, %i: i32, %n: i64, %f: f32) {
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i)
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "f16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "tf32"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @planrt_k_layernorm(%p, %p, %p, %p, %n, %n, %f) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
  call @planrt_k_sdpa_bwd(%p, %p, %p, %n, %n, %n, %n, %n, %i, %i, %f)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32) -> ()
  call @planrt_k_sdpa(%p, %p, %n, %n, %n, %n, %n, %i, %i, %f) {plan.gemm_precision = "bf16"}
      : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32) -> ()
  call @planrt_k_cross_entropy(%p, %p, %p, %n, %n, %i) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32) -> ()
  call @planrt_k_all_reduce(%p, %p, %n, %i, %i) : (!llvm.ptr, !llvm.ptr, i64, i32, i32) -> ()
  return
}

// -----

func.func private @planrt_cuda_embedding(!llvm.ptr)
// expected-error @+1 {{'func.func' op 'planrt_cuda_embedding' is already declared}}
func.func private @planrt_k_embedding(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64)

// -----

// A device kernel's operand in a constant global (a host address) is refused; the
// cross-entropy backward's seed (operand 0), which the runtime reads on the host, is not.
memref.global "private" constant @table : memref<4xf32> = dense<1.0>
func.func private @planrt_k_layernorm(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32)
func.func private @planrt_k_cross_entropy_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32)
func.func @constant_operand(%p: !llvm.ptr, %n: i64, %f: f32, %r: i32) {
  %g = memref.get_global @table : memref<4xf32>
  %i = memref.extract_aligned_pointer_as_index %g : memref<4xf32> -> index
  %c = arith.index_cast %i : index to i64
  %q = llvm.inttoptr %c : i64 to !llvm.ptr
  call @planrt_k_cross_entropy_bwd(%q, %p, %p, %p, %n, %n, %r, %r) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32) -> ()
  // expected-error @+1 {{operand 1 of 'planrt_cuda_layernorm' is the constant global @table, which a GPU kernel cannot read: not implemented by the CUDA target}}
  call @planrt_k_layernorm(%p, %q, %p, %p, %n, %n, %f) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, f32) -> ()
  return
}

// -----

func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func @fp8(%p: !llvm.ptr, %i: i32, %f: f32) {
  // expected-error @+1 {{'func.call' op has GEMM precision 'fp8', which the CUDA target does not implement (bf16, f16 or tf32)}}
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "fp8"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  return
}
