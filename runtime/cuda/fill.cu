// The CUDA backend's fill and add (planrt_backend.fill, .add, .fill_async, .copy_in): the runtime's zeroing of
// gradients and buffers, its other fills, and its accumulation of a reduce-scatter into a
// ZeRO-2 gradient shard run on the device, so that no host access pulls managed pages to
// the host inside a step.
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

void deviceCopyIn(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "planrt_mem_copy_in (cudaMemcpyAsync)");
  finish("planrt_mem_copy_in");
}

} // namespace planrt::cuda
