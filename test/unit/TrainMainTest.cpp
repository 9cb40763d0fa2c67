// The training driver (planrt_train_main) on a hand-written model: a softmax bigram
// model over 16 tokens (logits = W[token] + b, cross-entropy) with Adam, trained on
// a file whose tokens mostly follow a fixed successor. Every run is a forked child
// with stdout and stderr in files, so exit statuses and messages are observed as a
// user sees them; logs, checkpoints and gradient files are read back and checked
// against independent computations of the documented rules.
#include "planrt.h"

#include "TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using plan::test::TempDir;
using json = nlohmann::json;

// ---- The model: wte.weight [16, 16] at 0, lm_head.bias [16] at 256, 16 spare floats.
// Optimizer group 0 (the decayed matrices) is wte.weight, [0, 256); group 1 (the
// vectors) is lm_head.bias, [256, 272); the spare floats lie in neither.

constexpr int kVocab = 16, kMicro = 4, kSeq = 16, kAccum = 2;
constexpr int kBias = kVocab * kVocab, kNumFloats = kBias + kVocab + 16;
constexpr int kGroupBegin[2] = {0, kBias}, kGroupEnd[2] = {kBias, kBias + kVocab};
constexpr float kLr = 0.05f, kWeightDecay = 0.0f;

/// Softmax of W[token] + b into p; returns -log p[target].
float softmaxLoss(const float *params, int token, int target, float *p) {
  const float *row = params + token * kVocab;
  float mx = -INFINITY;
  for (int j = 0; j < kVocab; ++j)
    mx = std::max(mx, row[j] + params[kBias + j]);
  float sum = 0;
  for (int j = 0; j < kVocab; ++j)
    sum += p[j] = std::exp(row[j] + params[kBias + j] - mx);
  for (int j = 0; j < kVocab; ++j)
    p[j] /= sum;
  return -std::log(p[target]);
}

void bigramGrad(float *params, float *grads, const int32_t *tokens, const int32_t *targets, float *loss,
                const float * = nullptr) {
  const float n = float(kMicro * kSeq * kAccum);
  float p[kVocab], total = 0;
  for (int i = 0; i < kMicro * kSeq; ++i) {
    total += softmaxLoss(params, tokens[i], targets[i], p);
    for (int j = 0; j < kVocab; ++j) {
      float d = (p[j] - (j == targets[i] ? 1.0f : 0.0f)) / n;
      grads[tokens[i] * kVocab + j] += d;
      grads[kBias + j] += d;
    }
  }
  *loss += total / n;
}

/// state[6] = the sum of squares of both groups' gradient pieces.
void bigramSumsq(float *g0, float *g1, float *state) {
  const float *g[2] = {g0, g1};
  double sq = 0;
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < kGroupEnd[k] - kGroupBegin[k]; ++i)
      sq += double(g[k][i]) * g[k][i];
  state[6] = float(sq);
}

/// AdamW (bias-corrected by the step, decoupled decay on group 0 only), clipping at
/// global norm 1: the norm is sqrt(state[6]).
void adamUpdate(float *p0, float *p1, float *g0, float *g1, float *m0, float *m1, float *v0, float *v1, int64_t step,
                float *state) {
  float norm = std::sqrt(state[6]);
  float scale = norm > 1.0f ? 1.0f / norm : 1.0f;
  float c1 = 1.0f - std::pow(0.9f, float(step + 1)), c2 = 1.0f - std::pow(0.95f, float(step + 1));
  float *P[2] = {p0, p1}, *G[2] = {g0, g1}, *M[2] = {m0, m1}, *V[2] = {v0, v1};
  for (int k = 0; k < 2; ++k) {
    float decay = k == 0 ? 1.0f - kLr * kWeightDecay : 1.0f;
    for (int i = 0; i < kGroupEnd[k] - kGroupBegin[k]; ++i) {
      float g = G[k][i] * scale;
      M[k][i] = 0.9f * M[k][i] + 0.1f * g;
      V[k][i] = 0.95f * V[k][i] + 0.05f * g * g;
      P[k][i] = P[k][i] * decay - kLr * (M[k][i] / c1) / (std::sqrt(V[k][i] / c2) + 1e-8f);
    }
  }
  state[0] = norm;
  state[1] = kLr;
}

// ---- The step program, as planc lowers the sched dialect for one device. Buffer
// ids index the manifest's schedule.buffers table.
enum : int32_t { kParams = 0, kGrads = 1, kExpAvg = 2, kExpAvgSq = 3, kState = 4 };

void bigramStep(planrt_step_ctx *ctx, int64_t s) {
  const int64_t b0 = kGroupBegin[0], b1 = kGroupBegin[1];
  planrt_sched_fill(ctx, kState, 7, 1, 0.0f);
  planrt_sched_fill(ctx, kGrads, 0, kNumFloats, 0.0f);
  for (int64_t a = 0; a < kAccum; ++a)
    planrt_sched_grad(ctx, s, a, kParams, kGrads, kState);
  planrt_sched_sumsq(ctx, kGrads, b0, kGrads, b1, kState);
  planrt_sched_update(ctx, s, kParams, b0, kParams, b1, kGrads, b0, kGrads, b1, kExpAvg, b0, kExpAvg, b1, kExpAvgSq, b0,
                      kExpAvgSq, b1, kState);
}

/// gather and release: nothing to do on one device.
void noProgram(planrt_step_ctx *) {}

void bigramEval(float *params, const int32_t *tokens, const int32_t *targets, float *loss) {
  float p[kVocab], total = 0;
  for (int i = 0; i < kMicro * kSeq; ++i)
    total += softmaxLoss(params, tokens[i], targets[i], p);
  *loss = total / float(kMicro * kSeq);
}

