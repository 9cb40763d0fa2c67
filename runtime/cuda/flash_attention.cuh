// Tiled attention (flash-attention 2's algorithm) in fp32 on CUDA cores: forward with an
// online softmax, backward as one kernel for the queries' gradient and one for the
// keys' and values', rope as kernels of its own. Written on simt.cuh, so that the same
// source runs in libplanrt_cuda (attention.cu) and, emulated on host threads, in the
// gtest planc-simt-tests against the CPU's planrt_k_sdpa.
//
// Each row (a query, or in the keys' backward a key) is held by `split` adjacent threads
// (a power of two, split · kPerThread ≥ D): thread `lane` of the row holds elements
// 4 lane … 4 lane + 3, 4 (lane + split) …, … of its vectors in registers, and reads the
// same elements of a shared row as 16-byte loads. Dot products are the
// threads' partial sums added by xor shuffles. The other side (keys and values, or
// queries and output gradients) goes through shared memory in tiles of `tile` rows, each
// element read by all the rows of the block at once (a broadcast). Every sum has a fixed
// order: the same inputs give the same bits on every run, and no atomics are used.
//
// Against the CPU kernels the summation order differs (online softmax, the tiles), so
// results agree to fp32 rounding, not bit for bit (docs/CUDA.md).
#ifndef PLANRT_CUDA_FLASH_ATTENTION_CUH
#define PLANRT_CUDA_FLASH_ATTENTION_CUH

#include "simt.cuh"

#ifdef PLANRT_SIMT_EMULATE
#define SIMT_UNROLL
#else
#define SIMT_UNROLL _Pragma("unroll")
#endif

