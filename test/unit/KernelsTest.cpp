// The CPU kernels (planrt_kernels.h): every backward against central finite
// differences of its forward, input by input, and forward sanity checks whose
// expected values are worked out independently (closed forms, invariants). The
// comparison with PyTorch is test/ops/kernels_vs_torch.py.
#include "kernels/common.h"
#include "planrt_cuda.h"
#include "planrt_kernels.h"
#include "step_context.h"

#include <cblas.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using Vec = std::vector<float>;

Vec randn(size_t n, std::mt19937 &rng, float mean = 0.0f, float std = 1.0f) {
  std::normal_distribution<float> dist(mean, std);
  Vec v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

double dot(const Vec &a, const Vec &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += double(a[i]) * b[i];
  return s;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The finite-difference check of one input's gradient. For a few random
/// directions v (restricted to the indices `which` accepts), compares
///   fd = <dy, (f(x + h v) - f(x - h v)) / 2h>   with   an = <grad, v>.
/// Since an ~ N(0, |grad|^2) over v, the error is measured against |an| + |grad|:
/// a wrong term of relative size > rtol in the gradient fails, and an unlucky
/// near-zero an does not make the check flaky. `x` is perturbed in place and
/// restored; `f` reads it.
void checkVjp(
    const std::string &what, Vec &x, const Vec &grad, const Vec &dy, const std::function<Vec()> &f,
    const std::function<bool(size_t)> &which = [](size_t) { return true; }, float h = 1e-2f, double rtol = 1e-2) {
  SCOPED_TRACE(what);
  ASSERT_EQ(x.size(), grad.size());
  std::mt19937 rng(1234);
  double gradNorm = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (which(i))
      gradNorm += double(grad[i]) * grad[i];
  gradNorm = std::sqrt(gradNorm);
  for (int dir = 0; dir < 3; ++dir) {
    Vec v = randn(x.size(), rng);
    for (size_t i = 0; i < v.size(); ++i)
      if (!which(i))
        v[i] = 0;
    const Vec x0 = x;
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = x0[i] + h * v[i];
    Vec plus = f();
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = x0[i] - h * v[i];
    Vec minus = f();
    x = x0;
    ASSERT_EQ(plus.size(), dy.size());
    double fd = 0;
    for (size_t i = 0; i < dy.size(); ++i)
      fd += double(dy[i]) * (double(plus[i]) - double(minus[i])) / (2.0 * h);
    double an = dot(grad, v);
    EXPECT_LE(std::fabs(fd - an), rtol * (std::fabs(an) + gradNorm))
        << "direction " << dir << ": finite difference " << fd << ", from the gradient " << an
        << " (|grad| = " << gradNorm << ")";
  }
}

bool allFinite(const Vec &v) {
  for (float x : v)
    if (!std::isfinite(x))
      return false;
  return true;
}

// ---- LayerNorm

TEST(KernelsLayerNorm, NormalisesEachRow) {
  std::mt19937 rng(1);
  const int64_t rows = 6, C = 37;
  Vec x = randn(rows * C, rng, 3.0f, 2.5f), w(C, 1.0f), b(C, 0.0f), y(rows * C), yNoBias(rows * C);
  planrt_k_layernorm(x.data(), w.data(), b.data(), y.data(), rows, C, 1e-5f);
  planrt_k_layernorm(x.data(), w.data(), nullptr, yNoBias.data(), rows, C, 1e-5f);
  EXPECT_EQ(y, yNoBias);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += y[r * C + c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c)
      var += (y[r * C + c] - mean) * (y[r * C + c] - mean);
    var /= C; // biased, as the kernel's definition
    EXPECT_NEAR(mean, 0.0, 1e-6) << "row " << r;
    EXPECT_NEAR(var, 1.0, 1e-4) << "row " << r;
  }
}

TEST(KernelsLayerNorm, AppliesWeightAndBias) {
  std::mt19937 rng(2);
  const int64_t rows = 3, C = 16;
  Vec x = randn(rows * C, rng), w = randn(C, rng), b = randn(C, rng), one(C, 1.0f);
  Vec y(rows * C), yHat(rows * C);
  planrt_k_layernorm(x.data(), w.data(), b.data(), y.data(), rows, C, 1e-5f);
  planrt_k_layernorm(x.data(), one.data(), nullptr, yHat.data(), rows, C, 1e-5f);
  for (int64_t i = 0; i < rows * C; ++i)
    EXPECT_NEAR(y[i], yHat[i] * w[i % C] + b[i % C], 1e-5);
}

TEST(KernelsLayerNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(3);
  const int64_t rows = 5, C = 12;
  const float eps = 1e-5f;
  Vec x = randn(rows * C, rng, 0.5f, 1.5f), w = randn(C, rng), b = randn(C, rng);
  Vec dy = randn(rows * C, rng);
  Vec dx(rows * C, kNaN), dw(C, kNaN), db(C, kNaN);
  planrt_k_layernorm_bwd(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), rows, C, eps);
  ASSERT_TRUE(allFinite(dx) && allFinite(dw) && allFinite(db)); // overwritten, not accumulated
  auto f = [&] {
    Vec y(rows * C);
    planrt_k_layernorm(x.data(), w.data(), b.data(), y.data(), rows, C, eps);
    return y;
  };
  checkVjp("dx", x, dx, dy, f);
  checkVjp("dw", w, dw, dy, f);
  checkVjp("db", b, db, dy, f);

  // db may be NULL; dx and dw are unchanged by that.
  Vec dx2(rows * C), dw2(C);
  planrt_k_layernorm_bwd(dy.data(), x.data(), w.data(), dx2.data(), dw2.data(), nullptr, rows, C, eps);
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(dw, dw2);
}

TEST(KernelsNorm, EpsIsInsideTheSquareRoot) {
  // Rows (-1, 1) and (1, 1), eps = 3: LayerNorm gives (-1, 1) / sqrt(1 + 3) and
  // RMSNorm (1, 1) / sqrt(1 + 3).
  Vec x = {-1.0f, 1.0f}, ones = {1.0f, 1.0f}, y(2);
  planrt_k_layernorm(x.data(), ones.data(), nullptr, y.data(), 1, 2, 3.0f);
  EXPECT_FLOAT_EQ(y[0], -0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.5f);
  planrt_k_rmsnorm(ones.data(), ones.data(), y.data(), 1, 2, 3.0f);
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.5f);
}

// ---- RMSNorm

TEST(KernelsRmsNorm, NormalisesEachRow) {
  std::mt19937 rng(4);
  const int64_t rows = 4, C = 33;
  Vec x = randn(rows * C, rng, 1.0f, 3.0f), w(C, 1.0f), y(rows * C), y2(rows * C);
  planrt_k_rmsnorm(x.data(), w.data(), y.data(), rows, C, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c)
      ms += double(y[r * C + c]) * y[r * C + c];
    EXPECT_NEAR(ms / C, 1.0, 1e-5) << "row " << r;
  }
  // Scale invariant (up to eps), and w multiplies elementwise.
  Vec x2(x), w2 = randn(C, rng);
  for (float &v : x2)
    v *= 4.0f;
  planrt_k_rmsnorm(x2.data(), w2.data(), y2.data(), rows, C, 1e-6f);
  for (int64_t i = 0; i < rows * C; ++i)
    EXPECT_NEAR(y2[i], y[i] * w2[i % C], 1e-5);
}

TEST(KernelsRmsNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  const int64_t rows = 5, C = 10;
  const float eps = 1e-6f;
  Vec x = randn(rows * C, rng, 0.3f), w = randn(C, rng), dy = randn(rows * C, rng);
  Vec dx(rows * C, kNaN), dw(C, kNaN);
  planrt_k_rmsnorm_bwd(dy.data(), x.data(), w.data(), dx.data(), dw.data(), rows, C, eps);
  ASSERT_TRUE(allFinite(dx) && allFinite(dw));
  auto f = [&] {
    Vec y(rows * C);
    planrt_k_rmsnorm(x.data(), w.data(), y.data(), rows, C, eps);
    return y;
  };
  checkVjp("dx", x, dx, dy, f);
  checkVjp("dw", w, dw, dy, f);
}

// ---- Attention

struct SdpaShape {
  int64_t B, S, H, KVH, D;
  int32_t causal, rope;
  float theta;
};

std::string name(const SdpaShape &s) {
  return "B=" + std::to_string(s.B) + " S=" + std::to_string(s.S) + " H=" + std::to_string(s.H) +
         " KVH=" + std::to_string(s.KVH) + " D=" + std::to_string(s.D) + (s.causal ? " causal" : " full") +
         (s.rope ? " rope" : "");
}

TEST(KernelsSdpa, CausalFirstPositionIsItsValue) {
  std::mt19937 rng(6);
  for (int32_t rope : {0, 1}) {
    const int64_t B = 2, S = 5, H = 6, KVH = 2, D = 4, row = (H + 2 * KVH) * D;
    Vec qkv = randn(B * S * row, rng), out(B * S * H * D);
    planrt_k_sdpa(qkv.data(), out.data(), B, S, H, KVH, D, 1, rope, 10000.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D; ++i) {
          int64_t g = h / (H / KVH); // grouped-query: heads 0-2 read kv head 0, 3-5 head 1
          float v = qkv[b * S * row + (H + KVH + g) * D + i];
          EXPECT_FLOAT_EQ(out[b * S * H * D + h * D + i], v) << "rope " << rope << " b " << b << " h " << h;
        }
  }
}

