// Convolution, pooling and batch normalisation on the CPU (planrt_kernels.h, "Vision"):
// NCHW images, float32. A convolution is one cblas_sgemm (OpenBLAS) per image over an
// im2col matrix [C*R*R, P*Q] of the image (the image itself for a 1x1, stride 1,
// unpadded convolution); its data gradient scatters the columns back (col2im). Max
// pooling picks the maximum PyTorch's CPU max_pool2d picks (the first in row-major
// order; a NaN beats any number, the last NaN of a window winning), which its backward
// recomputes from x. The batch-norm kernels are split where SyncBatchNorm communicates:
// per channel, the statistics as the mean and the biased variance (two passes in double:
// a mean far from 0 costs no precision), which planrt_k_batchnorm_combine merges over
// ranks, and the gradient sums in double; all stored as float. No threads beyond
// OpenBLAS's own: the results do not depend on the scheduling. A bad shape is fatal
// ("planrt: error: ...").
#include "common.h"
#include "planrt_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

using planrt::kernels::fatal;

namespace {

/// The geometry of a window (convolution or pooling) sliding over an H x W plane: an
/// R x R window at output (p, q) covers rows p*stride - pad .. + R - 1 and columns
/// q*stride - pad .. + R - 1, whatever of it lies outside the plane being padding.
struct Window {
  int64_t H, W, R, stride, pad;
  int64_t P, Q; ///< output rows and columns: (H + 2 pad - R) / stride + 1, likewise

  /// A 1x1, stride 1, unpadded convolution: its im2col matrix is the image itself.
  bool pointwise() const { return R == 1 && stride == 1 && pad == 0; }
};

/// The geometry of op's window; a non-positive size or stride, a negative pad, a pad
/// beyond R / 2 (PyTorch's limit: every window then meets the plane), or a window larger
/// than the padded plane is fatal.
Window window(const char *op, int64_t N, int64_t C, int64_t H, int64_t W, int64_t R, int64_t stride, int64_t pad) {
  if (N <= 0 || C <= 0 || H <= 0 || W <= 0 || R <= 0 || stride <= 0 || pad < 0)
    fatal("%s: bad shape N=%lld C=%lld H=%lld W=%lld R=%lld stride=%lld pad=%lld (sizes and stride must be "
          "positive, pad non-negative)",
          op, (long long)N, (long long)C, (long long)H, (long long)W, (long long)R, (long long)stride, (long long)pad);
  if (pad > R / 2)
    fatal("%s: pad %lld exceeds half the %lldx%lld window (pad <= R / 2)", op, (long long)pad, (long long)R,
          (long long)R);
  if (R > H + 2 * pad || R > W + 2 * pad)
    fatal("%s: the %lldx%lld window does not fit the %lldx%lld input padded by %lld", op, (long long)R, (long long)R,
          (long long)H, (long long)W, (long long)pad);
  return {H, W, R, stride, pad, (H + 2 * pad - R) / stride + 1, (W + 2 * pad - R) / stride + 1};
}

/// A convolution's window, with K checked too, and its GEMMs' dimensions (K, C*R*R,
/// P*Q) within cblas_sgemm's int.
Window convWindow(const char *op, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t stride,
                  int64_t pad) {
  if (K <= 0)
    fatal("%s: bad shape K=%lld (the output channels must be positive)", op, (long long)K);
  Window g = window(op, N, C, H, W, R, stride, pad);
  if (K > INT_MAX || C * R * R > INT_MAX || g.P * g.Q > INT_MAX)
    fatal("%s: a GEMM dimension (K=%lld, C*R*R=%lld, P*Q=%lld) exceeds %d", op, (long long)K, (long long)(C * R * R),
          (long long)(g.P * g.Q), INT_MAX);
  return g;
}

/// The output positions o in [0, n) whose input o*stride + off lies in [0, size):
/// [lo, hi) (empty when lo == hi).
struct Span {
  int64_t lo, hi;
};
Span inside(int64_t off, int64_t size, int64_t stride, int64_t n) {
  int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  int64_t hi = off >= size ? 0 : std::min(n, (size - 1 - off) / stride + 1);
  return {std::min(lo, hi), hi};
}

/// cols [C*R*R, P*Q] of one image x [C, H, W]: row (c, kh, kw) holds, at column
/// (p, q), x[c, p*stride - pad + kh, q*stride - pad + kw], 0 in the padding.
void im2col(const float *x, int64_t C, const Window &g, float *cols) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t kh = 0; kh < g.R; ++kh) {
      Span ps = inside(kh - g.pad, g.H, g.stride, g.P);
      for (int64_t kw = 0; kw < g.R; ++kw) {
        Span qs = inside(kw - g.pad, g.W, g.stride, g.Q);
        float *row = cols + ((c * g.R + kh) * g.R + kw) * g.P * g.Q;
        std::fill(row, row + ps.lo * g.Q, 0.0f);
        for (int64_t p = ps.lo; p < ps.hi; ++p) {
          const float *in = x + (c * g.H + p * g.stride - g.pad + kh) * g.W;
          float *out = row + p * g.Q;
          std::fill(out, out + qs.lo, 0.0f);
          if (g.stride == 1) // a contiguous run (the common 3 × 3, stride 1)
            std::copy(in + qs.lo - g.pad + kw, in + qs.hi - g.pad + kw, out + qs.lo);
          else
            for (int64_t q = qs.lo; q < qs.hi; ++q)
              out[q] = in[q * g.stride - g.pad + kw];
          std::fill(out + qs.hi, out + g.Q, 0.0f);
        }
        std::fill(row + ps.hi * g.Q, row + g.P * g.Q, 0.0f);
      }
    }
}

