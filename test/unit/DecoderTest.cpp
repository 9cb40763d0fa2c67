// The runtime's Decoder (runtime/lib/decoder.h): chunked runs of a decoding entry
// over the window, the model layout a manifest describes, parameters by name.
#include "decoder.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using planrt::Decoder;
using planrt::ModelLayout;

/// An entry that writes, for each row i of its chunk, (position, token) and
/// records the offset of every call.
std::vector<int64_t> calls;
std::vector<std::vector<int32_t>> chunks;
constexpr int64_t kChunk = 4;
void fakeEntry(float *, const int32_t *tokens, int64_t offset, float *, float *out) {
  calls.push_back(offset);
  chunks.emplace_back(tokens, tokens + kChunk);
  for (int64_t i = 0; i < kChunk; ++i) {
    out[2 * i] = float(offset + i);
    out[2 * i + 1] = float(tokens[i]);
  }
}

ModelLayout layout(int64_t window) {
  ModelLayout m;
  m.model = "fake";
  m.numFloats = 3;
  m.vocab = 256;
  m.window = window;
  m.chunk = kChunk;
  m.layers = 1;
  m.cacheFloats = 1;
  m.width = 2;
  m.params = {{"w", {3}, 0, 3}};
  return m;
}

TEST(Decoder, RunsEveryPositionOnceInChunksBackingOffAtTheWindow) {
  calls.clear();
  chunks.clear();
  Decoder d(layout(10), fakeEntry);
  std::vector<int32_t> ctx{10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  std::vector<int64_t> seen;
  const float *last = d.run(ctx.data(), 0, 10, [&](int64_t p, const float *row) {
    EXPECT_EQ(row[0], float(p)) << "the row of position " << p;
    EXPECT_EQ(row[1], float(ctx[size_t(p)]));
    seen.push_back(p);
  });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // 0-3, 4-7, then 8-9 from a call at 6 (a call at 8 would pass the window of 10).
  EXPECT_EQ(calls, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(last[0], 9.0f);
  EXPECT_EQ(last[1], 19.0f);
}

TEST(Decoder, ResumesFromCachedPositionsAndPadsPastTheEnd) {
  calls.clear();
  chunks.clear();
  Decoder d(layout(64), fakeEntry);
  std::vector<int32_t> ctx{5, 6, 7, 8, 9, 10};
  std::vector<int64_t> seen;
  const float *last = d.run(ctx.data(), 3, 6, [&](int64_t p, const float *) { seen.push_back(p); });
  EXPECT_EQ(seen, (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(calls, (std::vector<int64_t>{3}));
  EXPECT_EQ(chunks[0], (std::vector<int32_t>{8, 9, 10, 0})) << "positions past `to` are padded with 0";
  EXPECT_EQ(last[0], 5.0f);
}

TEST(Decoder, ReadsTheLayoutAndNamesWhatIsMalformed) {
  using planrt::manifest::json;
  json j = json::parse(R"({"model": "tiny", "num_floats": 6, "vocab": 256, "window": 8, "chunk": 4,
                           "layers": 1, "cache_floats": 64, "width": 16,
                           "params": [{"name": "a", "shape": [2, 3], "offset": 0, "count": 6}]})");
  ModelLayout m;
  planrt::readModelLayout(j, "the manifest", m);
  EXPECT_EQ(m.width, 16);
  ASSERT_EQ(m.params.size(), 1u);
  EXPECT_EQ(m.params[0].shape, (std::vector<int64_t>{2, 3}));
  auto malformed = [&](json bad) -> std::string {
    try {
      planrt::readModelLayout(bad, "the manifest", m);
    } catch (const planrt::manifest::Malformed &e) {
      return e.what;
    }
    return "accepted";
  };
  json noWidth = j;
  noWidth.erase("width");
  EXPECT_EQ(malformed(noWidth), "the manifest has no 'width'");
  json chunkPastWindow = j;
  chunkPastWindow["chunk"] = 9;
  EXPECT_EQ(malformed(chunkPastWindow), "chunk is 9, outside [1, 8]");
  json badShape = j;
  badShape["params"][0]["shape"] = {2, 2};
  EXPECT_EQ(malformed(badShape), "params[0].shape does not hold count elements");
}

TEST(Decoder, LoadsParametersByNameAndNamesAMissingOne) {
  plan::test::TempDir dir;
  std::string path = dir / "p.safetensors";
  float w[3] = {1.5f, -2.0f, 3.25f}, other[2] = {0, 0};
  int64_t shape[1] = {3}, shape2[1] = {2};
  planrt_tensor ts[2] = {{"other", PLANRT_F32, 1, shape2, other}, {"w", PLANRT_F32, 1, shape, w}};
  ASSERT_EQ(planrt_st_save(path.c_str(), ts, 2, nullptr, 0), PLANRT_OK);
  Decoder d(layout(8), fakeEntry);
  ASSERT_EQ(d.load(path, "test"), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(d.params()[0], 1.5f);
  EXPECT_EQ(d.params()[2], 3.25f);
  EXPECT_EQ(d.checkpoint(), path);

  ModelLayout m = layout(8);
  m.params = {{"absent", {3}, 0, 3}};
  Decoder missing(m, fakeEntry);
  EXPECT_NE(missing.load(path, "test"), PLANRT_OK);
  EXPECT_NE(std::string(planrt_last_error()).find("absent"), std::string::npos) << planrt_last_error();
  EXPECT_NE(missing.load(dir / "nope", "embed = model(fake)"), PLANRT_OK);
  EXPECT_NE(std::string(planrt_last_error()).find("the checkpoint of embed = model(fake)"), std::string::npos)
      << planrt_last_error();
}

} // namespace
