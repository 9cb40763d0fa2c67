// Internal: the counter-based generator shared by sampling and initialisation.
#ifndef PLANRT_LIB_RANDOM_H
#define PLANRT_LIB_RANDOM_H

#include <cstdint>

namespace planrt {
/// splitmix64: a counter-based generator, so value i needs no state from value i - 1.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// A uniform integer in [0, n) from a random 64-bit r (Lemire's multiply-shift).
inline uint64_t below(uint64_t r, uint64_t n) { return uint64_t((__uint128_t(r) * n) >> 64); }
} // namespace planrt

#endif // PLANRT_LIB_RANDOM_H
