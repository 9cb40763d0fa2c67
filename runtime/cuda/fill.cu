// The CUDA backend's fill (planrt_backend.fill): the runtime's zeroing of gradients and
// buffers and its other fills run on the device, so that no host write pulls managed
// pages to the host inside a step.
#include "common.cuh"

#include <cstring>

namespace {

__global__ void fillFloats(float *p, float value, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

} // namespace

namespace planrt::cuda {

void deviceFill(void *ptr, float value, size_t count) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0) {
    check(cudaMemsetAsync(ptr, 0, count * sizeof(float), stream()), "planrt_mem_fill (cudaMemsetAsync)");
  } else {
    size_t blocks = (count + 255) / 256;
    fillFloats<<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, stream()>>>(static_cast<float *>(ptr), value,
                                                                                   count);
  }
  finish("planrt_mem_fill");
}

} // namespace planrt::cuda
