// The NVMe optimizer state (runtime/lib/offload.h): chunked streaming through io_uring,
// the last chunk's padding, the step state's writes, and crash safety — a process killed
// halfway through an update leaves the previous generation current and whole; with the
// parameter shard offloaded too, the same for it, and its ranges read for all-gathers;
// an update overlapped with what follows it, waited for by what touches its state, and its
// failure reported; on a device backend, the update in its memory and the files through
// host slots.
#include "TempDir.h"
#include "offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using planrt::train::OffloadedOptimizer;

namespace {

constexpr int64_t kChunk = 1024; // floats: one 4 KiB moment chunk

/// A stand-in update of one chunk, easy to predict: m += g, v += g², p -= 1 + m, and
/// the norm slot set to the step.
void fakeUpdate(float *p, float *g, float *m, float *v, int64_t step, const float *, float *next) {
  for (int64_t i = 0; i < kChunk; ++i) {
    m[i] += g[i];
    v[i] += g[i] * g[i];
    p[i] -= 1.0f + m[i];
  }
  next[0] = float(step);
}

struct Sizes {
  int64_t n0 = 5 * kChunk + 17, n1 = 300; // a partial last chunk in each group
};

OffloadedOptimizer make(const std::string &dir, const Sizes &s, const std::string &paramsDir = {}) {
  return OffloadedOptimizer(dir, 0, kChunk, {s.n0, fakeUpdate}, {s.n1, fakeUpdate}, paramsDir);
}

/// Floats [offset, offset + n) of the shard (group 0's piece, then group 1's), read back.
std::vector<float> fetch(OffloadedOptimizer &opt, int64_t offset, int64_t n) {
  std::vector<float> out(size_t(n), -1.0f);
  EXPECT_EQ(opt.readParams(offset, n, out.data()), PLANRT_OK) << planrt_last_error();
  return out;
}

/// Runs step 5's update in a child process with the crash hook set (SIGKILL halfway
/// through its writes of the next generation) and checks that it was killed.
void killedInAnUpdate(const std::string &dir, const Sizes &s, const std::string &paramsDir = {}) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("PLANRT_TEST_KILL_IN_UPDATE", "5", 1);
    OffloadedOptimizer opt = make(dir, s, paramsDir);
    std::vector<float> p0(size_t(s.n0)), p1(size_t(s.n1)), g0(size_t(s.n0), 7.0f), g1(size_t(s.n1), 7.0f);
    float *const ps[2] = {p0.data(), p1.data()}, *const gs[2] = {g0.data(), g1.data()};
    float state[8] = {};
    if (opt.open() == PLANRT_OK)
      opt.update(ps, gs, 5, state); // with the parameters offloaded, ps is not read
    _exit(3);                       // not reached when the hook fires
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the update finished instead of being killed: " << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

std::vector<float> concat(const std::vector<float> &a, const std::vector<float> &b) {
  std::vector<float> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<float> ramp(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = base + float(i % 97) * 0.25f;
  return v;
}

/// The parameters after fakeUpdate's step from moments m with gradients g: p - (1 + m + g).
std::vector<float> stepped(std::vector<float> p, const std::vector<float> &m, const std::vector<float> &g) {
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= 1.0f + (m[i] + g[i]);
  return p;
}

} // namespace

TEST(Offload, StoresLoadsAndUpdatesInChunks) {
  plan::test::TempDir tmp;
  Sizes s;
  OffloadedOptimizer opt = make(tmp / "nvme", s);
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
  const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
  ASSERT_EQ(opt.store(ms, vs), PLANRT_OK) << planrt_last_error();
  // Two generations of (5 + 1) + 1 records of 8 KiB.
  EXPECT_EQ(opt.fileBytes(), 7 * 2 * kChunk * 4);

  std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20), g0 = ramp(s.n0, 0.5f), g1 = ramp(s.n1, -0.5f);
  std::vector<float> wantP0 = stepped(p0, m0, g0), wantP1 = stepped(p1, m1, g1);
  float state[8] = {0, 0, 1, 0, 0, 0, 9, 0};
  float *const ps[2] = {p0.data(), p1.data()}, *const gs[2] = {g0.data(), g1.data()};
  ASSERT_EQ(opt.update(ps, gs, 3, state), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(p0, wantP0);
  EXPECT_EQ(p1, wantP1);
  EXPECT_EQ(state[0], 3.0f); // written through `next`
  EXPECT_EQ(state[6], 9.0f); // the sum of squares is not the update's to write

  // The moments after the update, read back from the current generation.
  std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), q0(size_t(s.n0)), q1(size_t(s.n1));
  float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {q0.data(), q1.data()};
  ASSERT_EQ(opt.load(rm, rv), PLANRT_OK) << planrt_last_error();
  for (int64_t i = 0; i < s.n0; ++i) {
    ASSERT_EQ(r0[size_t(i)], m0[size_t(i)] + g0[size_t(i)]) << i;
    ASSERT_EQ(q0[size_t(i)], v0[size_t(i)] + g0[size_t(i)] * g0[size_t(i)]) << i;
  }
  for (int64_t i = 0; i < s.n1; ++i)
    ASSERT_EQ(r1[size_t(i)], m1[size_t(i)] + g1[size_t(i)]) << i;
  EXPECT_EQ(opt.bytesRead, uint64_t(2 * opt.fileBytes()));    // the update's and the load's
  EXPECT_EQ(opt.bytesWritten, uint64_t(2 * opt.fileBytes())); // the store's and the update's
}

