/* planrt kernels: the CPU implementations of the nn ops that planc's lowering
 * calls rather than generates (see docs/LOWERING.md). Matmuls are not here:
 * generated code calls cblas_sgemm directly.
 *
 * Conventions: float32, row-major, contiguous, no aliasing between inputs and
 * outputs. Every `rows` is the number of (batch, sequence) positions. Backward
 * kernels OVERWRITE their outputs (they never accumulate into them) and keep
 * nothing from the forward: what they need (mean/rstd, attention probabilities)
 * is recomputed from the forward's inputs. The normalisation and cross-entropy
 * reductions are accumulated in double; attention does its products with
 * cblas_sgemm and its softmax in float.
 * An index out of range (embedding id, cross-entropy target) is fatal: the
 * kernel prints "planrt: error: ..." to stderr and exits with status 1. */
#ifndef PLANRT_KERNELS_H
#define PLANRT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels, each with its contract: planrt_abi.def (PLANRT_ABI_KERNEL). */
#define PLANRT_ABI_KERNEL(ret, name, params) ret name params;
#include "planrt_abi.def"

#ifdef __cplusplus
}
#endif

#endif /* PLANRT_KERNELS_H */
