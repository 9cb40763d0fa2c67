// libplanrt_cuda's kernels against their CPU references (runtime/lib/kernels/;
// cblas_sgemm for planrt_cuda_gemm in each of its precisions): the same random inputs
// through both, every output compared. Needs a
// GPU: without one every test is skipped (planrt_cuda_start says why). Each test also
// times the device kernel (median of 20 calls) and prints it: the micro-benchmark.
// Run by test/gpu/run_all.sh.
#include "kernels/common.h"
#include "kernels/nf4.h"
#include "planrt.h"
#include "planrt_cuda.h"
#include "planrt_kernels.h"
#include "planrt_nf4.h"

#include <cblas.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <functional>
#include <random>
#include <vector>

namespace {

bool started() {
  static int rc = planrt_cuda_start(0, nullptr);
  return rc == 0;
}

/// n floats of the backend (managed memory once the device is started).
struct Buf {
  float *p;
  int64_t n;
  explicit Buf(int64_t n)
      : p(static_cast<float *>(planrt_get_backend()->alloc(size_t(std::max<int64_t>(n, 1)) * 4))), n(n) {}
  ~Buf() { planrt_get_backend()->free(p); }
  float *data() { return p; }
};
struct Ids {
  int32_t *p;
  explicit Ids(int64_t n)
      : p(static_cast<int32_t *>(planrt_get_backend()->alloc(size_t(std::max<int64_t>(n, 1)) * 4))) {}
  ~Ids() { planrt_get_backend()->free(p); }
};

void fill(Buf &b, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (int64_t i = 0; i < b.n; ++i)
    b.p[i] = d(g);
}

/// max |a - b| / max(max |b|, tiny) over the buffer, once the device's queued work is done
/// (the library's calls return before it is).
double relDiff(const float *a, const float *b, int64_t n) {
  planrt_cuda_sync();
  double diff = 0, big = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    big = std::max(big, double(std::fabs(b[i])));
  }
  return diff / big;
}

/// Median time of `f` over 20 calls (each waited for), printed with `what`.
void bench(const std::string &what, const std::function<void()> &f) {
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    planrt_cuda_sync();
    auto a = std::chrono::steady_clock::now();
    f();
    planrt_cuda_sync();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::nth_element(t.begin(), t.begin() + 10, t.end());
  std::printf("[bench] %-40s %9.3f ms\n", what.c_str(), t[10]);
}

#define NEED_GPU()                                                                                                     \
  if (!started())                                                                                                      \
  GTEST_SKIP() << "no CUDA device"

/// x rounded to nearest even to `mantissa` bits (7: bf16, 10: fp16's and TF32's), as
/// nn.round leaves a mixed-precision plan's GEMM operands (normal values only).
float roundTo(float x, int mantissa) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  int drop = 23 - mantissa;
  uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
  u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(CudaKernels, Gemm) {
  NEED_GPU();
  struct Mode {
    int32_t compute;
    int mantissa;     // the operands' precision: exact in it (bf16, fp16) or not (-1)
    double tolerance; // max |C - ref| / max |ref|
  };
  // fp32 and the 16-bit modes (on operands already exact in them) differ from the CPU's
  // sgemm only in the order of the fp32 sums; TF32 rounds the operands (2^-11).
  const Mode modes[] = {{PLANRT_GEMM_F32, -1, 1e-5},
                        {PLANRT_GEMM_BF16, 7, 1e-5},
                        {PLANRT_GEMM_F16, 10, 1e-5},
                        {PLANRT_GEMM_TF32, -1, 4e-3}};
  for (const Mode &mode : modes)
    for (int ta : {111, 112})
      for (int tb : {111, 112}) {
        const int m = 96, n = 80, k = 72;
        Buf a(m * k), b(k * n), c(m * n), ref(m * n);
        fill(a, 1);
        fill(b, 2);
        if (mode.mantissa > 0)
          for (Buf *x : {&a, &b})
            for (int64_t i = 0; i < x->n; ++i)
              x->p[i] = roundTo(x->p[i], mode.mantissa);
        int lda = ta == 111 ? k : m, ldb = tb == 111 ? n : k;
        cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(ta), CBLAS_TRANSPOSE(tb), m, n, k, 1.0f, a.p, lda, b.p, ldb, 0.0f,
                    ref.p, n);
        planrt_cuda_gemm(101, ta, tb, m, n, k, 1.0f, a.p, lda, b.p, ldb, 0.0f, c.p, n, mode.compute);
        // Twice: the second call runs the plan the first one made.
        planrt_cuda_gemm(101, ta, tb, m, n, k, 1.0f, a.p, lda, b.p, ldb, 0.0f, c.p, n, mode.compute);
        EXPECT_LT(relDiff(c.p, ref.p, m * n), mode.tolerance)
            << "compute " << mode.compute << " transA " << ta << " transB " << tb;
      }
  // A parameter inside the flat buffer: operands aligned to 4 bytes only.
  {
    const int m = 33, n = 17, k = 9;
    Buf a(m * k + 1), b(k * n + 1), c(m * n + 1), ref(m * n);
    fill(a, 9);
    fill(b, 10);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.p + 1, k, b.p + 1, n, 0.0f, ref.p, n);
    planrt_cuda_gemm(101, 111, 111, m, n, k, 1.0f, a.p + 1, k, b.p + 1, n, 0.0f, c.p + 1, n, PLANRT_GEMM_F32);
    EXPECT_LT(relDiff(c.p + 1, ref.p, m * n), 1e-5);
  }
  const int m = 4096, n = 2304, k = 768; // gpt2_small's qkv projection, batch 4 x 1024
  Buf a(int64_t(m) * k), b(int64_t(k) * n), c(int64_t(m) * n);
  fill(a, 3);
  fill(b, 4);
  for (auto [name, compute] :
       {std::pair{"gemm 4096x2304x768 fp32", PLANRT_GEMM_F32}, std::pair{"gemm 4096x2304x768 bf16", PLANRT_GEMM_BF16},
        std::pair{"gemm 4096x2304x768 tf32", PLANRT_GEMM_TF32}})
    bench(name, [&, compute = compute] {
      planrt_cuda_gemm(101, 111, 111, m, n, k, 1.0f, a.p, k, b.p, n, 0.0f, c.p, n, compute);
    });
}