/// im2col's adjoint: adds each element of cols [C*R*R, P*Q] into the element of
/// dx [C, H, W] it was read from (padding drops it). dx is not zeroed here.
void col2im(const float *cols, int64_t C, const Window &g, float *dx) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t kh = 0; kh < g.R; ++kh) {
      Span ps = inside(kh - g.pad, g.H, g.stride, g.P);
      for (int64_t kw = 0; kw < g.R; ++kw) {
        Span qs = inside(kw - g.pad, g.W, g.stride, g.Q);
        const float *row = cols + ((c * g.R + kh) * g.R + kw) * g.P * g.Q;
        for (int64_t p = ps.lo; p < ps.hi; ++p) {
          float *out = dx + (c * g.H + p * g.stride - g.pad + kh) * g.W;
          const float *in = row + p * g.Q;
          if (g.stride == 1) { // contiguous: vectorised
            float *o = out + (qs.lo - g.pad + kw);
            for (int64_t q = qs.lo; q < qs.hi; ++q)
              o[q - qs.lo] += in[q];
          } else {
            for (int64_t q = qs.lo; q < qs.hi; ++q)
              out[q * g.stride - g.pad + kw] += in[q];
          }
        }
      }
    }
}

/// The flat index (ih * W + iw) in plane x [H, W] of the maximum of output (p, q)'s
/// window (which meets the plane, pad <= R / 2). As PyTorch's CPU max_pool2d: the
/// first strictly greater value in row-major order replaces the maximum, and so does
/// any NaN (so the last NaN of a window wins); a window of -inf only gives its first
/// element.
/// The rows [h0, h1) and columns [w0, w1) of output (p, q)'s window inside the image.
struct Rect {
  int64_t h0, h1, w0, w1;
};
Rect windowOf(const Window &g, int64_t p, int64_t q) {
  int64_t h = p * g.stride - g.pad, w = q * g.stride - g.pad;
  return {std::max<int64_t>(h, 0), std::min(h + g.R, g.H), std::max<int64_t>(w, 0), std::min(w + g.R, g.W)};
}

int64_t windowArgmax(const float *x, const Window &g, int64_t p, int64_t q) {
  auto [h0, h1, w0, w1] = windowOf(g, p, q);
  int64_t best = h0 * g.W + w0;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) {
      float v = x[ih * g.W + iw];
      if (v > max || std::isnan(v)) {
        max = v;
        best = ih * g.W + iw;
      }
    }
  return best;
}

/// The value at windowArgmax: the window's maximum, or its last NaN if it holds one,
/// without the index bookkeeping (the forward pass needs the value alone).
float windowMax(const float *x, const Window &g, int64_t p, int64_t q) {
  auto [h0, h1, w0, w1] = windowOf(g, p, q);
  float max = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) {
      float v = x[ih * g.W + iw];
      max = v > max ? v : max;
      nan |= v != v;
    }
  return nan ? x[windowArgmax(x, g, p, q)] : max;
}

/// Fatal unless the sizes of a per-channel kernel (N, C and HW) are positive.
void checkChannels(const char *op, int64_t N, int64_t C, int64_t HW) {
  if (N <= 0 || C <= 0 || HW <= 0)
    fatal("%s: bad shape N=%lld C=%lld HW=%lld (all must be positive)", op, (long long)N, (long long)C, (long long)HW);
}