TEST(KernelsSdpa, EqualScoresAverageTheValues) {
  // Keys all zero: every score is 0, so each query gets the mean of the values
  // it may see (all of them, or the first s + 1 when causal).
  std::mt19937 rng(7);
  const int64_t B = 1, S = 4, H = 2, KVH = 1, D = 4, row = (H + 2 * KVH) * D;
  Vec qkv = randn(B * S * row, rng);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < D; ++i)
      qkv[s * row + H * D + i] = 0.0f;
  for (int32_t causal : {0, 1}) {
    Vec out(B * S * H * D);
    planrt_k_sdpa(qkv.data(), out.data(), B, S, H, KVH, D, causal, 1, 10000.0f);
    for (int64_t s = 0; s < S; ++s) {
      int64_t T = causal ? s + 1 : S;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D; ++i) {
          double mean = 0;
          for (int64_t t = 0; t < T; ++t)
            mean += qkv[t * row + (H + KVH) * D + i];
          EXPECT_NEAR(out[s * H * D + h * D + i], mean / T, 1e-6) << "causal " << causal;
        }
    }
  }
}

/// out[s] = sum_t softmax_t(score(s, t)) v[t] for a given score function.
std::vector<double> attend(const std::function<double(int64_t, int64_t)> &score, const Vec &v, int64_t S, int64_t s) {
  std::vector<double> p(S);
  double max = -1e300, sum = 0;
  for (int64_t t = 0; t < S; ++t)
    max = std::max(max, p[t] = score(s, t));
  for (int64_t t = 0; t < S; ++t)
    sum += p[t] = std::exp(p[t] - max);
  std::vector<double> o(1, 0.0);
  for (int64_t t = 0; t < S; ++t)
    o[0] += p[t] / sum * v[t];
  return o;
}

TEST(KernelsSdpa, RopeRotatesHalvesByPosition) {
  // One head, D = 4, theta = 100: pairs (x0, x2) at frequency 1 and (x1, x3) at
  // 100^(-1/2) = 0.1. q = e1 and k = e3 sit on the second pair only, as (1, 0)
  // and (0, 1); after the rotations by angles 0.1 s and 0.1 t,
  // q.k = cos(0.1 s) * (-sin(0.1 t)) + sin(0.1 s) * cos(0.1 t) = sin(0.1 (s - t)).
  // An interleaved-pair convention, the other rotation direction or another
  // frequency gives a different answer.
  const int64_t S = 6, H = 1, KVH = 1, D = 4, row = 3 * D;
  std::mt19937 rng(8);
  Vec values = randn(S, rng), qkv(S * row, 0.0f), out(S * D);
  for (int64_t s = 0; s < S; ++s) {
    qkv[s * row + 1] = 3.0f;          // q = 3 e1 (a larger score than 1/2)
    qkv[s * row + D + 3] = 1.0f;      // k = e3
    qkv[s * row + 2 * D] = values[s]; // v = values[s] e0
  }
  planrt_k_sdpa(qkv.data(), out.data(), 1, S, H, KVH, D, 0, 1, 100.0f);
  for (int64_t s = 0; s < S; ++s) {
    auto expected =
        attend([](int64_t s, int64_t t) { return 3.0 * std::sin(0.1 * double(s - t)) / 2.0; }, values, S, s);
    EXPECT_NEAR(out[s * D], expected[0], 1e-6) << "s " << s;
    EXPECT_EQ(out[s * D + 1], 0.0f);
  }
}

TEST(KernelsSdpa, BackwardMatchesFiniteDifferences) {
  const SdpaShape shapes[] = {
      {2, 5, 2, 2, 4, 1, 0, 10000.0f}, // causal, multi-head
      {1, 6, 4, 2, 6, 0, 1, 10000.0f}, // full, rope, grouped-query
      {2, 4, 4, 1, 4, 1, 1, 10.0f},    // causal, rope (fast angles), one kv head
      {1, 5, 3, 3, 2, 0, 0, 10000.0f}, // full, multi-head
      {1, 7, 6, 2, 8, 1, 1, 500.0f},   // causal, rope, grouped-query
      // The kernels take queries in blocks of 64: whole and partial blocks.
      {1, 150, 2, 1, 4, 1, 1, 10000.0f}, // causal, rope, grouped-query
      {1, 70, 2, 2, 6, 0, 0, 10000.0f},  // full
  };
  std::mt19937 rng(9);
  for (const SdpaShape &sh : shapes) {
    SCOPED_TRACE(name(sh));
    const int64_t row = (sh.H + 2 * sh.KVH) * sh.D, n = sh.B * sh.S * row;
    Vec qkv = randn(n, rng), dout = randn(sh.B * sh.S * sh.H * sh.D, rng), dqkv(n, kNaN);
    planrt_k_sdpa_bwd(dout.data(), qkv.data(), dqkv.data(), sh.B, sh.S, sh.H, sh.KVH, sh.D, sh.causal, sh.rope,
                      sh.theta);
    ASSERT_TRUE(allFinite(dqkv));
    auto f = [&] {
      Vec out(sh.B * sh.S * sh.H * sh.D);
      planrt_k_sdpa(qkv.data(), out.data(), sh.B, sh.S, sh.H, sh.KVH, sh.D, sh.causal, sh.rope, sh.theta);
      return out;
    };
    auto part = [&](int64_t lo, int64_t hi) {
      return [=](size_t i) {
        int64_t c = int64_t(i) % row;
        return c >= lo * sh.D && c < hi * sh.D;
      };
    };
    checkVjp("dq", qkv, dqkv, dout, f, part(0, sh.H));
    checkVjp("dk", qkv, dqkv, dout, f, part(sh.H, sh.H + sh.KVH));
    checkVjp("dv", qkv, dqkv, dout, f, part(sh.H + sh.KVH, sh.H + 2 * sh.KVH));
  }
}

TEST(KernelsSdpa, CausalIgnoresLaterPositions) {
  // Query s of a causal attention reads positions 0..s only: changing everything
  // after s (in the same block of queries and in later ones) leaves out[0..s]
  // bit for bit, and the gradient of q[0..s] too, since dout is zero after s.
  std::mt19937 rng(10);
  const int64_t B = 1, S = 160, H = 4, KVH = 2, D = 8, row = (H + 2 * KVH) * D;
  for (int64_t s : {0, 40, 63, 64, 100}) {
    SCOPED_TRACE("s " + std::to_string(s));
    Vec qkv = randn(B * S * row, rng), out(S * H * D), dout = randn(S * H * D, rng);
    for (int64_t i = (s + 1) * H * D; i < S * H * D; ++i)
      dout[i] = 0.0f;
    Vec qkv2 = qkv, out2(out.size()), dqkv(qkv.size()), dqkv2(qkv.size());
    for (int64_t i = (s + 1) * row; i < S * row; ++i)
      qkv2[i] = 10.0f * qkv2[i] + 1.0f;
    planrt_k_sdpa(qkv.data(), out.data(), B, S, H, KVH, D, 1, 1, 10000.0f);
    planrt_k_sdpa(qkv2.data(), out2.data(), B, S, H, KVH, D, 1, 1, 10000.0f);
    planrt_k_sdpa_bwd(dout.data(), qkv.data(), dqkv.data(), B, S, H, KVH, D, 1, 1, 10000.0f);
    planrt_k_sdpa_bwd(dout.data(), qkv2.data(), dqkv2.data(), B, S, H, KVH, D, 1, 1, 10000.0f);
    for (int64_t i = 0; i < (s + 1) * H * D; ++i)
      ASSERT_EQ(out[i], out2[i]) << "out element " << i;
    for (int64_t t = 0; t <= s; ++t)
      for (int64_t i = 0; i < H * D; ++i)
        ASSERT_NEAR(dqkv[t * row + i], dqkv2[t * row + i], 1e-6) << "dq at " << t << ", " << i;
  }
}

// ---- Embedding

TEST(KernelsEmbedding, GathersRows) {
  std::mt19937 rng(10);
  const int64_t V = 7, C = 5, rows = 4;
  Vec table = randn(V * C, rng), out(rows * C);
  std::vector<int32_t> ids = {3, 0, 6, 3};
  planrt_k_embedding(table.data(), ids.data(), out.data(), rows, C, V);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c)
      EXPECT_EQ(out[r * C + c], table[ids[r] * C + c]);
}

TEST(KernelsEmbedding, BackwardScatterAddsAndOverwrites) {
  std::mt19937 rng(11);
  const int64_t V = 6, C = 3, rows = 5;
  std::vector<int32_t> ids = {2, 5, 2, 0, 2};
  Vec table = randn(V * C, rng), dout = randn(rows * C, rng), dtable(V * C, kNaN);
  planrt_k_embedding_bwd(dout.data(), ids.data(), dtable.data(), rows, C, V);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) {
      double expected = 0;
      for (int64_t r = 0; r < rows; ++r)
        if (ids[r] == v)
          expected += dout[r * C + c];
      EXPECT_NEAR(dtable[v * C + c], expected, 1e-6) << "id " << v;
    }
  auto f = [&] {
    Vec out(rows * C);
    planrt_k_embedding(table.data(), ids.data(), out.data(), rows, C, V);
    return out;
  };
  checkVjp("dtable", table, dtable, dout, f);
}

