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
 *   the precision cuBLASLt computes in (planrt_gemm_compute).
 * - The launch ABI of MLIR's gpu-to-llvm (mgpu*), which the generated host code
 *   calls for its kernels.
 * Every call and launch is synchronous (it returns after the device finished), and
 * any CUDA error, or an index a kernel found out of range, prints
 * "planrt: error: rank R: ..." naming the call or kernel and exits with status 1. */
#ifndef PLANRT_CUDA_H
#define PLANRT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int planrt_cuda_start(int argc, char **argv);

/* What planrt_cuda_gemm's operands may be computed in (the compiler's
 * plan.gemm_precision): every operand and the result are float32 in memory, the
 * products are summed in fp32.
 * - F32: fp32 products, no TF32 (the CPU target's sgemm within fp32 rounding).
 * - BF16, F16: tensor cores on the operands rounded to bf16 (fp16), which is exact
 *   when, as the compiler guarantees, each operand is already a bf16 (fp16) value.
 * - TF32: tensor cores on the operands rounded to TF32 (10 bits of mantissa): the
 *   GEMMs of a mixed-precision plan whose operands are not all exact in its type. */
enum planrt_gemm_compute { PLANRT_GEMM_F32 = 0, PLANRT_GEMM_BF16 = 1, PLANRT_GEMM_F16 = 2, PLANRT_GEMM_TF32 = 3 };

void planrt_cuda_gemm(int32_t order, int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k, float alpha,
                      const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc,
                      int32_t compute);

void planrt_cuda_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t C,
                           float eps);
void planrt_cuda_layernorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, float *db,
                               int64_t rows, int64_t C, float eps);
void planrt_cuda_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t C, float eps);
void planrt_cuda_rmsnorm_bwd(const float *dy, const float *x, const float *w, float *dx, float *dw, int64_t rows,
                             int64_t C, float eps);
void planrt_cuda_sdpa(const float *qkv, float *out, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                      int32_t causal, int32_t rope, float rope_theta);
void planrt_cuda_sdpa_bwd(const float *dout, const float *qkv, float *dqkv, int64_t B, int64_t S, int64_t H,
                          int64_t KVH, int64_t D, int32_t causal, int32_t rope, float rope_theta);
void planrt_cuda_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V);
void planrt_cuda_embedding_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                               int64_t V);
void planrt_cuda_cross_entropy(const float *logits, const int32_t *targets, float *loss, int64_t rows, int64_t V);
void planrt_cuda_cross_entropy_bwd(const float *dloss, const float *logits, const int32_t *targets, float *dlogits,
                                   int64_t rows, int64_t V);

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