TEST(Offload, AKilledUpdateLeavesThePreviousGenerationWhole) {
  plan::test::TempDir tmp;
  Sizes s;
  std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
  {
    OffloadedOptimizer opt = make(tmp / "nvme", s);
    ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
    const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
    ASSERT_EQ(opt.store(ms, vs), PLANRT_OK) << planrt_last_error();
  }
  // A child process updates with the crash hook set: SIGKILL halfway through step 5's
  // writes of the next generation.
  ASSERT_NO_FATAL_FAILURE(killedInAnUpdate(tmp / "nvme", s));

  OffloadedOptimizer opt = make(tmp / "nvme", s);
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), q0(size_t(s.n0)), q1(size_t(s.n1));
  float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {q0.data(), q1.data()};
  ASSERT_EQ(opt.load(rm, rv), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(r0, m0);
  EXPECT_EQ(r1, m1);
  EXPECT_EQ(q0, v0);
  EXPECT_EQ(q1, v1);
}

TEST(Offload, NamesTheFileItCannotUse) {
  plan::test::TempDir tmp;
  std::string notADir = tmp.write("plain", "x");
  OffloadedOptimizer opt = make(notADir, Sizes());
  EXPECT_NE(opt.open(), PLANRT_OK);
  EXPECT_NE(std::string(planrt_last_error()).find(notADir), std::string::npos) << planrt_last_error();
}

TEST(Offload, ARunHoldsItsDirectory) {
  // A second run on the same directory would step the same moments: refused by name.
  plan::test::TempDir tmp;
  OffloadedOptimizer first = make(tmp / "nvme", Sizes());
  ASSERT_EQ(first.open(), PLANRT_OK) << planrt_last_error();
  OffloadedOptimizer second = make(tmp / "nvme", Sizes());
  EXPECT_NE(second.open(), PLANRT_OK);
  EXPECT_NE(std::string(planrt_last_error()).find("another run holds"), std::string::npos) << planrt_last_error();
}

