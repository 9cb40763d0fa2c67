// Tiled attention on the tensor cores: flash_attention.cuh's algorithm with every matrix
// product a warp's mma.sync (m16n8k8, TF32) on split operands — each fp32 value x as
// hi + lo, two TF32 numbers, and each product as lo·hi + hi·lo + hi·hi — which keeps
// fp32's accuracy (about 2^-21 relative per product) at a third of TF32's rate. One
// code path for fp32 and bf16 plans; head dimensions up to 128 (kMaxD), zero-padded to
// a multiple of 8.
//
// A block is four warps; each warp owns 16 rows (queries, or keys in the keys' backward)
// of the block's 64, and the other side goes through shared memory in tiles of 64 rows.
// A product's operands are read from shared memory straight into the mma fragments
// (warpMma); probabilities and their gradients go back through shared memory between
// the two products that use them. The row statistics follow the layout of the mma's
// result: a thread holds two rows (g and g + 8) and two columns of every 8, and the
// four threads of a row combine their maxima and sums with xor shuffles. No atomics:
// the same bits every run.
//
// Written on simt.cuh like flash_attention.cuh: planc-simt-tests runs it emulated
// (simt::mmaTf32 computing the documented fragment layout) against the CPU kernels.
#ifndef PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH
#define PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH

#include "flash_attention.cuh"

namespace planrt::attention::mma {

constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps; ///< rows a block owns
constexpr int kKeys = 64;          ///< rows of the other side's tiles
constexpr int kScratch = kKeys + 4; ///< row stride of a warp's 16 x 64 scratch
constexpr int64_t kMaxD = 128;

/// x as hi + lo, two TF32 values.
SIMT_DEVICE void split(float x, uint32_t &hi, uint32_t &lo) {
  hi = simt::toTf32(x);
  lo = simt::toTf32(x - simt::fromBits(hi));
}

/// acc[nb] += A · B over k < K (a multiple of 8) for the calling warp: A(m, k) =
/// A[m am + k ak] for m < 16, B(k, n) = B[k bk + n bn] for n < 8 NB; acc[nb][q] holds
/// C[g + 8 (q / 2)][8 nb + 2 t + q % 2] (lane = 4 g + t).
template <int NB>
SIMT_DEVICE void warpMma(const float *A, int am, int ak, const float *B, int bk, int bn, int K, float (&acc)[NB][4]) {
  int lane = simt::threadIndex() % 32, g = lane / 4, t = lane % 4;
  for (int k0 = 0; k0 < K; k0 += 8) {
    const float av[4] = {A[g * am + (k0 + t) * ak], A[(g + 8) * am + (k0 + t) * ak], A[g * am + (k0 + t + 4) * ak],
                         A[(g + 8) * am + (k0 + t + 4) * ak]};
    uint32_t ah[4], al[4];
    SIMT_UNROLL
    for (int i = 0; i < 4; ++i)
      split(av[i], ah[i], al[i]);
    SIMT_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      int n = 8 * nb + g;
      uint32_t bh[2], bl[2];
      split(B[(k0 + t) * bk + n * bn], bh[0], bl[0]);
      split(B[(k0 + t + 4) * bk + n * bn], bh[1], bl[1]);
      simt::mmaTf32(acc[nb], al, bh);
      simt::mmaTf32(acc[nb], ah, bl);
      simt::mmaTf32(acc[nb], ah, bh);
    }
  }
}

/// tile[rows][ld] = rows [r0, r0 + n) of v's head (b, head) · scale; zeros past n, past D.
SIMT_DEVICE void fillTile(const Shape &a, const View &v, int64_t b, int64_t head, int64_t r0, int n, float scale,
                          float *tile, int ld, int rows) {
  for (int e = simt::threadIndex(); e < rows * ld; e += kThreads) {
    int r = e / ld, d = e % ld;
    tile[e] = r < n && d < a.D ? v.at(a.S, a.D, b, r0 + r, head)[d] * scale : 0.0f;
  }
}