TEST(KernelsEmbeddingDeathTest, IdOutOfRangeExits) {
  Vec table(4 * 2, 0.0f), out(2 * 2), dtable(4 * 2);
  std::vector<int32_t> high = {1, 4}, negative = {-3, 0};
  EXPECT_EXIT(planrt_k_embedding(table.data(), high.data(), out.data(), 2, 2, 4), ::testing::ExitedWithCode(1),
              "planrt: error: embedding id 4 is outside \\[0, 4\\)");
  EXPECT_EXIT(planrt_k_embedding(table.data(), negative.data(), out.data(), 2, 2, 4), ::testing::ExitedWithCode(1),
              "planrt: error: embedding id -3 is outside \\[0, 4\\)");
  EXPECT_EXIT(planrt_k_embedding_bwd(out.data(), high.data(), dtable.data(), 2, 2, 4), ::testing::ExitedWithCode(1),
              "planrt: error: embedding id 4 is outside \\[0, 4\\)");
}

// ---- Cross-entropy

TEST(KernelsCrossEntropy, KnownValues) {
  // Equal logits: log V whatever the target. Logits (0, log 3): targets 1 and 0
  // give log(4/3) and log 4; their mean is the loss.
  const int64_t V = 5;
  Vec flat(3 * V, 2.5f);
  std::vector<int32_t> t = {0, 4, 2};
  float loss = kNaN;
  planrt_k_cross_entropy(flat.data(), t.data(), &loss, 3, V, 0);
  EXPECT_NEAR(loss, std::log(5.0), 1e-6);

  Vec two = {0.0f, float(std::log(3.0)), 0.0f, float(std::log(3.0))};
  std::vector<int32_t> t2 = {1, 0};
  planrt_k_cross_entropy(two.data(), t2.data(), &loss, 2, 2, 0);
  EXPECT_NEAR(loss, 0.5 * (std::log(4.0 / 3.0) + std::log(4.0)), 1e-6);

  // Stable for large logits: a shift of 1e4 changes nothing.
  std::mt19937 rng(12);
  Vec x = randn(3 * V, rng), shifted(x);
  for (float &v : shifted)
    v += 1e4f;
  float l1, l2;
  planrt_k_cross_entropy(x.data(), t.data(), &l1, 3, V, 0);
  planrt_k_cross_entropy(shifted.data(), t.data(), &l2, 3, V, 0);
  EXPECT_TRUE(std::isfinite(l2));
  EXPECT_NEAR(l1, l2, 2e-3); // the shifted logits themselves are rounded to ~1e-3
}

TEST(KernelsCrossEntropy, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(13);
  const int64_t rows = 6, V = 9;
  Vec logits = randn(rows * V, rng, 0.0f, 2.0f), dlogits(rows * V, kNaN);
  std::vector<int32_t> t = {0, 8, 3, 3, 5, 1};
  float dloss = 1.7f;
  planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), dlogits.data(), rows, V, 0, 0);
  ASSERT_TRUE(allFinite(dlogits));
  for (int64_t r = 0; r < rows; ++r) { // softmax - onehot sums to 0
    double sum = 0;
    for (int64_t j = 0; j < V; ++j)
      sum += dlogits[r * V + j];
    EXPECT_NEAR(sum, 0.0, 1e-6);
    EXPECT_LT(dlogits[r * V + t[r]], 0.0f);
  }
  auto f = [&] {
    Vec loss(1);
    planrt_k_cross_entropy(logits.data(), t.data(), loss.data(), rows, V, 0);
    return loss;
  };
  checkVjp("dlogits", logits, dlogits, Vec{dloss}, f);
}

// The bf16 value nearest x, ties to the even one, from its two neighbours (finite x well
// inside the range): a reference independent of the kernels' bit arithmetic.
float nearestBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  float down, up;
  std::memcpy(&down, &lo, sizeof down);
  std::memcpy(&up, &hi, sizeof up);
  double toDown = std::fabs(double(x) - double(down)), toUp = std::fabs(double(up) - double(x));
  if (toDown != toUp)
    return toDown < toUp ? down : up;
  return (lo >> 16) & 1u ? up : down;
}

// Asked to round its result (plan-cuda-round-results), the backward writes each element
// rounded as nn.round would round it, also in place over the logits.
TEST(KernelsCrossEntropy, BackwardRoundsItsResultAlsoInPlace) {
  std::mt19937 rng(14);
  const int64_t rows = 5, V = 300;
  Vec logits = randn(rows * V, rng, 0.0f, 3.0f), plain(rows * V), rounded(rows * V);
  std::vector<int32_t> t = {0, 299, 17, 17, 150};
  float dloss = 0.9f;
  planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), plain.data(), rows, V, 0, 0);
  for (int32_t to : {1, 2}) {
    planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), rounded.data(), rows, V, to, 0);
    int64_t changed = 0;
    for (int64_t i = 0; i < rows * V; ++i) {
      float want = to == 1 ? nearestBf16(plain[i]) : float(static_cast<_Float16>(plain[i]));
      ASSERT_EQ(rounded[i], want) << "round_to " << to << ", element " << i;
      changed += rounded[i] != plain[i];
    }
    EXPECT_GT(changed, rows * V / 2) << "round_to " << to;
    Vec inPlace = logits;
    planrt_k_cross_entropy_bwd(&dloss, inPlace.data(), t.data(), inPlace.data(), rows, V, to, 0);
    EXPECT_EQ(inPlace, rounded) << "in place, round_to " << to;
  }
}

// 16-bit storage (plan-cuda-half-storage): logits held as bf16 (fp16) elements give the
// float32 kernels' loss and gradient on their values, the gradient stored as the 16 bits
// of its rounded value, also in place over the 16-bit logits.
TEST(KernelsCrossEntropy, SixteenBitLogitsAndGradient) {
  std::mt19937 rng(15);
  const int64_t rows = 4, V = 257;
  std::vector<int32_t> t = {0, 256, 3, 100};
  float dloss = 1.3f;
  for (int32_t type : {1, 2}) {
    Vec logits = randn(rows * V, rng, 0.0f, 3.0f);
    std::vector<uint16_t> half(size_t(rows * V));
    for (int64_t i = 0; i < rows * V; ++i) {
      logits[i] = type == 1 ? nearestBf16(logits[i]) : float(static_cast<_Float16>(logits[i]));
      half[i] = planrt::kernels::narrow16(logits[i], type);
      ASSERT_EQ(planrt::kernels::widen16(half[i], type), logits[i]);
    }
    auto *h = reinterpret_cast<const float *>(half.data());
    float want = 0, got = 0;
    planrt_k_cross_entropy(logits.data(), t.data(), &want, rows, V, 0);
    planrt_k_cross_entropy(h, t.data(), &got, rows, V, type);
    EXPECT_EQ(got, want) << "type " << type;
    Vec grad(rows * V);
    planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), grad.data(), rows, V, type, 0);
    std::vector<uint16_t> out(size_t(rows * V)), inPlace = half;
    planrt_k_cross_entropy_bwd(&dloss, h, t.data(), reinterpret_cast<float *>(out.data()), rows, V, type,
                               type | type << 2);
    planrt_k_cross_entropy_bwd(&dloss, reinterpret_cast<const float *>(inPlace.data()), t.data(),
                               reinterpret_cast<float *>(inPlace.data()), rows, V, type, type | type << 2);
    for (int64_t i = 0; i < rows * V; ++i) {
      ASSERT_EQ(planrt::kernels::widen16(out[i], type), grad[i]) << "type " << type << ", element " << i;
      ASSERT_EQ(inPlace[i], out[i]) << "in place, type " << type << ", element " << i;
    }
  }
  // A 16-bit gradient of another type than the rounding's is refused.
  Vec logits(2 * 3, 0.0f), dlogits(2 * 3);
  std::vector<int32_t> two = {0, 1};
  EXPECT_EXIT(planrt_k_cross_entropy_bwd(&dloss, logits.data(), two.data(), dlogits.data(), 2, 3, 1, 2 << 2),
              ::testing::ExitedWithCode(1), "needs round_to 2");
}

// Decoding with a key/value cache in chunks (a prompt of 5, then one position at a
// time, then a chunk of 3) gives planrt_k_sdpa's numbers for the whole sequence.
// Tensor parallelism: the slices of a vocab-split table sum to the whole lookup, and
// their gradients are the rows of the whole gradient.
TEST(KernelsTensorParallel, EmbeddingSlicesSumToTheWholeTable) {
  const int64_t V = 8, C = 3, rows = 5;
  std::mt19937 rng(21);
  Vec table = randn(size_t(V * C), rng), dout = randn(size_t(rows * C), rng);
  std::vector<int32_t> ids = {7, 0, 3, 4, 3};
  Vec whole(static_cast<size_t>(rows * C)), sum(static_cast<size_t>(rows * C), 0.0f),
      part(static_cast<size_t>(rows * C));
  planrt_k_embedding(table.data(), ids.data(), whole.data(), rows, C, V);
  Vec dwhole(static_cast<size_t>(V * C)), dpart(static_cast<size_t>(V / 2 * C));
  planrt_k_embedding_bwd(dout.data(), ids.data(), dwhole.data(), rows, C, V);
  for (int64_t c = 0; c < 2; ++c) {
    int64_t first = c * V / 2;
    planrt_k_embedding_slice(table.data() + first * C, ids.data(), part.data(), rows, C, V / 2, first);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += part[i];
    planrt_k_embedding_slice_bwd(dout.data(), ids.data(), dpart.data(), rows, C, V / 2, first);
    for (int64_t i = 0; i < V / 2 * C; ++i)
      EXPECT_EQ(dpart[size_t(i)], dwhole[size_t(first * C + i)]) << "rank " << c << ", element " << i;
  }
  EXPECT_EQ(sum, whole);
}

