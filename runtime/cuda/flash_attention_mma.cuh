// Tiled attention on the tensor cores: flash_attention.cuh's algorithm with every matrix
// product a warp's mma.sync, in one of two operand policies:
//   - SplitTf32 (fp32 plans, and fp16 plans): m16n8k8 TF32 on split operands — each fp32
//     value x as hi + lo, two TF32 numbers, and each product as lo·hi + hi·lo + hi·hi —
//     which keeps fp32's accuracy (about 2^-21 relative per product) at a third of TF32's
//     rate;
//   - Bf16 (bf16 plans): m16n8k16 on bf16 tiles, one instruction per product. q, k, v
//     and the output's gradient are bf16 values in such a plan, so they enter the tiles
//     exactly (all but the roped q and k, which rope computes in fp32); the
//     probabilities and their gradients are rounded to bf16 before the products that
//     use them (flash attention's choice, and PyTorch's), and the scale multiplies the
//     fp32 scores rather than the queries.
// Head dimensions up to 128 (kMaxD), zero-padded to a multiple of 8.
//
// A block is four warps; each warp owns 16 rows (queries, or keys in the keys' backward)
// of the block's 64, and the other side goes through shared memory in tiles of 64 rows.
// A product's operands are read from shared memory into the mma fragments (Bf16: by
// ldmatrix); the probabilities and their gradients, a product's result that is the next
// one's operand, stay in registers in Bf16 (an m16n8 result's layout is an m16n8k16 A
// operand's, two columns of 8 a register pair) and go through a warp's shared scratch in
// SplitTf32 (whose k8 layout differs). The row statistics follow the layout of the mma's
// result: a thread holds two rows (g and g + 8) and two columns of every 8, and the
// four threads of a row combine their maxima and sums with xor shuffles. A tile wholly
// seen (off a causal diagonal, not ragged) skips the per-element masks; the bf16 kernels
// exponentiate in base 2 (Op::exp). No atomics: the same bits every run.
//
// Written on simt.cuh like flash_attention.cuh: planc-simt-tests runs it emulated
// (simt::mmaTf32 and simt::mmaBf16 computing the documented fragment layouts) against
// the CPU kernels.
#ifndef PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH
#define PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH

#include "flash_attention.cuh"

#include <vector>

namespace planrt::attention::mma {

constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps; ///< rows a block owns
constexpr int kKeys = 64;          ///< rows of the other side's tiles
constexpr int64_t kMaxD = 128;

/// x as hi + lo, two TF32 values.
SIMT_DEVICE void split(float x, uint32_t &hi, uint32_t &lo) {
  hi = simt::toTf32(x);
  lo = simt::toTf32(x - simt::fromBits(hi));
}

/// fp32 products as split TF32: tiles of floats, three m16n8k8 per product, the queries
/// scaled as they enter their tile (as the CPU kernels scale them).
struct SplitTf32 {
  using Elem = float;
  static constexpr int kPad = 4;       ///< tile rows are 8 ND + kPad elements apart
  static constexpr int kScratch = kKeys + kPad; ///< row stride of a warp's 16 x 64 scratch
  static constexpr bool kScaleQ = true; ///< the queries' tile holds q · scale
  static constexpr bool kPInRegisters = false; ///< P goes through the warp's scratch
  static constexpr int kBuffers = 1; ///< fills that land at once: one buffer of the other side's tiles
  SIMT_DEVICE static Elem from(float x) { return x; }
  /// The softmax's exponential: e^x (fp32's accuracy; base 2 would round x · log2 e).
  static constexpr float kExpScale = 1.0f;
  SIMT_DEVICE static float exp(float x) { return expf(x); }

  /// The kernels read q, k, v and dout where they are.
  using Src = View;
  /// Element d < D of row (b, s) of v's head.
  SIMT_DEVICE static float value(const Shape &a, const Src &v, int64_t b, int64_t s, int64_t head, int d) {
    return v.at(a.S, a.D, b, s, head)[d];
  }
  /// tile[rows][ld] = rows [r0, r0 + n) of v's head (b, head) · scale; zeros past n, past
  /// D. A warp a row, its lanes along it.
  SIMT_DEVICE static void fill(const Shape &a, const Src &v, int64_t b, int64_t head, int64_t r0, int n, float scale,
                               Elem *tile, int ld, int rows) {
    int warp = simt::threadIndex() / 32, lane = simt::threadIndex() % 32;
    for (int r = warp; r < rows; r += kWarps) {
      const float *src = r < n ? v.at(a.S, a.D, b, r0 + r, head) : nullptr;
      for (int d = lane; d < ld; d += 32)
        tile[r * ld + d] = src && d < a.D ? src[d] * scale : 0.0f;
    }
  }

