// Embedding and its backward on the device (lib/kernels/embedding.cpp's planrt_k_embedding*): a
// thread per output element; the table's gradient summed in row order by a thread per
// column. An id outside [0, V) is flagged and reported by finish().
#include "common.cuh"

using namespace planrt::cuda;

namespace {

__global__ void embeddingFwd(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V,
                             IndexError *flag) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * C)
    return;
  int64_t r = i / C, c = i % C, id = ids[r];
  if (id < 0 || id >= V) {
    flagIndex(flag, 1, id, V);
    return;
  }
  out[i] = table[id * C + c];
}

/// dtable[ids[r], c] += dout[r, c] in row order: a thread per column, after zeroing.
__global__ void embeddingBwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C, int64_t V,
                             IndexError *flag) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t id = ids[r];
    if (id < 0 || id >= V) {
      flagIndex(flag, 1, id, V);
      return;
    }
    dtable[id * C + c] += dout[r * C + c];
  }
}

} // namespace

extern "C" {

void planrt_cuda_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V) {
  if (rows * C > 0)
    embeddingFwd<<<blocksForItems(rows * C), 256, 0, stream()>>>(table, ids, out, rows, C, V, indexError());
  finish("planrt_cuda_embedding");
}

void planrt_cuda_embedding_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                               int64_t V) {
  check(cudaMemsetAsync(dtable, 0, size_t(V * C) * sizeof(float), stream()), "cudaMemsetAsync (embedding backward)");
  if (C > 0)
    embeddingBwd<<<blocksForItems(C), 256, 0, stream()>>>(dout, ids, dtable, rows, C, V, indexError());
  finish("planrt_cuda_embedding_bwd");
}

} // extern "C"
