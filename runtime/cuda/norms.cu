// LayerNorm and RMSNorm with their backward on the device (lib/kernels/norms.cpp's
// planrt_k_layernorm*, planrt_k_rmsnorm*): a warp per row for y and dx; dw and db summed
// over the rows in two stages (chunks of rows, then each column's chunks), each sum in a
// fixed order.
#include "common.cuh"

#include <type_traits>

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

/// This lane's elements of a row (c = lane + kWarp i, i < K: the order the loops above
/// take them in), read once; K kWarp ≥ C (dispatch()). The same sums in the same order as
/// meanRstd, so the same bits.
template <int K> struct LaneRow {
  float v[K];
  __device__ LaneRow(const float *row, int64_t C, int lane) {
#pragma unroll
    for (int i = 0; i < K; ++i)
      v[i] = lane + kWarp * i < C ? row[lane + kWarp * i] : 0.0f;
  }
  __device__ void meanRstd(int64_t C, float eps, int lane, double &mean, double &rstd) const {
    double s = 0;
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane + kWarp * i < C)
        s += v[i];
    mean = warpSum(s) / double(C);
    double sq = 0;
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (lane + kWarp * i < C) {
        double d = v[i] - mean;
        sq += d * d;
      }
    rstd = 1.0 / sqrt(warpSum(sq) / double(C) + double(eps));
  }
};

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

/// dx of one row and, per row, mean and rstd (for the column sums). K = 0: the row read
/// from memory on each pass (any C); else from registers (C ≤ K kWarp): 0.067 -> 0.050 ms
/// with the column sums' new stages at 4,096 x 768 on an H100. (The forward so cached
/// measured slower, 0.019 -> 0.023 ms, and reads its row from memory.)
template <int K>
__global__ void layernormBwdRows(const float *dy, const float *x, const float *w, float *dx, double *stats,
                                 int64_t rows, int64_t C, float eps) {
  int64_t r = warpItem();
  int lane = laneId();
  if (r >= rows)
    return;
  const float *xr = x + r * C, *dyr = dy + r * C;
  double mean, rstd, sumG = 0, sumGX = 0;
  if constexpr (K == 0) {
    meanRstd(xr, C, eps, lane, mean, rstd);
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
  } else {
    LaneRow<K> xv(xr, C, lane), gv(dyr, C, lane);
    xv.meanRstd(C, eps, lane, mean, rstd);
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (int64_t c = lane + kWarp * i; c < C) {
        double xhat = (xv.v[i] - mean) * rstd, g = double(gv.v[i]) * w[c];
        sumG += g;
        sumGX += g * xhat;
      }
    double meanG = warpSum(sumG) / double(C), meanGX = warpSum(sumGX) / double(C);
#pragma unroll
    for (int i = 0; i < K; ++i)
      if (int64_t c = lane + kWarp * i; c < C) {
        double xhat = (xv.v[i] - mean) * rstd;
        dx[r * C + c] = float(rstd * (double(gv.v[i]) * w[c] - meanG - xhat * meanGX));
      }
  }
  if (lane == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

/// launch(std::integral_constant<int, K>()) with the K that holds a row of C in
/// registers (gpt2_small's 768: 24 a lane), or K = 0 beyond 1,024 columns.
template <class Launch> void dispatch(int64_t C, const Launch &launch) {
  if (C <= 8 * kWarp)
    launch(std::integral_constant<int, 8>());
  else if (C <= 16 * kWarp)
    launch(std::integral_constant<int, 16>());
  else if (C <= 24 * kWarp)
    launch(std::integral_constant<int, 24>());
  else if (C <= 32 * kWarp)
    launch(std::integral_constant<int, 32>());
  else
    launch(std::integral_constant<int, 0>());
}

/// The column sums in two stages, each a grid of blocks of kColumns columns by kLanes
/// threads a column (adjacent threads read adjacent columns: coalesced): stage one gives
/// each block a chunk of kChunkRows rows, its kLanes threads of a column taking every
/// kLanes-th row; stage two sums a column's chunks, its threads taking every kLanes-th
/// chunk. In both, a column's kLanes partial sums are then added in lane order: the same
/// bits on every run.
constexpr int kColumns = 32, kLanes = 8;
constexpr int64_t kChunkRows = 64;

/// Adds the kLanes partial sums (v, w) of this thread's column in lane order; lane 0
/// gets the totals.
__device__ void addLanes(double &v, double &w) {
  __shared__ double sv[kLanes][kColumns], sw[kLanes][kColumns];
  sv[threadIdx.y][threadIdx.x] = v;
  sw[threadIdx.y][threadIdx.x] = w;
  __syncthreads();
  if (threadIdx.y != 0)
    return;
  for (int l = 1; l < kLanes; ++l) {
    v += sv[l][threadIdx.x];
    w += sw[l][threadIdx.x];
  }
}

/// Stage one: part[p][c] = Σ over rows [p kChunkRows, (p + 1) kChunkRows) of dy·xhat (and
/// of dy in part[chunks + p][c] when db is wanted), in double.
__global__ void __launch_bounds__(kColumns *kLanes)
    normColumnPartials(const float *dy, const float *x, const double *stats, double *part, bool withDb, int64_t rows,
                       int64_t C) {
  int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x, p = blockIdx.y, chunks = gridDim.y;
  int64_t end = (p + 1) * kChunkRows < rows ? (p + 1) * kChunkRows : rows;
  double dwAcc = 0, dbAcc = 0;
  if (c < C)
    for (int64_t r = p * kChunkRows + threadIdx.y; r < end; r += kLanes) {
      double g = dy[r * C + c];
      dwAcc += g * ((x[r * C + c] - stats[2 * r]) * stats[2 * r + 1]);
      dbAcc += g;
    }
  addLanes(dwAcc, dbAcc);
  if (threadIdx.y != 0 || c >= C)
    return;
  part[p * C + c] = dwAcc;
  if (withDb)
    part[(chunks + p) * C + c] = dbAcc;
}

/// Stage two: dw[c] (and db[c]) = the column's chunks summed, rounded to float.
__global__ void __launch_bounds__(kColumns *kLanes)
    normColumnTotals(const double *part, float *dw, float *db, int64_t chunks, int64_t C) {
  int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  double dwAcc = 0, dbAcc = 0;
  if (c < C)
    for (int64_t p = threadIdx.y; p < chunks; p += kLanes) {
      dwAcc += part[p * C + c];
      if (db)
        dbAcc += part[(chunks + p) * C + c];
    }
  addLanes(dwAcc, dbAcc);
  if (threadIdx.y != 0 || c >= C)
    return;
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
  unsigned columnBlocks = unsigned((C + kColumns - 1) / kColumns);
  dim3 threads(kColumns, kLanes);
  if (rows > 0)
    normColumnPartials<<<dim3(columnBlocks, unsigned(chunks)), threads, 0, stream()>>>(dy, x, stats, part,
                                                                                         db != nullptr, rows, C);
  else
    check(cudaMemsetAsync(part, 0, size_t((db ? 2 : 1) * chunks * C) * sizeof(double), stream()), what);
  normColumnTotals<<<columnBlocks, threads, 0, stream()>>>(part, dw, db, chunks, C);
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
    dispatch(C, [&](auto k) {
      layernormBwdRows<decltype(k)::value>
          <<<blocksForRows(rows), kRowThreads, 0, stream()>>>(dy, x, w, dx, stats, rows, C, eps);
    });
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