  /// acc[nb] += A · B over k < K (a multiple of 8) for the calling warp: A(m, k) =
  /// A[m am + k ak] for m < 16, B(k, n) = B[k bk + n bn] for n < 8 NB; acc[nb][q] holds
  /// C[g + 8 (q / 2)][8 nb + 2 t + q % 2] (lane = 4 g + t).
  template <int NB>
  SIMT_DEVICE static void product(const float *A, int am, int ak, const float *B, int bk, int bn, int K,
                                  float (&acc)[NB][4]) {
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
  /// acc[nb] += A · Bᵀ: A the warp's 16 rows (stride lda), Bᵀ's 8 NB rows (stride ldb),
  /// both along k < K.
  template <int NB>
  SIMT_DEVICE static void productNT(const Elem *A, int lda, const Elem *Bt, int ldb, int K, float (&acc)[NB][4]) {
    product(A, lda, 1, Bt, 1, ldb, K, acc);
  }
};

/// bf16 operands, one m16n8k16 per product, fp32 sums: the kernels of a bf16 plan, whose
/// q, k, v and output gradients are bf16 values (so entering a tile loses nothing, but for
/// the roped q and k). The
/// probabilities and their gradients are rounded to bf16 before the products that use
/// them, as flash attention does; the scale multiplies the fp32 scores (docs/CUDA.md).
struct Bf16 {
  using Elem = uint16_t;
  static constexpr int kPad = 8;
  static constexpr int kScratch = 0; ///< no scratch: P stays in registers
  static constexpr bool kScaleQ = false;
  static constexpr bool kPInRegisters = true;
  static constexpr int kBuffers = 2; ///< the next tile loads (asynchronously) while this one is used
  /// The softmax's exponential in base 2, the scores scaled by log2 e as they leave the
  /// product: one multiply and an exp2 an element (flash attention's), the probabilities
  /// being rounded to bf16 anyway.
  static constexpr float kExpScale = 1.4426950408889634f;
  SIMT_DEVICE static float exp(float x) { return exp2f(x); }
  /// x rounded to bf16 (to nearest, ties to even; a NaN stays a NaN), as its bits.
  SIMT_DEVICE static Elem from(float x) { return Elem(simt::bf16Bits(x)); }