// Without a mesh the group is this process: the vocab-parallel loss over the whole
// vocabulary is nn.cross_entropy's, and its gradient, from the kept log-sum-exp, too.
TEST(KernelsTensorParallel, CrossEntropyOfOneRankIsTheWholeLoss) {
  const int64_t V = 7, rows = 4;
  std::mt19937 rng(22);
  Vec logits = randn(size_t(rows * V), rng, 0.0f, 3.0f);
  std::vector<int32_t> t = {6, 0, 2, 2};
  float loss = kNaN, ref = kNaN, dloss = 1.7f;
  Vec lse(static_cast<size_t>(rows)), grad(static_cast<size_t>(rows * V)), refGrad(static_cast<size_t>(rows * V));
  planrt_k_cross_entropy(logits.data(), t.data(), &ref, rows, V, 0);
  planrt_k_cross_entropy_vp(logits.data(), t.data(), &loss, lse.data(), rows, V, 0, 0);
  EXPECT_NEAR(loss, ref, 1e-6);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < V; ++j)
      s += std::exp(double(logits[size_t(r * V + j)]));
    EXPECT_NEAR(lse[size_t(r)], std::log(s), 1e-5);
  }
  planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), refGrad.data(), rows, V, 0, 0);
  planrt_k_cross_entropy_vp_bwd(&dloss, logits.data(), t.data(), lse.data(), grad.data(), rows, V, 0);
  for (size_t i = 0; i < grad.size(); ++i)
    EXPECT_NEAR(grad[i], refGrad[i], 1e-6) << i;
}

TEST(KernelsSdpaCached, ChunksMatchTheWholeSequence) {
  std::mt19937 rng(11);
  for (int32_t rope : {0, 1}) {
    const int64_t B = 2, S = 10, T = 12, H = 4, KVH = 2, D = 6, row = (H + 2 * KVH) * D;
    Vec qkv = randn(B * S * row, rng), whole(B * S * H * D);
    planrt_k_sdpa(qkv.data(), whole.data(), B, S, H, KVH, D, 1, rope, 10000.0f);
    Vec cache(B * T * 2 * KVH * D, std::nanf("")); // unwritten rows must never be read
    int64_t pos = 0;
    for (int64_t n : {5, 1, 1, 3}) {
      Vec chunk(B * n * row), out(B * n * H * D);
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(qkv.begin() + (b * S + pos) * row, n * row, chunk.begin() + b * n * row);
      planrt_k_sdpa_cached(chunk.data(), cache.data(), out.data(), B, n, T, pos, H, KVH, D, rope, 10000.0f);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n * H * D; ++i)
          EXPECT_NEAR(out[b * n * H * D + i], whole[(b * S + pos) * H * D + i], 1e-5)
              << "rope " << rope << " chunk at " << pos << " b " << b << " element " << i;
      pos += n;
    }
  }
}

TEST(KernelsSdpaCachedDeathTest, ChunkPastTheWindowExits) {
  const int64_t H = 1, KVH = 1, D = 2, T = 4;
  Vec qkv(2 * (H + 2 * KVH) * D, 0.0f), cache(T * 2 * KVH * D), out(2 * H * D);
  EXPECT_EXIT(planrt_k_sdpa_cached(qkv.data(), cache.data(), out.data(), 1, 2, T, 3, H, KVH, D, 0, 1e4f),
              ::testing::ExitedWithCode(1), "positions \\[3, 5\\) do not fit the window of 4");
}

TEST(KernelsCrossEntropyDeathTest, TargetOutOfRangeExits) {
  Vec logits(2 * 3, 0.0f), dlogits(2 * 3);
  std::vector<int32_t> t = {0, 3};
  float loss, dloss = 1.0f;
  EXPECT_EXIT(planrt_k_cross_entropy(logits.data(), t.data(), &loss, 2, 3, 0), ::testing::ExitedWithCode(1),
              "planrt: error: cross-entropy target 3 is outside \\[0, 3\\)");
  EXPECT_EXIT(planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), dlogits.data(), 2, 3, 0, 0),
              ::testing::ExitedWithCode(1), "planrt: error: cross-entropy target 3 is outside \\[0, 3\\)");
  t[1] = 2;
  EXPECT_EXIT(planrt_k_cross_entropy_bwd(&dloss, logits.data(), t.data(), dlogits.data(), 2, 3, 3, 0),
              ::testing::ExitedWithCode(1), "round_to 3 is not 0 \\(none\\), 1 \\(bf16\\) or 2 \\(fp16\\)");
}

// The cuda-host precision audit (plan-precision-audit): a call marked bf16 computes as
// the call it replaces when every operand is a bf16 value, and stops naming the first
// element that is not; 1 + 2^-10 is an fp16 value but not a bf16 one.
TEST(KernelsPrecisionAuditDeathTest, GemmOperandsMustBeValuesOfTheMarkedType) {
  Vec A = {1.0f, 2.0f, 3.0f, 4.0f}, B = {1.0f, 0.5f, -2.0f, 1.0f}, C(4), ref(4);
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2, PLANRT_GEMM_BF16);
  // C = A Bᵀ, worked out by hand.
  EXPECT_EQ(C, (Vec{2.0f, -0.0f, 5.0f, -2.0f}));
  A[3] = 1.0f + 1.0f / 1024;
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2, PLANRT_GEMM_F16);
  EXPECT_EXIT(
      planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2, PLANRT_GEMM_BF16),
      ::testing::ExitedWithCode(1),
      "planrt: error: GEMM marked bf16: operand A element \\(1, 1\\) = 1.0009765.* is not a bf16 value");
  A[3] = 4.0f;
  B[1] = 1.0f / 3; // operand B, transposed: its element (0, 1)
  EXPECT_EXIT(
      planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2, PLANRT_GEMM_F16),
      ::testing::ExitedWithCode(1), "GEMM marked fp16: operand B element \\(0, 1\\) = 0.333.* is not a fp16 value");
}

// A rounded result (PLANRT_GEMM_ROUND_RESULT): C rounded to nearest, ties to even, in the
// marked type, worked out by hand; beta must be 0.
TEST(KernelsPrecisionAuditDeathTest, GemmRoundsItsResultWhenAsked) {
  const float u = 1.0f / 256; // bf16 steps by 2u = 2^-7 in [1, 2)
  Vec A = {1.0f, u, 1.0f, 3 * u}, B = {1.0f, 1.0f, 1.0f, 0.0f}, C(4);
  // C = A Bᵀ = [1 + u, 1; 1 + 3u, 1]: two ties, to the even neighbours 1 and 1 + 4u.
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2, PLANRT_GEMM_BF16);
  EXPECT_EQ(C, (Vec{1.0f + u, 1.0f, 1.0f + 3 * u, 1.0f}));
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2,
                    PLANRT_GEMM_BF16 | PLANRT_GEMM_ROUND_RESULT);
  EXPECT_EQ(C, (Vec{1.0f, 1.0f, 1.0f + 4 * u, 1.0f}));
  // fp16 keeps both (steps of 2^-10).
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2,
                    PLANRT_GEMM_F16 | PLANRT_GEMM_ROUND_RESULT);
  EXPECT_EQ(C, (Vec{1.0f + u, 1.0f, 1.0f + 3 * u, 1.0f}));
  EXPECT_EXIT(planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 1.0f, C.data(), 2,
                                PLANRT_GEMM_BF16 | PLANRT_GEMM_ROUND_RESULT),
              ::testing::ExitedWithCode(1), "a rounded result \\(PLANRT_GEMM_ROUND_RESULT\\) needs beta = 0");
}

// 16-bit operands (plan-cuda-half-storage): A and B as bf16 elements, with leading
// dimensions wider than their rows, give the float32 GEMM's C; a 16-bit C holds the 16
// bits of the rounded result, and needs PLANRT_GEMM_ROUND_RESULT.
TEST(KernelsPrecisionAuditDeathTest, GemmReadsAndWritesSixteenBitBuffers) {
  const float u = 1.0f / 256;
  Vec A = {1.0f, u, 1.0f, 3 * u}, B = {1.0f, 1.0f, 1.0f, 0.0f}, want(4), C(4);
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, want.data(), 2, PLANRT_GEMM_BF16);
  // The same values, rows 3 elements apart (the third element of each row unused).
  std::vector<uint16_t> a16(6, 0xffff), b16(6, 0xffff), c16(4);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      a16[r * 3 + c] = planrt::kernels::narrow16(A[r * 2 + c], 1);
      b16[r * 3 + c] = planrt::kernels::narrow16(B[r * 2 + c], 1);
    }
  auto f = [](std::vector<uint16_t> &v) { return reinterpret_cast<float *>(v.data()); };
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, f(a16), 3, f(b16), 3, 0.0f, C.data(), 2,
                    PLANRT_GEMM_BF16 | PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_B);
  EXPECT_EQ(C, want);
  planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, f(a16), 3, B.data(), 2, 0.0f, f(c16), 2,
                    PLANRT_GEMM_BF16 | PLANRT_GEMM_ROUND_RESULT | PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_C);
  // The ties of GemmRoundsItsResultWhenAsked, to the even neighbours 1 and 1 + 4u.
  Vec got(4);
  for (int i = 0; i < 4; ++i)
    got[i] = planrt::kernels::widen16(c16[i], 1);
  EXPECT_EQ(got, (Vec{1.0f, 1.0f, 1.0f + 4 * u, 1.0f}));
  EXPECT_EXIT(planrt_audit_gemm(101, 111, 112, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, f(c16), 2,
                                PLANRT_GEMM_BF16 | PLANRT_GEMM_HALF_C),
              ::testing::ExitedWithCode(1), "needs PLANRT_GEMM_ROUND_RESULT");
}