namespace planrt::attention {

constexpr int kThreads = 128;  ///< threads per block
constexpr int kPerThread = 32; ///< elements of a head vector one thread holds
constexpr int kChunk = 16;     ///< keys per rescaling of the online softmax
constexpr int kTileFloats = 4096;
constexpr int kMaxSplit = 8;
constexpr int64_t kMaxD = int64_t(kMaxSplit) * kPerThread; ///< 256

/// One head of a [B, S, heads · D] tensor whose (b, s) rows are `stride` floats apart;
/// head `head` starts at column (first + head) · D.
struct View {
  float *p;
  int64_t stride, first;
  SIMT_DEVICE float *at(int64_t S, int64_t D, int64_t b, int64_t s, int64_t head) const {
    return p + (b * S + s) * stride + (first + head) * D;
  }
};

struct Shape {
  int64_t B, S, H, KVH, D, group;
  int ld;    ///< floats per row of a shared tile: D rounded up to a multiple of 4
  int split; ///< threads per row
  int rows;  ///< rows per block: kThreads / split
  int tile;  ///< rows of a shared tile: a multiple of kChunk, at most 64, tile · ld ≤ kTileFloats
  bool causal;
  float scale;
  View q, k, v; ///< q and k: the roped copy when rope is on
};

/// The block's thread as (row in the block, lane in the row).
struct Slot {
  int row, lane;
};
SIMT_DEVICE Slot slotOf(const Shape &a) {
  int t = simt::threadIndex();
  return {t / a.split, t % a.split};
}

/// Element i of a lane's registers: the lanes of a row take turns by groups of four
/// (lane 0 elements 0-3, lane 1 elements 4-7, …), so that a lane reads its elements of a
/// shared row as 16-byte loads, and the row's lanes read adjacent ones.
SIMT_DEVICE int elementOf(const Shape &a, int lane, int i) { return 4 * (lane + a.split * (i / 4)) + i % 4; }

/// x = the lane's elements of src · scale (zeros past D, or all zeros without src).
SIMT_DEVICE void loadRow(const Shape &a, int lane, const float *src, float scale, float *x) {
  SIMT_UNROLL
  for (int i = 0; i < kPerThread; ++i) {
    int d = elementOf(a, lane, i);
    x[i] = src && d < a.D ? src[d] * scale : 0.0f;
  }
}

/// The row's x · y (x in the lanes' registers, y one row of a shared tile, zero past D).
SIMT_DEVICE float dotRow(const Shape &a, int lane, const float *x, const float *y) {
  float acc = 0.0f;
  SIMT_UNROLL
  for (int i = 0; i < kPerThread; i += 4) {
    int d = elementOf(a, lane, i);
    if (d < a.ld) {
      simt::Vec4 v = simt::load4(y + d);
      acc += x[i] * v.x;
      acc += x[i + 1] * v.y;
      acc += x[i + 2] * v.z;
      acc += x[i + 3] * v.w;
    }
  }
  for (int o = 1; o < a.split; o <<= 1)
    acc += simt::shuffleXor(acc, o);
  return acc;
}

/// acc += w · y over the lane's elements (y one row of a shared tile, zero past D).
SIMT_DEVICE void axpyRow(const Shape &a, int lane, float w, const float *y, float *acc) {
  SIMT_UNROLL
  for (int i = 0; i < kPerThread; i += 4) {
    int d = elementOf(a, lane, i);
    if (d < a.ld) {
      simt::Vec4 v = simt::load4(y + d);
      acc[i] += w * v.x;
      acc[i + 1] += w * v.y;
      acc[i + 2] += w * v.z;
      acc[i + 3] += w * v.w;
    }
  }
}

/// dst's lane elements = x · scale.
SIMT_DEVICE void storeRow(const Shape &a, int lane, const float *x, float scale, float *dst) {
  SIMT_UNROLL
  for (int i = 0; i < kPerThread; ++i) {
    int d = elementOf(a, lane, i);
    if (d < a.D)
      dst[d] = x[i] * scale;
  }
}

/// tile[a.tile][ld] = rows [r0, r0 + n) of v's head (b, head) · scale, the rest zeros
/// (so that masked keys multiply zeros, never stale values, and the padding past D too).
SIMT_DEVICE void loadTile(const Shape &a, const View &v, int64_t b, int64_t head, int64_t r0, int n, float scale,
                          float *tile) {
  for (int e = simt::threadIndex(); e < a.tile * a.ld; e += kThreads) {
    int r = e / a.ld, d = e % a.ld;
    tile[e] = r < n && d < a.D ? v.at(a.S, a.D, b, r0 + r, head)[d] * scale : 0.0f;
  }
}

/// The keys the block's queries [s0, s0 + rows) see: [0, end).
SIMT_DEVICE int64_t keysEnd(const Shape &a, int64_t s0) {
  return a.causal ? (s0 + a.rows < a.S ? s0 + a.rows : a.S) : a.S;
}

/// The key and value tiles of key head (b, g) from key t0 (at most a.tile keys, none from
/// `end` on) into K and V, between barriers; returns how many keys they hold.
SIMT_DEVICE int loadKeys(const Shape &a, int64_t b, int64_t g, int64_t t0, int64_t end, float *K, float *V) {
  int n = int(end - t0 < a.tile ? end - t0 : a.tile);
  simt::syncBlock();
  loadTile(a, a.k, b, g, t0, n, 1.0f, K);
  loadTile(a, a.v, b, g, t0, n, 1.0f, V);
  simt::syncBlock();
  return n;
}

/// rowStats[3 e …] = the maximum, 1 / sum and delta of query row s0 + e of head (b, h),
/// for e < n (the keys' backward pass reads them per query).
SIMT_DEVICE void loadRowStats(const Shape &a, int64_t b, int64_t h, int64_t s0, int n, const float *stats,
                              const float *deltas, float *rowStats) {
  for (int e = simt::threadIndex(); e < n; e += kThreads) {
    int64_t row = (b * a.H + h) * a.S + s0 + e;
    rowStats[3 * e] = stats[2 * row];
    rowStats[3 * e + 1] = stats[2 * row + 1];
    rowStats[3 * e + 2] = deltas[row];
  }
}

/// Forward over grid (query blocks, H, B): out (unless its p is null) and each row's
/// maximum score and 1 / Σ exp(score − maximum) into stats (unless null), the row
/// (b, h, s) at index (b H + h) S + s.
SIMT_GLOBAL void forward(Shape a, View out, float *stats) {
  float *K = simt::dynamicShared<float>(), *V = K + a.tile * a.ld;
  Slot me = slotOf(a);
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * a.rows, s = s0 + me.row;
  int64_t g = h / a.group;
  bool live = s < a.S;
  float q[kPerThread], o[kPerThread];
  loadRow(a, me.lane, live ? a.q.at(a.S, a.D, b, s, h) : nullptr, a.scale, q);
  loadRow(a, me.lane, nullptr, 0.0f, o);
  float m = -INFINITY, l = 0.0f;
  int64_t end = keysEnd(a, s0);
  for (int64_t t0 = 0; t0 < end; t0 += a.tile) {
    int n = loadKeys(a, b, g, t0, end, K, V);
    for (int c = 0; c < n; c += kChunk) {
      float score[kChunk], top = -INFINITY;
      SIMT_UNROLL
      for (int j = 0; j < kChunk; ++j) {
        float x = dotRow(a, me.lane, q, K + (c + j) * a.ld);
        bool seen = c + j < n && (!a.causal || t0 + c + j <= s);
        score[j] = seen ? x : -INFINITY;
        top = fmaxf(top, score[j]);
      }
      // Key 0 is seen by every row, so m is finite from the first chunk on.
      float next = fmaxf(m, top), rescale = expf(m - next);
      l *= rescale;
      SIMT_UNROLL
      for (int i = 0; i < kPerThread; ++i)
        o[i] *= rescale;
      SIMT_UNROLL
      for (int j = 0; j < kChunk; ++j) {
        float p = expf(score[j] - next);
        l += p;
        axpyRow(a, me.lane, p, V + (c + j) * a.ld, o);
      }
      m = next;
    }
  }
  if (!live)
    return;
  float inv = 1.0f / l;
  if (out.p)
    storeRow(a, me.lane, o, inv, out.at(a.S, a.D, b, s, h));
  if (stats && me.lane == 0) {
    int64_t row = (b * a.H + h) * a.S + s;
    stats[2 * row] = m;
    stats[2 * row + 1] = inv;
  }
}

/// The queries' gradient over grid (query blocks, H, B), from the forward's out and
/// stats: delta = dout · out, then dq = scale · Σ_t p_t (dout · v_t − delta) k_t (in the
/// roped space when rope is on); each row's delta into deltas.
SIMT_GLOBAL void backwardQuery(Shape a, View out, View dout, const float *stats, float *deltas, View dq) {
  float *K = simt::dynamicShared<float>(), *V = K + a.tile * a.ld;
  Slot me = slotOf(a);
  int64_t b = simt::blockIndex(2), h = simt::blockIndex(1), s0 = simt::blockIndex(0) * a.rows, s = s0 + me.row;
  int64_t g = h / a.group, row = (b * a.H + h) * a.S + s;
  bool live = s < a.S;
  float q[kPerThread], dO[kPerThread], acc[kPerThread];
  loadRow(a, me.lane, live ? dout.at(a.S, a.D, b, s, h) : nullptr, 1.0f, dO);
  loadRow(a, me.lane, live ? out.at(a.S, a.D, b, s, h) : nullptr, 1.0f, acc);
  float delta = 0.0f;
  SIMT_UNROLL
  for (int i = 0; i < kPerThread; ++i)
    delta += dO[i] * acc[i];
  for (int o = 1; o < a.split; o <<= 1)
    delta += simt::shuffleXor(delta, o);
  loadRow(a, me.lane, live ? a.q.at(a.S, a.D, b, s, h) : nullptr, a.scale, q);
  loadRow(a, me.lane, nullptr, 0.0f, acc);
  float m = live ? stats[2 * row] : 0.0f, inv = live ? stats[2 * row + 1] : 0.0f;
  int64_t end = keysEnd(a, s0);
  for (int64_t t0 = 0; t0 < end; t0 += a.tile) {
    int n = loadKeys(a, b, g, t0, end, K, V);
    for (int j = 0; j < n; ++j) {
      float x = dotRow(a, me.lane, q, K + j * a.ld), dp = dotRow(a, me.lane, dO, V + j * a.ld);
      bool seen = live && (!a.causal || t0 + j <= s);
      float p = seen ? expf(x - m) * inv : 0.0f;
      axpyRow(a, me.lane, p * (dp - delta), K + j * a.ld, acc);
    }
  }
  if (!live)
    return;
  storeRow(a, me.lane, acc, a.scale, dq.at(a.S, a.D, b, s, h));
  if (me.lane == 0)
    deltas[row] = delta;
}

/// The keys' and values' gradients over grid (key blocks, KVH, B), over the query heads
/// of each key head's group and the queries that see the key: dv_t = Σ p dout and
/// dk_t = Σ p (dout · v_t − delta) · scale · q (in the roped space when rope is on).
SIMT_GLOBAL void backwardKeyValue(Shape a, View dout, const float *stats, const float *deltas, View dk, View dv) {
  float *Q = simt::dynamicShared<float>(), *dO = Q + a.tile * a.ld, *rowStats = dO + a.tile * a.ld;
  Slot me = slotOf(a);
  int64_t b = simt::blockIndex(2), g = simt::blockIndex(1), t0 = simt::blockIndex(0) * a.rows, t = t0 + me.row;
  bool live = t < a.S;
  float k[kPerThread], v[kPerThread], dK[kPerThread], dV[kPerThread];
  loadRow(a, me.lane, live ? a.k.at(a.S, a.D, b, t, g) : nullptr, 1.0f, k);
  loadRow(a, me.lane, live ? a.v.at(a.S, a.D, b, t, g) : nullptr, 1.0f, v);
  loadRow(a, me.lane, nullptr, 0.0f, dK);
  loadRow(a, me.lane, nullptr, 0.0f, dV);
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t s0 = a.causal ? t0 : 0; s0 < a.S; s0 += a.tile) {
      int n = int(a.S - s0 < a.tile ? a.S - s0 : a.tile);
      simt::syncBlock();
      loadTile(a, a.q, b, h, s0, n, a.scale, Q);
      loadTile(a, dout, b, h, s0, n, 1.0f, dO);
      loadRowStats(a, b, h, s0, n, stats, deltas, rowStats);
      simt::syncBlock();
      for (int j = 0; j < n; ++j) {
        float x = dotRow(a, me.lane, k, Q + j * a.ld), dp = dotRow(a, me.lane, v, dO + j * a.ld);
        bool seen = live && (!a.causal || s0 + j >= t);
        float p = seen ? expf(x - rowStats[3 * j]) * rowStats[3 * j + 1] : 0.0f;
        axpyRow(a, me.lane, p, dO + j * a.ld, dV);
        axpyRow(a, me.lane, p * (dp - rowStats[3 * j + 2]), Q + j * a.ld, dK);
      }
    }
  if (!live)
    return;
  storeRow(a, me.lane, dK, 1.0f, dk.at(a.S, a.D, b, t, g));
  storeRow(a, me.lane, dV, 1.0f, dv.at(a.S, a.D, b, t, g));
}

