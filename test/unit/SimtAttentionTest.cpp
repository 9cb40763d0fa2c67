// libplanrt_cuda's tiled attention kernels (runtime/cuda/flash_attention.cuh) run on host
// threads through simt.cuh's emulation — each block's threads with a real barrier and
// shuffles — against the CPU's planrt_k_sdpa and planrt_k_sdpa_bwd (OpenBLAS, two-pass
// softmax), which share no code with them. The shapes cover what the tiling can get
// wrong: several query blocks and key tiles with a ragged last one, every split of a row
// over threads (D = 16 … 256, and D = 48, not a power of two), grouped-query heads, the
// causal mask and rope. A GPU runs the same source (planc-cuda-kernels-test).
#define PLANRT_SIMT_EMULATE 1
#include "flash_attention_mma.cuh"

#include "planrt_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace attn = planrt::attention;

/// flash_attention.cuh's launcher on host threads; scratch from the heap.
struct HostLaunch {
  template <class Kernel, class... A> void run(unsigned gx, unsigned gy, unsigned gz, size_t shared, Kernel k, A... a) {
    planrt::simt::launch(planrt::simt::Grid{gx, gy, gz}, attn::kThreads, shared, k, a...);
  }
  float *alloc(int64_t n) { return new float[size_t(n)](); }
  void free(float *p) { delete[] p; }
};

std::vector<float> random(int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = u(g);
  return v;
}

double relDiff(const std::vector<float> &a, const std::vector<float> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

/// v's elements rounded to bf16 (to nearest, ties to even): a bf16 plan's values.
void roundToBf16(std::vector<float> &v) {
  for (float &x : v) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&x, &u, sizeof u);
  }
}

/// The kernels compared: CUDA cores (flash_attention.cuh), or tensor cores (_mma.cuh) on
/// split TF32 or on bf16.
enum class Kernels { Simt, Mma, Bf16 };

template <class K> void run(const std::vector<float> &qkv, const std::vector<float> &dout, std::vector<float> &out,
                            std::vector<float> &dqkv, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                            bool causal, bool rope) {
  HostLaunch launch;
  attn::sdpa<K>(launch, qkv.data(), out.data(), B, S, H, KVH, D, causal, rope, 10000.0f);
  attn::sdpaBackward<K>(launch, dout.data(), qkv.data(), dqkv.data(), B, S, H, KVH, D, causal, rope, 10000.0f);
}

/// The kernels' output and gradients against the CPU's on random inputs (bf16 values for
/// the bf16 kernels), as relative L2 errors.
void compare(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal, bool rope,
             Kernels kernels = Kernels::Simt) {
  SCOPED_TRACE(testing::Message() << "B " << B << " S " << S << " H " << H << " KVH " << KVH << " D " << D
                                  << " causal " << causal << " rope " << rope << " kernels " << int(kernels));
  int64_t row = (H + 2 * KVH) * D;
  std::vector<float> qkv = random(B * S * row, 1), dout = random(B * S * H * D, 2);
  if (kernels == Kernels::Bf16) {
    roundToBf16(qkv);
    roundToBf16(dout);
  }
  std::vector<float> out(size_t(B * S * H * D), NAN), outRef(out.size()), dqkv(size_t(B * S * row), NAN),
      dqkvRef(dqkv.size());
  if (kernels == Kernels::Mma)
    run<attn::mma::Kernels>(qkv, dout, out, dqkv, B, S, H, KVH, D, causal, rope);
  else if (kernels == Kernels::Bf16)
    run<attn::mma::KernelsBf16>(qkv, dout, out, dqkv, B, S, H, KVH, D, causal, rope);
  else
    run<attn::Kernels>(qkv, dout, out, dqkv, B, S, H, KVH, D, causal, rope);
  planrt_k_sdpa(qkv.data(), outRef.data(), B, S, H, KVH, D, causal, rope, 10000.0f);
  planrt_k_sdpa_bwd(dout.data(), qkv.data(), dqkvRef.data(), B, S, H, KVH, D, causal, rope, 10000.0f);
  // bf16: the probabilities (forward) and their gradients (backward) rounded to 8 bits.
  bool bf16 = kernels == Kernels::Bf16;
  EXPECT_LT(relDiff(out, outRef), bf16 ? 4e-3 : 2e-6);
  EXPECT_LT(relDiff(dqkv, dqkvRef), bf16 ? 5e-3 : 1e-5); // NaN (an element never written) fails too
  if (bf16) { // and not as exact as fp32: the rounding is there
    EXPECT_GT(relDiff(out, outRef), 1e-5);
  }
}

TEST(SimtAttention, CausalAndNotAcrossBlocksAndTiles) {
  compare(2, 37, 4, 4, 16, true, false);   // one query block, one key tile
  compare(1, 150, 2, 2, 16, false, false); // two query blocks (128 rows), three key tiles (64), ragged
  compare(1, 70, 2, 2, 64, true, false);   // split 2: two query blocks, two key tiles
}

TEST(SimtAttention, GroupedQueryWithRope) {
  compare(2, 29, 6, 2, 32, true, true);
  compare(1, 40, 4, 1, 128, false, true); // split 4, tile 32
  compare(1, 33, 2, 1, 48, true, true);   // D = 48: split 2, lanes past D idle
}

TEST(SimtAttention, WidestHead) {
  compare(1, 20, 2, 1, 256, true, false); // split 8, tile 16
}

// The tensor-core kernels, through an emulated mma.sync with the documented fragment
// layouts: on split TF32 operands (fp32's accuracy) and on bf16 (bf16 plans, bf16
// inputs); every ND (D 16, 32, 64, 128, and 48 padded to 64), ragged tiles and blocks (S
// 70: two blocks of 64 queries and keys).
TEST(SimtAttention, TensorCoresCausalAndNot) {
  for (Kernels k : {Kernels::Mma, Kernels::Bf16}) {
    compare(1, 70, 2, 2, 64, true, false, k);
    compare(1, 37, 2, 2, 16, false, false, k);
  }
}

// Whole tiles off the diagonal (and every tile of a bidirectional pass over whole blocks)
// take the kernels' path without per-element masks; those crossing it keep them.
TEST(SimtAttention, TensorCoresWholeTiles) {
  for (Kernels k : {Kernels::Mma, Kernels::Bf16}) {
    compare(1, 192, 1, 1, 16, true, false, k);
    compare(1, 128, 1, 1, 16, false, false, k);
    compare(1, 128, 2, 1, 64, true, false, k); // grouped-query heads, gpt2's D
  }
}

TEST(SimtAttention, TensorCoresGroupedQueryWithRope) {
  for (Kernels k : {Kernels::Mma, Kernels::Bf16}) {
    compare(1, 29, 4, 2, 32, true, true, k);
    compare(1, 33, 2, 1, 48, true, true, k);
    compare(1, 20, 2, 1, 128, false, true, k);
  }
}

TEST(SimtAttention, DeterministicBits) {
  const int64_t B = 1, S = 45, H = 2, D = 32, row = 3 * H * D;
  std::vector<float> qkv = random(B * S * row, 3), a(size_t(B * S * H * D)), b(a.size());
  HostLaunch launch;
  attn::sdpa(launch, qkv.data(), a.data(), B, S, H, H, D, true, false, 0.0f);
  attn::sdpa(launch, qkv.data(), b.data(), B, S, H, H, D, true, false, 0.0f);
  EXPECT_EQ(a, b);
}

} // namespace
