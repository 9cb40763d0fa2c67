// QLoRA's NF4 storage (runtime/include/planrt_nf4.h, runtime/lib/kernels/nf4.cpp): the
// layout's sizes, FP8 E4M3 by its definition, the rounding rules, and quantize →
// planrt_k_dequant_nf4 against the bounds the format promises. The bitwise comparison
// with an independent implementation is test/e2e/qlora_vs_torch.sh (nf4_ref.py).
#include "kernels/nf4.h"

#include "planrt_kernels.h"
#include "planrt_nf4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

constexpr float kLevels[16] = {PLANRT_NF4_LEVELS};

std::vector<float> roundTrip(const std::vector<float> &w, int64_t block, bool dbl) {
  int64_t n = int64_t(w.size());
  std::vector<float> region(size_t(planrt_nf4_bytes(n, block, dbl) / 4)), out(w.size());
  planrt::nf4::quantize(w.data(), n, block, dbl, reinterpret_cast<uint8_t *>(region.data()));
  planrt_k_dequant_nf4(region.data(), out.data(), n, block, dbl);
  return out;
}

TEST(Nf4, LayoutSizes) {
  // 128 × 128 in blocks of 64: 8192 code bytes, 256 absmax codes, one group scale, the
  // mean: 8456 bytes, 4.129 bits per value (the paper's 4.127 for large matrices).
  EXPECT_EQ(planrt_nf4_bytes(128 * 128, 64, 1), 8192 + 256 + 4 + 4);
  EXPECT_EQ(planrt_nf4_bytes(128 * 128, 64, 0), 8192 + 256 * 4);
  // Odd counts and partial blocks pad each part to 4 bytes.
  EXPECT_EQ(planrt_nf4_bytes(5, 4, 1), 4 + 4 + 4 + 4);
  EXPECT_EQ(planrt_nf4_blocks(65, 64), 2);
  EXPECT_EQ(planrt_nf4_groups(64 * 257, 64), 2);
  // Large models: 0.127 bits per parameter of scales over 4 bits of codes.
  int64_t n = int64_t(8192) * 28672;
  EXPECT_NEAR(8.0 * double(planrt_nf4_bytes(n, 64, 1)) / double(n), 4.127, 0.001);
}

TEST(Nf4, E4M3ValuesByDefinition) {
  EXPECT_EQ(planrt_e4m3_value(0x00), 0.0f);
  EXPECT_EQ(planrt_e4m3_value(0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(planrt_e4m3_value(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_EQ(planrt_e4m3_value(0x38), 1.0f);
  EXPECT_EQ(planrt_e4m3_value(0x7E), 448.0f);
  EXPECT_EQ(planrt_e4m3_value(0xBE), -1.75f);
  // Every finite code encodes back to itself, and the values increase with the code.
  for (int c = 0; c < 127; ++c) {
    EXPECT_EQ(planrt::nf4::e4m3(planrt_e4m3_value(uint8_t(c))), c) << c;
    if (c > 0) {
      EXPECT_EQ(planrt::nf4::e4m3(-planrt_e4m3_value(uint8_t(c))), 0x80 | c) << c;
      EXPECT_LT(planrt_e4m3_value(uint8_t(c - 1)), planrt_e4m3_value(uint8_t(c)));
    }
  }
}

TEST(Nf4, E4M3RoundsToNearestEven) {
  EXPECT_EQ(planrt_e4m3_value(planrt::nf4::e4m3(1.0625f)), 1.0f);  // between 1 and 1.125: even
  EXPECT_EQ(planrt_e4m3_value(planrt::nf4::e4m3(1.1875f)), 1.25f); // between 1.125 and 1.25: even
  EXPECT_EQ(planrt_e4m3_value(planrt::nf4::e4m3(1.07f)), 1.125f);  // nearer 1.125
  EXPECT_EQ(planrt_e4m3_value(planrt::nf4::e4m3(-300.0f)), -288.0f);
  EXPECT_EQ(planrt::nf4::e4m3(1e-4f), 0); // below half the smallest subnormal
}

TEST(Nf4, NearestLevelTiesToTheLowerCode) {
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(planrt::nf4::nearestLevel(kLevels[j]), j);
  EXPECT_EQ(planrt::nf4::nearestLevel(kLevels[8] / 2), 7); // exactly between 0 and level 8
  EXPECT_EQ(planrt::nf4::nearestLevel(1.0f), 15);
  EXPECT_EQ(planrt::nf4::nearestLevel(-1.0f), 0);
}

TEST(Nf4, EachBlocksAbsmaxIsExactWithoutDoubleQuantization) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(64 * 10 + 17); // a partial last block
  for (float &x : w)
    x = normal(gen);
  std::vector<float> out = roundTrip(w, 64, false);
  for (size_t b = 0; b * 64 < w.size(); ++b) {
    size_t from = b * 64, to = std::min(w.size(), from + 64);
    float absmax = 0;
    for (size_t i = from; i < to; ++i)
      absmax = std::max(absmax, std::fabs(w[i]));
    for (size_t i = from; i < to; ++i) {
      if (std::fabs(w[i]) == absmax) {
        EXPECT_EQ(out[i], w[i]) << i;
      }
      // Never further than half the widest gap between levels (0.1519 of absmax).
      EXPECT_LE(std::fabs(out[i] - w[i]), 0.5f * (kLevels[1] - kLevels[0]) * absmax * 1.0001f) << i;
    }
  }
}

TEST(Nf4, DoubleQuantizationKeepsTheScalesClose) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(64 * 600); // 600 blocks: three groups, the last partial
  for (float &x : w)
    x = normal(gen) * (1.0f + float(&x - w.data()) / float(w.size()));
  std::vector<float> single = roundTrip(w, 64, false), dbl = roundTrip(w, 64, true);
  double err = 0, total = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(std::signbit(dbl[i]) && dbl[i] != 0, std::signbit(single[i]) && single[i] != 0) << i;
    err += std::fabs(dbl[i] - single[i]);
    total += std::fabs(single[i]);
  }
  EXPECT_LT(err / total, 0.02); // 8-bit scales: within a few percent of the exact ones
  EXPECT_GT(err, 0.0);          // but not the same: the scales were quantized
}

TEST(Nf4, ZeroBlocksStayZero) {
  std::vector<float> w(256, 0.0f);
  for (size_t i = 128; i < 192; ++i)
    w[i] = float(i) - 150.0f;
  for (bool dbl : {false, true}) {
    std::vector<float> out = roundTrip(w, 64, dbl);
    for (size_t i = 0; i < 128; ++i)
      EXPECT_EQ(out[i], 0.0f) << i << (dbl ? " double" : "");
    EXPECT_NE(out[130], 0.0f);
  }
  // Every block equal: the group's spread is zero, and the scales come back exactly.
  std::vector<float> same(640, 0.5f), out = roundTrip(same, 64, true);
  for (float x : out)
    EXPECT_EQ(x, 0.5f);
}

} // namespace