// ---- Rope (Hugging Face's rotate_half), as the CPU's: for position s and i < D/2,
// angle = s · theta^(−2i/D) in double, its cosine and sine rounded to float.

/// table[s][i] = (cos, sin) of the angle, over S · D/2 threads.
SIMT_GLOBAL void ropeTable(int64_t S, int64_t D, float theta, float *table) {
  int64_t half = D / 2, e = simt::blockIndex(0) * kThreads + simt::threadIndex();
  if (e >= S * half)
    return;
  int64_t s = e / half, i = e % half;
  double angle = double(s) * pow(double(theta), -2.0 * double(i) / double(D));
  table[2 * e] = float(cos(angle));
  table[2 * e + 1] = float(sin(angle));
}

/// rot [B, S, H + KVH, D] = the query and key heads of qkv (rows `row` floats apart)
/// rotated, over B · S · (H + KVH) · D/2 threads.
SIMT_GLOBAL void ropeForward(Shape a, const float *qkv, int64_t row, const float *table, float *rot) {
  int64_t half = a.D / 2, heads = a.H + a.KVH, e = simt::blockIndex(0) * kThreads + simt::threadIndex();
  if (e >= a.B * a.S * heads * half)
    return;
  int64_t i = e % half, head = (e / half) % heads, bs = e / (half * heads), s = bs % a.S;
  const float *x = qkv + bs * row + head * a.D;
  float *y = rot + (bs * heads + head) * a.D;
  float c = table[2 * (s * half + i)], sn = table[2 * (s * half + i) + 1], x0 = x[i], x1 = x[i + half];
  y[i] = x0 * c - x1 * sn;
  y[i + half] = x1 * c + x0 * sn;
}

