// Parameter initialisation that is the same on every layout: element j of a
// parameter is drawn from (seed, parameter, j) by a counter-based generator.
#include "random.h"
#include "status.h"

#include <cmath>

using planrt::mix;

namespace {
/// A uniform double in (0, 1) from 53 random bits.
double open01(uint64_t r) { return (double(r >> 11) + 0.5) * 0x1.0p-53; }
} // namespace

extern "C" {

planrt_status planrt_init_normal(float *dst, int64_t count, int64_t offset, double mean, double std, uint64_t seed,
                                 uint64_t param) {
  if ((count && !dst) || count < 0 || offset < 0 || !(std >= 0))
    return planrt::fail(PLANRT_ERR_ARG, "planrt_init_normal: bad argument");
  uint64_t key = mix(seed ^ mix(param + 0x632be59bd9b4e019ull));
  for (int64_t i = 0; i < count; ++i) {
    // Box-Muller on the pair (j, j with a second stream): one normal per element.
    uint64_t j = uint64_t(offset + i);
    double u1 = open01(mix(key ^ (2 * j)));
    double u2 = open01(mix(key ^ (2 * j + 1)));
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    dst[i] = float(mean + std * z);
  }
  return PLANRT_OK;
}

planrt_status planrt_init_uniform(float *dst, int64_t count, int64_t offset, double bound, uint64_t seed,
                                  uint64_t param) {
  if ((count && !dst) || count < 0 || offset < 0 || !(bound >= 0))
    return planrt::fail(PLANRT_ERR_ARG, "planrt_init_uniform: bad argument");
  uint64_t key = mix(seed ^ mix(param + 0x632be59bd9b4e019ull));
  for (int64_t i = 0; i < count; ++i)
    dst[i] = float(bound * (2.0 * open01(mix(key ^ (2 * uint64_t(offset + i)))) - 1.0));
  return PLANRT_OK;
}

planrt_status planrt_init_fill(float *dst, int64_t count, float value) {
  if ((count && !dst) || count < 0)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_init_fill: bad argument");
  for (int64_t i = 0; i < count; ++i)
    dst[i] = value;
  return PLANRT_OK;
}

} // extern "C"