TEST(Offload, TheParameterShardStreamsWithItsMomentsAndIsReadByRange) {
  plan::test::TempDir tmp;
  Sizes s;
  OffloadedOptimizer opt = make(tmp / "nvme", s, tmp / "params");
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  EXPECT_TRUE(opt.paramsOffloaded());
  std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
  std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20);
  const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
  const float *const ps[2] = {p0.data(), p1.data()};
  ASSERT_EQ(opt.store(ms, vs, ps), PLANRT_OK) << planrt_last_error();
  // A parameter chunk per record: half the moments' bytes; two slots of three chunks and
  // one for the last gradient.
  EXPECT_EQ(opt.paramsFileBytes(), 7 * kChunk * 4);
  EXPECT_EQ(opt.stagingBytes(), 7 * kChunk * 4 + 4096);

  // Ranges as all-gathers ask for them: the whole shard, one across the groups' seam,
  // one inside a chunk of group 1, and one past the end refused.
  std::vector<float> all = concat(p0, p1);
  EXPECT_EQ(fetch(opt, 0, s.n0 + s.n1), all);
  EXPECT_EQ(fetch(opt, s.n0 - 5, 10), std::vector<float>(all.begin() + (s.n0 - 5), all.begin() + (s.n0 + 5)));
  EXPECT_EQ(fetch(opt, s.n0 + 100, 3), std::vector<float>(p1.begin() + 100, p1.begin() + 103));
  std::vector<float> past(4);
  EXPECT_NE(opt.readParams(s.n0 + s.n1 - 2, 4, past.data()), PLANRT_OK); // nothing of it read
  EXPECT_EQ(opt.fetchBytes, uint64_t(4 * (s.n0 + s.n1 + 10 + 3)));
  // Read ahead (through the ring, into the staging buffer) and then asked for: the same
  // floats; read ahead and then not asked for (another range comes first): dropped, and
  // the range asked for read as it is.
  opt.prefetchParams(s.n0 - 7, 20);
  EXPECT_EQ(fetch(opt, s.n0 - 7, 20), std::vector<float>(all.begin() + (s.n0 - 7), all.begin() + (s.n0 + 13)));
  opt.prefetchParams(0, 8);
  EXPECT_EQ(fetch(opt, 8, 8), std::vector<float>(all.begin() + 8, all.begin() + 16));
  EXPECT_EQ(fetch(opt, 0, 8), std::vector<float>(all.begin(), all.begin() + 8));
  EXPECT_EQ(opt.fetchBytes, uint64_t(4 * (s.n0 + s.n1 + 10 + 3 + 20 + 8 + 8)));
  opt.prefetchParams(0, 16); // still in flight when the update streams: dropped first

  // The update reads the parameters from the files, not from p (null here).
  std::vector<float> g0 = ramp(s.n0, 0.5f), g1 = ramp(s.n1, -0.5f);
  std::vector<float> want0 = stepped(p0, m0, g0), want1 = stepped(p1, m1, g1);
  float state[8] = {0, 0, 1, 0, 0, 0, 9, 0};
  float *const gs[2] = {g0.data(), g1.data()};
  ASSERT_EQ(opt.update(nullptr, gs, 3, state), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(fetch(opt, 0, s.n0 + s.n1), concat(want0, want1)); // the new generation's
  std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), q0(size_t(s.n0)), q1(size_t(s.n1)), x0(size_t(s.n0)),
      x1(size_t(s.n1));
  float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {q0.data(), q1.data()}, *const rp[2] = {x0.data(),
                                                                                                         x1.data()};
  ASSERT_EQ(opt.load(rm, rv, rp), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(x0, want0);
  EXPECT_EQ(x1, want1);
  for (int64_t i = 0; i < s.n1; ++i)
    ASSERT_EQ(r1[size_t(i)], m1[size_t(i)] + g1[size_t(i)]) << i;
  // The moments' and the parameters' records, read and written by the store, the update
  // and the load.
  EXPECT_EQ(opt.bytesWritten, uint64_t(2 * (opt.fileBytes() + opt.paramsFileBytes())));
  EXPECT_EQ(opt.bytesRead, uint64_t(2 * (opt.fileBytes() + opt.paramsFileBytes())));

  // A store without the shard would lose it: refused.
  EXPECT_NE(opt.store(ms, vs), PLANRT_OK);
}

TEST(Offload, AKilledUpdateLeavesThePreviousParametersWhole) {
  plan::test::TempDir tmp;
  Sizes s;
  std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20);
  {
    OffloadedOptimizer opt = make(tmp / "nvme", s, tmp / "params");
    ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
    const float *const ps[2] = {p0.data(), p1.data()};
    ASSERT_EQ(opt.store(nullptr, nullptr, ps), PLANRT_OK) << planrt_last_error();
  }
  ASSERT_NO_FATAL_FAILURE(killedInAnUpdate(tmp / "nvme", s, tmp / "params"));
  OffloadedOptimizer opt = make(tmp / "nvme", s, tmp / "params");
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(fetch(opt, 0, s.n0 + s.n1), concat(p0, p1));
}