/// f(i) for every i in [0, n), the indices split in contiguous ranges over as many threads
/// as OpenBLAS uses (this thread one of them) when the n items of `itemFloats` floats each
/// are worth it. Each i writes only its own outputs, so the results do not depend on the
/// split; the other cores would otherwise wait on these loops between GEMMs.
template <typename F> void forEach(int64_t n, int64_t itemFloats, F f) {
  int64_t threads = std::min<int64_t>(openblas_get_num_threads(), n);
  auto range = [&](int64_t t) {
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i)
      f(i);
  };
  if (threads <= 1 || n * itemFloats < (int64_t(1) << 15)) {
    for (int64_t i = 0; i < n; ++i)
      f(i);
    return;
  }
  std::vector<std::thread> others;
  for (int64_t t = 1; t < threads; ++t)
    others.emplace_back(range, t);
  range(0);
  for (std::thread &t : others)
    t.join();
}

/// Σ f(i) over i in [0, n), in double, as four interleaved partial sums: independent
/// chains of additions the core overlaps (one chain waits on each add's latency).
template <typename F> double sum4(int64_t n, F f) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += f(i);
    s1 += f(i + 1);
    s2 += f(i + 2);
    s3 += f(i + 3);
  }
  for (; i < n; ++i)
    s0 += f(i);
  return (s0 + s1) + (s2 + s3);
}

/// Channel c's mean and 1/sqrt(var + eps) from stats [2, C] (mean, biased variance).
void meanRstd(const float *stats, int64_t C, int64_t c, float eps, double &mean, double &rstd) {
  mean = stats[c];
  rstd = 1.0 / std::sqrt(double(stats[C + c]) + double(eps));
}

/// y = (x - mean) * rstd * w + b over channel c's planes of x [N, C, HW], in float
/// (vectorised): x - mean first, so that a large mean cancels exactly.
void normalise(const float *x, float *y, int64_t N, int64_t C, int64_t HW, int64_t c, double mean, double rstd,
               double w, double b) {
  const float m = float(mean), scale = float(rstd * w), shift = float(b);
  for (int64_t n = 0; n < N; ++n) {
    const float *xp = x + (n * C + c) * HW;
    float *yp = y + (n * C + c) * HW;
    for (int64_t i = 0; i < HW; ++i)
      yp[i] = (xp[i] - m) * scale + shift;
  }
}

/// The im2col matrix [C*R*R, P*Q] of one image, built in cols; a pointwise window's is
/// the image itself.
const float *columns(const float *image, int64_t C, const Window &g, std::vector<float> &cols) {
  if (g.pointwise())
    return image;
  im2col(image, C, g, cols.data());
  return cols.data();
}

} // namespace

extern "C" {

void planrt_k_conv2d(const float *x, const float *w, const float *b, float *y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t K, int64_t R, int64_t stride, int64_t pad) {
  const Window g = convWindow("conv2d", N, C, H, W, K, R, stride, pad);
  const int64_t CRR = C * R * R, PQ = g.P * g.Q;
  std::vector<float> cols(g.pointwise() ? 0 : size_t(CRR * PQ));
  for (int64_t n = 0; n < N; ++n) {
    const float *B = columns(x + n * C * H * W, C, g, cols);
    // y_n [K, P*Q] = w [K, C*R*R] . cols [C*R*R, P*Q], then the bias per channel.
    float *yn = y + n * K * PQ;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(K), int(PQ), int(CRR), 1.0f, w, int(CRR), B, int(PQ),
                0.0f, yn, int(PQ));
    if (b)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t i = 0; i < PQ; ++i)
          yn[k * PQ + i] += b[k];
  }
}

void planrt_k_conv2d_bwd_data(const float *dy, const float *w, float *dx, int64_t N, int64_t C, int64_t H, int64_t W,
                              int64_t K, int64_t R, int64_t stride, int64_t pad) {
  const Window g = convWindow("conv2d_bwd_data", N, C, H, W, K, R, stride, pad);
  const int64_t CRR = C * R * R, PQ = g.P * g.Q;
  std::vector<float> cols(g.pointwise() ? 0 : size_t(CRR * PQ));
  for (int64_t n = 0; n < N; ++n) {
    float *dxn = dx + n * C * H * W;
    // cols [C*R*R, P*Q] = w^T . dy_n [K, P*Q]; pointwise, that is dx_n itself.
    float *dcols = g.pointwise() ? dxn : cols.data();
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(CRR), int(PQ), int(K), 1.0f, w, int(CRR), dy + n * K * PQ,
                int(PQ), 0.0f, dcols, int(PQ));
    if (!g.pointwise()) {
      std::fill(dxn, dxn + C * H * W, 0.0f);
      col2im(dcols, C, g, dxn);
    }
  }
}

