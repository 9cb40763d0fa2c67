// Cross-entropy (mean over rows) and its backward on the CPU (planrt_kernels.h): a
// stable softmax per row (maximum subtracted), log-sum-exp and the mean in double; a
// target outside [0, V) is fatal. Logits and their gradient may be 16-bit buffers
// (storage, plan-cuda-half-storage): each row is widened to float32 first, and the
// gradient's rounded values are stored in 16 bits.
#include "common.h"
#include "planrt_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

using planrt::kernels::badIndex;

namespace {

/// Row r of the rows × V logits of type `type` (0 float32, 1 bf16, 2 fp16) as floats:
/// the row itself, or its widened copy in `wide`.
const float *rowOf(const float *logits, int64_t r, int64_t V, int32_t type, std::vector<float> &wide) {
  if (type == 0)
    return logits + r * V;
  const auto *h = reinterpret_cast<const uint16_t *>(logits) + r * V;
  wide.resize(size_t(V));
  for (int64_t j = 0; j < V; ++j)
    wide[size_t(j)] = planrt::kernels::widen16(h[j], type);
  return wide.data();
}

void checkStorage(const char *fn, int32_t type) {
  if (type < 0 || type > 2)
    planrt::kernels::fatal("%s: storage %d is not 0 (float32), 1 (bf16) or 2 (fp16)", fn, type);
}

} // namespace

extern "C" {

void planrt_k_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V,
                            int32_t storage) {
  checkStorage("planrt_k_cross_entropy", storage);
  std::vector<float> wide;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = rowOf(logits, r, V, storage, wide);
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
                                int64_t rows, int64_t V, int32_t round_to, int32_t storage) {
  if (round_to < 0 || round_to > 2)
    planrt::kernels::fatal("planrt_k_cross_entropy_bwd: round_to %d is not 0 (none), 1 (bf16) or 2 (fp16)", round_to);
  int32_t in = storage & 3, out = storage >> 2;
  checkStorage("planrt_k_cross_entropy_bwd", in);
  checkStorage("planrt_k_cross_entropy_bwd", out);
  if (out != 0 && out != round_to)
    planrt::kernels::fatal("planrt_k_cross_entropy_bwd: a 16-bit gradient (storage %d) needs round_to %d, not %d",
                           storage, out, round_to);
  if (static_cast<const void *>(logits) == dlogits && in != out)
    planrt::kernels::fatal("planrt_k_cross_entropy_bwd: a gradient written over the logits needs their storage "
                           "(storage %d)",
                           storage);
  double scale = rows > 0 ? double(*dloss) / double(rows) : 0.0;
  std::vector<float> wide, grad(out != 0 ? size_t(V) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = rowOf(logits, r, V, in, wide);
    float *dr = out != 0 ? grad.data() : dlogits + r * V;
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
    if (out != 0) {
      auto *h = reinterpret_cast<uint16_t *>(dlogits) + r * V;
      for (int64_t j = 0; j < V; ++j)
        h[j] = planrt::kernels::narrow16(dr[j], out);
    }
  }
}

} // extern "C"
