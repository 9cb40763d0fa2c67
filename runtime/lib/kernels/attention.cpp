// Scaled dot-product attention and its backward on the CPU (planrt_kernels.h): rope,
// grouped-query heads, causal or not, and over a key/value cache for decoding. Work goes
// per (batch, head) in blocks of 64 queries: the matrix products are cblas_sgemm calls
// (OpenBLAS), the softmax (row maximum subtracted) and other element-wise passes are in
// float, four lanes at a time; the backward recomputes the probabilities.
#include "common.h"
#include "planrt_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using planrt::kernels::fatal;

namespace {

/// Query rows per block of the attention kernels: the scores of one block of
/// queries against the keys it may see are one GEMM. With a causal mask, block
/// [r0, r1) only needs keys [0, r1), which skips most of the masked half.
constexpr int64_t kAttnBlock = 64;

/// Four floats in one SSE register (GCC/Clang vector extensions): the attention
/// kernels' element-wise passes, which the compiler does not vectorise at -O2.
namespace simd {
typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));

inline f4 load(const float *p) {
  f4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float *p, f4 v) { std::memcpy(p, &v, sizeof v); }
inline f4 splat(float x) { return f4{x, x, x, x}; }
inline float hsum(f4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
/// m ? a : b, lane by lane (m from a comparison: all ones or all zeros).
inline f4 select(i4 m, f4 a, f4 b) { return (f4)(((i4)a & m) | ((i4)b & ~m)); }
inline f4 max(f4 a, f4 b) { return select(a > b, a, b); }

/// exp(x) for x <= 0, lane by lane, within 1 ulp (Cephes' expf): x = n ln2 + r
/// with n = round(x / ln2) and |r| <= ln2/2, exp(r) by a degree-7 polynomial,
/// 2^n through the exponent bits. Below -87.3 (where expf goes denormal) it
/// returns 0; NaN stays NaN. (Above 0 it is right up to 88; past that, garbage.)
inline f4 expNonPositive(f4 x) {
  typedef uint32_t u4 __attribute__((vector_size(16)));
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low mantissa bits.
  const f4 magic = splat(12582912.0f);
  i4 under = x < splat(-87.33654f);
  f4 z = x * splat(1.44269504088896341f) + magic;
  f4 n = z - magic;
  f4 r = x - n * splat(0.693359375f) - n * splat(-2.12194440e-4f);
  f4 y = splat(1.9875691500e-4f);
  y = y * r + splat(1.3981999507e-3f);
  y = y * r + splat(8.3334519073e-3f);
  y = y * r + splat(4.1665795894e-2f);
  y = y * r + splat(1.6666665459e-1f);
  y = y * r + splat(5.0000001201e-1f);
  y = y * (r * r) + r + splat(1.0f);
  // 2^n = (n + 127) << 23, and z's bits are n + 0x4B400000, whose high bits shift out.
  f4 pow2n = (f4)(((u4)z + 127u) << 23);
  return (f4)((i4)(y * pow2n) & ~under);
}
} // namespace simd

/// max over x[0, n) (-inf for n == 0).
float rowMax(const float *x, int64_t n) {
  using namespace simd;
  f4 m = splat(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    m = simd::max(load(x + i), m);
  float r = std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
  for (; i < n; ++i)
    r = std::max(r, x[i]);
  return r;
}

/// sum over x[0, n) of x * y, in float.
float dot(const float *x, const float *y, int64_t n) {
  using namespace simd;
  f4 acc0 = splat(0.0f), acc1 = splat(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 += load(x + i) * load(y + i);
    acc1 += load(x + i + 4) * load(y + i + 4);
  }
  for (; i + 4 <= n; i += 4)
    acc0 += load(x + i) * load(y + i);
  float r = hsum(acc0 + acc1);
  for (; i < n; ++i)
    r += x[i] * y[i];
  return r;
}

/// x[0, n) = exp(x - shift), for shift >= max(x); returns their sum (float).
float expShiftSum(float *x, int64_t n, float shift) {
  using namespace simd;
  f4 acc = splat(0.0f), sh = splat(shift);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f4 e = expNonPositive(load(x + i) - sh);
    store(x + i, e);
    acc += e;
  }
  float r = hsum(acc);
  for (; i < n; ++i)
    r += x[i] = std::exp(x[i] - shift);
  return r;
}

/// x[0, n) *= k.
void scaleBy(float *x, int64_t n, float k) {
  using namespace simd;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    store(x + i, load(x + i) * splat(k));
  for (; i < n; ++i)
    x[i] *= k;
}

/// How many rows ahead the gathers of one head from qkv (rows (H + 2 KVH) D
/// apart) prefetch: the hardware prefetcher does not follow that stride well.
constexpr int64_t kPrefetchRows = 8;

