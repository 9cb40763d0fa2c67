// LayerNorm and RMSNorm with their backward on the device (lib/kernels/norms.cpp's
// planrt_k_layernorm*, planrt_k_rmsnorm*): a warp per row for y and dx; dw and db summed
// over the rows in two stages (chunks of rows, then each column's chunks in order).
#include "common.cuh"

using namespace planrt::cuda;

namespace {

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

/// Rows per partial sum of the column sums: the first stage gives a thread to each
/// (column, chunk of kChunkRows rows), the second sums a column's chunks in order.
constexpr int64_t kChunkRows = 64;

/// Stage one: part[p][c] = Σ over rows [p kChunkRows, (p + 1) kChunkRows) of dy·xhat (and
/// of dy in part[chunks + p][c] when db is wanted), in double.
__global__ void normColumnPartials(const float *dy, const float *x, const double *stats, double *part, bool withDb,
                                   int64_t rows, int64_t C) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, p = blockIdx.y, chunks = gridDim.y;
  if (c >= C)
    return;
  int64_t end = (p + 1) * kChunkRows < rows ? (p + 1) * kChunkRows : rows;
  double dwAcc = 0, dbAcc = 0;
  for (int64_t r = p * kChunkRows; r < end; ++r) {
    double xhat = (x[r * C + c] - stats[2 * r]) * stats[2 * r + 1];
    dwAcc += dy[r * C + c] * xhat;
    dbAcc += dy[r * C + c];
  }
  part[p * C + c] = dwAcc;
  if (withDb)
    part[(chunks + p) * C + c] = dbAcc;
}

/// Stage two: dw[c] (and db[c]) = the column's chunks summed in order, rounded to float.
__global__ void normColumnTotals(const double *part, float *dw, float *db, int64_t chunks, int64_t C) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  double dwAcc = 0, dbAcc = 0;
  for (int64_t p = 0; p < chunks; ++p) {
    dwAcc += part[p * C + c];
    if (db)
      dbAcc += part[(chunks + p) * C + c];
  }
  dw[c] = float(dwAcc);
  if (db)
    db[c] = float(dbAcc);
}

/// dw[c] = Σ_r dy·xhat and db[c] = Σ_r dy (rmsnorm: mean 0, no db), two-stage: the same
/// bits on every run.
void normColumnSums(const float *dy, const float *x, const double *stats, float *dw, float *db, int64_t rows,
                    int64_t C, const char *what) {
  if (C <= 0)
    return;
  int64_t chunks = rows > 0 ? (rows + kChunkRows - 1) / kChunkRows : 1;
  if (chunks > 65535) { // a grid's y: 4M rows
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: %lld rows, more than the %lld the column sums take", what, (long long)rows,
                  (long long)(65535 * kChunkRows));
    check(cudaErrorInvalidValue, buf);
  }
  double *part = scratch<double>((db ? 2 : 1) * chunks * C, what);
  if (rows > 0)
    normColumnPartials<<<dim3(blocksForItems(C), unsigned(chunks)), 256, 0, stream()>>>(dy, x, stats, part,
                                                                                           db != nullptr, rows, C);
  else
    check(cudaMemsetAsync(part, 0, size_t((db ? 2 : 1) * chunks * C) * sizeof(double), stream()), what);
  normColumnTotals<<<blocksForItems(C), 256, 0, stream()>>>(part, dw, db, chunks, C);
  release(part);
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

__global__ void rmsnormBwdRows(const float *dy, const float *x, const float *w, float *dx, double *stats, int64_t rows,
                               int64_t C, float eps) {
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

} // namespace

extern "C" {

void planrt_cuda_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t C,
                           float eps) {
  if (rows > 0)
    layernormFwd<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(x, w, b, y, rows, C, eps);
  finish("planrt_cuda_layernorm");
}

void planrt_cuda_layernorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, float *db,
                               int64_t rows, int64_t C, float eps) {
  double *stats = scratch<double>(2 * rows, "cudaMallocAsync (layernorm backward)");
  if (rows > 0)
    layernormBwdRows<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(dy, x, w, dx, stats, rows, C, eps);
  normColumnSums(dy, x, stats, dw, db, rows, C, "planrt_cuda_layernorm_bwd");
  release(stats);
  finish("planrt_cuda_layernorm_bwd");
}

void planrt_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps) {
  if (rows > 0)
    rmsnormFwd<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(x, w, y, rows, C, eps);
  finish("planrt_cuda_rmsnorm");
}

void planrt_cuda_rmsnorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, int64_t rows,
                             int64_t C, float eps) {
  double *stats = scratch<double>(2 * rows, "cudaMallocAsync (rmsnorm backward)");
  if (rows > 0)
    rmsnormBwdRows<<<blocksForRows(rows), kRowThreads, 0, stream()>>>(dy, x, w, dx, stats, rows, C, eps);
  normColumnSums(dy, x, stats, dw, nullptr, rows, C, "planrt_cuda_rmsnorm_bwd");
  release(stats);
  finish("planrt_cuda_rmsnorm_bwd");
}

} // extern "C"
