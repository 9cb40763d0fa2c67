// QLoRA's NF4 quantizer (planrt_nf4.h's layout): what the trainer runs once on each
// frozen base matrix as it loads it. Its inverse, planrt_k_dequant_nf4, is the kernel
// the step program calls where the matrix is used.
#ifndef PLANRT_LIB_KERNELS_NF4_H
#define PLANRT_LIB_KERNELS_NF4_H

#include <cstdint>

namespace planrt::nf4 {

/// Writes the planrt_nf4_bytes(n, block, dbl) bytes of w[n]'s region to `region`.
void quantize(const float *w, int64_t n, int64_t block, bool dbl, uint8_t *region);

/// The E4M3 code nearest to y (|y| ≤ 448), a tie to the even code.
uint8_t e4m3(float y);

/// The NF4 code whose level is nearest to x (|x| ≤ 1), a tie to the lower code.
uint8_t nearestLevel(float x);

} // namespace planrt::nf4

#endif // PLANRT_LIB_KERNELS_NF4_H
