/* QLoRA's storage of a frozen base matrix (`quantize = nf4(block: B, double: D)`,
 * EXTENSIONS.md §1): the one definition of its bytes, read by planc (the size of each
 * matrix's region in the params buffer, plan-train-abi), by the runtime's quantizer
 * and CPU dequantization kernel (kernels/nf4.cpp) and by the CUDA kernel
 * (cuda/dequantize.cu).
 *
 * A matrix of n floats, flattened row-major in planc's [in, out] layout, is cut into
 * blocks of B consecutive values (the last may be shorter). Each value is stored as the
 * 4-bit index of the nearest of the 16 NormalFloat levels (Dettmers et al. 2023,
 * appendix E) to value / absmax of its block. Without double quantization the block's
 * absmax is kept as an fp32; with it (the paper's 0.127 bits per parameter at B = 64),
 * the absmax values less their mean are quantized again as FP8 E4M3 (the paper's
 * "8-bit floats") in groups of 256 blocks, each group scaled so that its largest
 * magnitude is 448, E4M3's largest finite value.
 *
 * The region, in bytes from its start (each part padded to 4 bytes):
 *   codes     ceil(n / 2) bytes: value i in byte i / 2, the low nibble for even i;
 *   without double: absmax    nblocks fp32;
 *   with double:    absmax    nblocks bytes (E4M3 codes),
 *                   scales    ngroups fp32 (group g: its largest |absmax − mean| / 448),
 *                   mean      one fp32.
 * Block b's absmax is then e4m3(code_b) · scale_{b / 256} + mean, each operation rounded
 * to fp32, and value i is level[code_i] · absmax_{i / B}. */
#ifndef PLANRT_NF4_H
#define PLANRT_NF4_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PLANRT_NF4_FN static inline __host__ __device__
#else
#define PLANRT_NF4_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Blocks of absmax values quantized together by double quantization. */
#define PLANRT_NF4_GROUP 256
/** The largest finite FP8 E4M3 value, to which each group's largest magnitude maps. */
#define PLANRT_E4M3_MAX 448.0f
/** The 16 NF4 levels of the QLoRA paper (appendix E), as an initializer list. */
#define PLANRT_NF4_LEVELS                                                                                       \
  -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,             \
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,          \
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,                   \
      0.7229568362236023f, 1.0f
/** The code of the level 0.0 (a block whose values are all zero). */
#define PLANRT_NF4_ZERO 7

PLANRT_NF4_FN int64_t planrt_nf4_pad4(int64_t bytes) { return (bytes + 3) / 4 * 4; }
PLANRT_NF4_FN int64_t planrt_nf4_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }
PLANRT_NF4_FN int64_t planrt_nf4_groups(int64_t n, int64_t block) {
  return (planrt_nf4_blocks(n, block) + PLANRT_NF4_GROUP - 1) / PLANRT_NF4_GROUP;
}
/** Byte offsets of the parts of the region (see above). */
PLANRT_NF4_FN int64_t planrt_nf4_absmax_at(int64_t n) { return planrt_nf4_pad4((n + 1) / 2); }
PLANRT_NF4_FN int64_t planrt_nf4_scales_at(int64_t n, int64_t block) {
  return planrt_nf4_absmax_at(n) + planrt_nf4_pad4(planrt_nf4_blocks(n, block));
}
PLANRT_NF4_FN int64_t planrt_nf4_mean_at(int64_t n, int64_t block) {
  return planrt_nf4_scales_at(n, block) + 4 * planrt_nf4_groups(n, block);
}
/** The region's size in bytes, always a multiple of 4. */
PLANRT_NF4_FN int64_t planrt_nf4_bytes(int64_t n, int64_t block, int32_t dbl) {
  return dbl ? planrt_nf4_mean_at(n, block) + 4 : planrt_nf4_absmax_at(n) + 4 * planrt_nf4_blocks(n, block);
}

/** The value of an FP8 E4M3 code (OCP FP8: bias 7, subnormals, no infinities; the
 * NaN codes 0x7F and 0xFF are never written). */
PLANRT_NF4_FN float planrt_e4m3_value(uint8_t code) {
  int e = (code >> 3) & 15, m = code & 7;
  float mag = e == 0 ? (float)m * (1.0f / 512.0f) /* m/8 · 2^-6 */
                     : (1.0f + (float)m / 8.0f) * (e >= 7 ? (float)(1 << (e - 7)) : 1.0f / (float)(1 << (7 - e)));
  return (code & 0x80) ? -mag : mag;
}

#ifdef __cplusplus
}
#endif

#endif /* PLANRT_NF4_H */