TEST(KernelsPrecisionAuditDeathTest, AttentionOperandsMustBeBf16) {
  const int64_t H = 1, KVH = 1, D = 2, S = 2;
  Vec qkv(S * (H + 2 * KVH) * D, 0.5f), out(S * H * D), dout(S * H * D, 0.25f), dqkv(qkv.size());
  planrt_audit_sdpa(qkv.data(), out.data(), 1, S, H, KVH, D, 1, 0, 0.0f, PLANRT_GEMM_BF16);
  EXPECT_FLOAT_EQ(out[0], 0.5f); // the first query sees one key: its value
  dout[3] = 0.1f;
  EXPECT_EXIT(planrt_audit_sdpa_bwd(dout.data(), qkv.data(), dqkv.data(), 1, S, H, KVH, D, 1, 0, 0.0f,
                                    PLANRT_GEMM_BF16),
              ::testing::ExitedWithCode(1),
              "attention's backward marked bf16: the output's gradient element \\(1, 1\\) = 0.1.* is not a bf16 value");
}

// ---- Vision

struct ConvShape {
  int64_t N, C, H, W, K, R, stride, pad;
  int64_t P() const { return (H + 2 * pad - R) / stride + 1; }
  int64_t Q() const { return (W + 2 * pad - R) / stride + 1; }
};

std::string name(const ConvShape &s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " H=" + std::to_string(s.H) +
         " W=" + std::to_string(s.W) + " K=" + std::to_string(s.K) + " R=" + std::to_string(s.R) +
         " stride=" + std::to_string(s.stride) + " pad=" + std::to_string(s.pad);
}

/// The convolution by its definition (cross-correlation, zero padding), in double.
Vec conv2dDirect(const ConvShape &s, const Vec &x, const Vec &w, const float *b) {
  const int64_t P = s.P(), Q = s.Q();
  Vec y(size_t(s.N * s.K * P * Q));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          double sum = b ? b[k] : 0.0;
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t kh = 0; kh < s.R; ++kh)
              for (int64_t kw = 0; kw < s.R; ++kw) {
                int64_t ih = p * s.stride - s.pad + kh, iw = q * s.stride - s.pad + kw;
                if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
                  sum += double(x[((n * s.C + c) * s.H + ih) * s.W + iw]) * w[((k * s.C + c) * s.R + kh) * s.R + kw];
              }
          y[((n * s.K + k) * P + p) * Q + q] = float(sum);
        }
  return y;
}

const ConvShape kConvShapes[] = {
    {2, 3, 6, 6, 4, 3, 1, 1},  // 3x3 "same"
    {1, 1, 5, 7, 1, 3, 1, 0},  // N = C = K = 1, H != W, unpadded
    {2, 4, 7, 6, 3, 3, 2, 1},  // stride 2, padding 1
    {3, 5, 4, 3, 6, 1, 1, 0},  // 1x1, stride 1: the image is the GEMM operand
    {2, 3, 5, 5, 2, 1, 2, 0},  // 1x1, stride 2
    {1, 2, 11, 9, 3, 7, 2, 3}, // 7x7 stride 2 padding 3
    {1, 2, 3, 4, 2, 5, 1, 2},  // the window larger than the image
    {1, 2, 4, 5, 2, 2, 3, 1},  // even window, stride 3, pad = R / 2 (the largest)
};

TEST(KernelsConv2d, PointwiseIsAMatmul) {
  // A 1x1 convolution with stride s: y[n, k, p, q] = sum_c w[k, c] x[n, c, s p, s q] + b[k].
  std::mt19937 rng(30);
  for (int64_t stride : {1, 2}) {
    const int64_t N = 2, C = 5, H = 5, W = 4, K = 3, P = (H - 1) / stride + 1, Q = (W - 1) / stride + 1;
    Vec x = randn(N * C * H * W, rng), w = randn(K * C, rng), b = randn(K, rng), y(N * K * P * Q, kNaN);
    planrt_k_conv2d(x.data(), w.data(), b.data(), y.data(), N, C, H, W, K, 1, stride, 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            double sum = b[k];
            for (int64_t c = 0; c < C; ++c)
              sum += double(w[k * C + c]) * x[((n * C + c) * H + p * stride) * W + q * stride];
            EXPECT_NEAR(y[((n * K + k) * P + p) * Q + q], sum, 1e-5) << "stride " << stride;
          }
  }
}

TEST(KernelsConv2d, MatchesTheDirectLoops) {
  std::mt19937 rng(31);
  for (const ConvShape &s : kConvShapes) {
    SCOPED_TRACE(name(s));
    Vec x = randn(s.N * s.C * s.H * s.W, rng), w = randn(s.K * s.C * s.R * s.R, rng), b = randn(s.K, rng);
    for (bool bias : {true, false}) {
      Vec y(s.N * s.K * s.P() * s.Q(), kNaN);
      planrt_k_conv2d(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), s.N, s.C, s.H, s.W, s.K, s.R, s.stride,
                      s.pad);
      Vec ref = conv2dDirect(s, x, w, bias ? b.data() : nullptr);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << (bias ? "bias" : "no bias") << ", output " << i;
    }
  }
}

TEST(KernelsConv2d, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(32);
  for (const ConvShape &s : kConvShapes) {
    SCOPED_TRACE(name(s));
    Vec x = randn(s.N * s.C * s.H * s.W, rng), w = randn(s.K * s.C * s.R * s.R, rng), b = randn(s.K, rng);
    Vec dy = randn(s.N * s.K * s.P() * s.Q(), rng);
    Vec dx(x.size(), kNaN), dw(w.size(), kNaN), db(b.size(), kNaN);
    planrt_k_conv2d_bwd_data(dy.data(), w.data(), dx.data(), s.N, s.C, s.H, s.W, s.K, s.R, s.stride, s.pad);
    planrt_k_conv2d_bwd_filter(dy.data(), x.data(), dw.data(), db.data(), s.N, s.C, s.H, s.W, s.K, s.R, s.stride,
                               s.pad);
    ASSERT_TRUE(allFinite(dx) && allFinite(dw) && allFinite(db)); // overwritten, not accumulated
    auto f = [&] {
      Vec y(dy.size());
      planrt_k_conv2d(x.data(), w.data(), b.data(), y.data(), s.N, s.C, s.H, s.W, s.K, s.R, s.stride, s.pad);
      return y;
    };
    checkVjp("dx", x, dx, dy, f);
    checkVjp("dw", w, dw, dy, f);
    checkVjp("db", b, db, dy, f);

    // Called again into the same buffers (not accumulated), and db may be NULL.
    Vec dw2(dw);
    planrt_k_conv2d_bwd_filter(dy.data(), x.data(), dw2.data(), nullptr, s.N, s.C, s.H, s.W, s.K, s.R, s.stride, s.pad);
    EXPECT_EQ(dw2, dw);
  }
}