  /// The kernels read head-major bf16 copies of q, k, v and dout (staged by stageBf16):
  /// row (b, h, s) at ((b heads + h) S + s) dp, dp = 8 ND elements, zeros past D.
  struct Src {
    const Elem *p;
    int64_t heads;
    int dp;
    SIMT_DEVICE const Elem *at(int64_t S, int64_t b, int64_t s, int64_t h) const {
      return p + ((b * heads + h) * S + s) * dp;
    }
  };
  SIMT_DEVICE static float value(const Shape &a, const Src &v, int64_t b, int64_t s, int64_t head, int d) {
    return simt::fromBits(uint32_t(v.at(a.S, b, s, head)[d]) << 16);
  }
  /// tile[rows][ld] = rows [r0, r0 + n) of v's head (b, head), zeros past n, by 16-byte
  /// asynchronous copies (the scale is never on the tiles: kScaleQ is false): the tile
  /// is there once the block has waited for its group (the kernels' pipeline).
  SIMT_DEVICE static void fill(const Shape &a, const Src &v, int64_t b, int64_t head, int64_t r0, int n, float,
                               Elem *tile, int ld, int rows) {
    // A row's 16-byte chunks: dp / 8 = blocksFor(D), a power of two from 2 to 16, so that a
    // shift finds them.
    int chunks = v.dp / 8, shift = chunks == 16 ? 4 : chunks == 8 ? 3 : chunks == 4 ? 2 : 1;
    const Elem *src = v.at(a.S, b, r0, head); // rows dp elements apart
    for (int e = simt::threadIndex(); e < rows * chunks; e += kThreads) {
      int r = e >> shift, c = e & (chunks - 1);
      if (r < n)
        simt::copyAsync16(tile + r * ld + 8 * c, src + r * v.dp + 8 * c);
      else
        simt::zero16(tile + r * ld + 8 * c);
    }
  }
  /// SplitTf32::productNT's contract (NB even, K a multiple of 16), by ldmatrix: A's
  /// four 8 x 8 quarters of each k16 in one, and two n8 blocks of Bᵀ in another.
  template <int NB>
  SIMT_DEVICE static void productNT(const Elem *A, int lda, const Elem *Bt, int ldb, int K, float (&acc)[NB][4]) {
    int lane = simt::threadIndex() % 32, i = lane / 8, r = lane % 8;
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[4];
      simt::ldmatrix4(a, A + (r + 8 * (i % 2)) * lda + k0 + 8 * (i / 2));
      SIMT_UNROLL
      for (int nb = 0; nb < NB; nb += 2) {
        uint32_t b[4];
        simt::ldmatrix4(b, Bt + (8 * nb + r + 8 * (i / 2)) * ldb + k0 + 8 * (i % 2));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        simt::mmaBf16(acc[nb], a, b0);
        simt::mmaBf16(acc[nb + 1], a, b1);
      }
    }
  }
  /// acc[nb] += A · B: A as KB k16 blocks of m16n8k16 A fragments (registers), B(k, n) =
  /// B[k ldb + n] for k < 16 KB, n < 8 NB (NB even), by ldmatrix.trans.
  template <int KB, int NB>
  SIMT_DEVICE static void productRN(const uint32_t (&a)[KB][4], const Elem *B, int ldb, float (&acc)[NB][4]) {
    int lane = simt::threadIndex() % 32, i = lane / 8, r = lane % 8;
    SIMT_UNROLL
    for (int kb = 0; kb < KB; ++kb)
      SIMT_UNROLL
      for (int nb = 0; nb < NB; nb += 2) {
        uint32_t b[4];
        simt::ldmatrix4Trans(b, B + (16 * kb + r + 8 * (i % 2)) * ldb + 8 * nb + 8 * (i / 2));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        simt::mmaBf16(acc[nb], a[kb], b0);
        simt::mmaBf16(acc[nb + 1], a[kb], b1);
      }
  }
};

/// The inputs of a pass as the kernels of Op read them.
template <class Op> struct Inputs {
  typename Op::Src q, k, v, dout;
};

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

/// acc += P · B for the calling warp: P its 16 x kKeys p, as an mma leaves a result (rows
/// g and g + 8, columns 2 t, 2 t + 1 of every 8), rounded to Op's elements; B(k, n) =
/// B[k ldb + n]. Bf16 passes p on in registers; SplitTf32 through the warp's scratch Pw,
/// then a barrier, and a barrier before too where a product since the last barrier read
/// the scratch (`scratchRead`).
template <class Op, int NB>
SIMT_DEVICE void productP(const Lane &me, const float (&p)[kKeys / 8][4], typename Op::Elem *Pw,
                          const typename Op::Elem *B, int ldb, float (&acc)[NB][4], bool scratchRead = false) {
  if constexpr (Op::kPInRegisters) {
    uint32_t a[kKeys / 16][4];
    SIMT_UNROLL
    for (int kb = 0; kb < kKeys / 16; ++kb) {
      a[kb][0] = simt::packBf16(p[2 * kb][0], p[2 * kb][1]);
      a[kb][1] = simt::packBf16(p[2 * kb][2], p[2 * kb][3]);
      a[kb][2] = simt::packBf16(p[2 * kb + 1][0], p[2 * kb + 1][1]);
      a[kb][3] = simt::packBf16(p[2 * kb + 1][2], p[2 * kb + 1][3]);
    }
    Op::productRN(a, B, ldb, acc);
  } else {
    if (scratchRead)
      simt::syncBlock();
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q)
        Pw[(me.g + 8 * (q / 2)) * Op::kScratch + colOf(me, nb, q)] = Op::from(p[nb][q]);
    simt::syncBlock();
    Op::product(Pw, Op::kScratch, 1, B, ldb, 1, kKeys, acc);
  }
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

/// deltas[(b H + head) S + s] = Σ_d out(s, d) · dout(s, d) for the warp's rows s = r0 + …
/// below S, out being acc · scale[its half] (storeResult's values); the four lanes of a
/// row add their columns' products (every lane reaches the shuffles).
template <class Op, int ND>
SIMT_DEVICE void storeDeltas(const Shape &a, const Lane &me, const typename Op::Src &dout, const float (&acc)[ND][4],
                             const float (&scale)[2], int64_t b, int64_t r0, int64_t head, float *deltas) {
  SIMT_UNROLL
  for (int half = 0; half < 2; ++half) {
    int64_t s = r0 + rowOf(me, 2 * half);
    float sum = 0.0f;
    if (s < a.S) {
      SIMT_UNROLL
      for (int nd = 0; nd < ND; ++nd)
        SIMT_UNROLL
        for (int q = 2 * half; q < 2 * half + 2; ++q)
          if (colOf(me, nd, q) < a.D)
            sum += acc[nd][q] * scale[half] * Op::value(a, dout, b, s, head, colOf(me, nd, q));
    }
    sum = rowSum(sum);
    if (s < a.S && me.t == 0)
      deltas[(b * a.H + head) * a.S + s] = sum;
  }
}

/// Shared bytes of each kernel, by tile row stride ld: the key side's row statistics
/// (floats) first, then the block's own tiles, the other side's two tiles in each of
/// Op's buffers, and the warps' scratch (Op's elements).
template <class Op> size_t forwardShared(int ld) {
  return size_t(kRows * ld + 2 * Op::kBuffers * kKeys * ld + kWarps * 16 * Op::kScratch) * sizeof(typename Op::Elem);
}
template <class Op> size_t backwardShared(int ld) {
  return size_t(3 * kKeys) * sizeof(float) +
         size_t(2 * kRows * ld + 2 * Op::kBuffers * kKeys * ld + kWarps * 16 * Op::kScratch) *
             sizeof(typename Op::Elem);
}

/// The number of rows of the other side's tile from t0 (at most kKeys, none from end on).
SIMT_DEVICE int tileRows(int64_t t0, int64_t end) { return int(end - t0 < kKeys ? end - t0 : kKeys); }

/// Step i of the loop over the other side's tiles. With two buffers (Bf16, whose fills
/// are asynchronous), tile i is in buffer i % 2 while tile i + 1 loads into the other:
/// once every warp is done with that buffer (a barrier), loadNext(buffer) starts the
/// load (when `more`) and meanwhile() runs; then the step waits for tile i and shows it,
/// and what meanwhile() wrote, to the block (a barrier). With one (SplitTf32, whose
/// fills land at once and whose tiles are twice as large), loadThis(0) loads tile i
/// between the same barriers. Returns tile i's buffer; the loop's first tile with two
/// buffers is loaded before it (pipelineStart).
template <class Op, class Next, class This, class Meanwhile>
SIMT_DEVICE int pipelineStep(int64_t i, bool more, const Next &loadNext, const This &loadThis,
                             const Meanwhile &meanwhile) {
  simt::syncBlock();
  if constexpr (Op::kBuffers == 2) {
    if (more)
      loadNext(int((i + 1) % 2));
  } else {
    loadThis(0);
  }
  simt::commitAsync();
  meanwhile();
  simt::waitAsyncButOne();
  simt::syncBlock();
  return Op::kBuffers == 2 ? int(i % 2) : 0;
}
template <class Op, class Load> SIMT_DEVICE void pipelineStart(const Load &loadFirst) {
  if constexpr (Op::kBuffers == 2) {
    loadFirst(0);
    simt::commitAsync();
  }
}

/// The factors of the scale: on the queries as they enter a tile, or on the scores.
template <class Op> SIMT_DEVICE float queryScale(const Shape &a) { return Op::kScaleQ ? a.scale : 1.0f; }
template <class Op> SIMT_DEVICE float scoreScale(const Shape &a) { return Op::kScaleQ ? 1.0f : a.scale; }

/// A product's score x enters the softmax as x · scoreScale · Op::kExpScale, exponentiated
/// by Op::exp, and the row maxima the forward leaves in stats are of those: the backward
/// recomputes p = Op::exp(x' − m) · inv with the same scaling (its scores are other
/// products, K Qᵀ for Q Kᵀ, and the compiler may fuse its multiply and subtract: about an
/// ulp of the exponent apart).
template <class Op> SIMT_DEVICE float score2Scale(const Shape &a) { return scoreScale<Op>(a) * Op::kExpScale; }

/// Whether a tile of keys [t0, t0 + n) against the rows [s0, s0 + kRows) of queries needs
/// masking: a ragged tile, rows past the sequence (where `rows` says they matter: the
/// forward computes them and never stores them), or a causal tile that crosses the
/// diagonal (some query of the block before some key of the tile). A tile that does not
/// skips the per-element checks.
SIMT_DEVICE bool edgeTile(const Shape &a, int64_t s0, int64_t t0, int n, bool rows) {
  return n < kKeys || (rows && s0 + kRows > a.S) || (a.causal && t0 + kKeys > s0 + 1);
}

/// Forward over grid (query blocks of 64, H, B), ND · 8 ≥ D: out (unless out.p is null)
/// and each row's maximum (of the scores as score2Scale scales them) and 1 / sum into
/// stats (unless null); for the backward, each row's delta = dout · out into deltas
/// (unless null) from the output in registers, in.dout read where the output is held.
template <class Op, int ND>
SIMT_GLOBAL void forward(Shape a, Inputs<Op> in, int ld, View out, float *stats, float *deltas) {
  using E = typename Op::Elem;
  constexpr int kScratch = Op::kScratch;
  E *Q = simt::dynamicShared<E>(), *KV = Q + kRows * ld, *P = KV + 2 * Op::kBuffers * kKeys * ld;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * kRows, g = h / a.group;
  E *Qw = Q + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  int64_t end = a.causal ? (s0 + kRows < a.S ? s0 + kRows : a.S) : a.S;
  // Buffer i holds K at KV + 2 i kKeys ld and V after it.
  auto load = [&](int64_t t0, int i) {
    E *K = KV + 2 * i * kKeys * ld;
    Op::fill(a, in.k, b, g, t0, tileRows(t0, end), 1.0f, K, ld, kKeys);
    Op::fill(a, in.v, b, g, t0, tileRows(t0, end), 1.0f, K + kKeys * ld, ld, kKeys);
  };
  Op::fill(a, in.q, b, h, s0, int(a.S - s0 < kRows ? a.S - s0 : kRows), queryScale<Op>(a), Q, ld, kRows);
  pipelineStart<Op>([&](int buffer) { load(0, buffer); });
  float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale2 = score2Scale<Op>(a);
  zero(o);
  for (int64_t t0 = 0, i = 0; t0 < end; t0 += kKeys, ++i) {
    int buffer = pipelineStep<Op>(
        i, t0 + kKeys < end, [&](int next) { load(t0 + kKeys, next); }, [&](int now) { load(t0, now); }, [] {});
    int n = tileRows(t0, end);
    E *K = KV + 2 * buffer * kKeys * ld, *V = K + kKeys * ld;
    float s[kKeys / 8][4];
    zero(s);
    Op::productNT(Qw, ld, K, ld, ND * 8, s);
    float top[2] = {-INFINITY, -INFINITY};
    bool edge = edgeTile(a, s0, t0, n, false);
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q) {
        s[nb][q] *= scale2;
        if (edge) {
          int c = colOf(me, nb, q);
          bool seen = c < n && (!a.causal || t0 + c <= s0 + rowOf(me, q));
          s[nb][q] = seen ? s[nb][q] : -INFINITY;
        }
        top[q / 2] = fmaxf(top[q / 2], s[nb][q]);
      }
    // Key 0 is seen by every row, so m is finite from the first tile on.
    float rescale[2];
    for (int r = 0; r < 2; ++r) {
      float next = fmaxf(m[r], rowMax(top[r]));
      rescale[r] = Op::exp(m[r] - next);
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
        float p = Op::exp(s[nb][q] - m[q / 2]);
        l[q / 2] += p;
        s[nb][q] = p;
      }
    productP<Op>(me, s, Pw, V, ld, o);
  }
  float inv[2] = {1.0f / rowSum(l[0]), 1.0f / rowSum(l[1])};
  if (out.p)
    storeResult(a, me, o, inv, out, b, s0, h);
  if (deltas)
    storeDeltas<Op>(a, me, in.dout, o, inv, b, s0, h, deltas);
  for (int r = 0; r < 2; ++r) {
    int64_t s = s0 + rowOf(me, 2 * r);
    if (stats && me.t == 0 && s < a.S) {
      int64_t row = (b * a.H + h) * a.S + s;
      stats[2 * row] = m[r];
      stats[2 * row + 1] = inv[r];
    }
  }
}