template <int NB> SIMT_DEVICE void zero(float (&acc)[NB][4]) {
  SIMT_UNROLL
  for (int nb = 0; nb < NB; ++nb)
    SIMT_UNROLL
    for (int q = 0; q < 4; ++q)
      acc[nb][q] = 0.0f;
}

/// The lane's place in its warp's 16-row part: rows g and g + 8, columns 2 t and 2 t + 1
/// of every 8.
struct Lane {
  int warp, g, t;
};
SIMT_DEVICE Lane laneOf() {
  int th = simt::threadIndex(), lane = th % 32;
  return {th / 32, lane / 4, lane % 4};
}
SIMT_DEVICE int rowOf(const Lane &l, int q) { return 16 * l.warp + l.g + 8 * (q / 2); }
SIMT_DEVICE int colOf(const Lane &l, int nb, int q) { return 8 * nb + 2 * l.t + q % 2; }

/// The maximum (or the sum) over the four lanes of a row.
SIMT_DEVICE float rowMax(float v) {
  v = fmaxf(v, simt::shuffleXor(v, 1));
  return fmaxf(v, simt::shuffleXor(v, 2));
}
SIMT_DEVICE float rowSum(float v) {
  v += simt::shuffleXor(v, 1);
  return v + simt::shuffleXor(v, 2);
}

/// The warp's 16 x 8 ND result acc, each row times scale[its half], into the rows r0 + …
/// (below S) of v's head (b, head), columns below D.
template <int ND>
SIMT_DEVICE void storeResult(const Shape &a, const Lane &me, const float (&acc)[ND][4], const float (&scale)[2],
                             const View &v, int64_t b, int64_t r0, int64_t head) {
  SIMT_UNROLL
  for (int q = 0; q < 4; ++q) {
    int64_t s = r0 + rowOf(me, q);
    if (s >= a.S)
      continue;
    float *dst = v.at(a.S, a.D, b, s, head);
    SIMT_UNROLL
    for (int nd = 0; nd < ND; ++nd)
      if (colOf(me, nd, q) < a.D)
        dst[colOf(me, nd, q)] = acc[nd][q] * scale[q / 2];
  }
}

/// Shared floats of each kernel, by tile row stride ld.
inline size_t forwardShared(int ld) { return size_t(3 * kRows * ld + kWarps * 16 * kScratch) * sizeof(float); }
inline size_t backwardShared(int ld) {
  return size_t(4 * kRows * ld + kWarps * 16 * kScratch + 3 * kKeys) * sizeof(float);
}

/// The key and value tiles of key head (b, g) from key t0 (at most kKeys, none from `end`
/// on) into K and V, between barriers; returns how many keys they hold.
SIMT_DEVICE int loadKeys(const Shape &a, int ld, int64_t b, int64_t g, int64_t t0, int64_t end, float *K, float *V) {
  int n = int(end - t0 < kKeys ? end - t0 : kKeys);
  simt::syncBlock();
  fillTile(a, a.k, b, g, t0, n, 1.0f, K, ld, kKeys);
  fillTile(a, a.v, b, g, t0, n, 1.0f, V, ld, kKeys);
  simt::syncBlock();
  return n;
}

