// planrt_cuda_gemm's staging (gemm.cpp): a 16-bit copy of a GEMM operand whose float32
// values are already bf16 (or fp16) values, with a leading dimension padded to a
// multiple of 64, so that cuBLASLt reads half the bytes, aligned, with its native 16-bit
// kernels, and the inner dimension padded with zeros. The conversion rounds to nearest,
// which changes nothing on such values; a 16-bit operand (PLANRT_GEMM_HALF_A / _B) that
// needs the padding is copied so, bit for bit.
// And the result of a GEMM the compiler asked for rounded (PLANRT_GEMM_ROUND_RESULT):
// cuBLASLt's 16-bit result widened to float32, or a float32 result rounded in place, or
// copied out of its padded scratch into a 16-bit C (PLANRT_GEMM_HALF_C).
#include "common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

using namespace planrt::cuda;

namespace {

constexpr int kThreads = 256;

/// Thread (x, y) writes columns 2x, 2x + 1 of rows y, y + gridDim.y, … of the dstRows x
/// dstCols destination: one 32-bit store, zeros outside the rows x cols source.
/// A 16-bit source (S = uint16_t) is copied as it is, bit for bit (H is then uint16_t too).
template <class S, class H>
__global__ void __launch_bounds__(kThreads)
    toHalves(const S *__restrict__ src, int64_t rows, int64_t cols, int64_t ld, H *__restrict__ dst,
             int64_t dstRows, int64_t dstCols, int64_t ldd) {
  int64_t c = 2 * (int64_t(blockIdx.x) * kThreads + threadIdx.x);
  if (c >= dstCols)
    return;
  for (int64_t r = blockIdx.y; r < dstRows; r += gridDim.y) {
    const S *s = src + r * ld + c;
    H *d = dst + r * ldd + c;
    S a = r < rows && c < cols ? s[0] : S(0), b = r < rows && c + 1 < cols ? s[1] : S(0);
    if constexpr (std::is_same_v<S, uint16_t>)
      *reinterpret_cast<uint32_t *>(d) = uint32_t(a) | uint32_t(b) << 16;
    else if constexpr (std::is_same_v<H, __nv_bfloat16>)
      *reinterpret_cast<__nv_bfloat162 *>(d) = __floats2bfloat162_rn(a, b);
    else
      *reinterpret_cast<__half2 *>(d) = __floats2half2_rn(a, b);
  }
}

/// Thread (x, y) copies column x of rows y, y + gridDim.y, … of the rows x cols 16-bit src.
__global__ void __launch_bounds__(kThreads)
    copyRows(const uint16_t *__restrict__ src, int64_t rows, int64_t cols, int64_t lds, uint16_t *__restrict__ dst,
             int64_t ldd) {
  int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= cols)
    return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    dst[r * ldd + c] = src[r * lds + c];
}

/// Thread (x, y) widens columns 2x, 2x + 1 of rows y, y + gridDim.y, … of the rows x cols
/// 16-bit src (leading dimension lds, even) into the float32 dst (leading dimension ldd).
template <class H>
__global__ void __launch_bounds__(kThreads)
    fromHalves(const H *__restrict__ src, int64_t rows, int64_t cols, int64_t lds, float *__restrict__ dst,
               int64_t ldd) {
  int64_t c = 2 * (int64_t(blockIdx.x) * kThreads + threadIdx.x);
  if (c >= cols)
    return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float2 v;
    if constexpr (std::is_same_v<H, __nv_bfloat16>)
      v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(src + r * lds + c));
    else
      v = __half22float2(*reinterpret_cast<const __half2 *>(src + r * lds + c));
    float *d = dst + r * ldd + c;
    d[0] = v.x;
    if (c + 1 < cols)
      d[1] = v.y;
  }
}

/// Each element of the rows x cols float32 matrix at p (leading dimension ld) rounded to
/// the nearest bf16 (fp16) value, ties to even.
template <class H>
__global__ void __launch_bounds__(kThreads) roundInPlace(float *__restrict__ p, int64_t rows, int64_t cols, int64_t ld) {
  int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= cols)
    return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float &x = p[r * ld + c];
    if constexpr (std::is_same_v<H, __nv_bfloat16>)
      x = __bfloat162float(__float2bfloat16_rn(x));
    else
      x = __half2float(__float2half_rn(x));
  }
}