/// PLANRT_CUDA_GEMM_STAGE set for one scope.
struct StagePolicy {
  explicit StagePolicy(const char *v) { setenv("PLANRT_CUDA_GEMM_STAGE", v, 1); }
  ~StagePolicy() { unsetenv("PLANRT_CUDA_GEMM_STAGE"); }
};

// The 16-bit staging of bf16 and fp16 GEMMs (gemm.cpp): every policy gives the CPU's
// sgemm on bf16 (fp16) operands, with leading dimensions wider than the rows and not a
// multiple of 4, 4-byte aligned operands, an odd k (padded with zeros when staged), and
// C accumulated (beta 1); then the output
// head's three GEMMs of gpt2_small (batch 8 x 1024, vocabulary 50,257) and a layer's
// timed under each policy.
TEST(CudaKernels, GemmStaging) {
  NEED_GPU();
  for (const char *policy : {"never", "auto", "operands"})
    for (auto [compute, mantissa] : {std::pair{PLANRT_GEMM_BF16, 7}, std::pair{PLANRT_GEMM_F16, 10}})
      for (int ta : {111, 112})
        for (int tb : {111, 112}) {
          StagePolicy set(policy);
          const int m = 67, n = 45, k = 39, pad = 3;
          int lda = (ta == 111 ? k : m) + pad, ldb = (tb == 111 ? n : k) + pad, ldc = n + pad;
          Buf a(int64_t(ta == 111 ? m : k) * lda + 1), b(int64_t(tb == 111 ? k : n) * ldb + 1),
              c(int64_t(m) * ldc + 1), ref(int64_t(m) * ldc);
          fill(a, 21);
          fill(b, 22);
          fill(c, 23);
          for (Buf *x : {&a, &b})
            for (int64_t i = 0; i < x->n; ++i)
              x->p[i] = roundTo(x->p[i], mantissa);
          std::memcpy(ref.p, c.p + 1, size_t(ref.n) * 4);
          cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(ta), CBLAS_TRANSPOSE(tb), m, n, k, 0.5f, a.p + 1, lda, b.p + 1,
                      ldb, 1.0f, ref.p, ldc);
          planrt_cuda_gemm(101, ta, tb, m, n, k, 0.5f, a.p + 1, lda, b.p + 1, ldb, 1.0f, c.p + 1, ldc, compute);
          EXPECT_LT(relDiff(c.p + 1, ref.p, ref.n), 1e-5)
              << policy << " compute " << compute << " transA " << ta << " transB " << tb;
        }
  const int64_t T = 8192, C = 768, V = 50257;
  Buf x(T * C), wte(V * C), logits(T * V), dx(T * C), dwte(V * C), w(C * 3 * C), y(T * 3 * C);
  struct Shape {
    const char *name;
    int ta, tb, m, n, k;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float *c;
    int ldc;
  };
  const Shape shapes[] = {
      {"head logits 8192x50257x768 NT", 111, 112, int(T), int(V), int(C), x.p, int(C), wte.p, int(C), logits.p, int(V)},
      {"head dx 8192x768x50257 NN", 111, 111, int(T), int(C), int(V), logits.p, int(V), wte.p, int(C), dx.p, int(C)},
      {"head dwte 50257x768x8192 TN", 112, 111, int(V), int(C), int(T), logits.p, int(V), x.p, int(C), dwte.p, int(C)},
      {"qkv 8192x2304x768 NN", 111, 111, int(T), int(3 * C), int(C), x.p, int(C), w.p, int(3 * C), y.p, int(3 * C)}};
  for (const char *policy : {"never", "auto", "operands"}) {
    StagePolicy set(policy);
    for (const Shape &g : shapes)
      bench(std::string("gemm bf16 ") + g.name + ", " + policy, [&] {
        planrt_cuda_gemm(101, g.ta, g.tb, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b, g.ldb, 0.0f, g.c, g.ldc,
                         PLANRT_GEMM_BF16);
      });
  }
}

