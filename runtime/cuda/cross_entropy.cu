// Cross-entropy (mean over rows) and its backward on the device (lib/kernels/cross_entropy.cpp's
// planrt_k_cross_entropy*): a block per row; each thread keeps an online maximum and a
// sum of exponentials (float exp, double sum) over its share of the row in one read, the
// block combines them in a fixed order; the mean is summed by one block in a fixed order,
// so every run gives the same bits. A target outside [0, V) is flagged and reported by
// finish(). The forward reads the logits once, the backward twice and writes them once.
// Logits and their gradient may be float32 or 16-bit (storage, plan-cuda-half-storage):
// the kernels are instantiated for each element type read and written.
#include "common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

using namespace planrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

/// An element as a float, and a float as an element (rounded to nearest even).
__device__ float toFloat(float x) { return x; }
__device__ float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float toFloat(__half x) { return __half2float(x); }
template <class T> __device__ T fromFloat(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(x);
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(x);
  else
    return x;
}

/// f(j, lr[j]) for this thread's share of row lr (j = threadIdx.x, + kThreads, … < V),
/// kUnroll loads in flight, each before f sees it (f may write lr[j]: the backward in place).
template <class T, class F> __device__ void forShare(const T *lr, int64_t V, const F &f) {
  int64_t j = threadIdx.x;
  for (; j + (kUnroll - 1) * kThreads < V; j += kUnroll * kThreads) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      x[u] = toFloat(lr[j + u * kThreads]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      f(j + u * kThreads, x[u]);
  }
  for (; j < V; j += kThreads)
    f(j, toFloat(lr[j]));
}

/// The block's max m and Σ exp(x − m) over row `lr` (length V), on every thread.
template <class T> __device__ void rowMaxSumExp(const T *__restrict__ lr, int64_t V, float &blockMax, double &blockSum) {
  __shared__ float maxes[kThreads / kWarp];
  __shared__ double sums[kThreads / kWarp];
  float m = -INFINITY;
  double s = 0;
  // One read: m rises as the row goes, the sum is rescaled when it does.
  auto take = [&](int64_t, float x) {
    if (x > m) {
      s = s * double(expf(m - x)) + 1.0;
      m = x;
    } else if (x != -INFINITY) { // a NaN goes on to the sum, as on the CPU
      s += double(expf(x - m));
    }
  };
  forShare(lr, V, take);
  // The block's maximum, then each thread's sum rescaled to it, summed in a fixed order.
  int warp = threadIdx.x / kWarp, lane = laneId();
  float wm = warpMax(m);
  if (lane == 0)
    maxes[warp] = wm;
  __syncthreads();
  float M = maxes[0];
  for (int w = 1; w < kThreads / kWarp; ++w)
    M = fmaxf(M, maxes[w]);
  // A share of only −inf adds nothing; a NaN anywhere goes on to the sum (fmaxf drops
  // NaN from the maxima, not from the sums).
  double mine = m == -INFINITY && !isnan(s) ? 0.0 : s * double(expf(m - M));
  double ws = warpSum(mine);
  if (lane == 0)
    sums[warp] = ws;
  __syncthreads();
  double S = 0;
  for (int w = 0; w < kThreads / kWarp; ++w)
    S += sums[w];
  blockMax = M;
  blockSum = S;
}

/// Row r's target, or -1 after flagging it when outside [0, V).
__device__ int64_t targetOf(const int32_t *targets, int64_t r, int64_t V, IndexError *flag) {
  int64_t t = targets[r];
  if (t >= 0 && t < V)
    return t;
  if (threadIdx.x == 0)
    flagIndex(flag, 2, t, V);
  return -1;
}

/// Per row: logsumexp − the target's logit, in double (a block a row).
template <class T>
__global__ void __launch_bounds__(kThreads) crossEntropyRows(const T *__restrict__ logits, const int32_t *targets,
                                                             double *perRow, int64_t V, IndexError *flag) {
  int64_t r = blockIdx.x;
  int64_t t = targetOf(targets, r, V, flag);
  if (t < 0)
    return;
  const T *lr = logits + r * V;
  float m;
  double sum;
  rowMaxSumExp(lr, V, m, sum);
  if (threadIdx.x == 0)
    perRow[r] = double(m) + log(sum) - double(toFloat(lr[t]));
}

