/* libplanrt_cuda: what a `planc build --target cuda` executable links besides
 * libplanrt (docs/CUDA.md). On libcudart and cuBLASLt only, so the executable
 * starts on a machine without a driver and says so.
 *
 * - planrt_cuda_start: called by main before planrt_train_main; picks this
 *   process's GPU (local rank modulo the devices), installs CUDA managed memory as
 *   the runtime's backend (planrt_set_backend), or prints
 *   "planrt: error: rank R: ..." and returns 1.
 * - The device versions of planrt_kernels.h, same arguments and semantics, on
 *   device (managed) pointers: planrt_cuda_<name> for planrt_k_<name>.
 *   planrt_cuda_gemm has cblas_sgemm's arguments (row-major only) and one more,
 *   the precision cuBLASLt computes in (planrt_gemm_compute); planrt_cuda_sdpa(_bwd)
 *   take one more too, the precision of their products.
 * - The launch ABI of MLIR's gpu-to-llvm (mgpu*), which the generated host code
 *   calls for its kernels.
 * Calls and launches are queued on one stream and return at once; planrt_cuda_sync
 * waits for them (the compiler calls it where host code runs next). Any CUDA error, or
 * an index a kernel found out of range, prints "planrt: error: rank R: ..." naming the
 * call or kernel (at a wait: the last work queued) and exits with status 1. */
#ifndef PLANRT_CUDA_H
#define PLANRT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What planrt_cuda_gemm's operands may be computed in (the compiler's
 * plan.gemm_precision): every operand and the result are float32 in memory, the
 * products are summed in fp32.
 * - F32: fp32 products, no TF32 (the CPU target's sgemm within fp32 rounding).
 * - BF16, F16: tensor cores on the operands rounded to bf16 (fp16), which is exact
 *   when, as the compiler guarantees, each operand is already a bf16 (fp16) value.
 * - TF32: tensor cores on the operands rounded to TF32 (10 bits of mantissa): the
 *   GEMMs of a mixed-precision plan whose operands are not all exact in its type. */
enum planrt_gemm_compute { PLANRT_GEMM_F32 = 0, PLANRT_GEMM_BF16 = 1, PLANRT_GEMM_F16 = 2, PLANRT_GEMM_TF32 = 3 };
/* Or'ed into a BF16 or F16 compute (plan-cuda-round-results): the result is rounded to
 * that type, to nearest with ties to even, and stored as float32 — what a rounding of
 * the result to it (nn.round) would make of it, without the separate pass; beta must be
 * 0. On the device, cuBLASLt writes a 16-bit result that is then widened to float32
 * (unless PLANRT_CUDA_GEMM_STAGE=never or PLANRT_CUDA_GEMM_ROUND=inplace: the float32
 * result rounded in place). */
#define PLANRT_GEMM_ROUND_RESULT 16
/* Or'ed into a BF16 or F16 compute (plan-cuda-half-storage): A, B or C is not a float32
 * buffer but one of that 16-bit type (its pointer and leading dimension count 16-bit
 * elements), whose values are the same. C may be so only with PLANRT_GEMM_ROUND_RESULT. */
#define PLANRT_GEMM_HALF_A 32
#define PLANRT_GEMM_HALF_B 64
#define PLANRT_GEMM_HALF_C 128

/* planrt_cuda_start, planrt_cuda_gemm and the device kernels: planrt_abi.def
 * (PLANRT_ABI_CUDA). */
#define PLANRT_ABI_CUDA(ret, name, params) ret name params;
#include "planrt_abi.def"

/* The gpu-to-llvm launch ABI. A module is loaded on its first function lookup (the
 * generated constructor that registers it runs before main, before the device is
 * started). */
void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *data, int opt_level);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void *mgpuStreamCreate(void);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);
void mgpuLaunchKernel(void *function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z, intptr_t block_x,
                      intptr_t block_y, intptr_t block_z, int32_t shared_bytes, void *stream, void **params,
                      void **extra, size_t param_count);

#ifdef __cplusplus
}
#endif

#endif /* PLANRT_CUDA_H */