/// Forward over grid (query blocks of 64, H, B), ND · 8 ≥ D: out and each row's maximum
/// and 1 / sum into stats (as flash_attention.cuh's forward).
template <int ND> SIMT_GLOBAL void forward(Shape a, int ld, View out, float *stats) {
  float *Q = simt::dynamicShared<float>(), *K = Q + kRows * ld, *V = K + kKeys * ld, *P = V + kKeys * ld;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * kRows, g = h / a.group;
  float *Qw = Q + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  fillTile(a, a.q, b, h, s0, int(a.S - s0 < kRows ? a.S - s0 : kRows), a.scale, Q, ld, kRows);
  float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  zero(o);
  int64_t end = a.causal ? (s0 + kRows < a.S ? s0 + kRows : a.S) : a.S;
  for (int64_t t0 = 0; t0 < end; t0 += kKeys) {
    int n = loadKeys(a, ld, b, g, t0, end, K, V);
    float s[kKeys / 8][4];
    zero(s);
    warpMma(Qw, ld, 1, K, 1, ld, ND * 8, s);
    float top[2] = {-INFINITY, -INFINITY};
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q) {
        int c = colOf(me, nb, q);
        bool seen = c < n && (!a.causal || t0 + c <= s0 + rowOf(me, q));
        s[nb][q] = seen ? s[nb][q] : -INFINITY;
        top[q / 2] = fmaxf(top[q / 2], s[nb][q]);
      }
    // Key 0 is seen by every row, so m is finite from the first tile on.
    float rescale[2];
    for (int r = 0; r < 2; ++r) {
      float next = fmaxf(m[r], rowMax(top[r]));
      rescale[r] = expf(m[r] - next);
      l[r] *= rescale[r];
      m[r] = next;
    }
    SIMT_UNROLL
    for (int nd = 0; nd < ND; ++nd)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q)
        o[nd][q] *= rescale[q / 2];
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q) {
        float p = expf(s[nb][q] - m[q / 2]);
        l[q / 2] += p;
        Pw[(me.g + 8 * (q / 2)) * kScratch + colOf(me, nb, q)] = p;
      }
    simt::syncBlock();
    warpMma(Pw, kScratch, 1, V, ld, 1, kKeys, o);
  }
  float inv[2] = {1.0f / rowSum(l[0]), 1.0f / rowSum(l[1])};
  storeResult(a, me, o, inv, out, b, s0, h);
  for (int r = 0; r < 2; ++r) {
    int64_t s = s0 + rowOf(me, 2 * r);
    if (stats && me.t == 0 && s < a.S) {
      int64_t row = (b * a.H + h) * a.S + s;
      stats[2 * row] = m[r];
      stats[2 * row + 1] = inv[r];
    }
  }
}

/// deltas[(b H + h) S + s] = dout · out of the row, over B · H · S threads.
SIMT_GLOBAL void rowDeltas(Shape a, View out, View dout, float *deltas) {
  int64_t e = simt::blockIndex(0) * kThreads + simt::threadIndex();
  if (e >= a.B * a.H * a.S)
    return;
  int64_t s = e % a.S, h = (e / a.S) % a.H, b = e / (a.S * a.H);
  const float *o = out.at(a.S, a.D, b, s, h), *d = dout.at(a.S, a.D, b, s, h);
  float acc = 0.0f;
  for (int64_t i = 0; i < a.D; ++i)
    acc += o[i] * d[i];
  deltas[e] = acc;
}

/// The queries' gradient over grid (query blocks of 64, H, B): dq = scale Σ_t p_t (dout ·
/// v_t − delta) k_t, from the forward's stats and the rows' deltas.
template <int ND>
SIMT_GLOBAL void backwardQuery(Shape a, int ld, View dout, const float *stats, const float *deltas, View dq) {
  float *Q = simt::dynamicShared<float>(), *dO = Q + kRows * ld, *K = dO + kRows * ld, *V = K + kKeys * ld,
        *P = V + kKeys * ld;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * kRows, g = h / a.group;
  int rows = int(a.S - s0 < kRows ? a.S - s0 : kRows);
  fillTile(a, a.q, b, h, s0, rows, a.scale, Q, ld, kRows);
  fillTile(a, dout, b, h, s0, rows, 1.0f, dO, ld, kRows);
  float *Qw = Q + 16 * me.warp * ld, *dOw = dO + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  float m[2], inv[2], delta[2];
  for (int r = 0; r < 2; ++r) {
    int64_t s = s0 + rowOf(me, 2 * r), row = (b * a.H + h) * a.S + s;
    bool live = s < a.S;
    m[r] = live ? stats[2 * row] : 0.0f;
    inv[r] = live ? stats[2 * row + 1] : 0.0f;
    delta[r] = live ? deltas[row] : 0.0f;
  }
  float acc[ND][4];
  zero(acc);
  int64_t end = a.causal ? (s0 + kRows < a.S ? s0 + kRows : a.S) : a.S;
  for (int64_t t0 = 0; t0 < end; t0 += kKeys) {
    int n = loadKeys(a, ld, b, g, t0, end, K, V);
    float s[kKeys / 8][4], dp[kKeys / 8][4];
    zero(s);
    zero(dp);
    warpMma(Qw, ld, 1, K, 1, ld, ND * 8, s);
    warpMma(dOw, ld, 1, V, 1, ld, ND * 8, dp);
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q) {
        int c = colOf(me, nb, q);
        int64_t row = s0 + rowOf(me, q);
        bool seen = c < n && row < a.S && (!a.causal || t0 + c <= row);
        float p = seen ? expf(s[nb][q] - m[q / 2]) * inv[q / 2] : 0.0f;
        Pw[(me.g + 8 * (q / 2)) * kScratch + c] = p * (dp[nb][q] - delta[q / 2]);
      }
    simt::syncBlock();
    warpMma(Pw, kScratch, 1, K, ld, 1, kKeys, acc);
  }
  const float scale[2] = {a.scale, a.scale};
  storeResult(a, me, acc, scale, dq, b, s0, h);
}