TEST(Offload, AnOverlappedUpdateIsWaitedForByWhatItTouches) {
  plan::test::TempDir tmp;
  Sizes s;
  std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
  std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20), g0 = ramp(s.n0, 0.5f), g1 = ramp(s.n1, -0.5f);
  std::vector<float> want0 = stepped(p0, m0, g0), want1 = stepped(p1, m1, g1);
  const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
  float *const gs[2] = {g0.data(), g1.data()};

  // The parameters in memory: the update returns with the state's next values, and
  // the pieces are the updated ones once awaitPiece says so.
  {
    OffloadedOptimizer opt = make(tmp / "nvme", s);
    ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
    ASSERT_EQ(opt.store(ms, vs), PLANRT_OK) << planrt_last_error();
    std::vector<float> q0 = p0, q1 = p1;
    float *const ps[2] = {q0.data(), q1.data()};
    float state[8] = {0, 0, 1, 0, 0, 0, 9, 0};
    ASSERT_EQ(opt.update(ps, gs, 3, state, /*overlap=*/true), PLANRT_OK) << planrt_last_error();
    EXPECT_EQ(state[0], 3.0f); // the first record's next values, at once
    ASSERT_EQ(opt.awaitPiece(1, 0, s.n1), PLANRT_OK);
    EXPECT_EQ(q1, want1);
    ASSERT_EQ(opt.awaitPiece(0, s.n0 - 20, s.n0), PLANRT_OK); // the last record of group 0: all of it
    EXPECT_EQ(q0, want0);
    EXPECT_TRUE(opt.pending()); // until settled
    ASSERT_EQ(opt.settle(), PLANRT_OK) << planrt_last_error();
    EXPECT_FALSE(opt.pending());
    // A second one, settled by the load that follows it: the moments of two steps.
    ASSERT_EQ(opt.update(ps, gs, 4, state, /*overlap=*/true), PLANRT_OK) << planrt_last_error();
    std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), x0(size_t(s.n0)), x1(size_t(s.n1));
    float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {x0.data(), x1.data()};
    ASSERT_EQ(opt.load(rm, rv), PLANRT_OK) << planrt_last_error();
    EXPECT_FALSE(opt.pending());
    for (int64_t i = 0; i < s.n0; ++i)
      ASSERT_EQ(r0[size_t(i)], m0[size_t(i)] + 2 * g0[size_t(i)]) << i;
  }

  // The parameters in files: a range read while the update streams is the new one.
  OffloadedOptimizer opt = make(tmp / "nvme2", s, tmp / "params2");
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  const float *const ps[2] = {p0.data(), p1.data()};
  ASSERT_EQ(opt.store(ms, vs, ps), PLANRT_OK) << planrt_last_error();
  float state[8] = {0, 0, 1, 0, 0, 0, 9, 0};
  ASSERT_EQ(opt.update(nullptr, gs, 3, state, /*overlap=*/true), PLANRT_OK) << planrt_last_error();
  std::vector<float> all = concat(want0, want1);
  opt.prefetchParams(0, 16); // refused while the update streams through the staging buffer
  EXPECT_EQ(fetch(opt, s.n0 - 5, 10), std::vector<float>(all.begin() + (s.n0 - 5), all.begin() + (s.n0 + 5)));
  EXPECT_EQ(fetch(opt, 0, s.n0 + s.n1), all);
  ASSERT_EQ(opt.settle(), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(fetch(opt, 0, s.n0 + s.n1), all); // now the current generation
}

namespace {
/// fakeUpdate, except that step 7 fails (as a throwing callee would).
void failingUpdate(float *p, float *g, float *m, float *v, int64_t step, const float *state, float *next) {
  if (step == 7)
    throw std::runtime_error("the chunk update gave up");
  fakeUpdate(p, g, m, v, step, state, next);
}
} // namespace

TEST(Offload, AFailedOverlappedUpdateIsReportedAndLeavesTheStateAsItWas) {
  plan::test::TempDir tmp;
  Sizes s;
  OffloadedOptimizer opt(tmp / "nvme", 0, kChunk, {s.n0, failingUpdate}, {s.n1, fakeUpdate});
  ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
  std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
  const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
  ASSERT_EQ(opt.store(ms, vs), PLANRT_OK) << planrt_last_error();
  std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20), g0 = ramp(s.n0, 0.5f), g1 = ramp(s.n1, -0.5f);
  float *const ps[2] = {p0.data(), p1.data()}, *const gs[2] = {g0.data(), g1.data()};
  float state[8] = {0, 0, 1, 0, 0, 0, 9, 0};
  // Group 1's records stream first and succeed: the update returns; group 0's first fails,
  // and whatever waits for it gets the failure with its cause, once.
  ASSERT_EQ(opt.update(ps, gs, 7, state, /*overlap=*/true), PLANRT_OK) << planrt_last_error();
  EXPECT_NE(opt.awaitPiece(0, 0, 1), PLANRT_OK);
  EXPECT_NE(std::string(planrt_last_error()).find("the chunk update gave up"), std::string::npos)
      << planrt_last_error();
  EXPECT_FALSE(opt.pending());
  EXPECT_EQ(opt.settle(), PLANRT_OK);
  // No generation was made current: the moments are those stored.
  std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), x0(size_t(s.n0)), x1(size_t(s.n1));
  float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {x0.data(), x1.data()};
  ASSERT_EQ(opt.load(rm, rv), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(r0, m0);
  EXPECT_EQ(r1, m1);
  EXPECT_EQ(x0, v0);
}

