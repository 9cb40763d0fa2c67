// Internal to libplanrt_cuda's kernels (one family per file: norms.cu, attention.cu,
// embedding.cu, cross_entropy.cu): warp reductions, the grid of one warp per row, the
// out-of-range index flag, stream-ordered scratch memory. Each kernel file is the device
// version of a family of runtime/lib/kernels/ (one file per family) (the CPU reference, planrt_kernels.h);
// test/gpu/kernels_test.cpp compares the two and times each. Written for correctness
// first: row reductions in double as the CPU's (cross-entropy: its exponentials in
// float, summed in double), a warp (cross-entropy: a block) per row, no atomics in
// sums (every run gives the same bits).
#ifndef PLANRT_CUDA_COMMON_CUH
#define PLANRT_CUDA_COMMON_CUH

#include "device.h"

#include "planrt_cuda.h"

#include <cmath>
#include <cstdio>

namespace planrt::cuda {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

__device__ inline double warpSum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// The item (row, query, key) of this thread's warp, and the thread's lane in it.
__device__ inline int64_t warpItem() { return int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; }
__device__ inline int laneId() { return int(threadIdx.x % kWarp); }

/// Grid of warps, one per row.
inline unsigned blocksForRows(int64_t rows) { return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }
/// Grid of threads, one per item, 256 a block.
inline unsigned blocksForItems(int64_t n) { return unsigned((n + 255) / 256); }

__device__ inline void flagIndex(IndexError *flag, int kind, int64_t value, int64_t bound) {
  if (atomicCAS(&flag->kind, 0, kind) == 0) {
    flag->value = value;
    flag->bound = bound;
  }
}

/// Scratch device memory for one call (stream-ordered, from the device's default pool,
/// which keeps what it frees: each call asks for the same sizes again).
template <class T> T *scratch(int64_t n, const char *what) {
  void *p = nullptr;
  check(cudaMallocAsync(&p, size_t(n > 0 ? n : 1) * sizeof(T), stream()), what);
  return static_cast<T *>(p);
}
inline void release(void *p) { check(cudaFreeAsync(p, stream()), "cudaFreeAsync"); }

constexpr unsigned kRowThreads = kWarp * kWarpsPerBlock;

} // namespace planrt::cuda

#endif // PLANRT_CUDA_COMMON_CUH
