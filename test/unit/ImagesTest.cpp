// The runtime's image data (planrt_images_*): planc's image files and CIFAR-10 binary
// batches, read back exactly, sampled deterministically, cropped and flipped, and bad
// files refused with their name.
#include "planrt.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

using plan::test::TempDir;

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

template <typename T> void put(std::string &s, T v) { s.append(reinterpret_cast<const char *>(&v), sizeof v); }

/// A planc image file's bytes: the 32-byte header, pixels, then uint16 labels.
std::string planc(uint32_t c, uint32_t h, uint32_t w, const std::vector<uint8_t> &pixels,
                  const std::vector<uint16_t> &labels, uint32_t version = 1, const char *magic = "PLANCIMG") {
  std::string s(magic, 8);
  put(s, version);
  put(s, c);
  put(s, h);
  put(s, w);
  put(s, uint64_t(labels.size()));
  EXPECT_EQ(s.size(), 32u);
  s.append(pixels.begin(), pixels.end());
  for (uint16_t l : labels)
    put(s, l);
  return s;
}

/// Pixel byte of image n, channel c, row y, column x: distinct enough to recognise.
uint8_t pix(int n, int c, int y, int x) { return uint8_t(1 + n * 37 + c * 11 + y * 5 + x * 3); }

/// `n` images of c x h x w with pix() bytes, NCHW.
std::vector<uint8_t> pixels(int n, int c, int h, int w) {
  std::vector<uint8_t> p;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < c; ++k)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          p.push_back(pix(i, k, y, x));
  return p;
}

planrt_images *open(const std::string &pattern, planrt_images_format format = PLANRT_IMAGES_PLANC,
                    int64_t classes = 10) {
  const char *p = pattern.c_str();
  planrt_images *images = nullptr;
  EXPECT_EQ(planrt_images_open(&p, 1, format, classes, &images), PLANRT_OK) << planrt_last_error();
  return images;
}

/// The status of opening `pattern`, and the message in `error`.
planrt_status openError(const std::string &pattern, std::string &error,
                        planrt_images_format format = PLANRT_IMAGES_PLANC, int64_t classes = 10) {
  const char *p = pattern.c_str();
  planrt_images *images = nullptr;
  planrt_status s = planrt_images_open(&p, 1, format, classes, &images);
  error = planrt_last_error();
  EXPECT_EQ(images, nullptr);
  planrt_images_close(images);
  return s;
}

planrt_image_transform plain() {
  planrt_image_transform t;
  std::memset(&t, 0, sizeof t);
  return t;
}

} // namespace

TEST(Images, PlancFileReadsBackPixelsAndLabels) {
  TempDir dir;
  const int N = 3, C = 2, H = 3, W = 4;
  writeFile(dir / "a.img", planc(C, H, W, pixels(N, C, H, W), {7, 0, 9}));
  planrt_images *images = open(dir / "a.img");
  ASSERT_TRUE(images);
  EXPECT_EQ(planrt_images_count(images), 3u);
  int64_t c, h, w;
  planrt_images_shape(images, &c, &h, &w);
  EXPECT_EQ(c, C);
  EXPECT_EQ(h, H);
  EXPECT_EQ(w, W);
  std::vector<float> out(C * H * W);
  const int32_t labels[] = {7, 0, 9};
  for (int n = 0; n < N; ++n) {
    int32_t label = -1;
    ASSERT_EQ(planrt_images_get(images, n, nullptr, out.data(), &label), PLANRT_OK) << planrt_last_error();
    EXPECT_EQ(label, labels[n]);
    for (int k = 0; k < C; ++k)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
          EXPECT_EQ(out[(k * H + y) * W + x], float(pix(n, k, y, x)) / 255.0f);
  }
  EXPECT_EQ(planrt_images_get(images, 3, nullptr, out.data(), nullptr), PLANRT_ERR_ARG);
  planrt_images_close(images);
}