namespace {

/// A device backend whose memory the test can tell from the host's, and whose work runs
/// late, as a GPU's does: every block it hands out is recorded; a copy in and a chunk
/// update are queued until the next copy out or sync, a copy in from its page-locked
/// host memory reading its source only then (from other host memory, at once: CUDA
/// stages pageable memory before it returns). A host slot rewritten before the device
/// read it, or a wait left out, changes what the test reads back. (The host may still
/// touch the device's memory, unlike a GPU's: cuda-host's emulated device checks that.)
struct FakeDevice {
  using Blocks = std::vector<std::pair<const char *, size_t>>;
  static inline Blocks blocks, pinned;
  static inline std::vector<std::function<void()>> queue;
  static inline uint64_t copiedIn = 0, copiedOut = 0;
  static inline bool strayPointer = false;

  static bool in(const Blocks &where, const void *p, size_t bytes = 1) {
    auto *c = static_cast<const char *>(p);
    for (auto [at, n] : where)
      if (c >= at && c + bytes <= at + n)
        return true;
    return false;
  }
  static bool on(const void *p, size_t bytes = 1) { return in(blocks, p, bytes); }
  static void *alloc(size_t bytes) {
    void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    blocks.push_back({static_cast<const char *>(p), bytes});
    return p;
  }
  static void forget(Blocks &where, void *p) {
    where.erase(std::remove_if(where.begin(), where.end(), [p](auto &b) { return b.first == p; }), where.end());
  }
  static void release(void *p) {
    forget(blocks, p);
    std::free(p);
  }
  static void sync() {
    for (auto &work : queue)
      work();
    queue.clear();
  }
  static void copyIn(void *dst, const void *src, size_t bytes) {
    strayPointer |= !on(dst, bytes) || on(src);
    copiedIn += bytes;
    if (in(pinned, src, bytes)) {
      queue.push_back([=] { std::memcpy(dst, src, bytes); });
    } else {
      auto staged =
          std::make_shared<std::vector<char>>(static_cast<const char *>(src), static_cast<const char *>(src) + bytes);
      queue.push_back([=] { std::memcpy(dst, staged->data(), bytes); });
    }
  }
  static void copyOut(void *dst, const void *src, size_t bytes) {
    strayPointer |= on(dst) || !on(src, bytes);
    sync();
    copiedOut += bytes;
    std::memcpy(dst, src, bytes);
  }
  static void *hostAlloc(size_t bytes) {
    void *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    pinned.push_back({static_cast<const char *>(p), bytes});
    return p;
  }
  static void hostFree(void *p) {
    forget(pinned, p);
    std::free(p);
  }
  /// fakeUpdate, on the device's memory only, queued.
  static void update(float *p, float *g, float *m, float *v, int64_t step, const float *state, float *next) {
    for (const void *x : {(const void *)p, (const void *)g, (const void *)m, (const void *)v})
      strayPointer |= !on(x, kChunk * sizeof(float));
    strayPointer |= !on(state, 8 * sizeof(float)) || !on(next, 8 * sizeof(float));
    queue.push_back([=] { fakeUpdate(p, g, m, v, step, state, next); });
  }
  static planrt_backend backend() {
    planrt_backend b{};
    b.name = "test-device";
    b.alloc = alloc;
    b.free = release;
    b.copy_in = copyIn;
    b.copy_out = copyOut;
    b.host_alloc = hostAlloc;
    b.host_free = hostFree;
    b.sync = sync;
    return b;
  }
};

const planrt_backend kFakeDevice = FakeDevice::backend();

/// `v` in a block of the backend's memory.
float *onDevice(const std::vector<float> &v) {
  auto *p = static_cast<float *>(planrt_mem_alloc(v.size() * sizeof(float)));
  std::memcpy(p, v.data(), v.size() * sizeof(float));
  return p;
}

} // namespace

