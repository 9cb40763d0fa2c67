// QLoRA's NF4 storage with double quantization (planrt_nf4.h) on the CPU: the
// quantizer the trainer runs as it loads the frozen base, and planrt_k_dequant_nf4,
// which the step program calls before each use of a quantized matrix (and again in the
// backward pass, rather than keep the dequantized copy). Every operation is one fp32
// operation in the order planrt_nf4.h gives, so that the CUDA kernel and
// test/e2e/nf4_ref.py give the same bits.
#include "nf4.h"

#include "planrt_kernels.h"
#include "planrt_nf4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace planrt::nf4 {
namespace {

constexpr float kLevels[16] = {PLANRT_NF4_LEVELS};

/// The 127 non-negative finite E4M3 values, by code.
struct E4M3Table {
  float v[127];
  E4M3Table() {
    for (int c = 0; c < 127; ++c)
      v[c] = planrt_e4m3_value(uint8_t(c));
  }
};

float absmaxOf(const float *w, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, std::fabs(w[i]));
  return m;
}

/// The NF4 codes of one block into the region's nibbles.
void quantizeBlock(const float *w, int64_t from, int64_t to, float absmax, uint8_t *codes) {
  for (int64_t i = from; i < to; ++i) {
    uint8_t c = absmax == 0 ? uint8_t(PLANRT_NF4_ZERO) : nearestLevel(w[i] / absmax);
    codes[i / 2] = uint8_t(i % 2 ? (codes[i / 2] & 0x0F) | (c << 4) : (codes[i / 2] & 0xF0) | c);
  }
}

/// Double quantization of the blocks' absmax values: E4M3 codes, a scale per group and
/// their mean.
void quantizeAbsmax(const std::vector<float> &absmax, uint8_t *region, int64_t n, int64_t block) {
  double sum = 0;
  for (float a : absmax)
    sum += a;
  float mean = float(sum / double(absmax.size()));
  uint8_t *codes = region + planrt_nf4_absmax_at(n);
  float *scales = reinterpret_cast<float *>(region + planrt_nf4_scales_at(n, block));
  int64_t blocks = int64_t(absmax.size());
  for (int64_t g = 0; g * PLANRT_NF4_GROUP < blocks; ++g) {
    int64_t from = g * PLANRT_NF4_GROUP, to = std::min(blocks, from + PLANRT_NF4_GROUP);
    float m = 0;
    for (int64_t b = from; b < to; ++b)
      m = std::max(m, std::fabs(absmax[size_t(b)] - mean));
    float scale = m / PLANRT_E4M3_MAX;
    scales[g] = scale;
    for (int64_t b = from; b < to; ++b) {
      float y = scale == 0 ? 0.0f : (absmax[size_t(b)] - mean) / scale;
      codes[b] = e4m3(std::clamp(y, -PLANRT_E4M3_MAX, PLANRT_E4M3_MAX));
    }
  }
  std::memcpy(region + planrt_nf4_mean_at(n, block), &mean, sizeof mean);
}

} // namespace

uint8_t nearestLevel(float x) {
  uint8_t best = 0;
  for (uint8_t j = 1; j < 16; ++j)
    if (std::fabs(x - kLevels[j]) < std::fabs(x - kLevels[best]))
      best = j;
  return best;
}

uint8_t e4m3(float y) {
  static const E4M3Table table;
  float a = std::fabs(y);
  const float *end = table.v + 127, *hi = std::lower_bound(table.v, end, a);
  int c;
  if (hi == end) {
    c = 126;
  } else if (hi == table.v || *hi == a) {
    c = int(hi - table.v);
  } else {
    int h = int(hi - table.v), l = h - 1;
    float dl = a - table.v[l], dh = table.v[h] - a;
    c = dl < dh ? l : dh < dl ? h : (l % 2 == 0 ? l : h);
  }
  return uint8_t(c == 0 ? 0 : (y < 0 ? 0x80 | c : c));
}

void quantize(const float *w, int64_t n, int64_t block, bool dbl, uint8_t *region) {
  std::memset(region, 0, size_t(planrt_nf4_bytes(n, block, dbl)));
  std::vector<float> absmax(size_t(planrt_nf4_blocks(n, block)));
  for (size_t b = 0; b < absmax.size(); ++b) {
    int64_t from = int64_t(b) * block, to = std::min(n, from + block);
    absmax[b] = absmaxOf(w + from, to - from);
    quantizeBlock(w, from, to, absmax[b], region);
  }
  if (dbl)
    quantizeAbsmax(absmax, region, n, block);
  else
    std::memcpy(region + planrt_nf4_absmax_at(n), absmax.data(), absmax.size() * sizeof(float));
}

} // namespace planrt::nf4

extern "C" void planrt_k_dequant_nf4(const float *q, float *w, int64_t n, int64_t block, int32_t dbl) {
  const auto *region = reinterpret_cast<const uint8_t *>(q);
  const float *absmax = reinterpret_cast<const float *>(region + planrt_nf4_absmax_at(n));
  const float *scales = reinterpret_cast<const float *>(region + planrt_nf4_scales_at(n, block));
  float mean = 0;
  if (dbl)
    std::memcpy(&mean, region + planrt_nf4_mean_at(n, block), sizeof mean);
  for (int64_t b = 0, blocks = planrt_nf4_blocks(n, block); b < blocks; ++b) {
    float a = dbl ? planrt_e4m3_value(region[planrt_nf4_absmax_at(n) + b]) * scales[b / PLANRT_NF4_GROUP] + mean
                  : absmax[b];
    for (int64_t i = b * block, to = std::min(n, i + block); i < to; ++i) {
      uint8_t code = region[i / 2];
      w[i] = planrt::nf4::kLevels[i % 2 ? code >> 4 : code & 0x0F] * a;
    }
  }
}