// A GEMM asked for its result rounded (PLANRT_GEMM_ROUND_RESULT, plan-cuda-round-results):
// under every staging policy (and both PLANRT_CUDA_GEMM_ROUND ways), every element of C is a bf16 (fp16) value, the CPU's sgemm rounded
// within the order of the sums (one unit of the last place), with odd sizes and 4-byte
// aligned operands; then gpt2_small's logits GEMM so, against the plain one and its
// separate rounding (run_all.sh's profile shows that as a generated kernel).
/// a (m x k, or k x m transposed) and b (k x n, or n x k) from `seed` rounded to `mantissa`
/// bits, each read from element `offset` on, and ref = the CPU's sgemm of them (m x n).
void roundedOperands(Buf &a, Buf &b, Buf &ref, int m, int n, int k, int ta, int tb, int offset, int mantissa,
                     uint32_t seed) {
  fill(a, seed);
  fill(b, seed + 1);
  for (Buf *x : {&a, &b})
    for (int64_t i = 0; i < x->n; ++i)
      x->p[i] = roundTo(x->p[i], mantissa);
  cblas_sgemm(CblasRowMajor, CBLAS_TRANSPOSE(ta), CBLAS_TRANSPOSE(tb), m, n, k, 1.0f, a.p + offset,
              ta == 111 ? k : m, b.p + offset, tb == 111 ? n : k, 0.0f, ref.p, n);
}

TEST(CudaKernels, GemmRoundedResult) {
  NEED_GPU();
  for (const char *policy : {"never", "auto", "operands", "auto inplace"})
    for (auto [compute, mantissa] : {std::pair{PLANRT_GEMM_BF16, 7}, std::pair{PLANRT_GEMM_F16, 10}})
      for (int ta : {111, 112})
        for (int tb : {111, 112}) {
          bool inplace = std::strcmp(policy, "auto inplace") == 0;
          StagePolicy set(inplace ? "auto" : policy);
          if (inplace)
            setenv("PLANRT_CUDA_GEMM_ROUND", "inplace", 1);
          const int m = 67, n = 45, k = 39;
          int lda = ta == 111 ? k : m, ldb = tb == 111 ? n : k;
          Buf a(int64_t(m) * k + 1), b(int64_t(k) * n + 1), c(int64_t(m) * n + 1), ref(int64_t(m) * n);
          roundedOperands(a, b, ref, m, n, k, ta, tb, 1, mantissa, 31);
          planrt_cuda_gemm(101, ta, tb, m, n, k, 1.0f, a.p + 1, lda, b.p + 1, ldb, 0.0f, c.p + 1, n,
                           compute | PLANRT_GEMM_ROUND_RESULT);
          planrt_cuda_sync();
          // Within one unit in the last place (fp16's subnormals: 2^-24) of the rounded
          // reference, beyond what the order of the fp32 sums may move the sum before it is
          // rounded (the tolerance of the other GEMM tests, 1e-5 of the largest element: an
          // element much smaller than its terms can cross a rounding boundary, as one fp16
          // element of 67 x 45 did on an H100 under every policy).
          double big = 1e-30;
          for (int64_t i = 0; i < ref.n; ++i)
            big = std::max(big, double(std::fabs(ref.p[i])));
          int64_t inexact = 0, far = 0;
          for (int64_t i = 0; i < ref.n; ++i) {
            float got = c.p[1 + i], want = roundTo(ref.p[i], mantissa);
            inexact += roundTo(got, mantissa) != got;
            float ulp = std::max(std::ldexp(std::fabs(want), -mantissa), mantissa == 10 ? 0x1p-24f : 0.0f);
            far += std::fabs(got - want) > 1.01 * ulp + 1e-5 * big;
          }
          EXPECT_EQ(inexact, 0) << policy << " compute " << compute << " transA " << ta << " transB " << tb;
          EXPECT_EQ(far, 0) << policy << " compute " << compute << " transA " << ta << " transB " << tb;
          unsetenv("PLANRT_CUDA_GEMM_ROUND");
        }
  const int64_t T = 8192, C = 768, V = 50257;
  Buf x(T * C), wte(V * C), logits(T * V);
  fill(x, 33);
  fill(wte, 34);
  for (Buf *b : {&x, &wte})
    for (int64_t i = 0; i < b->n; ++i)
      b->p[i] = roundTo(b->p[i], 7);
  for (const char *how : {"half", "inplace"}) {
    setenv("PLANRT_CUDA_GEMM_ROUND", how, 1);
    bench(std::string("gemm bf16 head logits, rounded result, ") + how, [&] {
      planrt_cuda_gemm(101, 111, 112, int(T), int(V), int(C), 1.0f, x.p, int(C), wte.p, int(C), 0.0f, logits.p,
                       int(V), PLANRT_GEMM_BF16 | PLANRT_GEMM_ROUND_RESULT);
    });
  }
  unsetenv("PLANRT_CUDA_GEMM_ROUND");
}

/// The 16-bit bits of x, a bf16 (mantissa 7) or fp16 (10) value, and back (the runtime's
/// conversions, by roundTo's codes: 1 bf16, 2 fp16).
uint16_t bitsOf(float x, int mantissa) { return planrt::kernels::narrow16(x, mantissa == 10 ? 2 : 1); }
float valueOf(uint16_t bits, int mantissa) { return planrt::kernels::widen16(bits, mantissa == 10 ? 2 : 1); }