void planrt_k_conv2d_bwd_filter(const float *dy, const float *x, float *dw, float *db, int64_t N, int64_t C, int64_t H,
                                int64_t W, int64_t K, int64_t R, int64_t stride, int64_t pad) {
  const Window g = convWindow("conv2d_bwd_filter", N, C, H, W, K, R, stride, pad);
  const int64_t CRR = C * R * R, PQ = g.P * g.Q;
  std::vector<float> cols(g.pointwise() ? 0 : size_t(CRR * PQ));
  for (int64_t n = 0; n < N; ++n) {
    const float *B = columns(x + n * C * H * W, C, g, cols);
    // dw [K, C*R*R] (+)= dy_n [K, P*Q] . cols^T: the first image overwrites dw.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(K), int(CRR), int(PQ), 1.0f, dy + n * K * PQ, int(PQ), B,
                int(PQ), n == 0 ? 0.0f : 1.0f, dw, int(CRR));
  }
  if (!db)
    return;
  for (int64_t k = 0; k < K; ++k) {
    double sum = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < PQ; ++i)
        sum += dy[(n * K + k) * PQ + i];
    db[k] = float(sum);
  }
}

void planrt_k_maxpool2d(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t R, int64_t stride,
                        int64_t pad) {
  const Window g = window("maxpool2d", N, C, H, W, R, stride, pad);
  forEach(N * C, H * W, [&](int64_t plane) {
    const float *xp = x + plane * H * W;
    float *yp = y + plane * g.P * g.Q;
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q)
        yp[p * g.Q + q] = windowMax(xp, g, p, q);
  });
}

void planrt_k_maxpool2d_bwd(const float *dy, const float *x, float *dx, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t R, int64_t stride, int64_t pad) {
  const Window g = window("maxpool2d_bwd", N, C, H, W, R, stride, pad);
  forEach(N * C, H * W, [&](int64_t plane) {
    const float *xp = x + plane * H * W, *dyp = dy + plane * g.P * g.Q;
    float *dxp = dx + plane * H * W;
    std::fill(dxp, dxp + H * W, 0.0f);
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q)
        dxp[windowArgmax(xp, g, p, q)] += dyp[p * g.Q + q];
  });
}

void planrt_k_avgpool(const float *x, float *y, int64_t N, int64_t C, int64_t HW) {
  checkChannels("avgpool", N, C, HW);
  for (int64_t plane = 0; plane < N * C; ++plane) {
    double sum = 0;
    for (int64_t i = 0; i < HW; ++i)
      sum += x[plane * HW + i];
    y[plane] = float(sum / double(HW));
  }
}

void planrt_k_avgpool_bwd(const float *dy, float *dx, int64_t N, int64_t C, int64_t HW) {
  checkChannels("avgpool_bwd", N, C, HW);
  for (int64_t plane = 0; plane < N * C; ++plane) {
    float g = float(double(dy[plane]) / double(HW));
    std::fill(dx + plane * HW, dx + (plane + 1) * HW, g);
  }
}

void planrt_k_batchnorm_stats(const float *x, float *stats, int64_t N, int64_t C, int64_t HW) {
  checkChannels("batchnorm_stats", N, C, HW);
  const double count = double(N * HW);
  forEach(C, N * HW, [&](int64_t c) {
    // The mean, then the squared deviations from it: no cancellation, whatever the mean.
    double sum = 0, sumsq = 0;
    for (int64_t n = 0; n < N; ++n) {
      const float *xp = x + (n * C + c) * HW;
      sum += sum4(HW, [&](int64_t i) { return double(xp[i]); });
    }
    const double mean = sum / count;
    for (int64_t n = 0; n < N; ++n) {
      const float *xp = x + (n * C + c) * HW;
      sumsq += sum4(HW, [&](int64_t i) { return (xp[i] - mean) * (xp[i] - mean); });
    }
    stats[c] = float(mean);
    stats[C + c] = float(sumsq / count);
  });
}

