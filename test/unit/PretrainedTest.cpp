// runtime/lib/pretrained.h: the conversion of every F16 and BF16 value to f32 against
// PyTorch's, and the Hugging Face Llama mapping of a hand-made checkpoint.
#include "pretrained.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using plan::test::TempDir;
using planrt::train::Pretrained;

namespace {

bool haveTorch() {
  static int ok = -1;
  if (ok < 0)
    ok = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return ok;
}

/// Every 16-bit pattern through toF32 as `dtype`, written to `path` as raw f32.
void convertAll(planrt_dtype dtype, const std::string &path) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = uint16_t(i);
  int64_t shape[] = {65536};
  planrt_tensor t{"all", dtype, 1, shape, bits.data()};
  std::vector<float> out(65536);
  ASSERT_EQ(planrt::train::toF32(t, "test", out.data()), PLANRT_OK);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(out.data()), 65536 * 4);
}

} // namespace

// PyTorch's float16 and bfloat16 to float32, the independent reference: every value
// bitwise equal, every NaN a NaN of the same sign.
TEST(Pretrained, EveryHalfAndBFloat16ValueAsPyTorchConvertsIt) {
  if (!haveTorch())
    GTEST_SKIP() << "/usr/bin/python3 with torch is needed";
  TempDir dir;
  for (auto [dtype, name] : {std::pair<planrt_dtype, const char *>{PLANRT_F16, "float16"}, {PLANRT_BF16, "bfloat16"}}) {
    std::string path = dir / (std::string(name) + ".f32");
    convertAll(dtype, path);
    std::string code = "import numpy as np, torch; "
                       "got = np.fromfile('" + path + "', dtype=np.float32); "
                       "want = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch." + name +
                       ").float().numpy(); "
                       "nan = np.isnan(want); "
                       "assert (np.isnan(got) == nan).all(); "
                       "assert (np.signbit(got) == np.signbit(want)).all(); "
                       "assert (got[~nan].view(np.uint32) == want[~nan].view(np.uint32)).all()";
    EXPECT_EQ(std::system(("/usr/bin/python3 -c \"" + code + "\"").c_str()), 0) << name;
  }
}

// A hand-made Llama checkpoint: q [2·2, 3], k [2, 3], v [2, 3] rows fused
// and transposed into c_attn [3, 8]; lm_head [5, 3] transposed into output [3, 5].
TEST(Pretrained, HuggingFaceLlamaNamesMapOntoTheLlamaFamily) {
  TempDir dir;
  std::vector<float> q(12), k(6), v(6), head(15);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = float(i);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 100.0f + float(i);
    v[i] = 200.0f + float(i);
  }
  for (size_t i = 0; i < head.size(); ++i)
    head[i] = -float(i);
  int64_t qs[] = {4, 3}, ks[] = {2, 3}, hs[] = {5, 3};
  std::vector<planrt_tensor> ts = {{"model.layers.0.self_attn.q_proj.weight", PLANRT_F32, 2, qs, q.data()},
                                   {"model.layers.0.self_attn.k_proj.weight", PLANRT_F32, 2, ks, k.data()},
                                   {"model.layers.0.self_attn.v_proj.weight", PLANRT_F32, 2, ks, v.data()},
                                   {"lm_head.weight", PLANRT_F32, 2, hs, head.data()}};
  std::string path = dir / "model.safetensors";
  ASSERT_EQ(planrt_st_save(path.c_str(), ts.data(), ts.size(), nullptr, 0), PLANRT_OK) << planrt_last_error();
  std::unique_ptr<Pretrained> base;
  ASSERT_EQ(Pretrained::open(dir.path, "hf", base), PLANRT_OK) << planrt_last_error();
  std::vector<float> attn(24), out(15);
  ASSERT_EQ(base->read("layers.0.attention.c_attn.weight", {3, 8}, attn.data()), PLANRT_OK) << planrt_last_error();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t o = 0; o < 4; ++o)
      EXPECT_EQ(attn[size_t(i * 8 + o)], q[size_t(o * 3 + i)]);
    for (int64_t o = 0; o < 2; ++o) {
      EXPECT_EQ(attn[size_t(i * 8 + 4 + o)], k[size_t(o * 3 + i)]);
      EXPECT_EQ(attn[size_t(i * 8 + 6 + o)], v[size_t(o * 3 + i)]);
    }
  }
  ASSERT_EQ(base->read("output.weight", {3, 5}, out.data()), PLANRT_OK) << planrt_last_error();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t o = 0; o < 5; ++o)
      EXPECT_EQ(out[size_t(i * 5 + o)], head[size_t(o * 3 + i)]);
  // A c_attn of another width names both sides.
  EXPECT_EQ(base->read("layers.0.attention.c_attn.weight", {3, 10}, attn.data()), PLANRT_ERR_MISMATCH);
  EXPECT_NE(std::string(planrt_last_error()).find("hold 8 rows in the checkpoint but the model's "
                                                  "'layers.0.attention.c_attn.weight' is [3, 10]"),
            std::string::npos)
      << planrt_last_error();
  // Without format: hf, Hugging Face's names are not looked for.
  std::unique_ptr<Pretrained> plain;
  ASSERT_EQ(Pretrained::open(path, "planc", plain), PLANRT_OK);
  EXPECT_EQ(plain->read("output.weight", {3, 5}, out.data()), PLANRT_ERR_MISMATCH);
  EXPECT_NE(std::string(planrt_last_error()).find("(for Hugging Face names, write format: hf)"), std::string::npos);
}