TEST(KernelsConv2dDeathTest, BadShapesExit) {
  Vec buf(1024, 0.0f);
  float *p = buf.data();
  EXPECT_EXIT(planrt_k_conv2d(p, p, nullptr, p, 1, 1, 3, 3, 1, 5, 1, 0), ::testing::ExitedWithCode(1),
              "planrt: error: conv2d: the 5x5 window does not fit the 3x3 input padded by 0");
  EXPECT_EXIT(planrt_k_conv2d_bwd_data(p, p, p, 1, 1, 3, 3, 1, 3, 0, 1), ::testing::ExitedWithCode(1),
              "planrt: error: conv2d_bwd_data: bad shape .*stride=0");
  EXPECT_EXIT(planrt_k_conv2d_bwd_filter(p, p, p, p, 1, 1, 3, 3, 0, 3, 1, 1), ::testing::ExitedWithCode(1),
              "planrt: error: conv2d_bwd_filter: bad shape K=0");
  EXPECT_EXIT(planrt_k_maxpool2d(p, p, 1, 1, 4, 2, 3, 1, 0), ::testing::ExitedWithCode(1),
              "planrt: error: maxpool2d: the 3x3 window does not fit the 4x2 input padded by 0");
  EXPECT_EXIT(planrt_k_maxpool2d_bwd(p, p, p, 1, 1, 4, 4, 2, 1, -1), ::testing::ExitedWithCode(1),
              "planrt: error: maxpool2d_bwd: bad shape .*pad=-1");
  // PyTorch's limit pad <= R / 2: beyond it, a window could lie wholly in the padding.
  EXPECT_EXIT(planrt_k_conv2d(p, p, nullptr, p, 1, 1, 4, 5, 2, 2, 3, 2), ::testing::ExitedWithCode(1),
              "planrt: error: conv2d: pad 2 exceeds half the 2x2 window");
  EXPECT_EXIT(planrt_k_conv2d_bwd_filter(p, p, p, p, 1, 1, 6, 6, 1, 3, 1, 2), ::testing::ExitedWithCode(1),
              "planrt: error: conv2d_bwd_filter: pad 2 exceeds half the 3x3 window");
  EXPECT_EXIT(planrt_k_maxpool2d(p, p, 1, 1, 6, 6, 3, 2, 2), ::testing::ExitedWithCode(1),
              "planrt: error: maxpool2d: pad 2 exceeds half the 3x3 window");
  EXPECT_EXIT(planrt_k_maxpool2d_bwd(p, p, p, 1, 1, 6, 6, 1, 1, 1), ::testing::ExitedWithCode(1),
              "planrt: error: maxpool2d_bwd: pad 1 exceeds half the 1x1 window");
  EXPECT_EXIT(planrt_k_avgpool(p, p, 2, 3, 0), ::testing::ExitedWithCode(1),
              "planrt: error: avgpool: bad shape N=2 C=3 HW=0");
  EXPECT_EXIT(planrt_k_batchnorm_fwd(p, p, p, p, p, 0, 2, 4, 1e-5f), ::testing::ExitedWithCode(1),
              "planrt: error: batchnorm_fwd: bad shape N=0");
  EXPECT_EXIT(planrt_k_batchnorm_bwd_data(p, p, p, p, p, p, 1, 2, 4, 0, 1e-5f), ::testing::ExitedWithCode(1),
              "planrt: error: batchnorm_bwd_data: bad count=0");
  EXPECT_EXIT(planrt_k_batchnorm_combine(p, p, 0, 2), ::testing::ExitedWithCode(1),
              "planrt: error: batchnorm_combine: bad shape ranks=0 C=2");
  EXPECT_EXIT(planrt_k_batchnorm_running(p, p, p, 2, 1, 0.1f), ::testing::ExitedWithCode(1),
              "planrt: error: batchnorm_running: .*count >= 2");
}

TEST(KernelsMaxPool, PicksTheWindowMaximum) {
  // 2x2 windows, stride 2, over a 4x4 plane, worked out by hand.
  Vec x = {1, 5,  -2, 0,  //
           3, 2,  -1, -3, //
           0, 0,  7,  7,  //
           0, -4, 7,  6},
      y(4, kNaN);
  planrt_k_maxpool2d(x.data(), y.data(), 1, 1, 4, 4, 2, 2, 0);
  EXPECT_EQ(y, (Vec{5, 0, 0, 7}));
  // The padding is -infinity, not 0: 3x3 windows, stride 2, padding 1 over negative values.
  Vec neg = {-5, -4, -3, -2, -6, -7, -8, -9, -1}, yNeg(4, kNaN);
  planrt_k_maxpool2d(neg.data(), yNeg.data(), 1, 1, 3, 3, 3, 2, 1);
  EXPECT_EQ(yNeg, (Vec{-2, -3, -2, -1}));
}

TEST(KernelsMaxPool, BackwardRoutesToTheFirstMaximum) {
  // Ties: each 2x2 window of two planes goes to its first maximum in row-major order.
  Vec x = {1, 1, 2,  0,  //
           1, 1, 2,  2,  //
           3, 0, -1, -1, //
           0, 3, -1, -1},
      dy = {10, 20, 30, 40}, dx(16, kNaN);
  planrt_k_maxpool2d_bwd(dy.data(), x.data(), dx.data(), 1, 1, 4, 4, 2, 2, 0);
  EXPECT_EQ(dx, (Vec{10, 0, 20, 0, 0, 0, 0, 0, 30, 0, 40, 0, 0, 0, 0, 0}));
  // Overlapping windows (2x2, stride 1) that all hold the centre's maximum add up there.
  Vec peak = {0, 0, 0, 0, 9, 0, 0, 0, 0}, dyPeak = {1, 2, 3, 4}, dxPeak(9, kNaN);
  planrt_k_maxpool2d_bwd(dyPeak.data(), peak.data(), dxPeak.data(), 1, 1, 3, 3, 2, 1, 0);
  EXPECT_EQ(dxPeak, (Vec{0, 0, 0, 0, 10, 0, 0, 0, 0}));
  // A NaN is the maximum (PyTorch's CPU rule: any NaN replaces it, so the last NaN of
  // a window takes the gradient, and a larger value after it does not).
  Vec nan = {1, kNaN, 2, kNaN, 5, 0, kNaN, 1}, yNan(2), dyNan = {10, 20}, dxNan(8, kNaN);
  planrt_k_maxpool2d(nan.data(), yNan.data(), 1, 1, 2, 4, 2, 2, 0);
  EXPECT_TRUE(std::isnan(yNan[0]));
  EXPECT_TRUE(std::isnan(yNan[1]));
  planrt_k_maxpool2d_bwd(dyNan.data(), nan.data(), dxNan.data(), 1, 1, 2, 4, 2, 2, 0);
  EXPECT_EQ(dxNan, (Vec{0, 10, 0, 0, 0, 0, 20, 0}));
}

TEST(KernelsMaxPool, BackwardMatchesFiniteDifferences) {
  // Distinct values 0.5 apart (a shuffled ramp), so that no perturbation reorders a window.
  struct Shape {
    int64_t N, C, H, W, R, stride, pad;
  };
  std::mt19937 rng(33);
  for (const Shape &s : {Shape{2, 3, 6, 6, 2, 2, 0}, Shape{1, 2, 7, 5, 3, 2, 1}, Shape{1, 1, 5, 6, 3, 1, 1},
                         Shape{1, 2, 9, 8, 7, 2, 3}}) {
    SCOPED_TRACE("H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) + " R=" + std::to_string(s.R) +
                 " stride=" + std::to_string(s.stride) + " pad=" + std::to_string(s.pad));
    const int64_t P = (s.H + 2 * s.pad - s.R) / s.stride + 1, Q = (s.W + 2 * s.pad - s.R) / s.stride + 1;
    Vec x(s.N * s.C * s.H * s.W);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = 0.5f * float(i) - 20.0f;
    std::shuffle(x.begin(), x.end(), rng);
    Vec dy = randn(s.N * s.C * P * Q, rng), dx(x.size(), kNaN);
    planrt_k_maxpool2d_bwd(dy.data(), x.data(), dx.data(), s.N, s.C, s.H, s.W, s.R, s.stride, s.pad);
    ASSERT_TRUE(allFinite(dx));
    checkVjp("dx", x, dx, dy, [&] {
      Vec y(dy.size());
      planrt_k_maxpool2d(x.data(), y.data(), s.N, s.C, s.H, s.W, s.R, s.stride, s.pad);
      return y;
    });
  }
}

TEST(KernelsAvgPool, MeanOfEachPlaneAndItsBackward) {
  std::mt19937 rng(34);
  const int64_t N = 2, C = 3, HW = 12;
  Vec x(N * C * HW), y(N * C, kNaN);
  for (int64_t plane = 0; plane < N * C; ++plane) // constant planes: their value
    std::fill_n(x.begin() + plane * HW, HW, 0.25f * float(plane) - 1.0f);
  planrt_k_avgpool(x.data(), y.data(), N, C, HW);
  for (int64_t plane = 0; plane < N * C; ++plane)
    EXPECT_FLOAT_EQ(y[plane], 0.25f * float(plane) - 1.0f);

  x = randn(N * C * HW, rng, 2.0f);
  planrt_k_avgpool(x.data(), y.data(), N, C, HW);
  for (int64_t plane = 0; plane < N * C; ++plane) {
    double sum = 0;
    for (int64_t i = 0; i < HW; ++i)
      sum += x[plane * HW + i];
    EXPECT_NEAR(y[plane], sum / HW, 1e-6);
  }
  Vec dy = randn(N * C, rng), dx(N * C * HW, kNaN);
  planrt_k_avgpool_bwd(dy.data(), dx.data(), N, C, HW);
  for (int64_t i = 0; i < N * C * HW; ++i)
    EXPECT_FLOAT_EQ(dx[i], dy[i / HW] / float(HW));
  checkVjp("dx", x, dx, dy, [&] {
    Vec out(N * C);
    planrt_k_avgpool(x.data(), out.data(), N, C, HW);
    return out;
  });
}

/// BatchNorm2d in training on one rank: stats, then the forward.
Vec batchnormTrain(const Vec &x, const Vec &w, const Vec &b, int64_t N, int64_t C, int64_t HW, float eps) {
  Vec stats(2 * C), y(x.size());
  planrt_k_batchnorm_stats(x.data(), stats.data(), N, C, HW);
  planrt_k_batchnorm_fwd(x.data(), stats.data(), w.data(), b.data(), y.data(), N, C, HW, eps);
  return y;
}