// Faulty variants: the step is counted from the calls (runs that start at step 0).
int gCalls = 0;
void nanLossGrad(float *params, float *grads, const int32_t *tokens, const int32_t *targets, float *loss,
                 const float * = nullptr) {
  bigramGrad(params, grads, tokens, targets, loss);
  if (gCalls++ / kAccum == 3)
    *loss = NAN;
}
void nanGradGrad(float *params, float *grads, const int32_t *tokens, const int32_t *targets, float *loss,
                 const float * = nullptr) {
  bigramGrad(params, grads, tokens, targets, loss);
  if (gCalls++ / kAccum == 3)
    grads[5] = NAN;
}

// ---- Files.

void writeBytes(const std::string &path, const void *data, size_t n) {
  std::ofstream os(path, std::ios::binary);
  os.write(static_cast<const char *>(data), std::streamsize(n));
}

std::string readText(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// Tokens that follow t → (5t + 3) mod 16 nine times in ten.
std::vector<uint16_t> bigramTokens(size_t n, uint32_t seed) {
  std::vector<uint16_t> v(n);
  uint32_t r = seed, t = 0;
  for (size_t i = 0; i < n; ++i) {
    r = r * 1664525u + 1013904223u;
    t = (r >> 24) % 10 == 0 ? (r >> 8) % kVocab : (5 * t + 3) % kVocab;
    v[i] = uint16_t(t);
  }
  return v;
}

std::string ckptName(int step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step-%08d.safetensors", step);
  return buf;
}

struct Config {
  int steps = 12;
  uint64_t seed = 1337;
  std::string wteInit = "normal";
  std::vector<std::string> data, val;
  int evalEvery = 0, evalBatches = 0;
  std::string ckptDir;
  int every = 0, keep = 0;
};

std::string manifest(const Config &c) {
  json m = {{"format", "planc-train-1"}, {"plan", "t"}, {"model", "bigram"}, {"num_floats", kNumFloats}};
  json wte = {{"name", "wte.weight"}, {"shape", {kVocab, kVocab}}, {"offset", 0},
              {"count", kBias},       {"init", c.wteInit},         {"std", 0.02}};
  json bias = {{"name", "lm_head.bias"}, {"shape", {kVocab}}, {"offset", kBias},
               {"count", kVocab},        {"init", "zeros"},   {"std", 0.0}};
  m["params"] = {wte, bias};
  m["train"] = {{"batch", kMicro * kAccum},
                {"micro", kMicro},
                {"seq", kSeq},
                {"accumulation", kAccum},
                {"data_parallel", 1},
                {"steps", c.steps},
                {"seed", c.seed},
                {"vocab", kVocab},
                {"data", c.data},
                {"val", c.val},
                {"eval_every", c.evalEvery},
                {"eval_batches", c.evalBatches},
                {"checkpoint", {{"dir", c.ckptDir}, {"every", c.every}, {"keep", c.keep}}},
                {"lr", kLr},
                {"schedule", "constant"},
                {"warmup", 0},
                {"min_lr", 0.0},
                {"clip", 1.0},
                {"weight_decay", kWeightDecay},
                {"beta1", 0.9},
                {"beta2", 0.95},
                {"eps", 1e-8},
                {"precision", "fp32"},
                {"zero", 0}};
  m["groups"] = {{kGroupBegin[0], kGroupEnd[0]}, {kGroupBegin[1], kGroupEnd[1]}};
  m["mesh"] = {{"name", "cpu1"}, {"axes", {"dp"}}, {"sizes", {1}}, {"data", {"dp"}}};
  auto buffer = [](const char *name, int floats, const char *lifetime) {
    return json{{"name", name}, {"floats", floats}, {"lifetime", lifetime}};
  };
  // In the order of the ids kParams … kState.
  m["schedule"] = {{"buffers",
                    {buffer("params", kNumFloats, "persistent"), buffer("grads", kNumFloats, "step"),
                     buffer("exp_avg", kNumFloats, "persistent"), buffer("exp_avg_sq", kNumFloats, "persistent"),
                     buffer("state", 8, "persistent")}},
                   {"master", "params"},
                   {"sharded", false}};
  return m.dump();
}

// ---- Running the driver in a child process.

struct Result {
  int status = -1;
  std::string out, err;
};

Result run(const TempDir &dir, const std::string &manifestText, std::vector<std::string> args,
           planrt_grad_fn grad = bigramGrad) {
  static int runs = 0;
  std::string outPath = dir / ("run" + std::to_string(runs) + ".out");
  std::string errPath = dir / ("run" + std::to_string(runs++) + ".err");
  args.insert(args.begin(), "train");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    gCalls = 0;
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = planrt_train_main(int(args.size()), argv.data(), manifestText.c_str(), grad, bigramSumsq, adamUpdate,
                               bigramEval, bigramStep, noProgram, noProgram, nullptr, nullptr, nullptr, 0, nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc);
  }
  Result r;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
    r.status = WEXITSTATUS(status);
  r.out = readText(outPath);
  r.err = readText(errPath);
  return r;
}

struct Log {
  std::vector<json> steps, evals;
};

Log readLog(const std::string &path) {
  Log log;
  std::ifstream is(path);
  std::string line;
  while (std::getline(is, line)) {
    json j = json::parse(line);
    (j.contains("val_loss") ? log.evals : log.steps).push_back(j);
  }
  return log;
}

/// The losses of a log's step lines, in order (NaN for null).
std::vector<double> losses(const Log &log) {
  std::vector<double> out;
  for (const json &j : log.steps)
    out.push_back(j["loss"].is_null() ? NAN : j["loss"].get<double>());
  return out;
}

