// Internal: the host's versions of the backend's memory operations (memory.cpp): the CPU
// backend's, and what cuda-host's emulated device runs inside its device-work brackets,
// so that the two compute the same bits.
#ifndef PLANRT_LIB_HOST_MEMORY_H
#define PLANRT_LIB_HOST_MEMORY_H

#include <cstddef>
#include <cstdint>

namespace planrt::host {

void fill(void *ptr, float value, size_t count);
void add(float *to, const float *from, size_t count);
void divide(float *p, float divisor, size_t count);
/// *out = (float) the sum, in double, of x*x over the ranges, in range order.
void sumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out);

} // namespace planrt::host

#endif // PLANRT_LIB_HOST_MEMORY_H