// 16-bit storage (PLANRT_GEMM_HALF_A / _B / _C, plan-cuda-half-storage): A, B and a rounded
// C in 16-bit buffers (and 16-bit A, B with a float32 C, rounded or not) give the CPU's
// sgemm on their values, whether they are read as they
// are (aligned rows, k a multiple of 64) or copied (an odd offset, k, leading dimension);
// then a layer's GEMM of gpt2_small timed with float32 operands (staged), 16-bit
// operands, and 16-bit operands and result.
TEST(CudaKernels, GemmHalfStorage) {
  NEED_GPU();
  for (auto [compute, mantissa] : {std::pair{PLANRT_GEMM_BF16, 7}, std::pair{PLANRT_GEMM_F16, 10}})
    for (auto [m, n, k, offset] : {std::tuple{64, 128, 64, 0}, std::tuple{67, 45, 39, 1}})
      for (int ta : {111, 112})
        for (int tb : {111, 112})
          for (int half = PLANRT_GEMM_HALF_A; half <= 7 * PLANRT_GEMM_HALF_A; half += PLANRT_GEMM_HALF_A) {
            int lda = ta == 111 ? k : m, ldb = tb == 111 ? n : k;
            Buf a(int64_t(m) * k + 1), b(int64_t(k) * n + 1), c(int64_t(m) * n + 1), ref(int64_t(m) * n);
            roundedOperands(a, b, ref, m, n, k, ta, tb, offset, mantissa, 41);
            // The 16-bit operands: the same values, as 16-bit elements at the same offset.
            Buf a16(a.n / 2 + 1), b16(b.n / 2 + 1);
            auto *ha = reinterpret_cast<uint16_t *>(a16.p), *hb = reinterpret_cast<uint16_t *>(b16.p);
            for (int64_t i = 0; i < a.n; ++i)
              ha[i] = bitsOf(a.p[i], mantissa);
            for (int64_t i = 0; i < b.n; ++i)
              hb[i] = bitsOf(b.p[i], mantissa);
            bool halfC = half & PLANRT_GEMM_HALF_C;
            const float *A = half & PLANRT_GEMM_HALF_A ? reinterpret_cast<float *>(ha + offset) : a.p + offset;
            const float *B = half & PLANRT_GEMM_HALF_B ? reinterpret_cast<float *>(hb + offset) : b.p + offset;
            auto *hc = reinterpret_cast<uint16_t *>(c.p);
            float *C = halfC ? reinterpret_cast<float *>(hc + offset) : c.p + offset;
            // A float32 C is also left unrounded (rounded in the comparison below).
            bool round = halfC || (m + ta + tb) % 2 == 0;
            planrt_cuda_gemm(101, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, n,
                             compute | (round ? PLANRT_GEMM_ROUND_RESULT : 0) | half);
            planrt_cuda_sync();
            // As GemmRoundedResult: within an ulp of the rounded reference, beyond the order
            // of the fp32 sums (1e-5 of the largest element).
            double big = 1e-30;
            for (int64_t i = 0; i < ref.n; ++i)
              big = std::max(big, double(std::fabs(ref.p[i])));
            int64_t far = 0;
            for (int64_t i = 0; i < ref.n; ++i) {
              float got = halfC ? valueOf(hc[offset + i], mantissa) : c.p[offset + i];
              if (!round)
                got = roundTo(got, mantissa);
              float want = roundTo(ref.p[i], mantissa);
              float ulp = std::max(std::ldexp(std::fabs(want), -mantissa), mantissa == 10 ? 0x1p-24f : 0.0f);
              far += std::fabs(got - want) > 1.01 * ulp + 1e-5 * big;
            }
            EXPECT_EQ(far, 0) << "compute " << compute << " m " << m << " transA " << ta << " transB " << tb
                              << " half " << half;
          }
  const int64_t T = 8192, C = 768, F = 3072;
  Buf x(T * C), w(C * F), y(T * F), x16(T * C / 2), w16(C * F / 2), y16(T * F / 2);
  fill(x, 43);
  fill(w, 44);
  auto *hx = reinterpret_cast<uint16_t *>(x16.p), *hw = reinterpret_cast<uint16_t *>(w16.p);
  for (int64_t i = 0; i < x.n; ++i)
    hx[i] = bitsOf(x.p[i] = roundTo(x.p[i], 7), 7);
  for (int64_t i = 0; i < w.n; ++i)
    hw[i] = bitsOf(w.p[i] = roundTo(w.p[i], 7), 7);
  const int32_t rounded = PLANRT_GEMM_BF16 | PLANRT_GEMM_ROUND_RESULT;
  bench("gemm bf16 8192x3072x768 fp32 operands", [&] {
    planrt_cuda_gemm(101, 111, 111, int(T), int(F), int(C), 1.0f, x.p, int(C), w.p, int(F), 0.0f, y.p, int(F),
                     rounded);
  });
  bench("gemm bf16 8192x3072x768 16-bit operands", [&] {
    planrt_cuda_gemm(101, 111, 111, int(T), int(F), int(C), 1.0f, x16.p, int(C), w16.p, int(F), 0.0f, y.p, int(F),
                     rounded | PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_B);
  });
  bench("gemm bf16 8192x3072x768 16-bit operands, result", [&] {
    planrt_cuda_gemm(101, 111, 111, int(T), int(F), int(C), 1.0f, x16.p, int(C), w16.p, int(F), 0.0f, y16.p, int(F),
                     rounded | PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_B | PLANRT_GEMM_HALF_C);
  });
}

