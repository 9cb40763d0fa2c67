// The CUDA backend's fill and add (planrt_backend.fill, .add, .fill_async, .copy_in, .copy_out): the runtime's zeroing
// of gradients and buffers, its other fills, and its accumulation of a reduce-scatter into a ZeRO-2 gradient shard run
// on the device, so that no host access pulls managed pages to the host inside a step.
#include "common.cuh"

#include <cstring>

namespace {

__global__ void fillFloats(float *p, float value, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void addFloats(float *to, const float *from, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    to[i] += from[i];
}

__global__ void divideFloats(float *p, float divisor, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __fdiv_rn(p[i], divisor);
}

/// Block r sums x*x over range r in double: each thread a strided share, then a tree in
/// a fixed order (the same sums every run).
__global__ void sumsqRanges(const float *const *starts, const int64_t *counts, double *partial) {
  __shared__ double part[256];
  const float *p = starts[blockIdx.x];
  int64_t n = counts[blockIdx.x];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double x = p[i];
    s += x * x;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w)
      part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = part[0];
}

__global__ void sumPartials(const double *partial, int64_t n, float *out) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += partial[i];
  *out = float(s);
}

unsigned gridFor(size_t count) {
  size_t blocks = (count + 255) / 256;
  return unsigned(blocks < 65535 ? blocks : 65535);
}

} // namespace

namespace planrt::cuda {

void deviceAdd(float *to, const float *from, size_t count) {
  addFloats<<<gridFor(count), 256, 0, stream()>>>(to, from, count);
  finishAndWait("planrt_mem_add");
}

namespace {
void queueFill(void *ptr, float value, size_t count) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0) {
    check(cudaMemsetAsync(ptr, 0, count * sizeof(float), stream()), "planrt_mem_fill (cudaMemsetAsync)");
  } else {
    fillFloats<<<gridFor(count), 256, 0, stream()>>>(static_cast<float *>(ptr), value, count);
  }
}
} // namespace

void deviceFill(void *ptr, float value, size_t count) {
  queueFill(ptr, value, count);
  finishAndWait("planrt_mem_fill");
}

void deviceFillAsync(void *ptr, float value, size_t count) {
  queueFill(ptr, value, count);
  finish("planrt_mem_fill_async");
}

void deviceDivide(float *p, float divisor, size_t count) {
  divideFloats<<<gridFor(count), 256, 0, stream()>>>(p, divisor, count);
  finishAndWait("planrt_mem_divide");
}

void deviceSumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out) {
  if (n == 0) {
    check(cudaMemsetAsync(out, 0, sizeof(float), stream()), "planrt_mem_sumsq (cudaMemsetAsync)");
    return finishAndWait("planrt_mem_sumsq");
  }
  // The ranges' addresses and sizes, and their partial sums, in stream-ordered scratch.
  void *scratch = nullptr;
  size_t each = sizeof(float *) + sizeof(int64_t) + sizeof(double);
  check(cudaMallocAsync(&scratch, size_t(n) * each, stream()), "planrt_mem_sumsq (cudaMallocAsync)");
  auto **dStarts = static_cast<const float **>(scratch);
  auto *dCounts = reinterpret_cast<int64_t *>(dStarts + n);
  auto *partial = reinterpret_cast<double *>(dCounts + n);
  check(cudaMemcpyAsync(dStarts, starts, size_t(n) * sizeof(float *), cudaMemcpyHostToDevice, stream()),
        "planrt_mem_sumsq (cudaMemcpyAsync)");
  check(cudaMemcpyAsync(dCounts, counts, size_t(n) * sizeof(int64_t), cudaMemcpyHostToDevice, stream()),
        "planrt_mem_sumsq (cudaMemcpyAsync)");
  sumsqRanges<<<unsigned(n), 256, 0, stream()>>>(dStarts, dCounts, partial);
  sumPartials<<<1, 1, 0, stream()>>>(partial, n, out);
  check(cudaFreeAsync(scratch, stream()), "planrt_mem_sumsq (cudaFreeAsync)");
  finishAndWait("planrt_mem_sumsq");
}

void deviceCopyIn(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "planrt_mem_copy_in (cudaMemcpyAsync)");
  finish("planrt_mem_copy_in");
}

void deviceCopyOut(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()), "planrt_mem_copy_out (cudaMemcpyAsync)");
  finishAndWait("planrt_mem_copy_out");
}

} // namespace planrt::cuda
