// A federated round's sched ops (sched.fed_*, planrt_abi.def; docs/FEDERATED.md): the
// seeded client sample, the local steps' bookkeeping, FedProx's proximal gradient, the
// clients' updates in fixed point, secure aggregation's pairwise masks, and the server
// step. Every rank runs every op; only the round's sampled clients train and send
// non-zero updates.
#include "federated.h"

#include "random.h"
#include "step_context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace planrt::fed {

namespace {
constexpr uint64_t kSampleSalt = 0x66656473616d706cull; // "fedsampl"
constexpr uint64_t kMaskSalt = 0x6665646d61736b73ull;   // "fedmasks"
constexpr uint64_t kNoiseSalt = 0x6665646e6f697365ull;  // "fednoise"

/// A number in [0, n) from the 64-bit r (data.cpp's sampler does the same).
uint64_t below(uint64_t r, uint64_t n) { return uint64_t((__uint128_t(r) * n) >> 64); }
} // namespace

std::vector<int64_t> sampleClients(uint64_t seed, int64_t round, int64_t clients, int64_t sampled) {
  std::vector<int64_t> perm(static_cast<size_t>(clients));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t key = mix(seed ^ kSampleSalt);
  for (int64_t i = 0; i < sampled; ++i) {
    uint64_t r = mix(key ^ mix(uint64_t(round) * uint64_t(clients) + uint64_t(i)));
    int64_t j = i + int64_t(below(r, uint64_t(clients - i)));
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  perm.resize(size_t(sampled));
  std::sort(perm.begin(), perm.end());
  return perm;
}

uint64_t pairKey(uint64_t seed, int64_t clients, int64_t a, int64_t b) {
  int64_t lo = std::min(a, b), hi = std::max(a, b);
  return mix(mix(seed ^ kMaskSalt) ^ mix(uint64_t(lo) * uint64_t(clients) + uint64_t(hi)));
}

uint64_t maskWord(uint64_t key, int64_t round, int64_t t) {
  return mix(mix(key ^ mix(uint64_t(round))) + uint64_t(t));
}

double noise(uint64_t seed, int64_t round, int64_t i) {
  uint64_t base = mix(mix(seed ^ kNoiseSalt) ^ mix(uint64_t(round)));
  // Box–Muller: u1 in (0, 1], u2 in [0, 1).
  double u1 = double((mix(base + 2 * uint64_t(i)) >> 11) + 1) * 0x1p-53;
  double u2 = double(mix(base + 2 * uint64_t(i) + 1) >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

} // namespace planrt::fed

using namespace planrt;

namespace {
/// 64-bit integers in a buffer of floats (two floats each).
uint64_t *words(planrt_step_ctx *ctx, int32_t buf, int64_t count, const char *op) {
  float *p = ctx->range(buf, 0, count, op);
  return p ? reinterpret_cast<uint64_t *>(p) : nullptr;
}

int64_t floatsOf(planrt_step_ctx *ctx, int32_t buf) {
  return buf >= 0 && size_t(buf) < ctx->buffers.size() ? ctx->buffers[size_t(buf)].floats : 0;
}

/// x · 2^bits rounded, as a two's-complement word; false if it does not fit the range
/// the sum of the clients' words must stay within (|x| < 2^(62 − bits)).
bool encode(double x, int64_t bits, uint64_t &out) {
  double scaled = std::ldexp(x, int(bits));
  if (!(std::fabs(scaled) < 0x1p62))
    return false;
  out = uint64_t(int64_t(std::llround(scaled)));
  return true;
}
double decode(uint64_t w, int64_t bits) { return std::ldexp(double(int64_t(w)), -int(bits)); }

/// PLANRT_FED_DUMP=DIR (tests only): a client's words before (`plain`) and after (`sent`)
/// its masks, as DIR/round<r>_client<k>_<what>.u64, so that a test can check what the
/// aggregation receives. Written by the client itself: nothing leaves it unmasked.
void dump(planrt_step_ctx *ctx, int64_t round, const char *what, const uint64_t *q, int64_t n) {
  const char *dir = std::getenv("PLANRT_FED_DUMP");
  if (!dir || !*dir)
    return;
  char path[4096];
  std::snprintf(path, sizeof path, "%s/round%lld_client%lld_%s.u64", dir, (long long)round,
                (long long)ctx->fed.client, what);
  FILE *f = std::fopen(path, "wb");
  bool ok = f && std::fwrite(q, sizeof(uint64_t), size_t(n), f) == size_t(n);
  if (f)
    ok = std::fclose(f) == 0 && ok;
  if (!ok)
    ctx->failWith(fail(PLANRT_ERR_IO, "PLANRT_FED_DUMP: cannot write %s", path));
}
} // namespace

void planrt_sched_fed_begin(planrt_step_ctx *ctx, int64_t round, int32_t axis, int64_t sampled, int32_t global,
                            int32_t params, int32_t m, int32_t v) {
  if (ctx->status)
    return;
  auto &f = ctx->fed;
  (void)axis; // the driver set the client's coordinate on it (f.client)
  f.sampled = fed::sampleClients(f.seed, round, f.clients, sampled);
  f.mine = std::binary_search(f.sampled.begin(), f.sampled.end(), f.client);
  f.lossSum = 0;
  f.lossCount = 0;
  ctx->sampleStepBase = round * f.localSteps;
  if (!f.mine)
    return;
  int64_t n = floatsOf(ctx, global);
  float *w = ctx->range(global, 0, n, "fed_begin"), *p = ctx->range(params, 0, n, "fed_begin");
  float *mo = ctx->optional(m, 0, n, "fed_begin", nullptr), *vo = ctx->optional(v, 0, n, "fed_begin", nullptr);
  if (!w || !p)
    return;
  std::memcpy(p, w, size_t(n) * sizeof(float));
  // The clients' optimizer starts afresh each round.
  for (float *moment : {mo, vo})
    if (moment)
      std::fill(moment, moment + n, 0.0f);
}

int64_t planrt_sched_fed_local(planrt_step_ctx *ctx, int64_t count) {
  return ctx->status || !ctx->fed.mine ? 0 : count;
}

void planrt_sched_fed_loss(planrt_step_ctx *ctx, int32_t state) {
  if (float *s = ctx->range(state, 0, 8, "fed_loss")) {
    ctx->fed.lossSum += double(s[7]);
    ++ctx->fed.lossCount;
  }
}

void planrt_sched_fed_prox(planrt_step_ctx *ctx, int32_t grads, int64_t count, double mu, int32_t params,
                           int32_t global) {
  float *g = ctx->range(grads, 0, count, "fed_prox"), *p = ctx->range(params, 0, count, "fed_prox"),
        *w = ctx->range(global, 0, count, "fed_prox");
  if (!g || !p || !w)
    return;
  for (int64_t i = 0; i < count; ++i)
    g[i] += float(mu * (double(p[i]) - double(w[i])));
}

void planrt_sched_fed_encode(planrt_step_ctx *ctx, int32_t update, int32_t params, int32_t global, int64_t count,
                             int32_t uniform, double clip, int64_t bits) {
  uint64_t *q = words(ctx, update, 2 * (count + 1), "fed_encode");
  float *p = ctx->range(params, 0, count, "fed_encode"), *w = ctx->range(global, 0, count, "fed_encode");
  if (!q || !p || !w)
    return;
  auto &f = ctx->fed;
  std::fill(q, q + count + 1, 0);
  if (!f.mine)
    return; // a client the round did not sample adds zero
  double share = 1.0 / double(f.sampled.size());
  if (!uniform) {
    double total = 0;
    for (int64_t k : f.sampled)
      total += f.tokens[size_t(k)];
    share = f.tokens[size_t(f.client)] / total;
  }
  double scale = share;
  if (clip > 0) { // DP-FedAvg: the update's norm at most clip
    double sq = 0;
    for (int64_t i = 0; i < count; ++i) {
      double d = double(p[i]) - double(w[i]);
      sq += d * d;
    }
    double norm = std::sqrt(sq);
    if (norm > clip)
      scale *= clip / norm;
  }
  for (int64_t i = 0; i < count; ++i) {
    double d = double(p[i]) - double(w[i]);
    if (!encode(scale * d, bits, q[i])) {
      ctx->failWith(fail(PLANRT_ERR_ARG,
                         "client %lld: its update is %s at index %lld (value %g): %s", (long long)f.client,
                         std::isfinite(d) ? "too large for the fixed-point aggregation" : "not finite", (long long)i,
                         d,
                         std::isfinite(d) ? "updates must stay below 2^22 in magnitude"
                                          : "its local training diverged"));
      return;
    }
  }
  double loss = f.lossCount ? f.lossSum / double(f.lossCount) : 0.0;
  if (!encode(loss / double(f.sampled.size()), bits, q[count]))
    ctx->failWith(fail(PLANRT_ERR_ARG, "client %lld: its round loss is %g", (long long)f.client, loss));
}

void planrt_sched_fed_mask(planrt_step_ctx *ctx, int64_t round, int32_t update, int64_t count, int32_t axis) {
  (void)axis;
  uint64_t *q = words(ctx, update, count, "fed_mask");
  auto &f = ctx->fed;
  if (!q || !f.mine)
    return;
  dump(ctx, round, "plain", q, count / 2);
  for (int64_t j : f.sampled) {
    if (j == f.client)
      continue;
    uint64_t key = fed::pairKey(f.seed, f.clients, f.client, j);
    bool add = f.client < j;
    for (int64_t t = 0; t < count / 2; ++t) {
      uint64_t m = fed::maskWord(key, round, t);
      q[t] = add ? q[t] + m : q[t] - m;
    }
  }
  dump(ctx, round, "sent", q, count / 2);
}

void planrt_sched_fed_server(planrt_step_ctx *ctx, int64_t round, int32_t global, int32_t update, int32_t params,
                             int32_t m, int32_t v, int32_t adam, double lr, double beta1, double beta2, double eps,
                             double noise, int64_t bits, int32_t state) {
  int64_t n = floatsOf(ctx, global);
  uint64_t *q = words(ctx, update, 2 * (n + 1), "fed_server");
  float *w = ctx->range(global, 0, n, "fed_server"), *p = ctx->range(params, 0, n, "fed_server");
  float *s = ctx->range(state, 0, 8, "fed_server");
  float *mo = adam ? ctx->range(m, 0, n, "fed_server") : nullptr, *vo = adam ? ctx->range(v, 0, n, "fed_server") : nullptr;
  if (ctx->status || !q || !w || !p || !s || (adam && (!mo || !vo)))
    return;
  double t = double(round + 1);
  double c1 = 1 - std::pow(beta1, t), c2 = 1 - std::pow(beta2, t);
  for (int64_t i = 0; i < n; ++i) {
    double d = decode(q[i], bits);
    if (noise > 0)
      d += noise * fed::noise(ctx->fed.seed, round, i);
    if (!adam) {
      w[i] = float(double(w[i]) + lr * d);
      continue;
    }
    // FedAdam on the pseudo-gradient −Δ̄, with Adam's bias correction.
    double g = -d;
    double mi = beta1 * double(mo[i]) + (1 - beta1) * g, vi = beta2 * double(vo[i]) + (1 - beta2) * g * g;
    mo[i] = float(mi);
    vo[i] = float(vi);
    w[i] = float(double(w[i]) - lr * (mi / c1) / (std::sqrt(vi / c2) + eps));
  }
  std::memcpy(p, w, size_t(n) * sizeof(float));
  s[7] = float(decode(q[n], bits));
}