TEST(Offload, OnADeviceTheUpdateRunsInItsMemoryAndTheFilesMoveThroughHostSlots) {
  plan::test::TempDir tmp;
  Sizes s;
  planrt_set_backend(&kFakeDevice);
  {
    OffloadedOptimizer opt(tmp / "nvme", 0, kChunk, {s.n0, FakeDevice::update}, {s.n1, FakeDevice::update});
    ASSERT_EQ(opt.open(), PLANRT_OK) << planrt_last_error();
    // On the device: one record, the padded gradient and parameters, the state and its
    // next values; on the host: two records and the pads.
    EXPECT_EQ(opt.stagingBytes(), (4 * kChunk + 16) * 4);
    EXPECT_EQ(opt.hostStagingBytes(), 6 * kChunk * 4 + 4096);
    EXPECT_EQ(FakeDevice::pinned.size(), 1u);
    // The moments a resume stores and a checkpoint loads are the host's (never the device's).
    std::vector<float> m0 = ramp(s.n0, 1), m1 = ramp(s.n1, 2), v0 = ramp(s.n0, 3), v1 = ramp(s.n1, 4);
    const float *const ms[2] = {m0.data(), m1.data()}, *const vs[2] = {v0.data(), v1.data()};
    ASSERT_EQ(opt.store(ms, vs), PLANRT_OK) << planrt_last_error();
    EXPECT_TRUE(FakeDevice::queue.empty());
    EXPECT_EQ(FakeDevice::copiedIn + FakeDevice::copiedOut, 0u);

    std::vector<float> p0 = ramp(s.n0, 10), p1 = ramp(s.n1, 20), g0 = ramp(s.n0, 0.5f), g1 = ramp(s.n1, -0.5f);
    float *const ps[2] = {onDevice(p0), onDevice(p1)}, *const gs[2] = {onDevice(g0), onDevice(g1)};
    float *state = onDevice({0, 0, 1, 0, 0, 0, 9, 0});
    ASSERT_EQ(opt.update(ps, gs, 3, state, /*overlap=*/true), PLANRT_OK) << planrt_last_error();
    EXPECT_FALSE(opt.pending());            // a device's update is not overlapped
    EXPECT_TRUE(FakeDevice::queue.empty()); // it returns with its work done, as the runtime's other device work
    EXPECT_EQ(std::vector<float>(ps[0], ps[0] + s.n0), stepped(p0, m0, g0));
    EXPECT_EQ(std::vector<float>(ps[1], ps[1] + s.n1), stepped(p1, m1, g1));
    EXPECT_EQ(state[0], 3.0f);
    EXPECT_EQ(state[6], 9.0f);

    std::vector<float> r0(size_t(s.n0)), r1(size_t(s.n1)), q0(size_t(s.n0)), q1(size_t(s.n1));
    float *const rm[2] = {r0.data(), r1.data()}, *const rv[2] = {q0.data(), q1.data()};
    uint64_t in = FakeDevice::copiedIn, out = FakeDevice::copiedOut;
    ASSERT_EQ(opt.load(rm, rv), PLANRT_OK) << planrt_last_error();
    EXPECT_EQ(FakeDevice::copiedIn + FakeDevice::copiedOut, in + out); // the host's work alone
    for (int64_t i = 0; i < s.n0; ++i) {
      ASSERT_EQ(rm[0][i], m0[size_t(i)] + g0[size_t(i)]) << i;
      ASSERT_EQ(rv[0][i], v0[size_t(i)] + g0[size_t(i)] * g0[size_t(i)]) << i;
    }
    for (int64_t i = 0; i < s.n1; ++i) {
      ASSERT_EQ(rm[1][i], m1[size_t(i)] + g1[size_t(i)]) << i;
      ASSERT_EQ(rv[1][i], v1[size_t(i)] + g1[size_t(i)] * g1[size_t(i)]) << i;
    }
    EXPECT_FALSE(FakeDevice::strayPointer);
    // The update's copies, each way (planc explain's PCIe bytes: 6 n + 38 floats beyond
    // the records): each of the 7 records once; a group's partial last chunk of n floats
    // (17 and 300) three times: its gradient and parameters to the device's pads, the
    // parameters back; the step state (8 out; 8 + 8 in, its next values' 8 out, 6 in).
    uint64_t records = 7 * 2 * kChunk * 4, partial = 3 * (17 + 300) * 4;
    EXPECT_EQ(FakeDevice::copiedIn, records + partial + 22 * 4);
    EXPECT_EQ(FakeDevice::copiedOut, records + partial + 16 * 4);
    for (float *x : {ps[0], ps[1], gs[0], gs[1], state})
      planrt_mem_free(x);
  }
  planrt_set_backend(nullptr);
  EXPECT_TRUE(FakeDevice::blocks.empty()); // the optimizer's device block given back
  EXPECT_TRUE(FakeDevice::pinned.empty()); // and its page-locked slots
}
