// planrt_cuda_sgemm: cblas_sgemm's row-major C = alpha op(A) op(B) + beta C on the
// device through cuBLASLt, in fp32 (CUBLAS_COMPUTE_32F: no TF32, so the products
// match the CPU target's within fp32 rounding). cuBLASLt is column-major: the
// row-major C [m, n] is the column-major Cᵀ [n, m] = op(B)ᵀ op(A)ᵀ, so B is passed
// as cuBLASLt's A and A as its B, each with its own transpose flag.
#include "device.h"

#include "planrt_cuda.h"

#include <cublasLt.h>

#include <cstdio>
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
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  checkLt(cublasLtMatmulAlgoGetHeuristic(l.handle, desc, x, y, d, d, pref, 1, &result, &found),
          "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) {
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
