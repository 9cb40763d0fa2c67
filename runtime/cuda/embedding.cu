// Embedding and its backward on the device (lib/kernels/embedding.cpp's planrt_k_embedding*): a
// thread per output element; the table's gradient as a sort and a segmented sum: the rows'
// indices sorted by id (CUB's radix sort, which is stable), then a thread per (id, column)
// adding its rows' gradients in row order from zero — the CPU's order, so the same bits.
// An id outside [0, V) is flagged and reported by finish().
#include "common.cuh"

#include <cub/device/device_radix_sort.cuh>

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

__global__ void iota(int32_t *out, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = int32_t(i);
}

/// dtable[id, c] = Σ dout[r, c] over the rows r with ids[r] = id, in row order from zero:
/// a thread per (sorted position, column); the first position of each id's run sums it.
__global__ void embeddingBwdSegments(const float *dout, const int32_t *sortedIds, const int32_t *rowsById,
                                     float *dtable, int64_t rows, int64_t C, int64_t V, IndexError *flag) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * C)
    return;
  int64_t i = e / C, c = e % C;
  int32_t id = sortedIds[i];
  if (i > 0 && sortedIds[i - 1] == id)
    return; // not the first row of its id
  if (id < 0 || id >= V) {
    flagIndex(flag, 1, id, V);
    return;
  }
  float acc = 0.0f;
  for (int64_t j = i; j < rows && sortedIds[j] == id; ++j)
    acc += dout[int64_t(rowsById[j]) * C + c];
  dtable[int64_t(id) * C + c] = acc;
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
  const char *what = "planrt_cuda_embedding_bwd";
  check(cudaMemsetAsync(dtable, 0, size_t(V * C) * sizeof(float), stream()), what);
  if (rows > 0 && C > 0) {
    if (rows > INT32_MAX)
      check(cudaErrorInvalidValue, "planrt_cuda_embedding_bwd: more than 2^31 rows");
    cudaStream_t st = stream();
    int32_t *order = scratch<int32_t>(rows, what), *sortedIds = scratch<int32_t>(rows, what),
            *rowsById = scratch<int32_t>(rows, what);
    iota<<<blocksForItems(rows), 256, 0, st>>>(order, rows);
    size_t bytes = 0;
    check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, ids, sortedIds, order, rowsById, int(rows), 0, 32, st),
          what);
    unsigned char *temp = scratch<unsigned char>(int64_t(bytes), what);
    check(cub::DeviceRadixSort::SortPairs(temp, bytes, ids, sortedIds, order, rowsById, int(rows), 0, 32, st), what);
    embeddingBwdSegments<<<blocksForItems(rows * C), 256, 0, st>>>(dout, sortedIds, rowsById, dtable, rows, C, V,
                                                                   indexError());
    release(temp);
    release(order);
    release(sortedIds);
    release(rowsById);
  }
  finish(what);
}

} // extern "C"