/// The query and key heads of dqkv rotated back (the transpose of ropeForward), in place.
SIMT_GLOBAL void ropeBackward(Shape a, float *dqkv, int64_t row, const float *table) {
  int64_t half = a.D / 2, heads = a.H + a.KVH, e = simt::blockIndex(0) * kThreads + simt::threadIndex();
  if (e >= a.B * a.S * heads * half)
    return;
  int64_t i = e % half, head = (e / half) % heads, bs = e / (half * heads), s = bs % a.S;
  float *y = dqkv + bs * row + head * a.D;
  float c = table[2 * (s * half + i)], sn = table[2 * (s * half + i) + 1], g0 = y[i], g1 = y[i + half];
  y[i] = g0 * c + g1 * sn;
  y[i + half] = g1 * c - g0 * sn;
}

// ---- Host side: the kernels of one call in order, through a launcher L with
//   L::run(gx, gy, gz, sharedBytes, kernel, args...)   (kThreads threads a block)
//   L::alloc(floats) -> float *, L::free(float *)      (scratch for the call)
// (attention.cu's launches on the device stream; planc-simt-tests' emulates them).

inline int splitFor(int64_t D) {
  int split = 1;
  while (split * kPerThread < D)
    split *= 2;
  return split;
}

/// The shape of a call, its q, k and v reading qkv, or q and k the roped copy rot.
inline Shape shapeOf(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal, const float *qkv,
                     float *rot) {
  Shape a{};
  a.B = B, a.S = S, a.H = H, a.KVH = KVH, a.D = D, a.group = H / KVH;
  a.ld = int((D + 3) / 4 * 4);
  a.split = splitFor(a.ld);
  a.rows = kThreads / a.split;
  int tile = kTileFloats / a.ld / kChunk * kChunk;
  a.tile = tile > 64 ? 64 : tile;
  a.causal = causal;
  a.scale = float(1.0 / std::sqrt(double(D)));
  int64_t row = (H + 2 * KVH) * D;
  float *base = const_cast<float *>(qkv);
  a.q = rot ? View{rot, (H + KVH) * D, 0} : View{base, row, 0};
  a.k = rot ? View{rot, (H + KVH) * D, H} : View{base, row, H};
  a.v = View{base, row, H + KVH};
  return a;
}