TEST(Images, ScalesAndNormalizesByHand) {
  TempDir dir;
  // One 2-channel 1 x 2 image: bytes {0, 255} and {51, 102}.
  writeFile(dir / "a.img", planc(2, 1, 2, {0, 255, 51, 102}, {1}));
  planrt_images *images = open(dir / "a.img");
  ASSERT_TRUE(images);
  std::vector<float> out(4);
  planrt_image_transform t = plain();
  ASSERT_EQ(planrt_images_get(images, 0, &t, out.data(), nullptr), PLANRT_OK);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  EXPECT_FLOAT_EQ(out[2], 0.2f);
  EXPECT_FLOAT_EQ(out[3], 0.4f);
  t.normalize = 1;
  t.mean[0] = 0.5f, t.mean[1] = 0.2f;
  t.std[0] = 0.25f, t.std[1] = 0.1f;
  ASSERT_EQ(planrt_images_get(images, 0, &t, out.data(), nullptr), PLANRT_OK) << planrt_last_error();
  EXPECT_FLOAT_EQ(out[0], -2.0f); // (0 - 0.5) / 0.25
  EXPECT_FLOAT_EQ(out[1], 2.0f);  // (1 - 0.5) / 0.25
  EXPECT_NEAR(out[2], 0.0f, 1e-6f); // (0.2 - 0.2) / 0.1
  EXPECT_FLOAT_EQ(out[3], 2.0f);  // (0.4 - 0.2) / 0.1
  // Evaluation ignores crop and flip.
  t.crop_pad = 1;
  t.flip = 1;
  std::vector<float> again(4);
  ASSERT_EQ(planrt_images_get(images, 0, &t, again.data(), nullptr), PLANRT_OK);
  EXPECT_EQ(again, out);
  // A zero std is refused.
  t.std[1] = 0.0f;
  EXPECT_EQ(planrt_images_get(images, 0, &t, out.data(), nullptr), PLANRT_ERR_ARG);
  planrt_images_close(images);
}

TEST(Images, NormalizeTakesAtMostFourChannels) {
  TempDir dir;
  writeFile(dir / "a.img", planc(5, 1, 1, {1, 2, 3, 4, 5}, {0}));
  planrt_images *images = open(dir / "a.img");
  ASSERT_TRUE(images);
  std::vector<float> out(5);
  ASSERT_EQ(planrt_images_get(images, 0, nullptr, out.data(), nullptr), PLANRT_OK);
  EXPECT_EQ(out[4], 5.0f / 255.0f);
  planrt_image_transform t = plain();
  t.normalize = 1;
  for (float &s : t.std)
    s = 1.0f;
  EXPECT_EQ(planrt_images_sample(images, 1, 0, &t, out.data(), nullptr), PLANRT_ERR_ARG);
  EXPECT_NE(std::string(planrt_last_error()).find("4 channels"), std::string::npos) << planrt_last_error();
  planrt_images_close(images);
}

TEST(Images, Cifar10RecordLayout) {
  TempDir dir;
  // Two records: label byte, then the R, G, B planes of 32 x 32, row-major.
  std::string bytes;
  for (int n = 0; n < 2; ++n) {
    bytes.push_back(char(n == 0 ? 6 : 9));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          bytes.push_back(char(pix(n, c, y, x)));
  }
  ASSERT_EQ(bytes.size(), 2u * 3073u);
  writeFile(dir / "data_batch_1.bin", bytes);
  planrt_images *images = open(dir / "data_batch_*.bin", PLANRT_IMAGES_CIFAR10, 10);
  ASSERT_TRUE(images);
  EXPECT_EQ(planrt_images_count(images), 2u);
  int64_t c, h, w;
  planrt_images_shape(images, &c, &h, &w);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(h, 32);
  EXPECT_EQ(w, 32);
  std::vector<float> out(3 * 32 * 32);
  for (int n = 0; n < 2; ++n) {
    int32_t label = -1;
    ASSERT_EQ(planrt_images_get(images, n, nullptr, out.data(), &label), PLANRT_OK);
    EXPECT_EQ(label, n == 0 ? 6 : 9);
    for (int k = 0; k < 3; ++k)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          ASSERT_EQ(out[(k * 32 + y) * 32 + x], float(pix(n, k, y, x)) / 255.0f) << n << " " << k << " " << y;
  }
  planrt_images_close(images);
  // Label 9 is outside 9 classes.
  std::string error;
  EXPECT_EQ(openError(dir / "data_batch_1.bin", error, PLANRT_IMAGES_CIFAR10, 9), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("data_batch_1.bin"), std::string::npos) << error;
  EXPECT_NE(error.find("image 1"), std::string::npos) << error;
  EXPECT_NE(error.find("label 9"), std::string::npos) << error;
}