/// Asks for the cache lines of x[0, n) to be loaded.
inline void prefetch(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    __builtin_prefetch(x + i);
}

/// The softmax's backward on one row: ds = p (ds - delta), in place, with
/// delta = sum p ds.
void dsoftmax(const float *p, float *ds, int64_t n, float delta) {
  using namespace simd;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    store(ds + i, load(p + i) * (load(ds + i) - splat(delta)));
  for (; i < n; ++i)
    ds[i] = p[i] * (ds[i] - delta);
}

/// The shape of one attention call and where each head lives in a qkv row.
struct Attn {
  int64_t B, S, H, KVH, D;
  bool causal;
  int64_t row;   ///< floats per (b, s) position of qkv: (H + 2 KVH) D
  int64_t group; ///< query heads per key/value head
  double scale;  ///< 1/sqrt(D)
  /// cos and sin of position s, frequency i at [s * D/2 + i]; empty without rope.
  std::vector<float> cos, sin;

  Attn(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int32_t causal, int32_t rope, float theta,
       const char *name)
      : B(B), S(S), H(H), KVH(KVH), D(D), causal(causal != 0), row((H + 2 * KVH) * D), group(KVH > 0 ? H / KVH : 0),
        scale(1.0 / std::sqrt(double(D))) {
    if (B < 0 || S < 0 || H <= 0 || KVH <= 0 || D <= 0 || H % KVH != 0)
      fatal("%s: bad shape B=%lld S=%lld H=%lld KVH=%lld D=%lld (H must be a multiple of KVH)", name, (long long)B,
            (long long)S, (long long)H, (long long)KVH, (long long)D);
    if (!rope)
      return;
    if (D % 2 != 0)
      fatal("%s: rope needs an even head dim, got D=%lld", name, (long long)D);
    int64_t half = D / 2;
    cos.resize(size_t(S * half));
    sin.resize(size_t(S * half));
    for (int64_t i = 0; i < half; ++i) {
      double invFreq = std::pow(double(theta), -2.0 * double(i) / double(D));
      for (int64_t s = 0; s < S; ++s) {
        double angle = double(s) * invFreq;
        cos[size_t(s * half + i)] = float(std::cos(angle));
        sin[size_t(s * half + i)] = float(std::sin(angle));
      }
    }
  }

  bool rope() const { return !cos.empty(); }
  const float *q(const float *qkv, int64_t b, int64_t s, int64_t h) const { return qkv + (b * S + s) * row + h * D; }
  const float *k(const float *qkv, int64_t b, int64_t s, int64_t g) const {
    return qkv + (b * S + s) * row + (H + g) * D;
  }
  const float *v(const float *qkv, int64_t b, int64_t s, int64_t g) const {
    return qkv + (b * S + s) * row + (H + KVH + g) * D;
  }
  /// The number of keys query s sees.
  int64_t keys(int64_t s) const { return causal ? s + 1 : S; }
  /// The number of keys the query block ending (exclusive) at r1 sees.
  int64_t blockKeys(int64_t r1) const { return causal ? r1 : S; }

  /// dst = rope(src) at position s (a copy without rope).
  void rotate(const float *src, float *dst, int64_t s) const {
    if (!rope()) {
      std::memcpy(dst, src, size_t(D) * sizeof(float));
      return;
    }
    int64_t half = D / 2, i = 0;
    const float *c = &cos[size_t(s * half)], *sn = &sin[size_t(s * half)];
    for (; i + 4 <= half; i += 4) {
      simd::f4 a = simd::load(src + i), b = simd::load(src + i + half);
      simd::f4 ci = simd::load(c + i), si = simd::load(sn + i);
      simd::store(dst + i, a * ci - b * si);
      simd::store(dst + i + half, b * ci + a * si);
    }
    for (; i < half; ++i) {
      float a = src[i], b = src[i + half];
      dst[i] = a * c[i] - b * sn[i];
      dst[i + half] = b * c[i] + a * sn[i];
    }
  }
  /// dst = rope(.)^T applied to the gradient g at position s: the rotation is
  /// orthogonal, so its transpose is the rotation by the opposite angle.
  void unrotate(const float *g, float *dst, int64_t s) const {
    if (!rope()) {
      std::memcpy(dst, g, size_t(D) * sizeof(float));
      return;
    }
    int64_t half = D / 2, i = 0;
    const float *c = &cos[size_t(s * half)], *sn = &sin[size_t(s * half)];
    for (; i + 4 <= half; i += 4) {
      simd::f4 a = simd::load(g + i), b = simd::load(g + i + half);
      simd::f4 ci = simd::load(c + i), si = simd::load(sn + i);
      simd::store(dst + i, a * ci + b * si);
      simd::store(dst + i + half, b * ci - a * si);
    }
    for (; i < half; ++i) {
      float a = g[i], b = g[i + half];
      dst[i] = a * c[i] + b * sn[i];
      dst[i + half] = b * c[i] - a * sn[i];
    }
  }

