// Internal to the CPU kernels (one family per file, as runtime/cuda/: norms.cpp,
// attention.cpp, embedding.cpp, cross_entropy.cpp; tensor_parallel.cpp for the
// collectives of tensor-parallel ranks): the fatal error of a bad shape or index.
#ifndef PLANRT_LIB_KERNELS_COMMON_H
#define PLANRT_LIB_KERNELS_COMMON_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace planrt::kernels {

/// Prints "planrt: error: ..." to stderr and exits with status 1: the kernels
/// have no status to return, and a bad index would otherwise read out of bounds.
[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fatal(const char *fmt, ...) {
  std::fflush(stdout);
  std::fputs("planrt: error: ", stderr);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::exit(1);
}

/// x rounded to nearest, ties to even, to a bf16 (to == 1) or fp16 (to == 2) value, as a
/// float; x itself for 0 (planrt_k_cross_entropy_bwd's round_to; the codes are
/// planrt_gemm_compute's, which the audited GEMM's rounded result uses). What the generated
/// code's rounding (nn.round: arith.truncf, then arith.extf) makes of it; NaN and the
/// infinities stay, a value beyond the type's range becomes an infinity.
inline float roundTo(float x, int32_t to) {
  if (to == 2)
    return float(static_cast<_Float16>(x));
  if (to != 1)
    return x;
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}

/// The float value of a 16-bit element of type `type` (1 bf16, 2 fp16: roundTo's codes).
inline float widen16(uint16_t h, int32_t type) {
  if (type == 2) {
    _Float16 f;
    __builtin_memcpy(&f, &h, sizeof f);
    return float(f);
  }
  uint32_t u = uint32_t(h) << 16;
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}

/// x rounded to type `type` (1 bf16, 2 fp16), to nearest even, as its 16 bits; a NaN
/// stays a NaN.
inline uint16_t narrow16(float x, int32_t type) {
  if (type == 2) {
    _Float16 f = static_cast<_Float16>(x);
    uint16_t h;
    __builtin_memcpy(&h, &f, sizeof h);
    return h;
  }
  if (x != x)
    return __builtin_signbit(x) ? 0xffc0 : 0x7fc0;
  float r = roundTo(x, 1);
  uint32_t u;
  __builtin_memcpy(&u, &r, sizeof u);
  return uint16_t(u >> 16);
}

/// An embedding id or cross-entropy target outside [0, V): fatal.
[[noreturn]] inline void badIndex(const char *what, int64_t id, int64_t V) {
  fatal("%s %lld is outside [0, %lld)", what, (long long)id, (long long)V);
}

} // namespace planrt::kernels

#endif // PLANRT_LIB_KERNELS_COMMON_H