void planrt_k_batchnorm_combine(const float *gathered, float *stats, int64_t ranks, int64_t C) {
  if (ranks <= 0 || C <= 0)
    fatal("batchnorm_combine: bad shape ranks=%lld C=%lld (both must be positive)", (long long)ranks, (long long)C);
  for (int64_t c = 0; c < C; ++c) {
    // Equal counts: the union's mean is the mean of the means, and its variance the mean
    // of each rank's about the union's mean (var_r + (mean_r - mean)^2).
    double sum = 0, sumsq = 0;
    for (int64_t r = 0; r < ranks; ++r)
      sum += gathered[r * 2 * C + c];
    const double mean = sum / double(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      double d = gathered[r * 2 * C + c] - mean;
      sumsq += gathered[r * 2 * C + C + c] + d * d;
    }
    stats[c] = float(mean);
    stats[C + c] = float(sumsq / double(ranks));
  }
}

void planrt_k_batchnorm_fwd(const float *x, const float *stats, const float *w, const float *b, float *y, int64_t N,
                            int64_t C, int64_t HW, float eps) {
  checkChannels("batchnorm_fwd", N, C, HW);
  forEach(C, N * HW, [&](int64_t c) {
    double mean, rstd;
    meanRstd(stats, C, c, eps, mean, rstd);
    normalise(x, y, N, C, HW, c, mean, rstd, w[c], b[c]);
  });
}

void planrt_k_batchnorm_bwd_stats(const float *dy, const float *x, const float *stats, float *dstats, int64_t N,
                                  int64_t C, int64_t HW, float eps) {
  checkChannels("batchnorm_bwd_stats", N, C, HW);
  forEach(C, N * HW, [&](int64_t c) {
    double mean, rstd, sumDy = 0, sumDyXhat = 0;
    meanRstd(stats, C, c, eps, mean, rstd);
    for (int64_t n = 0; n < N; ++n) {
      const float *xp = x + (n * C + c) * HW, *dyp = dy + (n * C + c) * HW;
      sumDy += sum4(HW, [&](int64_t i) { return double(dyp[i]); });
      sumDyXhat += sum4(HW, [&](int64_t i) { return dyp[i] * ((xp[i] - mean) * rstd); });
    }
    dstats[c] = float(sumDy);
    dstats[C + c] = float(sumDyXhat);
  });
}

void planrt_k_batchnorm_bwd_data(const float *dy, const float *x, const float *stats, const float *w,
                                 const float *dstats, float *dx, int64_t N, int64_t C, int64_t HW, int64_t count,
                                 float eps) {
  checkChannels("batchnorm_bwd_data", N, C, HW);
  if (count <= 0)
    fatal("batchnorm_bwd_data: bad count=%lld (must be positive)", (long long)count);
  forEach(C, N * HW, [&](int64_t c) {
    double mean, rstd;
    meanRstd(stats, C, c, eps, mean, rstd);
    // dx = w rstd (dy - sum(dy) / count - xhat sum(dy xhat) / count).
    // In float (vectorised), x - mean first as in the forward pass.
    const float scale = float(w[c] * rstd), meanDy = float(dstats[c] / double(count)),
                perX = float(rstd * dstats[C + c] / double(count)), m = float(mean);
    for (int64_t n = 0; n < N; ++n) {
      const float *xp = x + (n * C + c) * HW, *dyp = dy + (n * C + c) * HW;
      float *dxp = dx + (n * C + c) * HW;
      for (int64_t i = 0; i < HW; ++i)
        dxp[i] = scale * (dyp[i] - meanDy - (xp[i] - m) * perX);
    }
  });
}

void planrt_k_batchnorm_eval(const float *x, const float *mean, const float *var, const float *w, const float *b,
                             float *y, int64_t N, int64_t C, int64_t HW, float eps) {
  checkChannels("batchnorm_eval", N, C, HW);
  for (int64_t c = 0; c < C; ++c)
    normalise(x, y, N, C, HW, c, mean[c], 1.0 / std::sqrt(double(var[c]) + double(eps)), w[c], b[c]);
}

void planrt_k_batchnorm_running(const float *stats, float *mean, float *var, int64_t C, int64_t count, float momentum) {
  if (C <= 0 || count < 2)
    fatal("batchnorm_running: bad shape C=%lld count=%lld (C must be positive, and the unbiased variance needs "
          "count >= 2)",
          (long long)C, (long long)count);
  const double m = momentum;
  for (int64_t c = 0; c < C; ++c) {
    double unbiased = double(stats[C + c]) * double(count) / double(count - 1);
    mean[c] = float((1.0 - m) * mean[c] + m * double(stats[c]));
    var[c] = float((1.0 - m) * var[c] + m * unbiased);
  }
}

} // extern "C"
