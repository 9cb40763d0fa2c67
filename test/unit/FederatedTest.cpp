// A federated round's runtime ops (runtime/lib/federated.cpp) on one process: the seeded
// client sample, secure aggregation's masks cancelling modulo 2^64, the fixed-point
// encoding and the server's decoding of a weighted mean, and the errors of an update that
// does not fit.
#include "federated.h"
#include "planrt.h"
#include "step_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

namespace {

/// A step context with buffers of the given sizes (ids in order).
struct Ctx {
  planrt_step_ctx ctx;
  explicit Ctx(std::initializer_list<int64_t> floats) {
    for (int64_t n : floats) {
      planrt::Buffer &b = ctx.buffers.emplace_back();
      b.name = "b" + std::to_string(ctx.buffers.size() - 1);
      b.lifetime = "persistent";
      b.floats = n;
      EXPECT_TRUE(b.allocate());
    }
  }
  float *data(int id) { return ctx.buffers[size_t(id)].data; }
  uint64_t *words(int id) { return reinterpret_cast<uint64_t *>(data(id)); }
  void client(int64_t k, int64_t clients, std::vector<int64_t> sampled, uint64_t seed = 7) {
    ctx.fed.seed = seed;
    ctx.fed.clients = clients;
    ctx.fed.client = k;
    ctx.fed.sampled = std::move(sampled);
    ctx.fed.mine = std::count(ctx.fed.sampled.begin(), ctx.fed.sampled.end(), k) > 0;
  }
};

TEST(Federated, SampleIsSeededSortedAndFair) {
  std::vector<int> chosen(10, 0);
  for (int64_t r = 0; r < 4000; ++r) {
    std::vector<int64_t> s = planrt::fed::sampleClients(7, r, 10, 3);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 3u);
    EXPECT_EQ(s, planrt::fed::sampleClients(7, r, 10, 3)); // the same on every rank
    for (int64_t k : s) {
      ASSERT_GE(k, 0);
      ASSERT_LT(k, 10);
      ++chosen[size_t(k)];
    }
  }
  for (int c : chosen) // 1,200 expected each; binomial sd about 29
    EXPECT_NEAR(c, 1200, 150);
  EXPECT_NE(planrt::fed::sampleClients(7, 0, 10, 3), planrt::fed::sampleClients(8, 0, 10, 3));
  EXPECT_EQ(planrt::fed::sampleClients(7, 5, 4, 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Federated, MasksCancelModulo64Bits) {
  const int64_t words = 64, clients = 5;
  std::vector<int64_t> sampled = {0, 2, 3};
  std::vector<uint64_t> plainSum(words, 0), sentSum(words, 0);
  for (int64_t k : sampled) {
    Ctx c({2 * words});
    c.client(k, clients, sampled);
    for (int64_t t = 0; t < words; ++t)
      c.words(0)[t] = uint64_t(int64_t(t * 1000 - k * 7)); // small values, some negative
    std::vector<uint64_t> plain(c.words(0), c.words(0) + words);
    planrt_sched_fed_mask(&c.ctx, 3, 0, 2 * words, 0);
    ASSERT_EQ(c.ctx.status, PLANRT_OK) << c.ctx.error;
    int64_t same = 0;
    for (int64_t t = 0; t < words; ++t) {
      plainSum[size_t(t)] += plain[size_t(t)];
      sentSum[size_t(t)] += c.words(0)[t];
      same += c.words(0)[t] == plain[size_t(t)];
    }
    EXPECT_EQ(same, 0) << "client " << k << " sent unmasked words";
  }
  EXPECT_EQ(plainSum, sentSum);
}

TEST(Federated, EncodeAndServerGiveTheWeightedMean) {
  // Two of three clients sampled, weighted by tokens 1 : 3; SGD at lr 1 adds the mean.
  const int64_t n = 5;
  enum { kParams, kGlobal, kUpdate, kState }; // buffer ids
  std::vector<uint64_t> sum(n + 1, 0);
  const float global[n] = {0.5f, -1.0f, 0.0f, 2.0f, 0.25f};
  const float local[2][n] = {{0.6f, -1.0f, 0.01f, 1.5f, 0.25f}, {0.4f, -0.9f, 0.0f, 2.5f, 0.3f}};
  for (int i = 0; i < 2; ++i) {
    Ctx c({n, n, 2 * (n + 1)});
    c.client(i == 0 ? 0 : 2, 3, {0, 2});
    c.ctx.fed.tokens = {100, 555, 300};
    c.ctx.fed.lossSum = 3.0 * (i + 1);
    c.ctx.fed.lossCount = 3;
    std::memcpy(c.data(kParams), local[i], sizeof local[i]);
    std::memcpy(c.data(kGlobal), global, sizeof global);
    planrt_sched_fed_encode(&c.ctx, kUpdate, kParams, kGlobal, n, /*uniform=*/0, /*clip=*/0, 40);
    ASSERT_EQ(c.ctx.status, PLANRT_OK) << c.ctx.error;
    for (int64_t t = 0; t <= n; ++t)
      sum[size_t(t)] += c.words(kUpdate)[t];
  }
  Ctx s({n, n, 2 * (n + 1), 8});
  std::memcpy(s.data(kGlobal), global, sizeof global);
  std::memcpy(s.words(kUpdate), sum.data(), sizeof(uint64_t) * size_t(n + 1));
  planrt_sched_fed_server(&s.ctx, 0, kGlobal, kUpdate, kParams, -1, -1, /*adam=*/0, 1.0, 0.9, 0.99, 1e-3, 0.0, 40,
                          kState);
  ASSERT_EQ(s.ctx.status, PLANRT_OK) << s.ctx.error;
  for (int64_t t = 0; t < n; ++t) {
    double mean = 0.25 * (double(local[0][t]) - global[t]) + 0.75 * (double(local[1][t]) - global[t]);
    EXPECT_NEAR(s.data(kGlobal)[t], float(global[t] + mean), 1e-6) << t;
    EXPECT_EQ(s.data(kParams)[t], s.data(kGlobal)[t]) << "params take the new global model";
  }
  EXPECT_NEAR(s.data(kState)[7], (1.0 + 2.0) / 2, 1e-9) << "the round loss: the mean over the sampled clients";
}

TEST(Federated, ClipScalesTheUpdateToItsNorm) {
  const int64_t n = 2;
  Ctx c({n, n, 2 * (n + 1)});
  c.client(0, 1, {0});
  const float local[n] = {3.0f, 4.0f}, zero[n] = {0, 0};
  std::memcpy(c.data(0), local, sizeof local);
  std::memcpy(c.data(1), zero, sizeof zero);
  planrt_sched_fed_encode(&c.ctx, 2, 0, 1, n, 1, /*clip=*/1.0, 40);
  ASSERT_EQ(c.ctx.status, PLANRT_OK);
  EXPECT_NEAR(std::ldexp(double(int64_t(c.words(2)[0])), -40), 0.6, 1e-12);
  EXPECT_NEAR(std::ldexp(double(int64_t(c.words(2)[1])), -40), 0.8, 1e-12);
}

TEST(Federated, AnUpdateThatDoesNotFitNamesTheClient) {
  const int64_t n = 3;
  for (float bad : {1e7f, NAN}) {
    Ctx c({n, n, 2 * (n + 1)});
    c.client(2, 4, {1, 2});
    const float local[n] = {0.0f, bad, 0.0f}, zero[n] = {0, 0, 0};
    std::memcpy(c.data(0), local, sizeof local);
    std::memcpy(c.data(1), zero, sizeof zero);
    planrt_sched_fed_encode(&c.ctx, 2, 0, 1, n, 1, 0, 40);
    EXPECT_NE(c.ctx.status, PLANRT_OK);
    EXPECT_NE(c.ctx.error.find("client 2: its update is"), std::string::npos) << c.ctx.error;
    EXPECT_NE(c.ctx.error.find("at index 1"), std::string::npos) << c.ctx.error;
  }
}

TEST(Federated, AClientNotSampledSendsZerosAndSkipsItsSteps) {
  const int64_t n = 3;
  Ctx c({n, n, 2 * (n + 1)});
  c.client(1, 4, {0, 2});
  const float local[n] = {1, 2, 3};
  std::memcpy(c.data(0), local, sizeof local);
  planrt_sched_fed_encode(&c.ctx, 2, 0, 1, n, 1, 0, 40);
  for (int64_t t = 0; t <= n; ++t)
    EXPECT_EQ(c.words(2)[t], 0u);
  EXPECT_EQ(planrt_sched_fed_local(&c.ctx, 10), 0);
  c.client(2, 4, {0, 2});
  EXPECT_EQ(planrt_sched_fed_local(&c.ctx, 10), 10);
}

TEST(Federated, NoiseIsStandardNormal) {
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = planrt::fed::noise(7, 3, i);
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0, 0.01);
  EXPECT_EQ(planrt::fed::noise(7, 3, 11), planrt::fed::noise(7, 3, 11));
  EXPECT_NE(planrt::fed::noise(7, 3, 11), planrt::fed::noise(7, 4, 11));
}

} // namespace
