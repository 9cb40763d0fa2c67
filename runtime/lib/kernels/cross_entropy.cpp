// Cross-entropy (mean over rows) and its backward on the CPU (planrt_kernels.h): a
// stable softmax per row (maximum subtracted), log-sum-exp and the mean in double; a
// target outside [0, V) is fatal.
#include "common.h"
#include "planrt_kernels.h"

#include <algorithm>
#include <cmath>

using planrt::kernels::badIndex;

extern "C" {

void planrt_k_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = logits + r * V;
    int64_t t = targets[r];
    if (t < 0 || t >= V)
      badIndex("cross-entropy target", t, V);
    float max = *std::max_element(lr, lr + V);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j)
      sum += std::exp(lr[j] - max);
    total += double(max) + std::log(sum) - double(lr[t]);
  }
  *loss = rows > 0 ? float(total / double(rows)) : 0.0f;
}

void planrt_k_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets, float *dlogits,
                                int64_t rows, int64_t V, int32_t round_to) {
  if (round_to < 0 || round_to > 2)
    planrt::kernels::fatal("planrt_k_cross_entropy_bwd: round_to %d is not 0 (none), 1 (bf16) or 2 (fp16)", round_to);
  double scale = rows > 0 ? double(*dloss) / double(rows) : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = logits + r * V;
    float *dr = dlogits + r * V;
    int64_t t = targets[r];
    if (t < 0 || t >= V)
      badIndex("cross-entropy target", t, V);
    float max = *std::max_element(lr, lr + V);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) {
      dr[j] = std::exp(lr[j] - max); // unnormalised softmax, kept for the second pass
      sum += dr[j];
    }
    double k = scale / sum;
    for (int64_t j = 0; j < V; ++j) {
      double pj = k * dr[j];
      dr[j] = planrt::kernels::roundTo(float(j == t ? pj - scale : pj), round_to);
    }
  }
}

} // extern "C"
