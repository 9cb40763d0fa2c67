// plan-precision-audit (cuda-host): the GEMMs and attention plan-gemm-precision marked
// bf16 or f16 call the runtime's audit with the precision as one more argument (1 bf16,
// 2 f16); unmarked and TF32 calls stay as they were, and so do their declarations; a
// precision the CUDA target does not have is an error.
// RUN: planc-opt %s -split-input-file -plan-precision-audit -verify-diagnostics | FileCheck %s

// CHECK-DAG: func.func private @cblas_sgemm(
// CHECK-DAG: func.func private @planrt_audit_gemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32, i32)
// CHECK-DAG: func.func private @planrt_audit_sdpa_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32, i32)
// CHECK-LABEL: func.func @step(
// CHECK: call @cblas_sgemm(%{{.*}}) : (
// CHECK: call @cblas_sgemm(%{{.*}}) {plan.gemm_precision = "tf32"}
// CHECK: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_audit_gemm(%{{.*}}, %[[BF16]]) : (
// CHECK: %[[F16:.*]] = arith.constant 2 : i32
// CHECK: call @planrt_audit_gemm(%{{.*}}, %[[F16]]) : (
// CHECK: call @planrt_k_sdpa(
// CHECK: %[[A16:.*]] = arith.constant 1 : i32
// CHECK: call @planrt_audit_sdpa_bwd(%{{.*}}, %[[A16]]) : (
func.func private @cblas_sgemm(i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32)
func.func private @planrt_k_sdpa(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32)
func.func private @planrt_k_sdpa_bwd(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32)
func.func @step(%p: !llvm.ptr, %i: i32, %n: i64, %f: f32) {
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i)
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "tf32"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "bf16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @cblas_sgemm(%i, %i, %i, %i, %i, %i, %f, %p, %i, %p, %i, %f, %p, %i) {plan.gemm_precision = "f16"}
      : (i32, i32, i32, i32, i32, i32, f32, !llvm.ptr, i32, !llvm.ptr, i32, f32, !llvm.ptr, i32) -> ()
  call @planrt_k_sdpa(%p, %p, %n, %n, %n, %n, %n, %i, %i, %f) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32) -> ()
  call @planrt_k_sdpa_bwd(%p, %p, %p, %n, %n, %n, %n, %n, %i, %i, %f) {plan.gemm_precision = "bf16"}
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i32, i32, f32) -> ()
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