TEST(CudaKernels, LayerNormAndRmsNorm) {
  NEED_GPU();
  // Rows held in registers (C up to 1,024: 200 and 768) and read from memory (1,500);
  // several chunks of the column sums, one partial.
  for (auto [rows, C] : {std::pair<int64_t, int64_t>{300, 200}, {1000, 768}, {130, 1500}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", C " + std::to_string(C));
    Buf x(rows * C), w(C), bias(C), dy(rows * C), y(rows * C), yr(rows * C), dx(rows * C), dxr(rows * C), dw(C),
        dwr(C), db(C), dbr(C);
    fill(x, 5);
    fill(w, 6);
    fill(bias, 7);
    fill(dy, 8);
    planrt_k_layernorm(x.p, w.p, bias.p, yr.p, rows, C, 1e-5f);
    planrt_cuda_layernorm(x.p, w.p, bias.p, y.p, rows, C, 1e-5f);
    EXPECT_LT(relDiff(y.p, yr.p, rows * C), 1e-6);
    planrt_k_layernorm_bwd(dy.p, x.p, w.p, dxr.p, dwr.p, dbr.p, rows, C, 1e-5f);
    planrt_cuda_layernorm_bwd(dy.p, x.p, w.p, dx.p, dw.p, db.p, rows, C, 1e-5f);
    EXPECT_LT(relDiff(dx.p, dxr.p, rows * C), 1e-6);
    EXPECT_LT(relDiff(dw.p, dwr.p, C), 1e-6);
    EXPECT_LT(relDiff(db.p, dbr.p, C), 1e-6);
    planrt_k_rmsnorm(x.p, w.p, yr.p, rows, C, 1e-6f);
    planrt_cuda_rmsnorm(x.p, w.p, y.p, rows, C, 1e-6f);
    EXPECT_LT(relDiff(y.p, yr.p, rows * C), 1e-6);
    planrt_k_rmsnorm_bwd(dy.p, x.p, w.p, dxr.p, dwr.p, rows, C, 1e-6f);
    planrt_cuda_rmsnorm_bwd(dy.p, x.p, w.p, dx.p, dw.p, rows, C, 1e-6f);
    EXPECT_LT(relDiff(dx.p, dxr.p, rows * C), 1e-6);
    EXPECT_LT(relDiff(dw.p, dwr.p, C), 1e-6);
  }
  for (int64_t R : {4096, 8192}) {
    const int64_t W = 768;
    Buf bx(R * W), bw(W), bb(W), by(R * W), bdy(R * W), bdx(R * W), bdw(W), bdb(W);
    std::string shape = std::to_string(R) + "x768";
    bench("layernorm " + shape, [&] { planrt_cuda_layernorm(bx.p, bw.p, bb.p, by.p, R, W, 1e-5f); });
    bench("layernorm_bwd " + shape,
          [&] { planrt_cuda_layernorm_bwd(bdy.p, bx.p, bw.p, bdx.p, bdw.p, bdb.p, R, W, 1e-5f); });
  }
}

/// b's elements rounded to bf16 (to nearest, ties to even): a bf16 plan's values.
void roundToBf16(Buf &b) {
  for (int64_t i = 0; i < b.n; ++i) {
    uint32_t u;
    std::memcpy(&u, &b.p[i], sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&b.p[i], &u, sizeof u);
  }
}

/// Attention forward and backward against the CPU for one shape, computed as `compute`
/// says (PLANRT_GEMM_BF16: the bf16 kernels, on bf16 inputs as a bf16 plan's; else fp32's).
/// Each error (largest difference over the largest reference value) printed as [diff].
void attention(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int causal, int rope, int32_t compute) {
  int64_t row = (H + 2 * KVH) * D;
  Buf qkv(B * S * row), out(B * S * H * D), outr(B * S * H * D), dout(B * S * H * D), dq(B * S * row), dqr(B * S * row);
  fill(qkv, 9);
  fill(dout, 10);
  bool bf16 = compute == PLANRT_GEMM_BF16;
  if (bf16) {
    roundToBf16(qkv);
    roundToBf16(dout);
  }
  planrt_k_sdpa(qkv.p, outr.p, B, S, H, KVH, D, causal, rope, 10000.0f);
  planrt_cuda_sdpa(qkv.p, out.p, B, S, H, KVH, D, causal, rope, 10000.0f, compute);
  double fwd = relDiff(out.p, outr.p, B * S * H * D);
  EXPECT_LT(fwd, bf16 ? 2e-2 : 2e-5) << "causal " << causal << " rope " << rope;
  planrt_k_sdpa_bwd(dout.p, qkv.p, dqr.p, B, S, H, KVH, D, causal, rope, 10000.0f);
  planrt_cuda_sdpa_bwd(dout.p, qkv.p, dq.p, B, S, H, KVH, D, causal, rope, 10000.0f, compute);
  double bwd = relDiff(dq.p, dqr.p, B * S * row);
  EXPECT_LT(bwd, bf16 ? 3e-2 : 1e-4) << "causal " << causal << " rope " << rope;
  std::printf("[diff] sdpa%s B%lld S%lld H%lld KVH%lld D%lld causal %d rope %d: forward %.2e backward %.2e\n",
              bf16 ? " bf16" : "", (long long)B, (long long)S, (long long)H, (long long)KVH, (long long)D, causal,
              rope, fwd, bwd);
}

