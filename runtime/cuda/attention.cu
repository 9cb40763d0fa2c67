// Scaled dot-product attention and its backward on the device (lib/kernels/attention.cpp's
// planrt_k_sdpa*): causal or not, grouped-query heads, rope. With a head dimension up to
// 128 the kernels are flash_attention_mma.cuh's, on the tensor cores: bf16 operands where
// the compiler says the call's operands are bf16 values (compute PLANRT_GEMM_BF16), split
// TF32 otherwise (fp32's accuracy), or for every call with PLANRT_CUDA_ATTENTION=tf32;
// beyond 128, or with PLANRT_CUDA_ATTENTION=simt, flash_attention.cuh's (tiled, online
// softmax, fp32 on CUDA cores). This file launches
// them on the runtime's stream with stream-ordered scratch memory.
#include "common.cuh"
#include "flash_attention_mma.cuh"

#include <cstdlib>
#include <cstring>

#include <utility>

using namespace planrt::cuda;
namespace attn = planrt::attention;

namespace {

/// flash_attention.cuh's launcher: the device stream, the default memory pool.
struct DeviceLaunch {
  const char *name;
  template <class... P, class... A>
  void run(unsigned gx, unsigned gy, unsigned gz, size_t shared, void (*kernel)(P...), A &&...args) {
    if (shared > 48 * 1024) // beyond the default: up to 227 KiB on sm_90, 163 KiB on sm_80
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)), name);
    kernel<<<dim3(gx, gy, gz), attn::kThreads, shared, stream()>>>(std::forward<A>(args)...);
    check(cudaGetLastError(), name);
  }
  float *alloc(int64_t n) { return scratch<float>(n, name); }
  void free(float *p) { release(p); }
};

void checkShape(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int32_t rope, const char *name) {
  if (B < 0 || S < 0 || H <= 0 || KVH <= 0 || D <= 0 || H % KVH != 0 || D > attn::kMaxD || (rope && D % 2 != 0) ||
      B > 65535 || H > 65535) {
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "%s: bad shape B=%lld S=%lld H=%lld KVH=%lld D=%lld (H a multiple of KVH, D at most %lld, even "
                  "with rope; B and H at most 65535)",
                  name, (long long)B, (long long)S, (long long)H, (long long)KVH, (long long)D,
                  (long long)attn::kMaxD);
    check(cudaErrorInvalidValue, buf);
  }
}

/// The kernels of a call: 0 CUDA cores, 1 tensor cores on split TF32, 2 tensor cores on bf16.
enum class Path { Simt, Tf32, Bf16 };
Path pathOf(int64_t D, int32_t compute) {
  const char *v = std::getenv("PLANRT_CUDA_ATTENTION");
  if (D > attn::mma::kMaxD || (v && std::strcmp(v, "simt") == 0))
    return Path::Simt;
  return compute == PLANRT_GEMM_BF16 && !(v && std::strcmp(v, "tf32") == 0) ? Path::Bf16 : Path::Tf32;
}

} // namespace

extern "C" {

void planrt_cuda_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                      int32_t causal, int32_t rope, float rope_theta, int32_t compute) {
  checkShape(B, S, H, KVH, D, rope, "planrt_cuda_sdpa");
  DeviceLaunch launch{"planrt_cuda_sdpa"};
  switch (pathOf(D, compute)) {
  case Path::Bf16:
    attn::sdpa<attn::mma::KernelsBf16>(launch, qkv, out, B, S, H, KVH, D, causal != 0, rope != 0, rope_theta);
    break;
  case Path::Tf32:
    attn::sdpa<attn::mma::Kernels>(launch, qkv, out, B, S, H, KVH, D, causal != 0, rope != 0, rope_theta);
    break;
  case Path::Simt:
    attn::sdpa(launch, qkv, out, B, S, H, KVH, D, causal != 0, rope != 0, rope_theta);
  }
  finish("planrt_cuda_sdpa");
}

void planrt_cuda_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H,
                          int64_t KVH, int64_t D, int32_t causal, int32_t rope, float rope_theta, int32_t compute) {
  checkShape(B, S, H, KVH, D, rope, "planrt_cuda_sdpa_bwd");
  DeviceLaunch launch{"planrt_cuda_sdpa_bwd"};
  bool c = causal != 0, r = rope != 0;
  switch (pathOf(D, compute)) {
  case Path::Bf16:
    attn::sdpaBackward<attn::mma::KernelsBf16>(launch, dout, qkv, dqkv, B, S, H, KVH, D, c, r, rope_theta);
    break;
  case Path::Tf32:
    attn::sdpaBackward<attn::mma::Kernels>(launch, dout, qkv, dqkv, B, S, H, KVH, D, c, r, rope_theta);
    break;
  case Path::Simt:
    attn::sdpaBackward(launch, dout, qkv, dqkv, B, S, H, KVH, D, c, r, rope_theta);
  }
  finish("planrt_cuda_sdpa_bwd");
}

} // extern "C"