/// The queries' gradient over grid (query blocks of 64, H, B): dq = scale Σ_t p_t (dout ·
/// v_t − delta) k_t, from the forward's stats and the rows' deltas.
template <class Op, int ND>
SIMT_GLOBAL void backwardQuery(Shape a, Inputs<Op> in, int ld, const float *stats, const float *deltas, View dq) {
  using E = typename Op::Elem;
  constexpr int kScratch = Op::kScratch;
  E *Q = reinterpret_cast<E *>(simt::dynamicShared<float>() + 3 * kKeys), *dO = Q + kRows * ld, *KV = dO + kRows * ld,
    *P = KV + 2 * Op::kBuffers * kKeys * ld;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * kRows, g = h / a.group;
  int rows = int(a.S - s0 < kRows ? a.S - s0 : kRows);
  int64_t end = a.causal ? (s0 + kRows < a.S ? s0 + kRows : a.S) : a.S;
  auto load = [&](int64_t t0, int i) {
    E *K = KV + 2 * i * kKeys * ld;
    Op::fill(a, in.k, b, g, t0, tileRows(t0, end), 1.0f, K, ld, kKeys);
    Op::fill(a, in.v, b, g, t0, tileRows(t0, end), 1.0f, K + kKeys * ld, ld, kKeys);
  };
  Op::fill(a, in.q, b, h, s0, rows, queryScale<Op>(a), Q, ld, kRows);
  Op::fill(a, in.dout, b, h, s0, rows, 1.0f, dO, ld, kRows);
  pipelineStart<Op>([&](int buffer) { load(0, buffer); });
  E *Qw = Q + 16 * me.warp * ld, *dOw = dO + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  float m[2], inv[2], delta[2];
  const float scale2 = score2Scale<Op>(a);
  for (int r = 0; r < 2; ++r) {
    int64_t s = s0 + rowOf(me, 2 * r), row = (b * a.H + h) * a.S + s;
    bool live = s < a.S;
    m[r] = live ? stats[2 * row] : 0.0f;
    inv[r] = live ? stats[2 * row + 1] : 0.0f;
    delta[r] = live ? deltas[row] : 0.0f;
  }
  float acc[ND][4];
  zero(acc);
  for (int64_t t0 = 0, i = 0; t0 < end; t0 += kKeys, ++i) {
    int buffer = pipelineStep<Op>(
        i, t0 + kKeys < end, [&](int next) { load(t0 + kKeys, next); }, [&](int now) { load(t0, now); }, [] {});
    int n = tileRows(t0, end);
    E *K = KV + 2 * buffer * kKeys * ld, *V = K + kKeys * ld;
    float s[kKeys / 8][4], dp[kKeys / 8][4];
    zero(s);
    zero(dp);
    Op::productNT(Qw, ld, K, ld, ND * 8, s);
    Op::productNT(dOw, ld, V, ld, ND * 8, dp);
    bool edge = edgeTile(a, s0, t0, n, true);
    SIMT_UNROLL
    for (int nb = 0; nb < kKeys / 8; ++nb)
      SIMT_UNROLL
      for (int q = 0; q < 4; ++q) {
        float p = Op::exp(s[nb][q] * scale2 - m[q / 2]) * inv[q / 2];
        if (edge) {
          int c = colOf(me, nb, q);
          int64_t row = s0 + rowOf(me, q);
          p = c < n && row < a.S && (!a.causal || t0 + c <= row) ? p : 0.0f;
        }
        s[nb][q] = p * (dp[nb][q] - delta[q / 2]); // dS
      }
    productP<Op>(me, s, Pw, K, ld, acc);
  }
  const float scale[2] = {a.scale, a.scale};
  storeResult(a, me, acc, scale, dq, b, s0, h);
}