unsigned rowBlocks(int64_t rows) { return unsigned(rows < 65535 ? rows : 65535); }

} // namespace

namespace planrt::cuda {

void *halvesScratch(int64_t elements) {
  return scratch<uint16_t>(elements, "cudaMallocAsync (planrt_cuda_gemm's 16-bit result)");
}

void widenHalves(const void *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd, bool fp16) {
  if (rows == 0 || cols == 0)
    return;
  dim3 grid(unsigned((cols + 2 * kThreads - 1) / (2 * kThreads)), rowBlocks(rows));
  if (fp16)
    fromHalves<<<grid, kThreads, 0, stream()>>>(static_cast<const __half *>(src), rows, cols, lds, dst, ldd);
  else
    fromHalves<<<grid, kThreads, 0, stream()>>>(static_cast<const __nv_bfloat16 *>(src), rows, cols, lds, dst, ldd);
  check(cudaGetLastError(), "planrt_cuda_gemm's widening of its 16-bit result");
}

void roundToHalves(float *p, int64_t rows, int64_t cols, int64_t ld, bool fp16) {
  if (rows == 0 || cols == 0)
    return;
  dim3 grid(unsigned((cols + kThreads - 1) / kThreads), rowBlocks(rows));
  if (fp16)
    roundInPlace<__half><<<grid, kThreads, 0, stream()>>>(p, rows, cols, ld);
  else
    roundInPlace<__nv_bfloat16><<<grid, kThreads, 0, stream()>>>(p, rows, cols, ld);
  check(cudaGetLastError(), "planrt_cuda_gemm's rounding of its result");
}

void *stageHalves(const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t dstRows, int64_t dstCols,
                  int64_t ldd, bool fp16) {
  auto *dst = scratch<uint16_t>(dstRows * ldd, "cudaMallocAsync (planrt_cuda_gemm's 16-bit operand)");
  if (dstRows == 0 || dstCols == 0)
    return dst;
  dim3 grid(unsigned((dstCols + 2 * kThreads - 1) / (2 * kThreads)), rowBlocks(dstRows));
  if (fp16)
    toHalves<<<grid, kThreads, 0, stream()>>>(src, rows, cols, ld, reinterpret_cast<__half *>(dst), dstRows, dstCols,
                                              ldd);
  else
    toHalves<<<grid, kThreads, 0, stream()>>>(src, rows, cols, ld, reinterpret_cast<__nv_bfloat16 *>(dst), dstRows,
                                              dstCols, ldd);
  check(cudaGetLastError(), "planrt_cuda_gemm's 16-bit staging");
  return dst;
}

void *stageHalves(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, int64_t dstRows, int64_t dstCols,
                  int64_t ldd) {
  auto *dst = scratch<uint16_t>(dstRows * ldd, "cudaMallocAsync (planrt_cuda_gemm's 16-bit operand)");
  if (dstRows == 0 || dstCols == 0)
    return dst;
  dim3 grid(unsigned((dstCols + 2 * kThreads - 1) / (2 * kThreads)), rowBlocks(dstRows));
  toHalves<<<grid, kThreads, 0, stream()>>>(src, rows, cols, ld, dst, dstRows, dstCols, ldd);
  check(cudaGetLastError(), "planrt_cuda_gemm's copy of a 16-bit operand");
  return dst;
}

void copyHalves(const void *src, int64_t rows, int64_t cols, int64_t lds, void *dst, int64_t ldd) {
  if (rows == 0 || cols == 0)
    return;
  dim3 grid(unsigned((cols + kThreads - 1) / kThreads), rowBlocks(rows));
  copyRows<<<grid, kThreads, 0, stream()>>>(static_cast<const uint16_t *>(src), rows, cols, lds,
                                            static_cast<uint16_t *>(dst), ldd);
  check(cudaGetLastError(), "planrt_cuda_gemm's copy of its 16-bit result");
}

void releaseStaged(void *p) { release(p); }

} // namespace planrt::cuda
