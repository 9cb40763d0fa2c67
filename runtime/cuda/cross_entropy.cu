// Cross-entropy (mean over rows) and its backward on the device (lib/kernels/cross_entropy.cpp's
// planrt_k_cross_entropy*): a warp per row, log-sum-exp in double, the mean summed in
// row order; a target outside [0, V) is flagged and reported by finish().
#include "common.cuh"

using namespace planrt::cuda;

namespace {

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

/// Row r's target, or -1 after flagging it when outside [0, V).
__device__ int64_t targetOf(const int32_t *targets, int64_t r, int64_t V, int lane, IndexError *flag) {
  int64_t t = targets[r];
  if (t >= 0 && t < V)
    return t;
  if (lane == 0)
    flagIndex(flag, 2, t, V);
  return -1;
}

/// Per row: logsumexp − the target's logit, in double (a warp a row).
__global__ void crossEntropyRows(const float *logits, const int32_t *targets, double *perRow, int64_t rows, int64_t V,
                                 IndexError *flag) {
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

__global__ void crossEntropyBwd(float dloss, const float *logits, const int32_t *targets, float *dlogits, int64_t rows,
                                int64_t V, IndexError *flag) {
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

} // namespace

extern "C" {

void planrt_cuda_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V) {
  double *perRow = scratch<double>(rows, "cudaMallocAsync (cross-entropy)");
  if (rows > 0)
    crossEntropyRows<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(logits, targets, perRow, rows, V, indexError());
  meanOfRows<<<1, 1, 0, stream()>>>(perRow, rows, loss);
  release(perRow);
  finish("planrt_cuda_cross_entropy");
}

void planrt_cuda_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets, float *dlogits,
                                   int64_t rows, int64_t V) {
  // *dloss is read here, on the host: the generated code passes the backward pass's
  // seed as a constant global of the executable, which the device cannot read, or (fp16
  // plans) the loss scale, which host code stored before the step's first launch; no
  // kernel writes either, so reading it while launches are queued is safe.
  if (rows > 0)
    crossEntropyBwd<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(*dloss, logits, targets, dlogits, rows, V,
                                                                       indexError());
  finish("planrt_cuda_cross_entropy_bwd");
}

} // extern "C"