/// The keys' and values' gradients over grid (key blocks of 64, KVH, B), over the query
/// heads of each key head's group and the queries that see the key: dv = Σ p dout and
/// dk = Σ p (dout · v − delta) · scale · q.
template <class Op, int ND>
SIMT_GLOBAL_OCCUPANCY(kThreads, Op::kBuffers == 2 && ND <= 8 ? 3 : 1)
void backwardKeyValue(Shape a, Inputs<Op> in, int ld, const float *stats, const float *deltas, View dk, View dv) {
  using E = typename Op::Elem;
  constexpr int kScratch = Op::kScratch;
  float *rowStats = simt::dynamicShared<float>();
  E *Kb = reinterpret_cast<E *>(rowStats + 3 * kKeys), *Vb = Kb + kRows * ld, *QdO = Vb + kRows * ld,
    *P = QdO + 2 * Op::kBuffers * kKeys * ld;
  Lane me = laneOf();
  int64_t b = simt::blockIndex(2), g = simt::blockIndex(1), t0 = simt::blockIndex(0) * kRows;
  int keys = int(a.S - t0 < kRows ? a.S - t0 : kRows);
  // The (query head, query tile) pairs in order: heads of the group, tiles from the first
  // that sees these keys; buffer i holds the queries at QdO + 2 i kKeys ld, dout after.
  const int64_t hEnd = (g + 1) * a.group, sFirst = a.causal ? t0 : 0;
  auto load = [&](int64_t h, int64_t s0, int i) {
    E *Q = QdO + 2 * i * kKeys * ld;
    Op::fill(a, in.q, b, h, s0, tileRows(s0, a.S), queryScale<Op>(a), Q, ld, kKeys);
    Op::fill(a, in.dout, b, h, s0, tileRows(s0, a.S), 1.0f, Q + kKeys * ld, ld, kKeys);
  };
  Op::fill(a, in.k, b, g, t0, keys, 1.0f, Kb, ld, kRows);
  Op::fill(a, in.v, b, g, t0, keys, 1.0f, Vb, ld, kRows);
  pipelineStart<Op>([&](int buffer) { load(g * a.group, sFirst, buffer); });
  E *Kw = Kb + 16 * me.warp * ld, *Vw = Vb + 16 * me.warp * ld, *Pw = P + 16 * me.warp * kScratch;
  float dK[ND][4], dV[ND][4];
  const float scale2 = score2Scale<Op>(a);
  zero(dK);
  zero(dV);
  for (int64_t h = g * a.group, s0 = sFirst, i = 0; h < hEnd; ++i) {
    int64_t nextH = s0 + kKeys < a.S ? h : h + 1, nextS0 = s0 + kKeys < a.S ? s0 + kKeys : sFirst;
    int n = tileRows(s0, a.S);
    int buffer = pipelineStep<Op>(
        i, nextH < hEnd, [&](int next) { load(nextH, nextS0, next); }, [&](int now) { load(h, s0, now); },
        [&] { loadRowStats(a, b, h, s0, n, stats, deltas, rowStats); });
    E *Q = QdO + 2 * buffer * kKeys * ld, *dO = Q + kKeys * ld;
    {
      float st[kKeys / 8][4], dpt[kKeys / 8][4];
      zero(st);
      zero(dpt);
      Op::productNT(Kw, ld, Q, ld, ND * 8, st);   // S^T = K Q^T
      Op::productNT(Vw, ld, dO, ld, ND * 8, dpt); // dP^T = V dO^T
      // The rows are keys here and the columns queries: a query sees the keys up to its own.
      // Columns from n on (queries past the sequence) always take the masked path: their
      // rowStats were never loaded.
      bool edge = n < kKeys || t0 + kRows > a.S || (a.causal && t0 + kRows > s0 + 1);
      SIMT_UNROLL
      for (int nb = 0; nb < kKeys / 8; ++nb)
        SIMT_UNROLL
        for (int odd = 0; odd < 2; ++odd) { // the column 8 nb + 2 t + odd: its statistics once
          int c = colOf(me, nb, odd);
          float m = rowStats[3 * c], inv = rowStats[3 * c + 1], delta = rowStats[3 * c + 2];
          SIMT_UNROLL
          for (int q = odd; q < 4; q += 2) {
            float p = Op::exp(st[nb][q] * scale2 - m) * inv;
            float d = delta;
            if (edge) {
              int64_t key = t0 + rowOf(me, q);
              bool seen = c < n && key < a.S && (!a.causal || s0 + c >= key);
              p = seen ? p : 0.0f;
              d = seen ? d : 0.0f;
            }
            dpt[nb][q] = p * (dpt[nb][q] - d); // dS^T
            st[nb][q] = p;                     // P^T
          }
        }
      productP<Op>(me, st, Pw, dO, ld, dV);  // dV += P^T dO
      productP<Op>(me, dpt, Pw, Q, ld, dK, true); // dK += dS^T q (· scale, below or in q)
    }
    h = nextH;
    s0 = nextS0;
  }
  const float one[2] = {1.0f, 1.0f}, dkScale[2] = {scoreScale<Op>(a), scoreScale<Op>(a)};
  storeResult(a, me, dK, dkScale, dk, b, t0, g);
  storeResult(a, me, dV, one, dv, b, t0, g);
}