/// The keys' and values' gradients over grid (key blocks of 64, KVH, B), over the query
/// heads of each key head's group and the queries that see the key: dv = Σ p dout and
/// dk = Σ p (dout · v − delta) · scale · q.
template <int ND>
SIMT_GLOBAL void backwardKeyValue(Shape a, int ld, View dout, const float *stats, const float *deltas, View dk,
                                  View dv) {
  float *Kb = simt::dynamicShared<float>(), *Vb = Kb + kRows * ld, *Q = Vb + kRows * ld, *dO = Q + kKeys * ld,
        *P = dO + kKeys * ld, *rowStats = P + kWarps * 16 * kScratch;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), g = simt::blockIndex(1), t0 = simt::blockIndex(0) * kRows;
  int keys = int(a.S - t0 < kRows ? a.S - t0 : kRows);
  fillTile(a, a.k, b, g, t0, keys, 1.0f, Kb, ld, kRows);
  fillTile(a, a.v, b, g, t0, keys, 1.0f, Vb, ld, kRows);
  float *Kw = Kb + 16 * me.warp * ld, *Vw = Vb + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  float dK[ND][4], dV[ND][4];
  zero(dK);
  zero(dV);
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t s0 = a.causal ? t0 : 0; s0 < a.S; s0 += kKeys) {
      int n = int(a.S - s0 < kKeys ? a.S - s0 : kKeys);
      simt::syncBlock();
      fillTile(a, a.q, b, h, s0, n, a.scale, Q, ld, kKeys);
      fillTile(a, dout, b, h, s0, n, 1.0f, dO, ld, kKeys);
      loadRowStats(a, b, h, s0, n, stats, deltas, rowStats);
      simt::syncBlock();
      float st[kKeys / 8][4], dpt[kKeys / 8][4];
      zero(st);
      zero(dpt);
      warpMma(Kw, ld, 1, Q, 1, ld, ND * 8, st);   // S^T = K Q^T
      warpMma(Vw, ld, 1, dO, 1, ld, ND * 8, dpt); // dP^T = V dO^T
      SIMT_UNROLL
      for (int nb = 0; nb < kKeys / 8; ++nb)
        SIMT_UNROLL
        for (int q = 0; q < 4; ++q) {
          int c = colOf(me, nb, q);
          int64_t key = t0 + rowOf(me, q);
          bool seen = c < n && key < a.S && (!a.causal || s0 + c >= key);
          float p = seen ? expf(st[nb][q] - rowStats[3 * c]) * rowStats[3 * c + 1] : 0.0f;
          Pw[(me.g + 8 * (q / 2)) * kScratch + c] = p;
          dpt[nb][q] = p * (dpt[nb][q] - (seen ? rowStats[3 * c + 2] : 0.0f)); // dS^T
        }
      simt::syncBlock();
      warpMma(Pw, kScratch, 1, dO, ld, 1, kKeys, dV); // dV += P^T dO
      simt::syncBlock();
      SIMT_UNROLL
      for (int nb = 0; nb < kKeys / 8; ++nb)
        SIMT_UNROLL
        for (int q = 0; q < 4; ++q)
          Pw[(me.g + 8 * (q / 2)) * kScratch + colOf(me, nb, q)] = dpt[nb][q];
      simt::syncBlock();
      warpMma(Pw, kScratch, 1, Q, ld, 1, kKeys, dK); // dK += dS^T (scale q)
    }
  const float one[2] = {1.0f, 1.0f};
  storeResult(a, me, dK, one, dk, b, t0, g);
  storeResult(a, me, dV, one, dv, b, t0, g);
}