/// Every attention shape against the CPU (head dimensions up to maxD), then the timing at
/// gpt2_small's shape, its lines labelled `label`.
void attentionSuite(int64_t maxD, const char *label, int32_t compute = PLANRT_GEMM_F32) {
  attention(2, 37, 4, 4, 16, 1, 0, compute); // GPT: causal, no rope
  attention(2, 37, 4, 4, 16, 0, 0, compute); // bidirectional (embedders)
  attention(2, 29, 6, 2, 32, 1, 1, compute); // llama: grouped-query, rope
  attention(1, 16, 2, 1, 64, 1, 1, compute);
  attention(1, 150, 2, 2, 16, 0, 0, compute); // the tiles: two query blocks, three key tiles, ragged
  attention(1, 70, 2, 2, 64, 1, 0, compute);
  attention(1, 40, 4, 1, 128, 0, 1, compute);
  attention(1, 33, 2, 1, 48, 1, 1, compute);
  attention(2, 1024, 12, 12, 64, 1, 0, compute); // gpt2_small's
  if (maxD >= 256)
    attention(1, 20, 2, 1, 256, 1, 0, compute);
  for (int64_t B : {4, 8}) {
    const int64_t S = 1024, H = 12, D = 64;
    Buf qkv(B * S * 3 * H * D), out(B * S * H * D), dq(B * S * 3 * H * D);
    std::string shape = " B" + std::to_string(B) + " S1024 H12 D64 causal";
    bench(std::string("sdpa") + label + shape,
          [&] { planrt_cuda_sdpa(qkv.p, out.p, B, S, H, H, D, 1, 0, 0.0f, compute); });
    bench(std::string("sdpa_bwd") + label + shape,
          [&] { planrt_cuda_sdpa_bwd(out.p, qkv.p, dq.p, B, S, H, H, D, 1, 0, 0.0f, compute); });
  }
}

// The CUDA-core kernels (PLANRT_CUDA_ATTENTION=simt; any D up to 256).
TEST(CudaKernels, Attention) {
  NEED_GPU();
  setenv("PLANRT_CUDA_ATTENTION", "simt", 1);
  attentionSuite(256, " (simt)");
  unsetenv("PLANRT_CUDA_ATTENTION");
}

// The tensor-core kernels, the default up to D 128: split TF32 (fp32 plans), and bf16.
TEST(CudaKernels, AttentionOnTensorCores) {
  NEED_GPU();
  attentionSuite(256, " (mma)");
}

TEST(CudaKernels, AttentionOnTensorCoresBf16) {
  NEED_GPU();
  attentionSuite(256, " (mma bf16)", PLANRT_GEMM_BF16);
}