  /// K (rope applied) and V of key/value head g of batch b, each as [S, D].
  void gatherKV(const float *qkv, int64_t b, int64_t g, float *K, float *V) const {
    for (int64_t t = 0; t < S; ++t) {
      if (t + kPrefetchRows < S) {
        prefetch(k(qkv, b, t + kPrefetchRows, g), D);
        prefetch(v(qkv, b, t + kPrefetchRows, g), D);
      }
      rotate(k(qkv, b, t, g), K + t * D, t);
      std::memcpy(V + t * D, v(qkv, b, t, g), size_t(D) * sizeof(float));
    }
  }
  /// Q (rope applied, then scaled by 1/sqrt(D)) of query head h of batch b, as [S, D].
  void gatherQ(const float *qkv, int64_t b, int64_t h, float *Q) const {
    const float fscale = float(scale);
    for (int64_t s = 0; s < S; ++s) {
      if (s + kPrefetchRows < S)
        prefetch(q(qkv, b, s + kPrefetchRows, h), D);
      float *qs = Q + s * D;
      rotate(q(qkv, b, s, h), qs, s);
      scaleBy(qs, D, fscale);
    }
  }

  /// Scores Q[r0, r0 + M) K[0, N)^T into P [M, N] (row stride N), then the
  /// softmax of each row over the keys its query sees; the masked keys get 0.
  /// With inv, the rows are left unnormalised (exp(score - max)) and inv[i] is
  /// 1 / row i's sum, for the caller to apply to a narrower product.
  void probs(const float *Q, const float *K, int64_t r0, int64_t M, int64_t N, float *P, float *inv = nullptr) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(D), 1.0f, Q + r0 * D, int(D), K, int(D),
                0.0f, P, int(N));
    for (int64_t i = 0; i < M; ++i) {
      float *p = P + i * N;
      int64_t T = std::min(keys(r0 + i), N);
      float rsum = 1.0f / expShiftSum(p, T, rowMax(p, T));
      if (inv)
        inv[i] = rsum;
      else
        scaleBy(p, T, rsum);
      std::fill(p + T, p + N, 0.0f);
    }
  }
};

} // namespace

extern "C" {

void planrt_k_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                   int32_t causal, int32_t rope, float rope_theta) {
  Attn a(B, S, H, KVH, D, causal, rope, rope_theta, "planrt_k_sdpa");
  if (B == 0 || S == 0)
    return;
  const int64_t ldo = H * D, block = std::min(kAttnBlock, S);
  std::vector<float> K(size_t(S * D)), V(size_t(S * D)), Q(size_t(S * D)), P(size_t(block * S)),
      inv(static_cast<size_t>(block));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KVH; ++g) {
      a.gatherKV(qkv, b, g, K.data(), V.data());
      for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
        a.gatherQ(qkv, b, h, Q.data());
        for (int64_t r0 = 0; r0 < S; r0 += block) {
          int64_t M = std::min(block, S - r0), N = a.blockKeys(r0 + M);
          a.probs(Q.data(), K.data(), r0, M, N, P.data(), inv.data());
          // O[r0, r0 + M) = P V[0, N), straight into out's rows, then normalised.
          float *O = out + (b * S + r0) * ldo + h * D;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(D), int(N), 1.0f, P.data(), int(N),
                      V.data(), int(D), 0.0f, O, int(ldo));
          for (int64_t i = 0; i < M; ++i)
            scaleBy(O + i * ldo, D, inv[size_t(i)]);
        }
      }
    }
}

