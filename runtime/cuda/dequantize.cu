// QLoRA's NF4 dequantization on the device (lib/kernels/nf4.cpp's planrt_k_dequant_nf4):
// a thread per value, the block's absmax recomputed by each of its threads. The
// product and sum of the double-quantized absmax are rounded one at a time
// (__fmul_rn, __fadd_rn: no fused multiply-add), as on the CPU, so both give the same bits.
#include "common.cuh"

#include "planrt_nf4.h"

using namespace planrt::cuda;

namespace {

__constant__ float kLevels[16] = {PLANRT_NF4_LEVELS};

__global__ void dequantNf4(const uint8_t *region, float *w, int64_t n, int64_t block, int32_t dbl) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  int64_t b = i / block;
  float a;
  if (dbl) {
    const float *scales = reinterpret_cast<const float *>(region + planrt_nf4_scales_at(n, block));
    float mean = *reinterpret_cast<const float *>(region + planrt_nf4_mean_at(n, block));
    a = __fadd_rn(__fmul_rn(planrt_e4m3_value(region[planrt_nf4_absmax_at(n) + b]), scales[b / PLANRT_NF4_GROUP]),
                  mean);
  } else {
    a = reinterpret_cast<const float *>(region + planrt_nf4_absmax_at(n))[b];
  }
  uint8_t code = region[i / 2];
  w[i] = __fmul_rn(kLevels[i % 2 ? code >> 4 : code & 0x0F], a);
}

} // namespace

extern "C" void planrt_cuda_dequant_nf4(const float *q, float *w, int64_t n, int64_t block, int32_t dbl) {
  if (n > 0)
    dequantNf4<<<blocksForItems(n), 256, 0, stream()>>>(reinterpret_cast<const uint8_t *>(q), w, n, block, dbl);
  finish("planrt_cuda_dequant_nf4");
}
