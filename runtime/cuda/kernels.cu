// Device versions of the CPU kernels of planrt_kernels.h (runtime/lib/kernels.cpp is
// their reference, and test/gpu/kernels_test.cpp compares the two): LayerNorm,
// RMSNorm, attention, embedding and cross-entropy, each with its backward. Written for
// correctness first: row reductions in double as the CPU's, one warp per row,
// attention one warp per (batch, head, query) with the probabilities recomputed in
// the backward pass (flash-attention style, without tiling), and parameter
// gradients summed over rows by one thread per column — no atomics, so every run
// gives the same bits.
#include "device.h"

#include "planrt_cuda.h"

#include <cmath>
#include <cstdio>

using planrt::cuda::finish;

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

__device__ double warpSum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Mean and 1/sqrt(var + eps) of row x[0, C) (biased variance, two passes, double), on
/// every lane of the warp.
__device__ void meanRstd(const float *xr, int64_t C, float eps, int lane, double &mean, double &rstd) {
  double s = 0;
  for (int64_t c = lane; c < C; c += kWarp)
    s += xr[c];
  mean = warpSum(s) / double(C);
  double sq = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    double d = xr[c] - mean;
    sq += d * d;
  }
  rstd = 1.0 / sqrt(warpSum(sq) / double(C) + double(eps));
}
/// 1/sqrt(mean(x²) + eps) of row x[0, C), on every lane.
__device__ double rmsRstd(const float *xr, int64_t C, float eps, int lane) {
  double sq = 0;
  for (int64_t c = lane; c < C; c += kWarp)
    sq += double(xr[c]) * xr[c];
  return 1.0 / sqrt(warpSum(sq) / double(C) + double(eps));
}
/// The row's maximum m and Σ exp(x − m) (double), on every lane.
__device__ void maxSumExp(const float *lr, int64_t V, int lane, float &m, double &sum) {
  m = -INFINITY;
  for (int64_t j = lane; j < V; j += kWarp)
    m = fmaxf(m, lr[j]);
  m = warpMax(m);
  sum = 0;
  for (int64_t j = lane; j < V; j += kWarp)
    sum += exp(double(lr[j] - m));
  sum = warpSum(sum);
}

/// The item (row, query, key) of this thread's warp, and the thread's lane in it.
__device__ int64_t warpItem() { return int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; }
__device__ int laneId() { return int(threadIdx.x % kWarp); }

/// Grid of warps, one per row.
unsigned blocksForRows(int64_t rows) { return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }
/// Grid of threads, one per item, 256 a block.
unsigned blocksForItems(int64_t n) { return unsigned((n + 255) / 256); }

__device__ void flagIndex(planrt::cuda::IndexError *flag, int kind, int64_t value, int64_t bound) {
  if (atomicCAS(&flag->kind, 0, kind) == 0) {
    flag->value = value;
    flag->bound = bound;
  }
}

// ---- LayerNorm and RMSNorm.

__global__ void layernormFwd(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t C,
                             float eps) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  const float *xr = x + r * C;
  double mean, rstd;
  meanRstd(xr, C, eps, lane, mean, rstd);
  for (int64_t c = lane; c < C; c += kWarp) {
    double v = (xr[c] - mean) * rstd * w[c];
    y[r * C + c] = float(b ? v + b[c] : v);
  }
}

/// dx of one row and, per row, mean and rstd (for the column sums).
__global__ void layernormBwdRows(const float *dy, const float *x, const float *w, float *dx, double *stats,
                                 int64_t rows, int64_t C, float eps) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  const float *xr = x + r * C, *dyr = dy + r * C;
  double mean, rstd;
  meanRstd(xr, C, eps, lane, mean, rstd);
  double sumG = 0, sumGX = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    double xhat = (xr[c] - mean) * rstd, g = double(dyr[c]) * w[c];
    sumG += g;
    sumGX += g * xhat;
  }
  double meanG = warpSum(sumG) / double(C), meanGX = warpSum(sumGX) / double(C);
  for (int64_t c = lane; c < C; c += kWarp) {
    double xhat = (xr[c] - mean) * rstd;
    dx[r * C + c] = float(rstd * (double(dyr[c]) * w[c] - meanG - xhat * meanGX));
  }
  if (lane == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

/// dw[c] = Σ_r dy·xhat and db[c] = Σ_r dy (rmsnorm: mean 0, no db): a thread per column.
__global__ void normColumnSums(const float *dy, const float *x, const double *stats, float *dw, float *db,
                               int64_t rows, int64_t C) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  double dwAcc = 0, dbAcc = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double xhat = (x[r * C + c] - stats[2 * r]) * stats[2 * r + 1];
    dwAcc += dy[r * C + c] * xhat;
    dbAcc += dy[r * C + c];
  }
  dw[c] = float(dwAcc);
  if (db)
    db[c] = float(dbAcc);
}