TEST(Images, SamplingIsDeterministicAndCoversEveryImage) {
  TempDir dir;
  const int N = 7, C = 1, H = 2, W = 2;
  std::vector<uint16_t> labels;
  for (int n = 0; n < N; ++n)
    labels.push_back(uint16_t(n));
  // Two files, concatenated in sorted order: b's images follow a's.
  std::vector<uint8_t> all = pixels(N, C, H, W);
  writeFile(dir / "b.img",
            planc(C, H, W, std::vector<uint8_t>(all.begin() + 3 * H * W, all.end()),
                  std::vector<uint16_t>(labels.begin() + 3, labels.end())));
  writeFile(dir / "a.img", planc(C, H, W, std::vector<uint8_t>(all.begin(), all.begin() + 3 * H * W),
                                 std::vector<uint16_t>(labels.begin(), labels.begin() + 3)));
  planrt_images *images = open(dir / "*.img");
  ASSERT_TRUE(images);
  ASSERT_EQ(planrt_images_count(images), uint64_t(N));
  std::vector<float> a(C * H * W), b(C * H * W), ref(C * H * W);
  std::set<int32_t> seen;
  int differ = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    int32_t la = -1, lb = -1, lc = -1;
    ASSERT_EQ(planrt_images_sample(images, 42, index, nullptr, a.data(), &la), PLANRT_OK);
    ASSERT_EQ(planrt_images_sample(images, 42, index, nullptr, b.data(), &lb), PLANRT_OK);
    EXPECT_EQ(a, b);
    EXPECT_EQ(la, lb);
    // The sample is the labelled image itself (labels are the global image index).
    ASSERT_GE(la, 0);
    ASSERT_LT(la, N);
    ASSERT_EQ(planrt_images_get(images, uint64_t(la), nullptr, ref.data(), nullptr), PLANRT_OK);
    EXPECT_EQ(a, ref);
    seen.insert(la);
    ASSERT_EQ(planrt_images_sample(images, 43, index, nullptr, b.data(), &lc), PLANRT_OK);
    differ += lc != la;
  }
  EXPECT_EQ(seen.size(), size_t(N));
  EXPECT_GT(differ, 100);
  planrt_images_close(images);
}

TEST(Images, CropShiftsByTheDrawnOffsetAndFillsZeros) {
  TempDir dir;
  const int C = 2, H = 4, W = 5, P = 2;
  writeFile(dir / "a.img", planc(C, H, W, pixels(1, C, H, W), {3}));
  planrt_images *images = open(dir / "a.img");
  ASSERT_TRUE(images);
  planrt_image_transform t = plain();
  t.crop_pad = P;
  t.normalize = 1;
  t.mean[0] = 0.5f, t.mean[1] = 0.25f;
  t.std[0] = 0.5f, t.std[1] = 2.0f;
  std::vector<float> out(C * H * W);
  std::set<std::pair<int, int>> offsets;
  for (uint64_t index = 0; index < 300; ++index) {
    int32_t label = -1;
    ASSERT_EQ(planrt_images_sample(images, 5, index, &t, out.data(), &label), PLANRT_OK) << planrt_last_error();
    EXPECT_EQ(label, 3);
    // Find the offset (dy, dx) in [0, 2P]^2 whose reference crop matches: the image
    // padded by P zero bytes, cropped at (dy, dx), then normalised.
    int matches = 0;
    for (int dy = 0; dy <= 2 * P; ++dy)
      for (int dx = 0; dx <= 2 * P; ++dx) {
        bool same = true;
        for (int k = 0; k < C && same; ++k)
          for (int y = 0; y < H && same; ++y)
            for (int x = 0; x < W && same; ++x) {
              int sy = y + dy - P, sx = x + dx - P;
              int byte = sy >= 0 && sy < H && sx >= 0 && sx < W ? pix(0, k, sy, sx) : 0;
              float expect = (float(byte) / 255.0f - t.mean[k]) / t.std[k];
              same = out[(k * H + y) * W + x] == expect;
            }
        if (same) {
          ++matches;
          offsets.insert({dy, dx});
        }
      }
    EXPECT_EQ(matches, 1) << "index " << index;
  }
  // Every offset of the 5 x 5 is drawn.
  EXPECT_EQ(offsets.size(), size_t((2 * P + 1) * (2 * P + 1)));
  planrt_images_close(images);
}