/// *loss = mean of the rows' losses: each thread sums rows i, i + kThreads, …, then the
/// threads' sums are added in thread order (one block; a fixed order).
__global__ void __launch_bounds__(kThreads) meanOfRows(const double *perRow, int64_t rows, float *loss) {
  __shared__ double part[kThreads];
  double total = 0;
  for (int64_t r = threadIdx.x; r < rows; r += kThreads)
    total += perRow[r];
  part[threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  double all = 0;
  for (int i = 0; i < kThreads; ++i)
    all += part[i];
  *loss = rows > 0 ? float(all / double(rows)) : 0.0f;
}

// dlogits may be logits (plan-cuda-round-results writes the rounded gradient over the
// logits): rowMaxSumExp has read the whole row, and synchronised the block, before any
// element is written, and each element is then read before its thread writes it.
// A 16-bit gradient (Out) is of round_to's type: the caller checks.
template <class In, class Out>
__global__ void __launch_bounds__(kThreads) crossEntropyBwd(float dloss, const In *logits, const int32_t *targets,
                                                            Out *dlogits, int64_t rows, int64_t V, int32_t roundTo,
                                                            IndexError *flag) {
  int64_t r = blockIdx.x;
  int64_t t = targetOf(targets, r, V, flag);
  if (t < 0)
    return;
  double scale = double(dloss) / double(rows);
  const In *lr = logits + r * V;
  Out *dr = dlogits + r * V;
  float m;
  double sum;
  rowMaxSumExp(lr, V, m, sum);
  // p_j = k exp(x_j − m) in float; the target's p_t − scale in double, as the CPU's
  // (where p_t is near 1 the difference would lose its digits in float).
  double kd = scale / sum;
  float k = float(kd);
  // Rounded to bf16 (fp16) values where the compiler asked (round_to): the generated
  // code's rounding of the gradient, without its pass over the logits' gradient; a
  // 16-bit gradient is stored so (its type is round_to's).
  auto grad = [&](int64_t j, float x) {
    float g = j == t ? float(kd * exp(double(x - m)) - scale) : k * expf(x - m);
    if constexpr (!std::is_same_v<Out, float>)
      dr[j] = fromFloat<Out>(g);
    else
      dr[j] = roundTo == 1 ? __bfloat162float(__float2bfloat16_rn(g)) : roundTo == 2 ? __half2float(__float2half_rn(g)) : g;
  };
  forShare(lr, V, grad);
}

/// Rows are blocks: a grid's x extent is below 2^31.
void checkRows(int64_t rows, const char *what) {
  if (rows >= (int64_t(1) << 31))
    check(cudaErrorInvalidValue, what);
}

/// f(T{}) for the element type of storage code `type` (0 float32, 1 bf16, 2 fp16).
template <class F> void withType(int32_t type, const F &f) {
  if (type == 1)
    f(__nv_bfloat16{});
  else if (type == 2)
    f(__half{});
  else
    f(float{});
}

void checkStorage(int32_t type, const char *what) {
  if (type < 0 || type > 2)
    check(cudaErrorInvalidValue, what);
}

} // namespace

extern "C" {

void planrt_cuda_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V,
                               int32_t storage) {
  checkRows(rows, "planrt_cuda_cross_entropy: 2^31 rows or more");
  checkStorage(storage, "planrt_cuda_cross_entropy: storage is not 0 (float32), 1 (bf16) or 2 (fp16)");
  double *perRow = scratch<double>(rows, "cudaMallocAsync (cross-entropy)");
  if (rows > 0)
    withType(storage, [&](auto in) {
      using In = decltype(in);
      crossEntropyRows<<<unsigned(rows), kThreads, 0, stream()>>>(reinterpret_cast<const In *>(logits), targets,
                                                                  perRow, V, indexError());
    });
  meanOfRows<<<1, kThreads, 0, stream()>>>(perRow, rows, loss);
  release(perRow);
  finish("planrt_cuda_cross_entropy");
}

void planrt_cuda_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets, float *dlogits,
                                   int64_t rows, int64_t V, int32_t round_to, int32_t storage) {
  checkRows(rows, "planrt_cuda_cross_entropy_bwd: 2^31 rows or more");
  if (round_to < 0 || round_to > 2)
    check(cudaErrorInvalidValue, "planrt_cuda_cross_entropy_bwd: round_to is not 0 (none), 1 (bf16) or 2 (fp16)");
  int32_t inType = storage & 3, outType = storage >> 2;
  checkStorage(inType, "planrt_cuda_cross_entropy_bwd: the logits' storage is not 0, 1 or 2");
  if (outType != 0 && outType != round_to)
    check(cudaErrorInvalidValue, "planrt_cuda_cross_entropy_bwd: a 16-bit gradient needs round_to its type");
  if (static_cast<const void *>(logits) == dlogits && inType != outType)
    check(cudaErrorInvalidValue, "planrt_cuda_cross_entropy_bwd: a gradient written over the logits needs their "
                                 "storage");
  // *dloss is read here, on the host: the generated code passes the backward pass's
  // seed as a constant global of the executable, which the device cannot read, or (fp16
  // plans) the loss scale, which host code stored before the step's first launch; no
  // kernel writes either, so reading it while launches are queued is safe.
  if (rows > 0)
    withType(inType, [&](auto in) {
      withType(outType, [&](auto out) {
        using In = decltype(in);
        using Out = decltype(out);
        crossEntropyBwd<<<unsigned(rows), kThreads, 0, stream()>>>(*dloss, reinterpret_cast<const In *>(logits),
                                                                    targets, reinterpret_cast<Out *>(dlogits), rows,
                                                                    V, round_to, indexError());
      });
    });
  finish("planrt_cuda_cross_entropy_bwd");
}

} // extern "C"