inline unsigned blocksOf(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

/// The roped copy of qkv's query and key heads, and the table it came from.
template <class L> float *ropeCopy(L &launch, const Shape &a, const float *qkv, float theta, float **table) {
  int64_t half = a.D / 2, row = (a.H + 2 * a.KVH) * a.D;
  *table = launch.alloc(2 * a.S * half);
  float *rot = launch.alloc(a.B * a.S * (a.H + a.KVH) * a.D);
  launch.run(blocksOf(a.S * half, kThreads), 1, 1, 0, ropeTable, a.S, a.D, theta, *table);
  launch.run(blocksOf(a.B * a.S * (a.H + a.KVH) * half, kThreads), 1, 1, 0, ropeForward, a, qkv, row, *table, rot);
  return rot;
}

/// A call's shape, with q and k read from a roped copy when rope is on; the copy and its
/// table are freed with it.
template <class L> struct Prepared {
  Prepared(L &launch, const float *qkv, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
           bool rope, float theta)
      : launch(launch) {
    a = shapeOf(B, S, H, KVH, D, causal, qkv, nullptr);
    rot = rope ? ropeCopy(launch, a, qkv, theta, &table) : nullptr;
    a = shapeOf(B, S, H, KVH, D, causal, qkv, rot);
  }
  Prepared(const Prepared &) = delete;
  Prepared &operator=(const Prepared &) = delete;
  ~Prepared() {
    if (rot) {
      launch.free(rot);
      launch.free(table);
    }
  }
  /// dqkv's query and key gradients rotated back, when rope is on.
  void unrope(float *dqkv) {
    if (rot)
      launch.run(blocksOf(a.B * a.S * (a.H + a.KVH) * (a.D / 2), kThreads), 1, 1, 0, ropeBackward, a, dqkv,
                 (a.H + 2 * a.KVH) * a.D, (const float *)table);
  }
  L &launch;
  Shape a;
  float *table = nullptr, *rot = nullptr;
};

/// The backward pass's scratch: the forward's output recomputed (where the kernels need
/// it: withOut), each row's statistics and delta; and the views of out and dout.
template <class L> struct BackwardScratch {
  BackwardScratch(L &launch, const Shape &a, const float *dout, bool withOut) : launch(launch) {
    int64_t rows = a.B * a.H * a.S;
    out = withOut ? launch.alloc(rows * a.D) : nullptr;
    stats = launch.alloc(2 * rows);
    deltas = launch.alloc(rows);
    outView = View{out, a.H * a.D, 0};
    doutView = View{const_cast<float *>(dout), a.H * a.D, 0};
  }
  BackwardScratch(const BackwardScratch &) = delete;
  BackwardScratch &operator=(const BackwardScratch &) = delete;
  ~BackwardScratch() {
    if (out)
      launch.free(out);
    launch.free(stats);
    launch.free(deltas);
  }
  L &launch;
  float *out, *stats, *deltas;
  View outView, doutView;
};

/// The CUDA-core kernels of a call (flash_attention_mma.cuh's Kernels has the tensor cores'):
/// the forward pass into out and stats, the backward pass from the scratch the forward
/// filled, and the two in a row (sdpaBackward's).
struct Kernels {
  static constexpr bool kNeedsOut = true; ///< the backward reads the recomputed output
  template <class L> static void forwardPass(L &launch, const Shape &a, View out, float *stats) {
    size_t shared = size_t(2 * a.tile * a.ld) * sizeof(float);
    launch.run(blocksOf(a.S, a.rows), unsigned(a.H), unsigned(a.B), shared, forward, a, out, stats);
  }
  template <class L>
  static void backwardPass(L &launch, const Shape &a, const BackwardScratch<L> &t, float *dqkv) {
    int64_t row = (a.H + 2 * a.KVH) * a.D;
    size_t shared = size_t(2 * a.tile * a.ld) * sizeof(float);
    launch.run(blocksOf(a.S, a.rows), unsigned(a.H), unsigned(a.B), shared, backwardQuery, a, t.outView, t.doutView,
               (const float *)t.stats, t.deltas, View{dqkv, row, 0});
    launch.run(blocksOf(a.S, a.rows), unsigned(a.KVH), unsigned(a.B), shared + size_t(3 * a.tile) * sizeof(float),
               backwardKeyValue, a, t.doutView, (const float *)t.stats, (const float *)t.deltas,
               View{dqkv, row, a.H}, View{dqkv, row, a.H + a.KVH});
  }
  template <class L>
  static void forwardAndBackward(L &launch, const Shape &a, const BackwardScratch<L> &t, float *dqkv) {
    forwardPass(launch, a, t.outView, t.stats);
    backwardPass(launch, a, t, dqkv);
  }
};

/// planrt_k_sdpa with kernels K (Kernels, or mma::Kernels).
template <class K = Kernels, class L>
void sdpa(L &launch, const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
          bool causal, bool rope, float theta) {
  if (B * S == 0)
    return;
  Prepared<L> p(launch, qkv, B, S, H, KVH, D, causal, rope, theta);
  K::forwardPass(launch, p.a, View{out, H * D, 0}, nullptr);
}

/// planrt_k_sdpa_bwd with kernels K: the forward recomputed (its row statistics, and its
/// output where K's backward reads it), then the backward pass.
template <class K = Kernels, class L>
void sdpaBackward(L &launch, const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H,
                  int64_t KVH, int64_t D, bool causal, bool rope, float theta) {
  if (B * S == 0)
    return;
  Prepared<L> p(launch, qkv, B, S, H, KVH, D, causal, rope, theta);
  BackwardScratch<L> t(launch, p.a, dout, K::kNeedsOut);
  K::forwardAndBackward(launch, p.a, t, dqkv);
  p.unrope(dqkv);
}

} // namespace planrt::attention

#endif // PLANRT_CUDA_FLASH_ATTENTION_CUH