// ---- Host side, through flash_attention.cuh's launcher L.

/// The kernels' row stride in shared memory: D rounded up to ND · 8, plus Op's padding
/// (so that a fragment's 32 reads fall in 32 banks).
template <class Op> int strideOf(int nd) { return 8 * nd + Op::kPad; }

/// ND for D (a power of two from 2 to 16), or 0 when D > kMaxD.
inline int blocksFor(int64_t D) {
  if (D > kMaxD)
    return 0;
  int nd = 2;
  while (8 * nd < D)
    nd *= 2;
  return nd;
}

template <class Op, int ND, class L>
void forwardAs(L &launch, const Shape &a, const Inputs<Op> &in, View out, float *stats, float *deltas) {
  int ld = strideOf<Op>(ND);
  launch.run(blocksOf(a.S, kRows), unsigned(a.H), unsigned(a.B), forwardShared<Op>(ld), forward<Op, ND>, a, in, ld,
             out, stats, deltas);
}

template <class Op, int ND, class L>
void backwardAs(L &launch, const Shape &a, const Inputs<Op> &in, const float *stats, const float *deltas,
                float *dqkv) {
  int ld = strideOf<Op>(ND);
  int64_t row = (a.H + 2 * a.KVH) * a.D;
  launch.run(blocksOf(a.S, kRows), unsigned(a.H), unsigned(a.B), backwardShared<Op>(ld), backwardQuery<Op, ND>, a, in,
             ld, stats, deltas, View{dqkv, row, 0});
  launch.run(blocksOf(a.S, kRows), unsigned(a.KVH), unsigned(a.B), backwardShared<Op>(ld), backwardKeyValue<Op, ND>,
             a, in, ld, stats, deltas, View{dqkv, row, a.H}, View{dqkv, row, a.H + a.KVH});
}