TEST(CudaKernels, EmbeddingAndCrossEntropy) {
  NEED_GPU();
  const int64_t rows = 257, C = 48, V = 300;
  Buf table(V * C), out(rows * C), outr(rows * C), dout(rows * C), dt(V * C), dtr(V * C), logits(rows * V),
      dl(rows * V), dlr(rows * V), loss(1), lossr(1);
  Ids ids(rows);
  std::mt19937 g(11);
  for (int64_t r = 0; r < rows; ++r)
    ids.p[r] = int32_t(g() % uint32_t(V));
  fill(table, 12);
  fill(dout, 13);
  fill(logits, 14, 3.0f);
  planrt_k_embedding(table.p, ids.p, outr.p, rows, C, V);
  planrt_cuda_embedding(table.p, ids.p, out.p, rows, C, V);
  EXPECT_EQ(relDiff(out.p, outr.p, rows * C), 0.0);
  planrt_k_embedding_bwd(dout.p, ids.p, dtr.p, rows, C, V);
  planrt_cuda_embedding_bwd(dout.p, ids.p, dt.p, rows, C, V);
  EXPECT_EQ(relDiff(dt.p, dtr.p, V * C), 0.0); // same order of additions
  planrt_k_cross_entropy(logits.p, ids.p, lossr.p, rows, V, 0);
  planrt_cuda_cross_entropy(logits.p, ids.p, loss.p, rows, V, 0);
  planrt_cuda_sync();
  EXPECT_LT(std::fabs(loss.p[0] - lossr.p[0]) / std::fabs(lossr.p[0]), 1e-6);
  // The seed as the generated code passes it: a constant of the executable, in host memory.
  static const float seed = 1.5f;
  planrt_k_cross_entropy_bwd(&seed, logits.p, ids.p, dlr.p, rows, V, 0, 0);
  planrt_cuda_cross_entropy_bwd(&seed, logits.p, ids.p, dl.p, rows, V, 0, 0);
  EXPECT_LT(relDiff(dl.p, dlr.p, rows * V), 1e-6);
  // Asked to round (plan-cuda-round-results): every element a bf16 (fp16) value, the
  // CPU's rounded gradient within one unit of the type (the unrounded ones differ in the
  // last float bits, which may cross a rounding boundary).
  for (int32_t to : {1, 2}) {
    planrt_k_cross_entropy_bwd(&seed, logits.p, ids.p, dlr.p, rows, V, to, 0);
    planrt_cuda_cross_entropy_bwd(&seed, logits.p, ids.p, dl.p, rows, V, to, 0);
    planrt_cuda_sync();
    int64_t notRounded = 0;
    for (int64_t i = 0; i < rows * V; ++i)
      notRounded += planrt::kernels::roundTo(dl.p[i], to) != dl.p[i];
    EXPECT_EQ(notRounded, 0) << "round_to " << to;
    EXPECT_LT(relDiff(dl.p, dlr.p, rows * V), to == 1 ? 8e-3 : 1e-3) << "round_to " << to;
    // In place, over the logits: the same bits.
    std::memcpy(dlr.p, logits.p, sizeof(float) * size_t(rows * V));
    planrt_cuda_cross_entropy_bwd(&seed, dlr.p, ids.p, dlr.p, rows, V, to, 0);
    planrt_cuda_sync();
    EXPECT_EQ(std::memcmp(dlr.p, dl.p, sizeof(float) * size_t(rows * V)), 0) << "in place, round_to " << to;
  }
  // Rows longer than a block's unrolled stride (4 x 256), of an odd length; then one
  // element of a row a NaN (not its target): the loss is NaN on both, and so is that
  // row's gradient.
  {
    const int64_t r2 = 37, V2 = 5003;
    Buf l2(r2 * V2), g2(r2 * V2), g2r(r2 * V2), s2(1), s2r(1);
    Ids t2(r2);
    for (int64_t r = 0; r < r2; ++r)
      t2.p[r] = int32_t(g() % uint32_t(V2));
    fill(l2, 15, 4.0f);
    planrt_k_cross_entropy(l2.p, t2.p, s2r.p, r2, V2, 0);
    planrt_cuda_cross_entropy(l2.p, t2.p, s2.p, r2, V2, 0);
    planrt_cuda_sync();
    EXPECT_LT(std::fabs(s2.p[0] - s2r.p[0]) / std::fabs(s2r.p[0]), 1e-6);
    planrt_k_cross_entropy_bwd(&seed, l2.p, t2.p, g2r.p, r2, V2, 0, 0);
    planrt_cuda_cross_entropy_bwd(&seed, l2.p, t2.p, g2.p, r2, V2, 0, 0);
    EXPECT_LT(relDiff(g2.p, g2r.p, r2 * V2), 1e-6);
    l2.p[5 * V2 + (t2.p[5] + 1) % V2] = NAN;
    planrt_k_cross_entropy(l2.p, t2.p, s2r.p, r2, V2, 0);
    planrt_cuda_cross_entropy(l2.p, t2.p, s2.p, r2, V2, 0);
    planrt_cuda_cross_entropy_bwd(&seed, l2.p, t2.p, g2.p, r2, V2, 0, 0);
    planrt_cuda_sync();
    EXPECT_TRUE(std::isnan(s2r.p[0]) && std::isnan(s2.p[0])) << s2r.p[0] << " " << s2.p[0];
    EXPECT_TRUE(std::isnan(g2.p[5 * V2 + t2.p[5]]));
  }
  const int64_t R = 4096, W = 50257;
  Buf bl(R * W), bdl(R * W), bloss(1);
  Ids bt(R);
  for (int64_t r = 0; r < R; ++r)
    bt.p[r] = int32_t(r % W);
  Buf demb(int64_t(W) * 768), dy(int64_t(8192) * 768);
  Ids tokens(8192);
  for (int64_t r = 0; r < 8192; ++r)
    tokens.p[r] = int32_t(g() % uint32_t(W));
  bench("embedding_bwd 8192x768 of 50257", [&] { planrt_cuda_embedding_bwd(dy.p, tokens.p, demb.p, 8192, 768, W); });
  bench("cross_entropy 4096x50257", [&] { planrt_cuda_cross_entropy(bl.p, bt.p, bloss.p, R, W, 0); });
  bench("cross_entropy_bwd 4096x50257", [&] { planrt_cuda_cross_entropy_bwd(bloss.p, bl.p, bt.p, bdl.p, R, W, 0, 0); });
  bench("cross_entropy_bwd 4096x50257, rounded to bf16",
        [&] { planrt_cuda_cross_entropy_bwd(bloss.p, bl.p, bt.p, bdl.p, R, W, 1, 0); });
}

// The backend's device operations the runtime uses inside a step (planrt_mem_*): the
// queued fill and host-to-device copy, the division (a data-parallel mean) and the sum
// of squares over ranges (the gradient norm under tensor and pipeline parallelism),
// against the host's.
TEST(CudaKernels, BackendStepOperations) {
  NEED_GPU();
  const planrt_backend &b = *planrt_get_backend();
  ASSERT_TRUE(b.fill_async && b.copy_in && b.divide && b.sumsq);
  const int64_t n = 300001;
  Buf x(n), y(n);
  fill(x, 5);
  std::vector<float> host(x.p, x.p + n);
  b.copy_in(y.p, host.data(), size_t(n) * 4);
  planrt_cuda_sync();
  EXPECT_EQ(std::memcmp(y.p, host.data(), size_t(n) * 4), 0);
  b.divide(y.p, 3.0f, size_t(n));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(y.p[i], host[size_t(i)] / 3.0f) << i; // IEEE division, as the host's
  b.fill_async(y.p, -2.5f, size_t(n));
  planrt_cuda_sync();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(y.p[i], -2.5f) << i;
  // Ranges of several sizes (empty, one float, more than a block's threads).
  const float *starts[4] = {x.p, x.p + 10, x.p + 11, x.p + 1000};
  const int64_t counts[4] = {7, 0, 1, n - 1000};
  Buf out(1);
  b.sumsq(starts, counts, 4, out.p);
  double want = 0;
  for (int r = 0; r < 4; ++r)
    for (int64_t i = 0; i < counts[r]; ++i)
      want += double(starts[r][i]) * double(starts[r][i]);
  EXPECT_NEAR(double(out.p[0]), want, 1e-6 * want);
  b.sumsq(starts, counts, 0, out.p);
  EXPECT_EQ(out.p[0], 0.0f);
  bench("sumsq 4 ranges, 0.3M floats", [&] { b.sumsq(starts, counts, 4, out.p); });
}

