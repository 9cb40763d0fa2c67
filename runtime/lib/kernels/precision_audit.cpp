// The cuda-host target's precision audit (planrt_kernels.h, plan-precision-audit): a
// GEMM or attention the CUDA target runs on bf16 (fp16) tensor cores converts its float32
// operands to that type, which loses nothing only if each is already a value of it, as
// plan-gemm-precision claims. These check every element of those operands — fatal at
// the first that is not, naming the call, the operand, the element and the value — then
// compute as the call they replace. A GEMM asked for a rounded result
// (PLANRT_GEMM_ROUND_RESULT, plan-cuda-round-results) rounds C as the CUDA target's does,
// and one whose operands are 16-bit buffers (PLANRT_GEMM_HALF_*, plan-cuda-half-storage)
// widens them to float32 and narrows its result, as cuBLASLt reads and writes them.
#include "common.h"
#include "planrt_cuda.h"
#include "planrt_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

using planrt::kernels::fatal;

namespace {

/// Whether x is a value of the type `compute` names (PLANRT_GEMM_BF16 or _F16).
bool exactIn(float x, int32_t compute) {
  if (compute == PLANRT_GEMM_BF16) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u & 0xFFFFu) == 0;
  }
  return float(_Float16(x)) == x || x != x;
}

const char *typeName(int32_t compute) { return compute == PLANRT_GEMM_BF16 ? "bf16" : "fp16"; }

/// Every element of the rows × cols matrix at p (rows ld floats apart) exact in `compute`.
void checkMatrix(const char *call, const char *operand, const float *p, int64_t rows, int64_t cols, int64_t ld,
                 int32_t compute) {
  if (compute != PLANRT_GEMM_BF16 && compute != PLANRT_GEMM_F16)
    fatal("%s: precision %d is not audited (bf16 or fp16)", call, compute);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (!exactIn(p[r * ld + c], compute))
        fatal("%s marked %s: %s element (%lld, %lld) = %.9g is not a %s value", call, typeName(compute), operand,
              (long long)r, (long long)c, double(p[r * ld + c]), typeName(compute));
}

/// A float32 copy of the rows × cols 16-bit matrix at p (rows ld elements apart), rows
/// cols apart.
std::vector<float> widened(const void *p, int64_t rows, int64_t cols, int64_t ld, int32_t compute) {
  std::vector<float> out(size_t(rows * cols));
  const auto *h = static_cast<const uint16_t *>(p);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] = planrt::kernels::widen16(h[r * ld + c], compute);
  return out;
}

} // namespace

extern "C" {

void planrt_audit_gemm(int32_t order, int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k, float alpha,
                       const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc,
                       int32_t compute) {
  if (order != CblasRowMajor)
    fatal("planrt_audit_gemm: only row-major GEMMs are audited");
  bool round = (compute & PLANRT_GEMM_ROUND_RESULT) != 0;
  int32_t half = compute & (PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_B | PLANRT_GEMM_HALF_C);
  compute &= ~(PLANRT_GEMM_ROUND_RESULT | half);
  if (round && beta != 0.0f)
    fatal("planrt_audit_gemm: a rounded result (PLANRT_GEMM_ROUND_RESULT) needs beta = 0");
  if ((half & PLANRT_GEMM_HALF_C) && !round)
    fatal("planrt_audit_gemm: a 16-bit result (PLANRT_GEMM_HALF_C) needs PLANRT_GEMM_ROUND_RESULT");
  bool ta = transA == CblasTrans, tb = transB == CblasTrans;
  int64_t rowsA = ta ? k : m, colsA = ta ? m : k, rowsB = tb ? n : k, colsB = tb ? k : n;
  // 16-bit operands are exact in their type: widened, they are the float32 operands.
  std::vector<float> wideA, wideB, wideC;
  if (half & PLANRT_GEMM_HALF_A) {
    wideA = widened(A, rowsA, colsA, lda, compute);
    A = wideA.data();
    lda = int32_t(std::max<int64_t>(colsA, 1)); // BLAS wants a leading dimension of 1 at least
  }
  if (half & PLANRT_GEMM_HALF_B) {
    wideB = widened(B, rowsB, colsB, ldb, compute);
    B = wideB.data();
    ldb = int32_t(std::max<int64_t>(colsB, 1));
  }
  checkMatrix("GEMM", "operand A", A, rowsA, colsA, lda, compute);
  checkMatrix("GEMM", "operand B", B, rowsB, colsB, ldb, compute);
  float *out = C;
  int32_t ldo = ldc;
  if (half & PLANRT_GEMM_HALF_C) {
    wideC.resize(size_t(int64_t(m) * n));
    out = wideC.data();
    ldo = std::max(n, 1);
  }
  cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(transA), CBLAS_TRANSPOSE(transB), m, n, k, alpha, A, lda, B, ldb, beta,
              out, ldo);
  if (!round)
    return;
  // roundTo's codes are planrt_gemm_compute's: 1 bf16, 2 fp16.
  auto *halves = reinterpret_cast<uint16_t *>(C);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      if (half & PLANRT_GEMM_HALF_C)
        halves[r * ldc + c] = planrt::kernels::narrow16(out[r * ldo + c], compute);
      else
        C[r * ldc + c] = planrt::kernels::roundTo(C[r * ldc + c], compute);
    }
}

void planrt_audit_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                       int32_t causal, int32_t rope, float rope_theta, int32_t compute) {
  checkMatrix("attention", "q, k, v", qkv, B * S, (H + 2 * KVH) * D, (H + 2 * KVH) * D, compute);
  planrt_k_sdpa(qkv, out, B, S, H, KVH, D, causal, rope, rope_theta);
}

void planrt_audit_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H,
                           int64_t KVH, int64_t D, int32_t causal, int32_t rope, float rope_theta, int32_t compute) {
  checkMatrix("attention's backward", "the output's gradient", dout, B * S, H * D, H * D, compute);
  checkMatrix("attention's backward", "q, k, v", qkv, B * S, (H + 2 * KVH) * D, (H + 2 * KVH) * D, compute);
  planrt_k_sdpa_bwd(dout, qkv, dqkv, B, S, H, KVH, D, causal, rope, rope_theta);
}

} // extern "C"