__global__ void rmsnormFwd(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  const float *xr = x + r * C;
  double rstd = rmsRstd(xr, C, eps, lane);
  for (int64_t c = lane; c < C; c += kWarp)
    y[r * C + c] = float(xr[c] * rstd * w[c]);
}

__global__ void rmsnormBwdRows(const float *dy, const float *x, const float *w, float *dx, double *stats,
                               int64_t rows, int64_t C, float eps) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  const float *xr = x + r * C, *dyr = dy + r * C;
  double rstd = rmsRstd(xr, C, eps, lane), sumGX = 0;
  for (int64_t c = lane; c < C; c += kWarp)
    sumGX += double(dyr[c]) * w[c] * (xr[c] * rstd);
  double meanGX = warpSum(sumGX) / double(C);
  for (int64_t c = lane; c < C; c += kWarp)
    dx[r * C + c] = float(rstd * (double(dyr[c]) * w[c] - xr[c] * rstd * meanGX));
  if (lane == 0) {
    stats[2 * r] = 0.0;
    stats[2 * r + 1] = rstd;
  }
}

/// Scratch device memory for one call (stream-ordered, from the device's default pool,
/// which keeps what it frees: each call asks for the same sizes again).
template <class T> T *scratch(int64_t n, const char *what) {
  void *p = nullptr;
  planrt::cuda::check(cudaMallocAsync(&p, size_t(n > 0 ? n : 1) * sizeof(T), planrt::cuda::stream()), what);
  return static_cast<T *>(p);
}
void release(void *p) { planrt::cuda::check(cudaFreeAsync(p, planrt::cuda::stream()), "cudaFreeAsync"); }

// ---- Attention: qkv [B, S, (H + 2 KVH) D]; out [B, S, H D].

struct Shape {
  int64_t B, S, H, KVH, D, row, group;
  bool causal, rope;
  float theta, scale;
  __device__ const float *q(const float *qkv, int64_t b, int64_t s, int64_t h) const {
    return qkv + (b * S + s) * row + h * D;
  }
  __device__ const float *k(const float *qkv, int64_t b, int64_t s, int64_t g) const {
    return qkv + (b * S + s) * row + (H + g) * D;
  }
  __device__ const float *v(const float *qkv, int64_t b, int64_t s, int64_t g) const {
    return qkv + (b * S + s) * row + (H + KVH + g) * D;
  }
  __device__ int64_t keys(int64_t s) const { return causal ? s + 1 : S; }
  /// Element d of rope(x) at position s (x itself without rope), as the CPU's tables:
  /// frequency i = d mod D/2, angle = s * theta^(-2i/D) in double, cos/sin rounded to float.
  __device__ float rot(const float *x, int64_t d, int64_t s) const {
    if (!rope)
      return x[d];
    int64_t half = D / 2, i = d % half;
    double angle = double(s) * pow(double(theta), -2.0 * double(i) / double(D));
    float c = float(cos(angle)), sn = float(sin(angle));
    float a = x[i], b = x[i + half];
    return d < half ? a * c - b * sn : b * c + a * sn;
  }
  /// Element d of rope(.)ᵀ g at position s: the rotation by the opposite angle.
  __device__ float unrot(const float *g, int64_t d, int64_t s) const {
    if (!rope)
      return g[d];
    int64_t half = D / 2, i = d % half;
    double angle = double(s) * pow(double(theta), -2.0 * double(i) / double(D));
    float c = float(cos(angle)), sn = float(sin(angle));
    float a = g[i], b = g[i + half];
    return d < half ? a * c + b * sn : b * c - a * sn;
  }
};

