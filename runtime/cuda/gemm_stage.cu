// planrt_cuda_gemm's staging (gemm.cpp): a 16-bit copy of a GEMM operand whose float32
// values are already bf16 (or fp16) values, with a leading dimension padded to a
// multiple of 64, so that cuBLASLt reads half the bytes, aligned, with its native 16-bit
// kernels, and the inner dimension padded with zeros. The conversion rounds to nearest,
// which changes nothing on such values.
#include "common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

using namespace planrt::cuda;

namespace {

constexpr int kThreads = 256;

/// Thread (x, y) writes columns 2x, 2x + 1 of rows y, y + gridDim.y, … of the dstRows x
/// dstCols destination: one 32-bit store, zeros outside the rows x cols source.
template <class H>
__global__ void __launch_bounds__(kThreads)
    toHalves(const float *__restrict__ src, int64_t rows, int64_t cols, int64_t ld, H *__restrict__ dst,
             int64_t dstRows, int64_t dstCols, int64_t ldd) {
  int64_t c = 2 * (int64_t(blockIdx.x) * kThreads + threadIdx.x);
  if (c >= dstCols)
    return;
  for (int64_t r = blockIdx.y; r < dstRows; r += gridDim.y) {
    const float *s = src + r * ld + c;
    H *d = dst + r * ldd + c;
    float a = r < rows && c < cols ? s[0] : 0.0f, b = r < rows && c + 1 < cols ? s[1] : 0.0f;
    if constexpr (std::is_same_v<H, __nv_bfloat16>)
      *reinterpret_cast<__nv_bfloat162 *>(d) = __floats2bfloat162_rn(a, b);
    else
      *reinterpret_cast<__half2 *>(d) = __floats2half2_rn(a, b);
  }
}

} // namespace

namespace planrt::cuda {

void *stageHalves(const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t dstRows, int64_t dstCols,
                  int64_t ldd, bool fp16) {
  auto *dst = scratch<uint16_t>(dstRows * ldd, "cudaMallocAsync (planrt_cuda_gemm's 16-bit operand)");
  if (dstRows == 0 || dstCols == 0)
    return dst;
  dim3 grid(unsigned((dstCols + 2 * kThreads - 1) / (2 * kThreads)), unsigned(dstRows < 65535 ? dstRows : 65535));
  if (fp16)
    toHalves<<<grid, kThreads, 0, stream()>>>(src, rows, cols, ld, reinterpret_cast<__half *>(dst), dstRows, dstCols,
                                              ldd);
  else
    toHalves<<<grid, kThreads, 0, stream()>>>(src, rows, cols, ld, reinterpret_cast<__nv_bfloat16 *>(dst), dstRows,
                                              dstCols, ldd);
  check(cudaGetLastError(), "planrt_cuda_gemm's 16-bit staging");
  return dst;
}

void releaseStaged(void *p) { release(p); }

} // namespace planrt::cuda