// The offloaded optimizer's copies (runtime/lib/offload.cpp on a device): page-locked
// host memory, a copy in from it queued behind a kernel, and a copy out that waits for
// both; then their speed, a 4 MiB record each way (PCIe's, in the log).
TEST(CudaKernels, BackendCopiesThroughPageLockedMemory) {
  NEED_GPU();
  const planrt_backend &b = *planrt_get_backend();
  ASSERT_TRUE(b.copy_out && b.host_alloc && b.host_free && planrt_mem_is_device());
  const int64_t n = int64_t(1) << 20; // one 4 MiB record's moment
  auto *slot = static_cast<float *>(b.host_alloc(size_t(n) * 4));
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % 4096, 0u);
  for (int64_t i = 0; i < n; ++i)
    slot[i] = float(i % 1000) * 0.5f;
  Buf x(n);
  b.fill_async(x.p, 3.0f, size_t(n)); // a kernel queued first
  b.copy_in(x.p, slot, size_t(n) * 4);
  std::vector<float> back(size_t(n), -1.0f);
  b.copy_out(back.data(), x.p, size_t(n) * 4); // waits for the fill and the copy in
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(back[size_t(i)], slot[i]) << i;
  b.copy_out(slot, x.p, size_t(n) * 4); // into page-locked memory too
  EXPECT_EQ(slot[n - 1], back[size_t(n - 1)]);
  bench("copy_in 4 MiB from page-locked memory", [&] {
    b.copy_in(x.p, slot, size_t(n) * 4);
    planrt_cuda_sync();
  });
  bench("copy_out 4 MiB to page-locked memory", [&] { b.copy_out(slot, x.p, size_t(n) * 4); });
  b.host_free(slot);
}

// Where the runtime's memory lives, measured (docs/CUDA.md, issue 23's plain device
// memory): the same cross-entropy over 4096 x 50257 logits, and a device-to-device copy of
// its 0.8 GB, on managed memory (the runtime's backend), on managed memory advised to
// stay on the GPU, and on plain device memory (cudaMalloc). A measurement, not a check.
TEST(CudaKernels, ManagedAgainstDeviceMemory) {
  NEED_GPU();
  const int64_t R = 4096, W = 50257, n = R * W;
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  for (const char *kind : {"managed", "managed, advised to the GPU", "cudaMalloc"}) {
    float *logits = nullptr, *copy = nullptr, *loss = nullptr;
    int32_t *ids = nullptr;
    bool plain = std::strcmp(kind, "cudaMalloc") == 0;
    for (void **p : {(void **)&logits, (void **)&copy}) {
      ASSERT_EQ(plain ? cudaMalloc(p, size_t(n) * 4) : cudaMallocManaged(p, size_t(n) * 4), cudaSuccess);
      if (std::strcmp(kind, "managed, advised to the GPU") == 0) {
#if CUDART_VERSION >= 13000
        cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
#else
        int gpu = device;
#endif
        ASSERT_EQ(cudaMemAdvise(*p, size_t(n) * 4, cudaMemAdviseSetPreferredLocation, gpu), cudaSuccess);
      }
    }
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&loss), 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&ids), size_t(R) * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(ids, 0, size_t(R) * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(logits, 0, size_t(n) * 4), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    bench(std::string("cross_entropy 4096x50257, ") + kind, [&] { planrt_cuda_cross_entropy(logits, ids, loss, R, W, 0); });
    // A device-to-device cudaMemcpy may return before the copy is done: wait for it.
    bench(std::string("copy 0.82 GB, ") + kind, [&] {
      ASSERT_EQ(cudaMemcpy(copy, logits, size_t(n) * 4, cudaMemcpyDeviceToDevice), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    });
    for (void *p : {(void *)logits, (void *)copy, (void *)loss, (void *)ids})
      cudaFree(p);
  }
}

TEST(CudaKernels, DequantizeNf4) {
  NEED_GPU();
  for (int dbl : {0, 1}) {
    const int64_t n = 3 * 64 * 300 + 17; // three groups of blocks, a partial last block
    Buf w(n), q(planrt_nf4_bytes(n, 64, dbl) / 4), out(n), outr(n);
    fill(w, 21, 0.02f);
    planrt::nf4::quantize(w.p, n, 64, dbl != 0, reinterpret_cast<uint8_t *>(q.p));
    planrt_k_dequant_nf4(q.p, outr.p, n, 64, dbl);
    planrt_cuda_dequant_nf4(q.p, out.p, n, 64, dbl);
    planrt_cuda_sync();
    EXPECT_EQ(std::memcmp(out.p, outr.p, size_t(n) * 4), 0) << "double " << dbl; // bitwise
  }
  // Llama 3 70B's largest matrix, 8192 × 28672 (the quantized bytes are left as zeros).
  const int64_t n = int64_t(8192) * 28672;
  Buf q(planrt_nf4_bytes(n, 64, 1) / 4), out(n);
  std::memset(q.p, 0, size_t(q.n) * 4);
  bench("dequant_nf4 8192x28672 double", [&] { planrt_cuda_dequant_nf4(q.p, out.p, n, 64, 1); });
}

} // namespace