/// Channel c's mean and biased variance of x [N, C, HW], two passes in double.
void channelMoments(const Vec &x, int64_t N, int64_t C, int64_t HW, int64_t c, double &mean, double &var) {
  mean = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i)
      mean += x[(n * C + c) * HW + i];
  mean /= double(N * HW);
  var = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < HW; ++i)
      var += (x[(n * C + c) * HW + i] - mean) * (x[(n * C + c) * HW + i] - mean);
  var /= double(N * HW);
}

TEST(KernelsBatchNorm, NormalisesEachChannel) {
  std::mt19937 rng(35);
  const int64_t N = 3, C = 4, HW = 10;
  Vec x = randn(N * C * HW, rng, 3.0f, 2.0f), one(C, 1.0f), zero(C, 0.0f);
  Vec stats(2 * C, kNaN);
  planrt_k_batchnorm_stats(x.data(), stats.data(), N, C, HW);
  for (int64_t c = 0; c < C; ++c) {
    double mean, var;
    channelMoments(x, N, C, HW, c, mean, var);
    EXPECT_NEAR(stats[c], mean, 1e-6 * std::fabs(mean));
    EXPECT_NEAR(stats[C + c], var, 1e-6 * var);
  }
  Vec y = batchnormTrain(x, one, zero, N, C, HW, 1e-5f);
  for (int64_t c = 0; c < C; ++c) {
    double mean, var;
    channelMoments(y, N, C, HW, c, mean, var); // biased, as the kernel's definition
    EXPECT_NEAR(mean, 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(var, 1.0, 1e-4) << "channel " << c;
  }
  // w scales and b shifts each channel.
  Vec w = randn(C, rng), b = randn(C, rng), yWB = batchnormTrain(x, w, b, N, C, HW, 1e-5f);
  for (int64_t i = 0; i < N * C * HW; ++i)
    EXPECT_NEAR(yWB[i], y[i] * w[(i / HW) % C] + b[(i / HW) % C], 1e-5);
}

TEST(KernelsBatchNorm, LargeMeanKeepsItsPrecision) {
  // A mean far from 0 against a small spread (|mean| / spread = 1000 and more): the sum of
  // squares minus the squared sum lost all the variance here; two passes keep it. What
  // is left is the float stats' rounding of the mean, half an ulp of |mean|.
  std::mt19937 rng(39);
  const int64_t N = 4, C = 3, HW = 20;
  for (auto [mean, spread] : {std::pair{100.0f, 0.1f}, {1000.0f, 1.0f}, {-2000.0f, 0.5f}}) {
    SCOPED_TRACE("mean " + std::to_string(mean) + " spread " + std::to_string(spread));
    Vec x = randn(N * C * HW, rng, mean, spread), one(C, 1.0f), zero(C, 0.0f), stats(2 * C, kNaN);
    planrt_k_batchnorm_stats(x.data(), stats.data(), N, C, HW);
    for (int64_t c = 0; c < C; ++c) {
      double m, v;
      channelMoments(x, N, C, HW, c, m, v);
      EXPECT_NEAR(stats[c], m, 0.5 * FLT_EPSILON * std::fabs(m)) << "channel " << c;
      EXPECT_NEAR(stats[C + c], v, 1e-6 * v) << "channel " << c;
    }
    // The normalised channels: mean 0 up to the rounding of the mean over the spread, variance 1.
    Vec y = batchnormTrain(x, one, zero, N, C, HW, 0.0f);
    for (int64_t c = 0; c < C; ++c) {
      double m, v;
      channelMoments(y, N, C, HW, c, m, v);
      EXPECT_NEAR(m, 0.0, 1e-6 + 0.5 * FLT_EPSILON * std::fabs(mean) / spread) << "channel " << c;
      EXPECT_NEAR(v, 1.0, 1e-5) << "channel " << c;
    }
  }
}

TEST(KernelsBatchNorm, CombineIsTheStatisticsOfTheUnion) {
  // Two ranks' batches {1, 2} and {3, 4}: means 1.5 and 3.5, variances 0.25; the union's
  // mean is 2.5 and its variance 0.25 + 1 = 1.25 (second channel: the same, negated).
  Vec gathered = {1.5f, -1.5f, 0.25f, 0.25f, 3.5f, -3.5f, 0.25f, 0.25f}, stats(4, kNaN);
  planrt_k_batchnorm_combine(gathered.data(), stats.data(), 2, 2);
  EXPECT_EQ(stats, (Vec{2.5f, -2.5f, 1.25f, 1.25f}));
  // One rank: its own statistics.
  planrt_k_batchnorm_combine(gathered.data(), stats.data(), 1, 2);
  EXPECT_EQ(stats, (Vec{1.5f, -1.5f, 0.25f, 0.25f}));
  // Three ranks' thirds of a batch: the whole batch's statistics.
  std::mt19937 rng(40);
  const int64_t N = 6, C = 4, HW = 5, part = N / 3 * C * HW;
  Vec x = randn(N * C * HW, rng, 2.0f, 3.0f), whole(2 * C), three(3 * 2 * C), combined(2 * C, kNaN);
  planrt_k_batchnorm_stats(x.data(), whole.data(), N, C, HW);
  for (int64_t r = 0; r < 3; ++r)
    planrt_k_batchnorm_stats(x.data() + r * part, three.data() + r * 2 * C, N / 3, C, HW);
  planrt_k_batchnorm_combine(three.data(), combined.data(), 3, C);
  for (int64_t i = 0; i < 2 * C; ++i)
    EXPECT_NEAR(combined[i], whole[i], 1e-6 * std::fabs(whole[i])) << i;
}

TEST(KernelsBatchNorm, SplitBatchGivesTheWholeBatch) {
  // SyncBatchNorm on two ranks: each holds half the images; their stats gathered and
  // combined, and their dstats summed (the all-reduce) with count = the whole batch,
  // give the whole batch's y and dx. Also with a large mean: there the whole batch's and
  // the combined statistics may differ by the rounding of their float means (an ulp or
  // so of |mean|), which shifts xhat by that over the spread (`shift`).
  std::mt19937 rng(36);
  const int64_t N = 4, C = 3, HW = 5, half = N / 2 * C * HW, count = N * HW;
  const float eps = 1e-5f;
  for (auto [mean, spread] : {std::pair{1.0f, 1.0f}, {100.0f, 0.1f}}) {
    SCOPED_TRACE("mean " + std::to_string(mean) + " spread " + std::to_string(spread));
    const double shift = 2 * FLT_EPSILON * std::fabs(mean) / spread;
    Vec x = randn(N * C * HW, rng, mean, spread), w = randn(C, rng), b = randn(C, rng), dy = randn(N * C * HW, rng);
    Vec stats(2 * C), dstats(2 * C), y(x.size()), dx(x.size());
    planrt_k_batchnorm_stats(x.data(), stats.data(), N, C, HW);
    planrt_k_batchnorm_fwd(x.data(), stats.data(), w.data(), b.data(), y.data(), N, C, HW, eps);
    planrt_k_batchnorm_bwd_stats(dy.data(), x.data(), stats.data(), dstats.data(), N, C, HW, eps);
    planrt_k_batchnorm_bwd_data(dy.data(), x.data(), stats.data(), w.data(), dstats.data(), dx.data(), N, C, HW, count,
                                eps);
    Vec gathered(2 * 2 * C), sync(2 * C, kNaN), d0(2 * C), d1(2 * C), dsum(2 * C), yr(x.size()), dxr(x.size());
    for (int64_t r = 0; r < 2; ++r)
      planrt_k_batchnorm_stats(x.data() + r * half, gathered.data() + r * 2 * C, N / 2, C, HW);
    planrt_k_batchnorm_combine(gathered.data(), sync.data(), 2, C);
    for (int64_t r = 0; r < 2; ++r) {
      planrt_k_batchnorm_fwd(x.data() + r * half, sync.data(), w.data(), b.data(), yr.data() + r * half, N / 2, C, HW,
                             eps);
      planrt_k_batchnorm_bwd_stats(dy.data() + r * half, x.data() + r * half, sync.data(), (r ? d1 : d0).data(), N / 2,
                                   C, HW, eps);
    }
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(sync[c], stats[c], 1e-6 + 2 * FLT_EPSILON * std::fabs(mean)) << "mean " << c;
      EXPECT_NEAR(sync[C + c], stats[C + c], 1e-5 * stats[C + c] + 4 * FLT_EPSILON * std::fabs(mean) * spread)
          << "var " << c;
    }
    for (int64_t i = 0; i < 2 * C; ++i) {
      dsum[i] = d0[i] + d1[i];
      // dw = sum dy xhat moves by the shift of xhat times db.
      double moved = i >= C ? shift * std::fabs(dstats[i - C]) : 0.0;
      EXPECT_NEAR(dsum[i], dstats[i], 1e-5 * (1 + std::fabs(dstats[i])) + moved) << "dstats " << i;
    }
    for (int64_t r = 0; r < 2; ++r)
      planrt_k_batchnorm_bwd_data(dy.data() + r * half, x.data() + r * half, sync.data(), w.data(), dsum.data(),
                                  dxr.data() + r * half, N / 2, C, HW, count, eps);
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t c = int64_t(i) / HW % C;
      const double scale = std::fabs(w[c]) / std::sqrt(double(stats[C + c]) + eps); // of dx: w rstd
      EXPECT_NEAR(yr[i], y[i], 1e-5 + shift * std::fabs(w[c])) << i;
      EXPECT_NEAR(dxr[i], dx[i], 1e-5 * (1 + scale) + shift * scale) << i;
    }
  }
}

