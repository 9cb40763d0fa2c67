// planrt_cuda_sgemm: cblas_sgemm's row-major C = alpha op(A) op(B) + beta C on the
// device through cuBLASLt, in fp32 (CUBLAS_COMPUTE_32F: no TF32, so the products
// match the CPU target's within fp32 rounding). cuBLASLt is column-major: the
// row-major C [m, n] is the column-major Cᵀ [n, m] = op(B)ᵀ op(A)ᵀ, so B is passed
// as cuBLASLt's A and A as its B, each with its own transpose flag.
#include "device.h"

#include "planrt_cuda.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <string>

namespace {

using planrt::cuda::check;

void checkLt(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return;
  std::string detail = std::string(what) + ": cuBLASLt status " + std::to_string(int(s));
  check(cudaErrorUnknown, detail.c_str());
}

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  Lt() {
    checkLt(cublasLtCreate(&handle), "cublasLtCreate");
    check(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc of the cuBLASLt workspace");
  }
};

Lt &lt() {
  static Lt instance;
  return instance;
}

// CBLAS constants (cblas.h).
enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

} // namespace

extern "C" void planrt_cuda_sgemm(int32_t order, int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k,
                                  float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
                                  float *C, int32_t ldc) {
  if (order != kRowMajor)
    check(cudaErrorInvalidValue, "planrt_cuda_sgemm: only row-major (CblasRowMajor) is implemented");
  if (m == 0 || n == 0)
    return;
  if (k == 0) {  // C = beta C: what the generated code asks (beta = 0) is a zeroed C
    if (beta != 0.0f)
      check(cudaErrorNotSupported, "planrt_cuda_sgemm: k = 0 with beta != 0 is not implemented");
    check(cudaMemset2DAsync(C, size_t(ldc) * sizeof(float), 0, size_t(n) * sizeof(float), size_t(m),
                            planrt::cuda::stream()),
          "planrt_cuda_sgemm (k = 0)");
    return planrt::cuda::finish("planrt_cuda_sgemm (k = 0)");
  }
  Lt &l = lt();
  bool tb = transB == kTrans, ta = transA == kTrans;
  // Column-major views: X = B (op → n × k), Y = A (op → k × m), D = C (n × m).
  cublasLtMatmulDesc_t desc;
  checkLt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasOperation_t opX = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opY = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkLt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opX, sizeof opX), "TRANSA");
  checkLt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opY, sizeof opY), "TRANSB");
  cublasLtMatrixLayout_t x, y, d;
  checkLt(cublasLtMatrixLayoutCreate(&x, CUDA_R_32F, tb ? k : n, tb ? n : k, ldb), "layout of B");
  checkLt(cublasLtMatrixLayoutCreate(&y, CUDA_R_32F, ta ? m : k, ta ? k : m, lda), "layout of A");
  checkLt(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, n, m, ldc), "layout of C");
  cublasLtMatmulPreference_t pref;
  checkLt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  size_t ws = kWorkspaceBytes;
  checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
          "workspace preference");
  // cuBLASLt assumes 256-byte aligned operands unless told: a parameter inside the flat
  // buffer or a view of an activation may be aligned to as little as 4 bytes.
  auto alignment = [](const void *p) {
    uint32_t a = 256;
    while (a > 4 && reinterpret_cast<uintptr_t>(p) % a != 0)
      a /= 2;
    return a;
  };
  uint32_t alignX = alignment(B), alignY = alignment(A), alignD = alignment(C);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t *> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignX},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignY},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD}};
  for (auto [attr, value] : aligns)
    checkLt(cublasLtMatmulPreferenceSetAttribute(pref, attr, value, sizeof *value), "alignment preference");
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(l.handle, desc, x, y, d, d, pref, 1, &result, &found);
  if (heuristic != CUBLAS_STATUS_SUCCESS && heuristic != CUBLAS_STATUS_NOT_SUPPORTED)
    checkLt(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "planrt_cuda_sgemm: cuBLASLt has no algorithm for m=%d n=%d k=%d", m, n, k);
    check(cudaErrorNotSupported, buf);
  }
  checkLt(cublasLtMatmul(l.handle, desc, &alpha, B, x, A, y, &beta, C, d, C, d, &result.algo, l.workspace,
                         kWorkspaceBytes, planrt::cuda::stream()),
          "cublasLtMatmul");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(x);
  cublasLtMatrixLayoutDestroy(y);
  cublasLtMatrixLayoutDestroy(d);
  cublasLtMatmulDescDestroy(desc);
  planrt::cuda::finish("planrt_cuda_sgemm (cublasLtMatmul)");
}