TEST(Images, FlipMirrorsRows) {
  TempDir dir;
  const int C = 3, H = 2, W = 4;
  writeFile(dir / "a.img", planc(C, H, W, pixels(1, C, H, W), {0}));
  planrt_images *images = open(dir / "a.img");
  ASSERT_TRUE(images);
  planrt_image_transform t = plain();
  t.flip = 1;
  std::vector<float> out(C * H * W);
  int flipped = 0, kept = 0;
  for (uint64_t index = 0; index < 100; ++index) {
    ASSERT_EQ(planrt_images_sample(images, 9, index, &t, out.data(), nullptr), PLANRT_OK);
    bool isFlipped = true, isKept = true;
    for (int k = 0; k < C; ++k)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          isKept &= out[(k * H + y) * W + x] == float(pix(0, k, y, x)) / 255.0f;
          isFlipped &= out[(k * H + y) * W + x] == float(pix(0, k, y, W - 1 - x)) / 255.0f;
        }
    EXPECT_NE(isFlipped, isKept) << "index " << index;
    flipped += isFlipped;
    kept += isKept;
  }
  EXPECT_GT(flipped, 25);
  EXPECT_GT(kept, 25);
  // Without flip, no sample is mirrored.
  t.flip = 0;
  for (uint64_t index = 0; index < 20; ++index) {
    ASSERT_EQ(planrt_images_sample(images, 9, index, &t, out.data(), nullptr), PLANRT_OK);
    EXPECT_EQ(out[W - 1], float(pix(0, 0, 0, W - 1)) / 255.0f);
  }
  planrt_images_close(images);
}

TEST(Images, BadFilesAreRefusedWithTheirName) {
  TempDir dir;
  std::string error;
  std::vector<uint8_t> px = pixels(2, 1, 2, 2);
  std::string good = planc(1, 2, 2, px, {1, 2});

  writeFile(dir / "magic.img", planc(1, 2, 2, px, {1, 2}, 1, "PLANCIMX"));
  EXPECT_EQ(openError(dir / "magic.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("magic.img"), std::string::npos) << error;
  EXPECT_NE(error.find("magic"), std::string::npos) << error;

  writeFile(dir / "version.img", planc(1, 2, 2, px, {1, 2}, 2));
  EXPECT_EQ(openError(dir / "version.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("version.img: planc image file version 2"), std::string::npos) << error;

  writeFile(dir / "short.img", good.substr(0, 32 + 5)); // pixels cut short
  EXPECT_EQ(openError(dir / "short.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("short.img: truncated"), std::string::npos) << error;
  EXPECT_NE(error.find("(44 bytes)"), std::string::npos) << error; // 32 + 2·4 + 2·2
  EXPECT_NE(error.find("has 37 bytes"), std::string::npos) << error;

  writeFile(dir / "header.img", good.substr(0, 20));
  EXPECT_EQ(openError(dir / "header.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("header.img"), std::string::npos) << error;

  writeFile(dir / "long.img", good + "x");
  EXPECT_EQ(openError(dir / "long.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("long.img: over-long"), std::string::npos) << error;
  EXPECT_NE(error.find("(44 bytes) but the file has 45 bytes"), std::string::npos) << error;

  writeFile(dir / "zero.img", planc(0, 2, 2, {}, {1}));
  EXPECT_EQ(openError(dir / "zero.img", error), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("zero.img"), std::string::npos) << error;

  writeFile(dir / "label.img", planc(1, 2, 2, px, {1, 10}));
  EXPECT_EQ(openError(dir / "label.img", error, PLANRT_IMAGES_PLANC, 10), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("label.img: image 1 has label 10, outside the 10 classes"), std::string::npos) << error;

  writeFile(dir / "cifar.bin", std::string(3073 * 2 + 1, '\0'));
  EXPECT_EQ(openError(dir / "cifar.bin", error, PLANRT_IMAGES_CIFAR10), PLANRT_ERR_FORMAT);
  EXPECT_NE(error.find("cifar.bin"), std::string::npos) << error;
  EXPECT_NE(error.find("3073"), std::string::npos) << error;

  EXPECT_EQ(openError(dir / "missing_*.img", error), PLANRT_ERR_IO);
  EXPECT_NE(error.find("missing_*.img: no such image file"), std::string::npos) << error;
}

TEST(Images, MismatchedShapesAcrossFilesAreRefused) {
  TempDir dir;
  writeFile(dir / "shard_a.img", planc(1, 2, 2, pixels(1, 1, 2, 2), {0}));
  writeFile(dir / "shard_b.img", planc(1, 2, 3, pixels(1, 1, 2, 3), {0}));
  std::string error;
  EXPECT_EQ(openError(dir / "shard_*.img", error), PLANRT_ERR_MISMATCH);
  EXPECT_NE(error.find("shard_a.img"), std::string::npos) << error;
  EXPECT_NE(error.find("shard_b.img"), std::string::npos) << error;
}