TEST(KernelsBatchNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(37);
  struct Shape {
    int64_t N, C, HW;
    float eps;
  };
  for (const Shape &s : {Shape{3, 4, 6, 1e-5f}, Shape{1, 1, 5, 1e-5f}, Shape{2, 3, 1, 0.1f}, Shape{4, 2, 9, 1e-3f}}) {
    SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " HW=" + std::to_string(s.HW));
    const int64_t n = s.N * s.C * s.HW, count = s.N * s.HW;
    Vec x = randn(n, rng, 0.5f, 1.5f), w = randn(s.C, rng, 1.0f, 0.5f), b = randn(s.C, rng), dy = randn(n, rng);
    Vec stats(2 * s.C), dstats(2 * s.C, kNaN), dx(n, kNaN);
    planrt_k_batchnorm_stats(x.data(), stats.data(), s.N, s.C, s.HW);
    planrt_k_batchnorm_bwd_stats(dy.data(), x.data(), stats.data(), dstats.data(), s.N, s.C, s.HW, s.eps);
    planrt_k_batchnorm_bwd_data(dy.data(), x.data(), stats.data(), w.data(), dstats.data(), dx.data(), s.N, s.C, s.HW,
                                count, s.eps);
    ASSERT_TRUE(allFinite(dx) && allFinite(dstats));
    Vec db(dstats.begin(), dstats.begin() + s.C), dw(dstats.begin() + s.C, dstats.end());
    auto f = [&] { return batchnormTrain(x, w, b, s.N, s.C, s.HW, s.eps); };
    checkVjp("dx", x, dx, dy, f);
    checkVjp("dw = dstats[1]", w, dw, dy, f);
    checkVjp("db = dstats[0]", b, db, dy, f);
  }
}

TEST(KernelsBatchNorm, EvalAndRunningStatistics) {
  // One channel of 1, 2, 3, 4: batch mean 2.5, biased variance 1.25, unbiased 5/3.
  Vec x = {1, 2, 3, 4}, stats(2), mean = {0.0f}, var = {1.0f};
  planrt_k_batchnorm_stats(x.data(), stats.data(), 2, 1, 2);
  EXPECT_EQ(stats, (Vec{2.5f, 1.25f}));
  planrt_k_batchnorm_running(stats.data(), mean.data(), var.data(), 1, 4, 0.1f);
  EXPECT_NEAR(mean[0], 0.25, 1e-7);
  EXPECT_NEAR(var[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);

  // Evaluation with running mean 1 and variance 3, eps 1: (x - 1) / 2 * w + b.
  Vec m = {1.0f, 1.0f}, v = {3.0f, 3.0f}, w = {2.0f, -1.0f}, b = {0.5f, 0.0f}, y(4, kNaN);
  planrt_k_batchnorm_eval(x.data(), m.data(), v.data(), w.data(), b.data(), y.data(), 1, 2, 2, 1.0f);
  EXPECT_EQ(y, (Vec{0.5f, 1.5f, -1.0f, -1.5f}));

  // With the batch's own statistics (stats: mean, biased variance) as the running ones,
  // eval is the training forward.
  std::mt19937 rng(38);
  const int64_t N = 2, C = 3, HW = 7;
  Vec xs = randn(N * C * HW, rng, 1.0f, 2.0f), ws = randn(C, rng), bs = randn(C, rng), st(2 * C);
  planrt_k_batchnorm_stats(xs.data(), st.data(), N, C, HW);
  Vec bm(st.begin(), st.begin() + C), bv(st.begin() + C, st.end()), yEval(xs.size());
  planrt_k_batchnorm_eval(xs.data(), bm.data(), bv.data(), ws.data(), bs.data(), yEval.data(), N, C, HW, 1e-5f);
  Vec yTrain = batchnormTrain(xs, ws, bs, N, C, HW, 1e-5f);
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(yEval[i], yTrain[i], 1e-5) << i;
}

} // namespace

// The running statistics of the active step: a training batch moves layer 1's (and
// counts it), evaluation normalises by them and reports them; another layer is untouched.
TEST(KernelsBatchNorm, RunningStatisticsOfTheActiveStep) {
  planrt_step_ctx ctx;
  ctx.running.push_back({"bn0", {0.0f}, {1.0f}, 0});
  ctx.running.push_back({"bn1", {0.0f, 0.0f}, {1.0f, 1.0f}, 0});
  planrt::setActiveStep(&ctx);
  // Channel 0: 1, 2, 3, 4 (mean 2.5, unbiased variance 5/3); channel 1: all 6.
  Vec x = {1, 2, 6, 6, 3, 4, 6, 6}, stats(4);
  planrt_k_batchnorm_stats(x.data(), stats.data(), 2, 2, 2);
  planrt_k_batchnorm_observe(stats.data(), 1, 2, 4, 0.5f);
  planrt_k_batchnorm_observe(stats.data(), 1, 2, 4, 0.5f);
  const planrt_step_ctx::RunningStats &r = ctx.running[1];
  EXPECT_EQ(r.tracked, 2);
  EXPECT_NEAR(r.mean[0], 0.75 * 2.5, 1e-6);
  EXPECT_NEAR(r.mean[1], 0.75 * 6.0, 1e-6);
  EXPECT_NEAR(r.var[0], 0.25 + 0.75 * 5.0 / 3.0, 1e-6);
  EXPECT_NEAR(r.var[1], 0.25, 1e-7);
  EXPECT_EQ(ctx.running[0].tracked, 0);
  EXPECT_EQ(ctx.running[0].mean, (Vec{0.0f}));

  Vec w = {1.0f, 2.0f}, b = {0.0f, 1.0f}, y(8, kNaN), got(4, kNaN), want(8, kNaN);
  planrt_k_batchnorm_infer(x.data(), w.data(), b.data(), y.data(), got.data(), 1, 2, 2, 2, 1e-5f);
  planrt_k_batchnorm_eval(x.data(), r.mean.data(), r.var.data(), w.data(), b.data(), want.data(), 2, 2, 2, 1e-5f);
  EXPECT_EQ(y, want);
  EXPECT_EQ(got, (Vec{r.mean[0], r.mean[1], r.var[0], r.var[1]}));
  EXPECT_EQ(r.tracked, 2); // evaluation does not count
  planrt::setActiveStep(nullptr);
}

TEST(KernelsBatchNormDeathTest, UnknownLayerOrChannelsExit) {
  Vec stats = {0.0f, 1.0f};
  EXPECT_EXIT(
      {
        planrt_step_ctx ctx;
        ctx.running.push_back({"bn1", {0.0f}, {1.0f}, 0});
        planrt::setActiveStep(&ctx);
        planrt_k_batchnorm_observe(stats.data(), 1, 1, 4, 0.1f);
      },
      ::testing::ExitedWithCode(1), "batchnorm layer 1 has no running statistics \\(the executable keeps 1\\)");
  EXPECT_EXIT(
      {
        planrt_step_ctx ctx;
        ctx.running.push_back({"bn1", {0.0f}, {1.0f}, 0});
        planrt::setActiveStep(&ctx);
        planrt_k_batchnorm_observe(stats.data(), 0, 2, 4, 0.1f);
      },
      ::testing::ExitedWithCode(1), "batchnorm layer 0 \\('bn1'\\) keeps 1 channels' running statistics, not 2");
}

// Pooling and batch normalisation split their planes or channels over OpenBLAS's threads:
// the same bits on one thread and on two.
TEST(KernelsVision, ThreadsDoNotChangeTheBits) {
  std::mt19937 rng(41);
  const int64_t N = 8, C = 16, H = 16, W = 16, n = N * C * H * W;
  Vec x = randn(n, rng, 0.5f, 2.0f), dy = randn(n, rng), w = randn(C, rng), b = randn(C, rng);
  Vec pdy = randn(N * C * 8 * 8, rng);
  auto run = [&](int threads) {
    openblas_set_num_threads(threads);
    Vec stats(2 * C), y(n), dstats(2 * C), dx(n), pool(N * C * 8 * 8), dpool(n);
    planrt_k_batchnorm_stats(x.data(), stats.data(), N, C, H * W);
    planrt_k_batchnorm_fwd(x.data(), stats.data(), w.data(), b.data(), y.data(), N, C, H * W, 1e-5f);
    planrt_k_batchnorm_bwd_stats(dy.data(), x.data(), stats.data(), dstats.data(), N, C, H * W, 1e-5f);
    planrt_k_batchnorm_bwd_data(dy.data(), x.data(), stats.data(), w.data(), dstats.data(), dx.data(), N, C, H * W,
                                N * H * W, 1e-5f);
    planrt_k_maxpool2d(x.data(), pool.data(), N, C, H, W, 2, 2, 0);
    planrt_k_maxpool2d_bwd(pdy.data(), x.data(), dpool.data(), N, C, H, W, 2, 2, 0);
    return std::vector<Vec>{stats, y, dstats, dx, pool, dpool};
  };
  std::vector<Vec> one = run(1), two = run(2);
  openblas_set_num_threads(1);
  for (size_t k = 0; k < one.size(); ++k)
    EXPECT_EQ(one[k], two[k]) << "output " << k;
}
