// LayerNorm and RMSNorm with their backward on the CPU (planrt_kernels.h): scalar C++,
// one row at a time, with the row's statistics and the dw/db sums in double; the
// backward recomputes mean and rstd from x.
#include "planrt_kernels.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

/// Mean and 1/sqrt(var + eps) of one row (biased variance, two passes).
void meanRstd(const float *x, int64_t C, float eps, double &mean, double &rstd) {
  double sum = 0;
  for (int64_t c = 0; c < C; ++c)
    sum += x[c];
  mean = sum / double(C);
  double sq = 0;
  for (int64_t c = 0; c < C; ++c) {
    double d = x[c] - mean;
    sq += d * d;
  }
  rstd = 1.0 / std::sqrt(sq / double(C) + double(eps));
}

/// 1/sqrt(mean(x^2) + eps) of one row.
double rmsRstd(const float *x, int64_t C, float eps) {
  double sq = 0;
  for (int64_t c = 0; c < C; ++c)
    sq += double(x[c]) * x[c];
  return 1.0 / std::sqrt(sq / double(C) + double(eps));
}

} // namespace

extern "C" {

void planrt_k_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C;
    float *yr = y + r * C;
    double mean, rstd;
    meanRstd(xr, C, eps, mean, rstd);
    for (int64_t c = 0; c < C; ++c) {
      double v = (xr[c] - mean) * rstd * w[c];
      yr[c] = float(b ? v + b[c] : v);
    }
  }
}

void planrt_k_layernorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, float *db,
                            int64_t rows, int64_t C, float eps) {
  std::vector<double> dwAcc(size_t(C), 0.0), dbAcc(size_t(C), 0.0), xhat(C);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C, *dyr = dy + r * C;
    double mean, rstd;
    meanRstd(xr, C, eps, mean, rstd);
    // With g = dy * w: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < C; ++c) {
      xhat[c] = (xr[c] - mean) * rstd;
      double g = double(dyr[c]) * w[c];
      sumG += g;
      sumGX += g * xhat[c];
      dwAcc[c] += dyr[c] * xhat[c];
      dbAcc[c] += dyr[c];
    }
    double meanG = sumG / double(C), meanGX = sumGX / double(C);
    for (int64_t c = 0; c < C; ++c)
      dx[r * C + c] = float(rstd * (double(dyr[c]) * w[c] - meanG - xhat[c] * meanGX));
  }
  for (int64_t c = 0; c < C; ++c) {
    dw[c] = float(dwAcc[c]);
    if (db)
      db[c] = float(dbAcc[c]);
  }
}

void planrt_k_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C;
    double rstd = rmsRstd(xr, C, eps);
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = float(xr[c] * rstd * w[c]);
  }
}

void planrt_k_rmsnorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, int64_t rows,
                          int64_t C, float eps) {
  std::vector<double> dwAcc(size_t(C), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C, *dyr = dy + r * C;
    double rstd = rmsRstd(xr, C, eps);
    // With g = dy * w and xhat = x * rstd: dx = rstd * (g - xhat * mean(g * xhat)).
    double sumGX = 0;
    for (int64_t c = 0; c < C; ++c) {
      double xhat = xr[c] * rstd;
      sumGX += double(dyr[c]) * w[c] * xhat;
      dwAcc[c] += dyr[c] * xhat;
    }
    double meanGX = sumGX / double(C);
    for (int64_t c = 0; c < C; ++c)
      dx[r * C + c] = float(rstd * (double(dyr[c]) * w[c] - xr[c] * rstd * meanGX));
  }
  for (int64_t c = 0; c < C; ++c)
    dw[c] = float(dwAcc[c]);
}

} // extern "C"