std::vector<int64_t> stepsOf(const Log &log) {
  std::vector<int64_t> out;
  for (const json &j : log.steps)
    out.push_back(j["step"].get<int64_t>());
  return out;
}

/// A test directory with train.bin and val.bin.
struct Fixture {
  TempDir dir;
  std::string train = dir / "train.bin", val = dir / "val.bin";
  Fixture() {
    auto t = bigramTokens(8192, 1);
    writeBytes(train, t.data(), t.size() * 2);
    auto v = bigramTokens(2048, 2);
    writeBytes(val, v.data(), v.size() * 2);
  }
  Config config() const {
    Config c;
    c.data = {train};
    return c;
  }
};

/// Reads tensor `name` [shape] (f32) of a safetensors file.
std::vector<float> readTensor(const std::string &file, const std::string &name, std::vector<int64_t> shape) {
  planrt_st *st = nullptr;
  EXPECT_EQ(planrt_st_open(file.c_str(), &st), PLANRT_OK) << planrt_last_error();
  if (!st)
    return {};
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_EQ(planrt_st_read(st, name.c_str(), PLANRT_F32, int(shape.size()), shape.data(), out.data()), PLANRT_OK)
      << planrt_last_error();
  planrt_st_close(st);
  return out;
}

std::string metadata(const std::string &file, const char *key) {
  planrt_st *st = nullptr;
  if (planrt_st_open(file.c_str(), &st) != PLANRT_OK)
    return "<unreadable>";
  const char *v = planrt_st_metadata(st, key);
  std::string out = v ? v : "<none>";
  planrt_st_close(st);
  return out;
}