/// The head dimension a lane holds: d = lane + 32 j, j < kMaxPerLane (D ≤ 256).
constexpr int kMaxPerLane = 8;

/// Loads rope(q) · scale of (b, s, h) into the lane's registers.
__device__ void loadQ(const Shape &a, const float *qkv, int64_t b, int64_t s, int64_t h, float *q, int lane) {
  const float *qs = a.q(qkv, b, s, h);
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    q[j] = d < a.D ? a.rot(qs, d, s) * a.scale : 0.0f;
  }
}
/// The score q · rope(k_t), summed over the warp.
__device__ float score(const Shape &a, const float *q, const float *kt, int64_t t, int lane) {
  float acc = 0;
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    if (d < a.D)
      acc += q[j] * a.rot(kt, d, t);
  }
  for (int o = kWarp / 2; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

/// x · y over the head dimension (x in the lane's registers), summed over the warp.
__device__ float dotPlain(const Shape &a, const float *x, const float *y, int lane) {
  float acc = 0;
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    if (d < a.D)
      acc += x[j] * y[d];
  }
  for (int o = kWarp / 2; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

/// One warp per (b, h, s): two passes over the keys (maximum and sum, then the
/// weighted values) into out (unless null); each row's maximum and 1/sum into
/// stats (unless null).
__global__ void sdpaFwd(Shape a, const float *qkv, float *out, float *stats) {
  int64_t item = warpItem();
  int lane = laneId();
  if (item >= a.B * a.H * a.S)
    return;
  int64_t s = item % a.S, h = (item / a.S) % a.H, b = item / (a.S * a.H), g = h / a.group;
  float q[kMaxPerLane];
  loadQ(a, qkv, b, s, h, q, lane);
  int64_t T = a.keys(s);
  float m = -INFINITY;
  for (int64_t t = 0; t < T; ++t)
    m = fmaxf(m, score(a, q, a.k(qkv, b, t, g), t, lane));
  float sum = 0, o[kMaxPerLane] = {0};
  for (int64_t t = 0; t < T; ++t) {
    float p = expf(score(a, q, a.k(qkv, b, t, g), t, lane) - m);
    sum += p;
    const float *vt = a.v(qkv, b, t, g);
    for (int j = 0; j < kMaxPerLane; ++j) {
      int64_t d = lane + kWarp * j;
      if (d < a.D)
        o[j] += p * vt[d];
    }
  }
  float inv = 1.0f / sum;
  if (out) {
    float *os = out + (b * a.S + s) * a.H * a.D + h * a.D;
    for (int j = 0; j < kMaxPerLane; ++j) {
      int64_t d = lane + kWarp * j;
      if (d < a.D)
        os[d] = o[j] * inv;
    }
  }
  if (stats && lane == 0) {
    stats[2 * item] = m;
    stats[2 * item + 1] = inv;
  }
}

/// x (one head's D floats, each lane having written its elements) replaced by
/// rope⁻¹(x) at position s: each lane reads the pairs it needs after the warp wrote.
__device__ void unrotateInPlace(const Shape &a, float *x, int64_t s, int lane) {
  if (!a.rope)
    return;
  __syncwarp();
  float un[kMaxPerLane];
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    un[j] = d < a.D ? a.unrot(x, d, s) : 0.0f;
  }
  __syncwarp();
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    if (d < a.D)
      x[d] = un[j];
  }
}

/// The backward pass, first half: per (b, h, s), delta = Σ_t p_t (dout · v_t), then
/// dq = scale · rope⁻¹(Σ_t p_t (dout · v_t − delta) rope(k_t)).
__global__ void sdpaBwdQ(Shape a, const float *dout, const float *qkv, const float *stats, float *deltas,
                         float *dqkv) {
  int64_t item = warpItem();
  int lane = laneId();
  if (item >= a.B * a.H * a.S)
    return;
  int64_t s = item % a.S, h = (item / a.S) % a.H, b = item / (a.S * a.H), g = h / a.group;
  float q[kMaxPerLane], dO[kMaxPerLane];
  loadQ(a, qkv, b, s, h, q, lane);
  const float *dos = dout + (b * a.S + s) * a.H * a.D + h * a.D;
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    dO[j] = d < a.D ? dos[d] : 0.0f;
  }
  float m = stats[2 * item], inv = stats[2 * item + 1];
  int64_t T = a.keys(s);
  float delta = 0;
  for (int64_t t = 0; t < T; ++t) {
    float p = expf(score(a, q, a.k(qkv, b, t, g), t, lane) - m) * inv;
    delta += p * dotPlain(a, dO, a.v(qkv, b, t, g), lane);
  }
  float dq[kMaxPerLane] = {0};
  for (int64_t t = 0; t < T; ++t) {
    const float *kt = a.k(qkv, b, t, g);
    float p = expf(score(a, q, kt, t, lane) - m) * inv;
    float ds = p * (dotPlain(a, dO, a.v(qkv, b, t, g), lane) - delta);
    for (int j = 0; j < kMaxPerLane; ++j) {
      int64_t d = lane + kWarp * j;
      if (d < a.D)
        dq[j] += ds * a.rot(kt, d, t);
    }
  }
  if (lane == 0)
    deltas[item] = delta;
  // dq in rotated space, scaled, then rotated back.
  float *dqs = dqkv + (b * a.S + s) * a.row + h * a.D;
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    if (d < a.D)
      dqs[d] = dq[j] * a.scale;
  }
  unrotateInPlace(a, dqs, s, lane);
}

/// The backward pass, second half: per (b, key/value head g, key t), over the query
/// heads of the group and the queries that see t: dv_t = Σ p dout, and
/// dk_t = rope⁻¹(Σ p (dout · v_t − delta) · scale · rope(q)).
__global__ void sdpaBwdKV(Shape a, const float *dout, const float *qkv, const float *stats, const float *deltas,
                          float *dqkv) {
  int64_t item = warpItem();
  int lane = laneId();
  if (item >= a.B * a.KVH * a.S)
    return;
  int64_t t = item % a.S, g = (item / a.S) % a.KVH, b = item / (a.S * a.KVH);
  const float *kt = a.k(qkv, b, t, g), *vt = a.v(qkv, b, t, g);
  float k[kMaxPerLane], v[kMaxPerLane], dk[kMaxPerLane] = {0}, dv[kMaxPerLane] = {0};
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    k[j] = d < a.D ? a.rot(kt, d, t) : 0.0f;
    v[j] = d < a.D ? vt[d] : 0.0f;
  }
  for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h)
    for (int64_t s = a.causal ? t : 0; s < a.S; ++s) {
      int64_t row = (b * a.H + h) * a.S + s;
      float q[kMaxPerLane], dO[kMaxPerLane];
      loadQ(a, qkv, b, s, h, q, lane);
      const float *dos = dout + (b * a.S + s) * a.H * a.D + h * a.D;
      float qk = 0, dov = 0;
      for (int j = 0; j < kMaxPerLane; ++j) {
        int64_t d = lane + kWarp * j;
        dO[j] = d < a.D ? dos[d] : 0.0f;
        qk += q[j] * k[j];
        dov += dO[j] * v[j];
      }
      for (int o = kWarp / 2; o > 0; o /= 2) {
        qk += __shfl_xor_sync(0xffffffffu, qk, o);
        dov += __shfl_xor_sync(0xffffffffu, dov, o);
      }
      float p = expf(qk - stats[2 * row]) * stats[2 * row + 1];
      float ds = p * (dov - deltas[row]);
      for (int j = 0; j < kMaxPerLane; ++j) {
        dv[j] += p * dO[j];
        dk[j] += ds * q[j];  // q already carries the scale
      }
    }
  float *dks = dqkv + (b * a.S + t) * a.row + (a.H + g) * a.D;
  float *dvs = dqkv + (b * a.S + t) * a.row + (a.H + a.KVH + g) * a.D;
  for (int j = 0; j < kMaxPerLane; ++j) {
    int64_t d = lane + kWarp * j;
    if (d < a.D) {
      dks[d] = dk[j];
      dvs[d] = dv[j];
    }
  }
  unrotateInPlace(a, dks, t, lane);
}

Shape shapeOf(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int32_t causal, int32_t rope, float theta,
              const char *name) {
  if (B < 0 || S < 0 || H <= 0 || KVH <= 0 || D <= 0 || H % KVH != 0 || D > kWarp * kMaxPerLane ||
      (rope && D % 2 != 0)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: bad shape B=%lld S=%lld H=%lld KVH=%lld D=%lld (H a multiple of KVH, "
                  "D at most %d, even with rope)", name, (long long)B, (long long)S, (long long)H, (long long)KVH,
                  (long long)D, kWarp * kMaxPerLane);
    planrt::cuda::check(cudaErrorInvalidValue, buf);
  }
  return Shape{B, S, H, KVH, D, (H + 2 * KVH) * D, H / KVH, causal != 0, rope != 0, theta,
               float(1.0 / std::sqrt(double(D)))};
}

// ---- Embedding and cross-entropy.

__global__ void embeddingFwd(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V,
                             planrt::cuda::IndexError *flag) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * C)
    return;
  int64_t r = i / C, c = i % C, id = ids[r];
  if (id < 0 || id >= V) {
    flagIndex(flag, 1, id, V);
    return;
  }
  out[i] = table[id * C + c];
}

/// dtable[ids[r], c] += dout[r, c] in row order: a thread per column, after zeroing.
__global__ void embeddingBwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                             int64_t V, planrt::cuda::IndexError *flag) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t id = ids[r];
    if (id < 0 || id >= V) {
      flagIndex(flag, 1, id, V);
      return;
    }
    dtable[id * C + c] += dout[r * C + c];
  }
}

/// Row r's target, or -1 after flagging it when outside [0, V).
__device__ int64_t targetOf(const int32_t *targets, int64_t r, int64_t V, int lane, planrt::cuda::IndexError *flag) {
  int64_t t = targets[r];
  if (t >= 0 && t < V)
    return t;
  if (lane == 0)
    flagIndex(flag, 2, t, V);
  return -1;
}

/// Per row: logsumexp − the target's logit, in double (a warp a row).
__global__ void crossEntropyRows(const float *logits, const int32_t *targets, double *perRow, int64_t rows,
                                 int64_t V, planrt::cuda::IndexError *flag) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  int64_t t = targetOf(targets, r, V, lane, flag);
  if (t < 0)
    return;
  const float *lr = logits + r * V;
  float m;
  double sum;
  maxSumExp(lr, V, lane, m, sum);
  if (lane == 0)
    perRow[r] = double(m) + log(sum) - double(lr[t]);
}

/// *loss = mean of the rows' losses, summed in row order by one thread.
__global__ void meanOfRows(const double *perRow, int64_t rows, float *loss) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += perRow[r];
  *loss = rows > 0 ? float(total / double(rows)) : 0.0f;
}

__global__ void crossEntropyBwd(float dloss, const float *logits, const int32_t *targets, float *dlogits,
                                int64_t rows, int64_t V, planrt::cuda::IndexError *flag) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  int64_t t = targetOf(targets, r, V, lane, flag);
  if (t < 0)
    return;
  double scale = double(dloss) / double(rows);
  const float *lr = logits + r * V;
  float *dr = dlogits + r * V;
  float m;
  double sum;
  maxSumExp(lr, V, lane, m, sum);
  double k = scale / sum;
  for (int64_t j = lane; j < V; j += kWarp) {
    double pj = k * exp(double(lr[j] - m));
    dr[j] = float(j == t ? pj - scale : pj);
  }
}

constexpr unsigned kRowThreads = kWarp * kWarpsPerBlock;

} // namespace

extern "C" {

void planrt_cuda_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t C,
                           float eps) {
  if (rows > 0)
    layernormFwd<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(x, w, b, y, rows, C, eps);
  finish("planrt_cuda_layernorm");
}

void planrt_cuda_layernorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, float *db,
                               int64_t rows, int64_t C, float eps) {
  double *stats = scratch<double>(2 * rows, "cudaMallocAsync (layernorm backward)");
  if (rows > 0)
    layernormBwdRows<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(dy, x, w, dx, stats, rows,
                                                                                      C, eps);
  if (C > 0)
    normColumnSums<<<blocksForItems(C), 256, 0, planrt::cuda::stream()>>>(dy, x, stats, dw, db, rows, C);
  release(stats);
  finish("planrt_cuda_layernorm_bwd");
}

void planrt_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps) {
  if (rows > 0)
    rmsnormFwd<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(x, w, y, rows, C, eps);
  finish("planrt_cuda_rmsnorm");
}

void planrt_cuda_rmsnorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, int64_t rows,
                             int64_t C, float eps) {
  double *stats = scratch<double>(2 * rows, "cudaMallocAsync (rmsnorm backward)");
  if (rows > 0)
    rmsnormBwdRows<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(dy, x, w, dx, stats, rows, C,
                                                                                    eps);
  if (C > 0)
    normColumnSums<<<blocksForItems(C), 256, 0, planrt::cuda::stream()>>>(dy, x, stats, dw, nullptr, rows, C);
  release(stats);
  finish("planrt_cuda_rmsnorm_bwd");
}

void planrt_cuda_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                      int32_t causal, int32_t rope, float rope_theta) {
  Shape a = shapeOf(B, S, H, KVH, D, causal, rope, rope_theta, "planrt_cuda_sdpa");
  int64_t items = B * H * S;
  if (items > 0)
    sdpaFwd<<<blocksForRows(items), kRowThreads, 0, planrt::cuda::stream()>>>(a, qkv, out, nullptr);
  finish("planrt_cuda_sdpa");
}

void planrt_cuda_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H,
                          int64_t KVH, int64_t D, int32_t causal, int32_t rope, float rope_theta) {
  Shape a = shapeOf(B, S, H, KVH, D, causal, rope, rope_theta, "planrt_cuda_sdpa_bwd");
  int64_t items = B * H * S;
  if (items == 0)
    return finish("planrt_cuda_sdpa_bwd");
  float *stats = scratch<float>(2 * items, "cudaMallocAsync (attention backward)");
  float *deltas = scratch<float>(items, "cudaMallocAsync (attention backward)");
  cudaStream_t st = planrt::cuda::stream();
  sdpaFwd<<<blocksForRows(items), kRowThreads, 0, st>>>(a, qkv, nullptr, stats);
  sdpaBwdQ<<<blocksForRows(items), kRowThreads, 0, st>>>(a, dout, qkv, stats, deltas, dqkv);
  sdpaBwdKV<<<blocksForRows(B * KVH * S), kRowThreads, 0, st>>>(a, dout, qkv, stats, deltas, dqkv);
  release(stats);
  release(deltas);
  finish("planrt_cuda_sdpa_bwd");
}

void planrt_cuda_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V) {
  if (rows * C > 0)
    embeddingFwd<<<blocksForItems(rows * C), 256, 0, planrt::cuda::stream()>>>(table, ids, out, rows, C, V,
                                                                             planrt::cuda::indexError());
  finish("planrt_cuda_embedding");
}

void planrt_cuda_embedding_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                               int64_t V) {
  planrt::cuda::check(cudaMemsetAsync(dtable, 0, size_t(V * C) * sizeof(float), planrt::cuda::stream()),
                      "cudaMemsetAsync (embedding backward)");
  if (C > 0)
    embeddingBwd<<<blocksForItems(C), 256, 0, planrt::cuda::stream()>>>(dout, ids, dtable, rows, C, V,
                                                                      planrt::cuda::indexError());
  finish("planrt_cuda_embedding_bwd");
}

void planrt_cuda_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V) {
  double *perRow = scratch<double>(rows, "cudaMallocAsync (cross-entropy)");
  if (rows > 0)
    crossEntropyRows<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(
        logits, targets, perRow, rows, V, planrt::cuda::indexError());
  meanOfRows<<<1, 1, 0, planrt::cuda::stream()>>>(perRow, rows, loss);
  release(perRow);
  finish("planrt_cuda_cross_entropy");
}

void planrt_cuda_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets, float *dlogits,
                                   int64_t rows, int64_t V) {
  // *dloss is read here, on the host: the generated code passes the backward pass's
  // seed as a constant global of the executable, which the device cannot read.
  if (rows > 0)
    crossEntropyBwd<<<blocksForRows(rows), kRowThreads, 0, planrt::cuda::stream()>>>(
        *dloss, logits, targets, dlogits, rows, V, planrt::cuda::indexError());
  finish("planrt_cuda_cross_entropy_bwd");
}

} // extern "C"
