// Embedding and its backward on the CPU (planrt_kernels.h): a row gather from the
// table, and a scatter-add into the zeroed table gradient; an id outside [0, V) is fatal.
#include "common.h"
#include "planrt_kernels.h"

#include <algorithm>
#include <cstring>

using planrt::kernels::badIndex;

extern "C" {

void planrt_k_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t id = ids[r];
    if (id < 0 || id >= V)
      badIndex("embedding id", id, V);
    std::memcpy(out + r * C, table + id * C, size_t(C) * sizeof(float));
  }
}

void planrt_k_embedding_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C, int64_t V) {
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] < 0 || ids[r] >= V)
      badIndex("embedding id", ids[r], V);
  std::fill(dtable, dtable + V * C, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float *dst = dtable + int64_t(ids[r]) * C;
    const float *src = dout + r * C;
    for (int64_t c = 0; c < C; ++c)
      dst[c] += src[c];
  }
}

} // extern "C"