/// dst = head-major bf16 copy of src's `heads` heads (Bf16::Src's layout), over
/// B · heads · S · dp / 8 threads, each writing 8 elements as one 16-byte store.
SIMT_GLOBAL void stageBf16(Shape a, View src, int64_t heads, int dp, uint16_t *dst) {
  int64_t e = simt::blockIndex(0) * kThreads + simt::threadIndex(), chunks = dp / 8;
  if (e >= a.B * heads * a.S * chunks)
    return;
  int64_t d0 = e % chunks * 8, row = e / chunks, s = row % a.S, h = (row / a.S) % heads, b = row / (a.S * heads);
  const float *x = src.at(a.S, a.D, b, s, h);
  alignas(16) uint16_t out[8];
  for (int i = 0; i < 8; ++i)
    out[i] = Bf16::from(d0 + i < a.D ? x[d0 + i] : 0.0f);
  simt::copy16(dst + 8 * e, out);
}

/// A pass's inputs for Op's kernels, made through launcher L: SplitTf32's are the views
/// themselves; Bf16's are copies staged before the pass and freed after it.
template <class Op, class L> struct Staging {
  Staging(L &, const Shape &a, const View *dout) : in{a.q, a.k, a.v, dout ? *dout : View{}} {}
  Inputs<Op> in;
};
template <class L> struct Staging<Bf16, L> {
  Staging(L &launch, const Shape &a, const View *dout) : launch(launch) {
    int dp = 8 * blocksFor(a.D);
    in.q = stage(a, a.q, a.H, dp);
    in.k = stage(a, a.k, a.KVH, dp);
    in.v = stage(a, a.v, a.KVH, dp);
    in.dout = dout ? stage(a, *dout, a.H, dp) : Bf16::Src{};
  }
  Staging(const Staging &) = delete;
  Staging &operator=(const Staging &) = delete;
  ~Staging() {
    for (float *p : owned)
      launch.free(p);
  }
  Bf16::Src stage(const Shape &a, const View &src, int64_t heads, int dp) {
    int64_t n = a.B * heads * a.S * dp;
    float *p = launch.alloc((n + 1) / 2);
    owned.push_back(p);
    auto *dst = reinterpret_cast<uint16_t *>(p);
    launch.run(blocksOf(n / 8, kThreads), 1, 1, 0, stageBf16, a, src, heads, dp, dst);
    return Bf16::Src{dst, heads, dp};
  }
  L &launch;
  Inputs<Bf16> in;
  std::vector<float *> owned;
};

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
/// sdpaBackward (the forward recomputed and the backward on one staging of the inputs;
/// the recomputed forward leaves the rows' deltas instead of the output).
template <class Op> struct KernelsOf {
  static constexpr bool kNeedsOut = false; ///< the recomputed forward leaves the deltas instead
  template <class L> static void forwardPass(L &launch, const Shape &a, View out, float *stats) {
    Staging<Op, L> s(launch, a, nullptr);
    PLANRT_MMA_DISPATCH(blocksFor(a.D), (forwardAs<Op, N>(launch, a, s.in, out, stats, nullptr)))
  }
  template <class L>
  static void forwardAndBackward(L &launch, const Shape &a, const BackwardScratch<L> &t, float *dqkv) {
    Staging<Op, L> s(launch, a, &t.doutView);
    // The recomputed forward leaves the row statistics and the rows' deltas, not the output.
    PLANRT_MMA_DISPATCH(blocksFor(a.D), (forwardAs<Op, N>(launch, a, s.in, View{}, t.stats, t.deltas)))
    PLANRT_MMA_DISPATCH(blocksFor(a.D), (backwardAs<Op, N>(launch, a, s.in, t.stats, t.deltas, dqkv)))
  }
};
/// fp32 plans' kernels (split TF32), and bf16 plans'.
using Kernels = KernelsOf<SplitTf32>;
using KernelsBf16 = KernelsOf<Bf16>;

#undef PLANRT_MMA_DISPATCH

} // namespace planrt::attention::mma

#endif // PLANRT_CUDA_FLASH_ATTENTION_MMA_CUH