// ---- Host side, through flash_attention.cuh's launcher L.

/// The kernels' row stride in shared memory: D rounded up to ND · 8, plus 4 (so that a
/// fragment's 32 reads fall in 32 banks).
inline int strideOf(int nd) { return 8 * nd + 4; }

/// ND for D (a power of two from 2 to 16), or 0 when D > kMaxD.
inline int blocksFor(int64_t D) {
  if (D > kMaxD)
    return 0;
  int nd = 2;
  while (8 * nd < D)
    nd *= 2;
  return nd;
}

template <int ND, class L> void forwardAs(L &launch, const Shape &a, View out, float *stats) {
  int ld = strideOf(ND);
  launch.run(blocksOf(a.S, kRows), unsigned(a.H), unsigned(a.B), forwardShared(ld), forward<ND>, a, ld, out, stats);
}

template <int ND, class L>
void backwardAs(L &launch, const Shape &a, View dout, const float *stats, const float *deltas, float *dqkv) {
  int ld = strideOf(ND);
  int64_t row = (a.H + 2 * a.KVH) * a.D;
  launch.run(blocksOf(a.S, kRows), unsigned(a.H), unsigned(a.B), backwardShared(ld), backwardQuery<ND>, a, ld, dout,
             stats, deltas, View{dqkv, row, 0});
  launch.run(blocksOf(a.S, kRows), unsigned(a.KVH), unsigned(a.B), backwardShared(ld), backwardKeyValue<ND>, a, ld,
             dout, stats, deltas, View{dqkv, row, a.H}, View{dqkv, row, a.H + a.KVH});
}

/// f<ND>(args...) for D's ND.
#define PLANRT_MMA_DISPATCH(nd, call)                                                                                  \
  switch (nd) {                                                                                                        \
  case 2: {                                                                                                            \
    constexpr int N = 2;                                                                                               \
    call;                                                                                                              \
  } break;                                                                                                             \
  case 4: {                                                                                                            \
    constexpr int N = 4;                                                                                               \
    call;                                                                                                              \
  } break;                                                                                                             \
  case 8: {                                                                                                            \
    constexpr int N = 8;                                                                                               \
    call;                                                                                                              \
  } break;                                                                                                             \
  default: {                                                                                                           \
    constexpr int N = 16;                                                                                              \
    call;                                                                                                              \
  } break;                                                                                                             \
  }

/// The tensor cores' kernels of a call (D ≤ kMaxD), for flash_attention.cuh's sdpa and
/// sdpaBackward; the rows' deltas by a kernel of their own.
struct Kernels {
  template <class L> static void forwardPass(L &launch, const Shape &a, View out, float *stats) {
    PLANRT_MMA_DISPATCH(blocksFor(a.D), (forwardAs<N>(launch, a, out, stats)))
  }
  template <class L>
  static void backwardPass(L &launch, const Shape &a, const BackwardScratch<L> &t, float *dqkv) {
    launch.run(blocksOf(a.B * a.H * a.S, kThreads), 1, 1, 0, rowDeltas, a, t.outView, t.doutView, t.deltas);
    PLANRT_MMA_DISPATCH(blocksFor(a.D), (backwardAs<N>(launch, a, t.doutView, t.stats, t.deltas, dqkv)))
  }
};

#undef PLANRT_MMA_DISPATCH

} // namespace planrt::attention::mma

#endif // PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH
