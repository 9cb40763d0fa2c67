// Scaled dot-product attention and its backward on the device (lib/kernels/attention.cpp's
// planrt_k_sdpa*): causal or not, grouped-query heads, rope. A warp per (batch, head,
// query): two passes over the keys; the backward recomputes the probabilities
// (flash-attention style, without tiling): dq per query, dk and dv per key.
#include "common.cuh"

using namespace planrt::cuda;

namespace {

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
__global__ void sdpaBwdQ(Shape a, const float *dout, const float *qkv, const float *stats, float *deltas, float *dqkv) {
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
        dk[j] += ds * q[j]; // q already carries the scale
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
    std::snprintf(buf, sizeof buf,
                  "%s: bad shape B=%lld S=%lld H=%lld KVH=%lld D=%lld (H a multiple of KVH, "
                  "D at most %d, even with rope)",
                  name, (long long)B, (long long)S, (long long)H, (long long)KVH, (long long)D, kWarp * kMaxPerLane);
    check(cudaErrorInvalidValue, buf);
  }
  return Shape{
      B, S, H, KVH, D, (H + 2 * KVH) * D, H / KVH, causal != 0, rope != 0, theta, float(1.0 / std::sqrt(double(D)))};
}

} // namespace

extern "C" {

void planrt_cuda_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                      int32_t causal, int32_t rope, float rope_theta) {
  Shape a = shapeOf(B, S, H, KVH, D, causal, rope, rope_theta, "planrt_cuda_sdpa");
  int64_t items = B * H * S;
  if (items > 0)
    sdpaFwd<<<blocksForRows(items), kRowThreads, 0, stream()>>>(a, qkv, out, nullptr);
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
  cudaStream_t st = stream();
  sdpaFwd<<<blocksForRows(items), kRowThreads, 0, st>>>(a, qkv, nullptr, stats);
  sdpaBwdQ<<<blocksForRows(items), kRowThreads, 0, st>>>(a, dout, qkv, stats, deltas, dqkv);
  sdpaBwdKV<<<blocksForRows(B * KVH * S), kRowThreads, 0, st>>>(a, dout, qkv, stats, deltas, dqkv);
  release(stats);
  release(deltas);
  finish("planrt_cuda_sdpa_bwd");
}

} // extern "C"