size_t countOf(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST(TrainMain, LossFallsAndEveryStepIsLogged) {
  Fixture f;
  Config c = f.config();
  c.steps = 40;
  std::string log = f.dir / "log.jsonl";
  Result r = run(f.dir, manifest(c), {"--log", log});
  ASSERT_EQ(r.status, 0) << r.err;
  Log l = readLog(log);
  ASSERT_EQ(l.steps.size(), 40u);
  for (int s = 0; s < 40; ++s) {
    const json &j = l.steps[size_t(s)];
    EXPECT_EQ(j["step"], s);
    EXPECT_FLOAT_EQ(j["lr"].get<double>(), kLr);
    EXPECT_GT(j["grad_norm"].get<double>(), 0.0);
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(j["comm_bytes"]["all_reduce"], 0);
  }
  std::vector<double> loss = losses(l);
  EXPECT_NEAR(loss.front(), std::log(16.0), 0.1); // std 0.02: nearly uniform at first
  EXPECT_LT(loss.back(), 0.6 * loss.front());
  // Not a terminal: a plain line every 40/20 = 2 steps, then the final line.
  EXPECT_EQ(countOf(r.err, " · loss "), 20u) << r.err;
  EXPECT_NE(r.err.find("step 2/40 · loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step 40/40 · loss "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 3/40"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("done · 40 steps (to step 40) · final loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" tok/s"), std::string::npos);

  // --quiet keeps only the final line.
  r = run(f.dir, manifest(c), {"--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(countOf(r.err, "\n"), 1u) << r.err;
  EXPECT_NE(r.err.find("done · 40 steps"), std::string::npos) << r.err;
}

// ---- The executable's arena (the cuda targets' memory plan): every buffer of the
// manifest at its offset in one reservation, the step region after the state part.
constexpr int64_t kSlot = (kNumFloats * 4 + 255) / 256 * 256; // each buffer's bytes, aligned
constexpr int64_t kStateBytes = 4 * kSlot + 256, kStepBytes = 4096;

std::string withArena(const std::string &text) {
  json m = json::parse(text);
  int64_t at = 0;
  for (json &b : m["schedule"]["buffers"]) {
    b["offset"] = at;
    at += (b["floats"].get<int64_t>() * 4 + 255) / 256 * 256;
  }
  m["memory"] = {{"alignment", 256}, {"state_bytes", at}, {"step_bytes", kStepBytes}, {"arenas", json::object()}};
  return m.dump();
}

/// bigramGrad, stopping the process unless its buffers lie at the manifest's offsets in
/// the arena whose step region planrt_step_arena returns.
void arenaGrad(float *params, float *grads, const int32_t *tokens, const int32_t *targets, float *loss,
               const float *seed = nullptr) {
  auto *base = static_cast<unsigned char *>(planrt_step_arena(kStepBytes)) - kStateBytes;
  if (reinterpret_cast<unsigned char *>(params) != base || reinterpret_cast<unsigned char *>(grads) != base + kSlot)
    _exit(7);
  bigramGrad(params, grads, tokens, targets, loss, seed);
}

TEST(TrainMain, AnArenaHoldsTheBuffersAtTheirOffsetsAndTrainsTheSame) {
  Fixture f;
  Config c = f.config();
  ASSERT_EQ(json::parse(withArena(manifest(c)))["memory"]["state_bytes"], kStateBytes);
  Result plain = run(f.dir, manifest(c), {"--log", f.dir / "plain.jsonl"});
  Result arena = run(f.dir, withArena(manifest(c)), {"--log", f.dir / "arena.jsonl"}, arenaGrad);
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(arena.status, 0) << arena.err;
  Log a = readLog(f.dir / "arena.jsonl"), p = readLog(f.dir / "plain.jsonl");
  EXPECT_EQ(losses(a), losses(p));
  EXPECT_NE(arena.err.find("(arena 0.0 MiB: 0.0 MiB of state, 0.0 MiB of step buffers)"), std::string::npos)
      << arena.err;
  EXPECT_EQ(plain.err.find("(arena "), std::string::npos) << plain.err;
  // The device peak counts the whole arena (a process-wide peak: this process's earlier
  // tests may have held more).
  EXPECT_GE(a.steps.back()["mem_device_peak_bytes"].get<int64_t>(), kStateBytes + kStepBytes);
  // Without the arena, the generated code asking for its step region stops the run.
  Result none = run(f.dir, manifest(c), {}, arenaGrad);
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("planrt: error: rank 0: a step function asks for the executable's arena, which the runtime "
                          "has not reserved"),
            std::string::npos)
      << none.err;
}

TEST(TrainMain, AnArenaThatDoesNotHoldItsBuffersIsMalformed) {
  Fixture f;
  json m = json::parse(withArena(manifest(f.config())));
  auto expectError = [&](const json &text, const std::string &what) {
    Result r = run(f.dir, text.dump(), {});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("planrt: error: rank 0: the manifest is malformed: " + what), std::string::npos) << r.err;
  };
  json bad = m;
  bad["schedule"]["buffers"][1]["offset"] = 100;
  expectError(bad, "schedule.buffers[1].offset 100 does not place its 288 floats at a 256-byte boundary inside the "
                   "5376 bytes of the arena's state part");
  bad = m;
  bad["schedule"]["buffers"][3]["offset"] = kStateBytes - 256;
  expectError(bad, "schedule.buffers[3].offset 5120 does not place its 288 floats");
  bad = m;
  bad["schedule"]["buffers"][0].erase("offset");
  expectError(bad, "schedule.buffers[0] ('params') has no offset in the arena, and is not offloaded");
  // Only an offloaded moment may lack one (plan-memory-plan leaves them out of the arena).
  bad = m;
  bad["schedule"]["buffers"][2].erase("offset");
  expectError(bad, "schedule.buffers[2] ('exp_avg') has no offset in the arena, and is not offloaded");
  bad = m;
  bad["memory"]["stage_state_bytes"] = {kStateBytes, kStateBytes};
  expectError(bad, "memory.stage_state_bytes is not one size per pipeline stage, each at most 5376");
}

TEST(TrainMain, TheSameSeedGivesBitwiseTheSameRun) {
  Fixture f;
  Config c = f.config();
  Result a = run(f.dir, manifest(c), {"--log", f.dir / "a.jsonl"});
  Result b = run(f.dir, manifest(c), {"--log", f.dir / "b.jsonl"});
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  Log la = readLog(f.dir / "a.jsonl"), lb = readLog(f.dir / "b.jsonl");
  ASSERT_EQ(la.steps.size(), 12u);
  EXPECT_EQ(losses(la), losses(lb));
  for (size_t s = 0; s < 12; ++s)
    EXPECT_EQ(la.steps[s]["grad_norm"], lb.steps[s]["grad_norm"]) << s;
  // Another seed draws other initial values and other samples.
  c.seed = 1338;
  Result d = run(f.dir, manifest(c), {"--log", f.dir / "d.jsonl"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_NE(losses(readLog(f.dir / "d.jsonl")), losses(la));
}

TEST(TrainMain, SaveInitThenInitGivesTheSameRun) {
  Fixture f;
  Config c = f.config();
  std::string init = f.dir / "init.safetensors";
  Result a = run(f.dir, manifest(c), {"--save-init", init, "--log", f.dir / "a.jsonl"});
  ASSERT_EQ(a.status, 0) << a.err;
  // The saved values are the documented initialisation: parameter 0, normal(0, 0.02).
  std::vector<float> wte = readTensor(init, "wte.weight", {kVocab, kVocab}), expect(kBias);
  ASSERT_EQ(planrt_init_normal(expect.data(), kBias, 0, 0.0, 0.02, 1337, 0), PLANRT_OK);
  EXPECT_EQ(wte, expect);
  EXPECT_EQ(readTensor(init, "lm_head.bias", {kVocab}), std::vector<float>(kVocab, 0.0f));
  EXPECT_EQ(metadata(init, "format"), "planc-params-1");
  EXPECT_EQ(metadata(init, "step"), "0");
  // A plan whose own initialisation differs trains exactly like A from A's values.
  c.wteInit = "ones";
  Result b = run(f.dir, manifest(c), {"--init", init, "--log", f.dir / "b.jsonl"});
  ASSERT_EQ(b.status, 0) << b.err;
  Result o = run(f.dir, manifest(c), {"--log", f.dir / "o.jsonl"});
  ASSERT_EQ(o.status, 0) << o.err;
  std::vector<double> la = losses(readLog(f.dir / "a.jsonl"));
  EXPECT_EQ(losses(readLog(f.dir / "b.jsonl")), la);
  EXPECT_NE(losses(readLog(f.dir / "o.jsonl")), la);
}

TEST(TrainMain, ResumeContinuesBitwiseLikeAnUninterruptedRun) {
  Fixture f;
  Config c = f.config();
  Result full = run(f.dir, manifest(c), {"--log", f.dir / "full.jsonl"});
  ASSERT_EQ(full.status, 0) << full.err;
  std::vector<double> all = losses(readLog(f.dir / "full.jsonl"));
  ASSERT_EQ(all.size(), 12u);

  // Stop at step 10 with a checkpoint every 4: steps 4, 8 and the end of the run, 10.
  std::string ckpt = f.dir / "ckpt/nested";
  c.ckptDir = ckpt;
  c.every = 4;
  Result first = run(f.dir, manifest(c), {"--steps", "10", "--log", f.dir / "first.jsonl"});
  ASSERT_EQ(first.status, 0) << first.err;
  for (int s : {4, 8, 10})
    EXPECT_TRUE(exists(ckpt + "/" + ckptName(s))) << s;
  EXPECT_FALSE(exists(ckpt + "/" + ckptName(12)));
  EXPECT_NE(first.err.find("checkpoint " + ckpt + "/" + ckptName(10)), std::string::npos) << first.err;
  std::vector<double> firstLosses = losses(readLog(f.dir / "first.jsonl"));
  EXPECT_EQ(firstLosses, std::vector<double>(all.begin(), all.begin() + 10));

  // The checkpoint: parameters under their names, both moments, the metadata.
  std::string eight = ckpt + "/" + ckptName(8);
  EXPECT_EQ(metadata(eight, "format"), "planc-ckpt-1");
  EXPECT_EQ(metadata(eight, "step"), "8");
  EXPECT_EQ(metadata(eight, "plan"), "t");
  EXPECT_EQ(metadata(eight, "model"), "bigram");
  EXPECT_EQ(metadata(eight, "seed"), "1337");
  std::vector<float> v = readTensor(eight, "optimizer.exp_avg_sq.lm_head.bias", {kVocab});
  EXPECT_GT(v[0], 0.0f);
  EXPECT_EQ(readTensor(eight, "optimizer.exp_avg.wte.weight", {kVocab, kVocab}).size(), size_t(kBias));

  // Resume from the newest (10) and from 8: the rest of the run is bitwise the same.
  Result fromTen = run(f.dir, manifest(c), {"--resume", ckpt, "--log", f.dir / "ten.jsonl"});
  ASSERT_EQ(fromTen.status, 0) << fromTen.err;
  Log ten = readLog(f.dir / "ten.jsonl");
  EXPECT_EQ(stepsOf(ten), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(losses(ten), std::vector<double>(all.begin() + 10, all.end()));
  ASSERT_EQ(std::remove((ckpt + "/" + ckptName(12)).c_str()), 0);
  ASSERT_EQ(std::remove((ckpt + "/" + ckptName(10)).c_str()), 0);
  Result fromEight = run(f.dir, manifest(c), {"--resume", ckpt, "--log", f.dir / "eight.jsonl"});
  ASSERT_EQ(fromEight.status, 0) << fromEight.err;
  EXPECT_NE(fromEight.err.find("resuming from " + eight + " at step 8"), std::string::npos) << fromEight.err;
  Log e = readLog(f.dir / "eight.jsonl");
  EXPECT_EQ(stepsOf(e), (std::vector<int64_t>{8, 9, 10, 11}));
  EXPECT_EQ(losses(e), std::vector<double>(all.begin() + 8, all.end()));

  // A directory without a checkpoint is an error that names it.
  std::string empty = f.dir / "empty";
  ASSERT_EQ(::mkdir(empty.c_str(), 0755), 0);
  Result none = run(f.dir, manifest(c), {"--resume", empty});
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("planrt: error: rank 0: " + empty + ": no checkpoint to resume from"), std::string::npos)
      << none.err;

  // Resuming a finished run has nothing to do.
  Result done = run(f.dir, manifest(c), {"--resume", ckpt});
  EXPECT_EQ(done.status, 0) << done.err;
  EXPECT_NE(done.err.find("nothing to do"), std::string::npos) << done.err;
}

TEST(TrainMain, KeepPrunesOldCheckpoints) {
  Fixture f;
  Config c = f.config();
  c.steps = 6;
  c.ckptDir = f.dir / "ckpt";
  c.every = 1;
  c.keep = 2;
  Result r = run(f.dir, manifest(c), {});
  ASSERT_EQ(r.status, 0) << r.err;
  for (int s = 1; s <= 6; ++s)
    EXPECT_EQ(exists(c.ckptDir + "/" + ckptName(s)), s >= 5) << s;
  // --checkpoint-dir and --checkpoint-every replace the plan's.
  std::string other = f.dir / "other";
  r = run(f.dir, manifest(c), {"--checkpoint-dir", other, "--checkpoint-every", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(exists(other + "/" + ckptName(3)));
  EXPECT_TRUE(exists(other + "/" + ckptName(6)));
  EXPECT_FALSE(exists(other + "/" + ckptName(4)));
}

TEST(TrainMain, ANonFiniteLossStopsWithTheStepAndTheLastCheckpointLoads) {
  Fixture f;
  Config c = f.config();
  c.ckptDir = f.dir / "ckpt";
  c.every = 2;
  std::string log = f.dir / "nan.jsonl";
  Result r = run(f.dir, manifest(c), {"--log", log}, nanLossGrad);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("planrt: error: rank 0: step 3: the loss is NaN"), std::string::npos) << r.err;
  Log l = readLog(log);
  ASSERT_EQ(l.steps.size(), 4u); // steps 0–2, then step 3 with its loss as null
  EXPECT_TRUE(l.steps[3]["loss"].is_null());
  EXPECT_TRUE(exists(c.ckptDir + "/" + ckptName(2)));
  EXPECT_FALSE(exists(c.ckptDir + "/" + ckptName(4)));
  // The checkpoint before it loads, and training goes on from it.
  EXPECT_EQ(metadata(c.ckptDir + "/" + ckptName(2), "step"), "2");
  Result resumed = run(f.dir, manifest(c), {"--resume", c.ckptDir, "--steps", "4", "--log", f.dir / "r.jsonl"});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(stepsOf(readLog(f.dir / "r.jsonl")), (std::vector<int64_t>{2, 3}));
}

TEST(TrainMain, ANonFiniteGradientNormStopsWithTheStep) {
  Fixture f;
  Config c = f.config();
  c.ckptDir = f.dir / "ckpt";
  c.every = 1;
  Result r = run(f.dir, manifest(c), {"--log", f.dir / "log.jsonl"}, nanGradGrad);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("planrt: error: rank 0: step 3: the gradient norm is NaN"), std::string::npos) << r.err;
  EXPECT_TRUE(exists(c.ckptDir + "/" + ckptName(3)));
  EXPECT_FALSE(exists(c.ckptDir + "/" + ckptName(4)));
  Log l = readLog(f.dir / "log.jsonl");
  ASSERT_EQ(l.steps.size(), 4u);
  EXPECT_TRUE(l.steps[3]["grad_norm"].is_null());
}

TEST(TrainMain, BadDataFailsNamingTheFile) {
  Fixture f;
  Config c = f.config();
  auto expectError = [&](const std::string &file, const std::string &what) {
    c.data = {file};
    Result r = run(f.dir, manifest(c), {"--log", f.dir / "bad.jsonl"});
    EXPECT_EQ(r.status, 1) << file;
    EXPECT_NE(r.err.find("planrt: error: rank 0: " + file + ": " + what), std::string::npos) << r.err;
  };
  expectError(f.dir / "missing.bin", "no such token file");

  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 1000;
  std::vector<char> bytes(1024 + 500 * 2);
  std::memcpy(bytes.data(), header.data(), 1024);
  writeBytes(f.dir / "cut.bin", bytes.data(), bytes.size());
  expectError(f.dir / "cut.bin", "truncated or corrupt: the header promises 1000 tokens");

  header[0] = 20240521;
  header[2] = 500;
  std::memcpy(bytes.data(), header.data(), 1024);
  writeBytes(f.dir / "magic.bin", bytes.data(), bytes.size());
  expectError(f.dir / "magic.bin", "an llm.c-style header with magic 20240521");

  std::vector<uint16_t> big(4096, 300);
  writeBytes(f.dir / "vocab.bin", big.data(), big.size() * 2);
  expectError(f.dir / "vocab.bin", "token 300 at position");

  std::vector<uint16_t> tiny(10, 1);
  writeBytes(f.dir / "tiny.bin", tiny.data(), tiny.size() * 2);
  expectError(f.dir / "tiny.bin", "fewer than 17 tokens");
  EXPECT_TRUE(readLog(f.dir / "bad.jsonl").steps.empty());

  // --data replaces the plan's files.
  Result r = run(f.dir, manifest(c), {"--data", f.train, "--steps", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(TrainMain, InitWithAWrongShapeNamesTheTensor) {
  Fixture f;
  std::vector<float> w(kVocab * 8, 0.5f), b(kVocab, 0.0f);
  int64_t wShape[2] = {kVocab, 8}, bShape[1] = {kVocab};
  planrt_tensor t[2] = {{"wte.weight", PLANRT_F32, 2, wShape, w.data()},
                        {"lm_head.bias", PLANRT_F32, 1, bShape, b.data()}};
  std::string file = f.dir / "wrong.safetensors";
  ASSERT_EQ(planrt_st_save(file.c_str(), t, 2, nullptr, 0), PLANRT_OK);
  Result r = run(f.dir, manifest(f.config()), {"--init", file});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("planrt: error: rank 0: " + file +
                       ": tensor 'wte.weight' is F32 [16, 8] in the checkpoint but the model's 'wte.weight' is [16, 16]"),
            std::string::npos)
      << r.err;
  // A missing tensor is named too.
  w.resize(kBias);
  t[0].data = w.data();
  wShape[1] = kVocab;
  ASSERT_EQ(planrt_st_save(file.c_str(), t, 1, nullptr, 0), PLANRT_OK);
  r = run(f.dir, manifest(f.config()), {"--init", file});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("tensor 'lm_head.bias' is not in the checkpoint"), std::string::npos) << r.err;
}

TEST(TrainMain, AnUnwritableCheckpointDirectoryFailsBeforeStepZero) {
  Fixture f;
  Config c = f.config();
  writeBytes(f.dir / "file", "x", 1);
  c.ckptDir = f.dir / "file/ckpt";
  c.every = 2;
  std::string log = f.dir / "log.jsonl";
  Result r = run(f.dir, manifest(c), {"--log", log});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("planrt: error: rank 0: " + c.ckptDir + ": cannot create the checkpoint directory"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(readLog(log).steps.empty());
  EXPECT_EQ(r.err.find("step 1/"), std::string::npos) << r.err;
  // A directory without write permission (root writes anyway: not tested as root).
  if (geteuid() != 0) {
    std::string ro = f.dir / "ro";
    ASSERT_EQ(::mkdir(ro.c_str(), 0500), 0);
    r = run(f.dir, manifest(c), {"--log", log, "--checkpoint-dir", ro});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(ro + ": the checkpoint directory is not writable"), std::string::npos) << r.err;
    EXPECT_TRUE(readLog(log).steps.empty());
    ::chmod(ro.c_str(), 0700);
  }
}

TEST(TrainMain, SavedGradientsFollowTheSamplingRule) {
  Fixture f;
  Config c = f.config();
  std::string file = f.dir / "grads.safetensors";
  Result r = run(f.dir, manifest(c), {"--save-grads", file, "--steps", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  // Step 0, micro-step a: global samples 0·batch + a·micro + i, i < micro.
  std::vector<float> params(kNumFloats, 0.0f), grads(kNumFloats, 0.0f);
  ASSERT_EQ(planrt_init_normal(params.data(), kBias, 0, 0.0, 0.02, c.seed, 0), PLANRT_OK);
  const char *pattern = f.train.c_str();
  planrt_data *data = nullptr;
  ASSERT_EQ(planrt_data_open(&pattern, 1, c.seed, kVocab, &data), PLANRT_OK);
  std::vector<int32_t> tokens(kMicro * kSeq), targets(kMicro * kSeq);
  float loss = 0;
  for (int a = 0; a < kAccum; ++a) {
    ASSERT_EQ(planrt_data_batch(data, uint64_t(a * kMicro), kMicro, kSeq, tokens.data(), targets.data()), PLANRT_OK);
    bigramGrad(params.data(), grads.data(), tokens.data(), targets.data(), &loss);
  }
  planrt_data_close(data);
  EXPECT_EQ(readTensor(file, "wte.weight", {kVocab, kVocab}), std::vector<float>(grads.begin(), grads.begin() + kBias));
  EXPECT_EQ(readTensor(file, "lm_head.bias", {kVocab}),
            std::vector<float>(grads.begin() + kBias, grads.begin() + kBias + kVocab));
  EXPECT_EQ(metadata(file, "format"), "planc-grads-1");
  EXPECT_EQ(std::stof(metadata(file, "loss")), loss);
}

TEST(TrainMain, EvaluatesOnTheValidationWindows) {
  Fixture f;
  Config c = f.config();
  c.val = {f.val};
  c.evalEvery = 5;
  c.evalBatches = 2;
  c.ckptDir = f.dir / "ckpt";
  c.every = 100; // only the end of the run
  std::string log = f.dir / "log.jsonl";
  Result r = run(f.dir, manifest(c), {"--log", log});
  ASSERT_EQ(r.status, 0) << r.err;
  Log l = readLog(log);
  ASSERT_EQ(l.evals.size(), 3u);
  EXPECT_EQ(l.evals[0]["step"], 4);
  EXPECT_EQ(l.evals[1]["step"], 9);
  EXPECT_EQ(l.evals[2]["step"], 11);
  EXPECT_NE(r.err.find("step 12/12 · val loss "), std::string::npos) << r.err;
  // The last one, recomputed from the final parameters: batch w is windows w·micro + i.
  std::string last = c.ckptDir + "/" + ckptName(12);
  std::vector<float> params = readTensor(last, "wte.weight", {kVocab, kVocab});
  std::vector<float> bias = readTensor(last, "lm_head.bias", {kVocab});
  params.insert(params.end(), bias.begin(), bias.end());
  const char *pattern = f.val.c_str();
  planrt_data *data = nullptr;
  ASSERT_EQ(planrt_data_open(&pattern, 1, 0, kVocab, &data), PLANRT_OK);
  std::vector<int32_t> tokens(kMicro * kSeq), targets(kMicro * kSeq);
  double sum = 0;
  for (int w = 0; w < 2; ++w) {
    for (int i = 0; i < kMicro; ++i)
      ASSERT_EQ(
          planrt_data_window(data, uint64_t(w * kMicro + i), kSeq, tokens.data() + i * kSeq, targets.data() + i * kSeq),
          PLANRT_OK);
    float loss = 0;
    bigramEval(params.data(), tokens.data(), targets.data(), &loss);
    sum += loss;
  }
  planrt_data_close(data);
  EXPECT_NEAR(l.evals[2]["val_loss"].get<double>(), sum / 2, 1e-7 * sum);

  // Too little validation data for eval_batches × micro windows fails before step 0.
  c.evalBatches = 1000;
  r = run(f.dir, manifest(c), {"--log", f.dir / "short.jsonl"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(f.val + ": the validation data holds fewer than"), std::string::npos) << r.err;
  EXPECT_TRUE(readLog(f.dir / "short.jsonl").steps.empty());
}

TEST(TrainMain, TheCommandLineIsChecked) {
  Fixture f;
  std::string m = manifest(f.config());
  Result r = run(f.dir, m, {"--x"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "planrt: error: unknown option '--x' (see --help)\n");
  r = run(f.dir, m, {"--steps", "ten"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad value 'ten' for --steps"), std::string::npos) << r.err;
  r = run(f.dir, m, {"--steps=-1"});
  EXPECT_EQ(r.status, 2);
  r = run(f.dir, m, {"--log"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("option '--log' needs a value"), std::string::npos) << r.err;
  r = run(f.dir, m, {"stray"});
  EXPECT_EQ(r.status, 2);
  r = run(f.dir, m, {"--init", "a", "--resume", "b"});
  EXPECT_EQ(r.status, 2);
  r = run(f.dir, m, {"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char *flag : {"--steps", "--log", "--init", "--save-init", "--resume", "--data", "--val",
                           "--checkpoint-dir", "--checkpoint-every", "--save-grads", "--quiet", "--help"})
    EXPECT_NE(r.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  EXPECT_NE(r.out.find("Trains plan 't' (model 'bigram')"), std::string::npos) << r.out;
  // --steps=N works like --steps N.
  r = run(f.dir, m, {"--steps=3", "--log", f.dir / "log.jsonl"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(readLog(f.dir / "log.jsonl").steps.size(), 3u);
}

TEST(TrainMain, AMalformedManifestIsAnError) {
  Fixture f;
  std::string good = manifest(f.config());
  auto expectError = [&](const std::string &text, const std::string &what) {
    Result r = run(f.dir, text, {});
    EXPECT_EQ(r.status, 1) << text;
    EXPECT_NE(r.err.find("planrt: error: rank 0: the manifest is malformed: " + what), std::string::npos) << r.err;
  };
  expectError("{\"format\": ", "not valid JSON");
  json m = json::parse(good);
  m["format"] = "planc-train-9";
  expectError(m.dump(), "format 'planc-train-9'");
  m = json::parse(good);
  m["params"][1]["offset"] = kNumFloats - 8;
  expectError(m.dump(), "params[1] ('lm_head.bias') ends at float 296, past float 288 (num_floats)");
  m = json::parse(good);
  m["params"][0]["count"] = 3;
  expectError(m.dump(), "params[0] ('wte.weight').count is 3 but its shape has 256 elements");
  m = json::parse(good);
  m["params"][1]["offset"] = 200;
  expectError(m.dump(), "parameters 'wte.weight' and 'lm_head.bias' overlap");
  m = json::parse(good);
  m["params"][0]["init"] = "xavier";
  expectError(m.dump(), "params[0] ('wte.weight').init is 'xavier'; expected normal, uniform, zeros or ones");
  m = json::parse(good);
  m["train"]["batch"] = 6;
  expectError(m.dump(), "train.batch 6 is not micro × accumulation × data_parallel = 8");
  m = json::parse(good);
  m["train"]["seq"] = "16";
  expectError(m.dump(), "train.seq is \"16\", not an integer");
  m = json::parse(good);
  m["train"].erase("micro");
  expectError(m.dump(), "train has no 'micro'");
  // The optimizer groups, the mesh and the step program's buffer table.
  m = json::parse(good);
  m.erase("groups");
  expectError(m.dump(), "the manifest has no 'groups'");
  m = json::parse(good);
  m["groups"][1] = {kBias, kNumFloats + 16};
  expectError(m.dump(), "groups[1] is not a span of num_floats that splits into data_parallel pieces");
  m = json::parse(good);
  m["mesh"]["sizes"] = {2};
  expectError(m.dump(), "train.data_parallel 1 × tensor_parallel 1 × pipeline stages 1 × federated clients 1 is not "
                        "the mesh's 2 devices over its data, tensor, pipeline and federated axes");
  m = json::parse(good);
  m["mesh"]["data"] = {"tp"};
  expectError(m.dump(), "mesh.data names 'tp', which is not an axis");
  // Tensor parallelism: the axis, and each split parameter's blocks.
  m = json::parse(good);
  m["mesh"]["tensor"] = "tq";
  expectError(m.dump(), "mesh.tensor names 'tq', which is not an axis");
  m = json::parse(good);
  m["params"][0]["split"] = {{"dim", 0}, {"parts", 2}, {"blocks", {3}}};
  expectError(m.dump(), "params[0] ('wte.weight').split.blocks holds 3, not an extent divisible by the parts");
  m = json::parse(good);
  m["params"][0]["split"] = {{"dim", 0}, {"parts", 2}, {"blocks", {2}}};
  expectError(m.dump(), "params[0] ('wte.weight').split.blocks do not add up to the split dim times the parts");
  // Pipeline parallelism: the stages' tables and the pipeline axis.
  m = json::parse(good);
  m["pipeline"] = {{"axis", "pp"}, {"size", 2}, {"schedule", "gpipe"}};
  expectError(m.dump(), "the manifest has no 'stages'");
  m["stages"] = json::array({json::parse(good)});
  expectError(m.dump(), "stages is not an array of two stages or more");
  m["stages"] = json::array({json::parse(good), json::parse(good)});
  expectError(m.dump(), "pipeline.axis names 'pp', which is not an axis");
  // Each rank's table lists the stages it holds (rank r of p: r, r + p, …), as many on
  // every rank.
  m["pipeline"]["axis"] = "dp";
  expectError(m.dump(), "stages[0] has no 'chunks'");
  m["stages"][0]["chunks"] = json::array({{{"stage", 0}, {"activation", 8}}});
  m["stages"][1]["chunks"] = json::array({{{"stage", 1}}, {{"stage", 3}}});
  expectError(m.dump(), "stages[1].chunks holds 2 stages, stages[0].chunks 1: every rank holds as many");
  m["stages"][0]["chunks"] = json::array({{{"stage", 1}, {"activation", 8}}});
  m["stages"][1]["chunks"] = json::array({{{"stage", 0}}});
  expectError(m.dump(), "stages[0].chunks[0].stage is not 0: rank r of p holds stages r, r + p, …");
  m = json::parse(good);
  m["params"][0]["replica"] = 1;
  expectError(m.dump(), "params[0] ('wte.weight').replica is not true or false");
  m = json::parse(good);
  m["schedule"]["buffers"].erase(3);
  expectError(m.dump(), "schedule.buffers lacks 'exp_avg_sq'");
  m = json::parse(good);
  m["schedule"]["buffers"][1]["floats"] = kNumFloats - 16;
  expectError(m.dump(), "schedule.buffers do not have the sizes of the flat layout");
  m = json::parse(good);
  m["schedule"]["buffers"][4]["lifetime"] = "forever";
  expectError(m.dump(), "schedule.buffers[4].lifetime is 'forever'");
}

TEST(TrainMain, TheProgressLineIsRedrawnOnATerminal) {
  Fixture f;
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
    GTEST_SKIP() << "no pseudo-terminal";
  std::string slave = ptsname(master);
  Config c = f.config();
  std::string m = manifest(c);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(slave.c_str(), O_RDWR | O_NOCTTY);
    ::dup2(fd, STDERR_FILENO);
    char arg0[] = "train";
    char *argv[] = {arg0, nullptr};
    int rc = planrt_train_main(1, argv, m.c_str(), bigramGrad, bigramSumsq, adamUpdate, bigramEval, bigramStep,
                               noProgram, noProgram, nullptr, nullptr, nullptr, 0, nullptr);
    std::fflush(stderr);
    _exit(rc);
  }
  // Read while the child runs (the terminal's buffer is small), until it hangs up.
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, size_t(n));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ::close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("\r\033[Kstep 1/12 · loss "), std::string::npos) << out;
  EXPECT_NE(out.find("ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[Kdone · 12 steps"), std::string::npos) << out;
}