void planrt_k_sdpa_cached(const float *qkv, float *cache, float *out, int64_t B, int64_t n, int64_t T, int64_t pos,
                          int64_t H, int64_t KVH, int64_t D, int32_t rope, float rope_theta) {
  // The rotation tables span the window; the chunk's rows are indexed here.
  Attn a(B, T, H, KVH, D, /*causal=*/1, rope, rope_theta, "planrt_k_sdpa_cached");
  if (n < 0 || pos < 0 || pos + n > T)
    fatal("planrt_k_sdpa_cached: positions [%lld, %lld) do not fit the window of %lld", (long long)pos,
          (long long)(pos + n), (long long)T);
  if (B == 0 || n == 0)
    return;
  const int64_t row = a.row, crow = 2 * KVH * D, ldo = H * D, N = pos + n;
  const float fscale = float(a.scale);
  auto chunk = [&](int64_t b, int64_t s) { return qkv + (b * n + s) * row; };
  for (int64_t b = 0; b < B; ++b) {
    float *C = cache + b * T * crow;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t g = 0; g < KVH; ++g) {
        a.rotate(chunk(b, s) + (H + g) * D, C + (pos + s) * crow + g * D, pos + s);
        std::memcpy(C + (pos + s) * crow + (KVH + g) * D, chunk(b, s) + (H + KVH + g) * D, size_t(D) * sizeof(float));
      }
  }
  std::vector<float> Q(size_t(n * D)), P(size_t(n * N));
  for (int64_t b = 0; b < B; ++b) {
    const float *C = cache + b * T * crow;
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / a.group;
      for (int64_t s = 0; s < n; ++s) {
        a.rotate(chunk(b, s) + h * D, Q.data() + s * D, pos + s);
        scaleBy(Q.data() + s * D, D, fscale);
      }
      // P = Q K[0, N)^T straight from the cache rows, then each query's softmax over
      // the keys up to its position.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(N), int(D), 1.0f, Q.data(), int(D), C + g * D,
                  int(crow), 0.0f, P.data(), int(N));
      for (int64_t i = 0; i < n; ++i) {
        float *p = P.data() + i * N;
        int64_t keys = pos + i + 1;
        scaleBy(p, keys, 1.0f / expShiftSum(p, keys, rowMax(p, keys)));
        std::fill(p + keys, p + N, 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(D), int(N), 1.0f, P.data(), int(N),
                  C + (KVH + g) * D, int(crow), 0.0f, out + b * n * ldo + h * D, int(ldo));
    }
  }
}

void planrt_k_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H, int64_t KVH,
                       int64_t D, int32_t causal, int32_t rope, float rope_theta) {
  Attn a(B, S, H, KVH, D, causal, rope, rope_theta, "planrt_k_sdpa_bwd");
  if (B == 0 || S == 0)
    return;
  const int64_t ldo = H * D, block = std::min(kAttnBlock, S);
  const float fscale = float(a.scale);
  std::vector<float> K(size_t(S * D)), V(size_t(S * D)), Q(size_t(S * D)), dK(size_t(S * D)), dV(size_t(S * D)),
      dQ(size_t(block * D)), P(size_t(block * S)), dP(size_t(block * S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KVH; ++g) {
      a.gatherKV(qkv, b, g, K.data(), V.data());
      std::fill(dK.begin(), dK.end(), 0.0f);
      std::fill(dV.begin(), dV.end(), 0.0f);
      for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
        a.gatherQ(qkv, b, h, Q.data());
        const float *dO = dout + b * S * ldo + h * D;
        for (int64_t r0 = 0; r0 < S; r0 += block) {
          int64_t M = std::min(block, S - r0), N = a.blockKeys(r0 + M);
          const float *dOb = dO + r0 * ldo;
          a.probs(Q.data(), K.data(), r0, M, N, P.data());
          // dV[0, N) += P^T dO.
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(D), int(M), 1.0f, P.data(), int(N), dOb,
                      int(ldo), 1.0f, dV.data(), int(D));
          // dP = dO V^T; then dS = P (dP - rowsum(P dP)) in place (0 where masked,
          // since P is).
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(D), 1.0f, dOb, int(ldo), V.data(),
                      int(D), 0.0f, dP.data(), int(N));
          for (int64_t i = 0; i < M; ++i) {
            const float *p = &P[size_t(i * N)];
            float *ds = &dP[size_t(i * N)];
            int64_t T = std::min(a.keys(r0 + i), N);
            float delta = dot(p, ds, T);
            dsoftmax(p, ds, T, delta);
            for (int64_t t = T; t < N; ++t)
              ds[t] = 0.0f;
          }
          // dQ = dS K / sqrt(D); dK[0, N) += dS^T Q (Q carries the scale already).
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(D), int(N), fscale, dP.data(), int(N),
                      K.data(), int(D), 0.0f, dQ.data(), int(D));
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(D), int(M), 1.0f, dP.data(), int(N),
                      Q.data() + r0 * D, int(D), 1.0f, dK.data(), int(D));
          for (int64_t i = 0; i < M; ++i)
            a.unrotate(&dQ[size_t(i * D)], dqkv + (b * S + r0 + i) * a.row + h * D, r0 + i);
        }
      }
      for (int64_t t = 0; t < S; ++t) {
        float *row = dqkv + (b * S + t) * a.row;
        a.unrotate(&dK[size_t(t * D)], row + (H + g) * D, t);
        std::memcpy(row + (H + KVH + g) * D, &dV[size_t(t * D)], size_t(D) * sizeof(float));
      }
    }
}

} // extern "C"
