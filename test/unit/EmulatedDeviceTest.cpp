// cuda-host's emulated device (runtime/lib/emulated_device.cpp): the host-touch and
// synchronisation audits. Each case runs in a child process (gtest's death tests), since
// the device takes over the process's backend and its SIGSEGV handler.
#include "emulated_device.h"
#include "planrt.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace {

using ::testing::ExitedWithCode;
using ::testing::KilledBySignal;

/// Starts the emulated device; `floats` of its memory, set to 0 (before any step: the
/// host may write it then).
float *deviceFloats(size_t floats) {
  if (planrt_emu_start(0, nullptr) != 0)
    std::exit(3);
  auto *p = static_cast<float *>(planrt_mem_alloc(floats * sizeof(float)));
  for (size_t i = 0; i < floats; ++i)
    p[i] = 0;
  return p;
}

const planrt_backend &device() { return *planrt_get_backend(); }

/// A host read the compiler cannot drop.
float hostRead(const float *p) { return *static_cast<const volatile float *>(p); }

/// Device work writing p[i] = v (what an emulated launch does between its brackets).
void kernel(const char *what, float *p, size_t i, float v) {
  planrt_emu_begin(what);
  p[i] = v;
  planrt_emu_end();
}

TEST(EmulatedDeviceDeathTest, ReadBeforeTheWaitIsFatalAndNamed) {
  auto child = [] {
    float *p = deviceFloats(64);
    device().step(1);
    kernel("generated kernel 7 at t.plan:3", p, 0, 1.0f);
    std::printf("%g\n", double(hostRead(p))); // no planrt_emu_sync before it
    std::exit(0);
  };
  EXPECT_EXIT(
      child(), ExitedWithCode(1),
      "rank 0: host code \\(.*\\) touched device memory \\(offset [0-9]+\\) during a step while generated kernel 7 at "
      "t.plan:3 may still run: no wait");
}

TEST(EmulatedDeviceDeathTest, TouchesAfterAWaitAreCountedOncePerStretch) {
  auto child = [] {
    float *p = deviceFloats(64);
    device().step(1);
    kernel("k1", p, 0, 2.0f);
    planrt_emu_sync();
    float x = hostRead(p) + hostRead(p + 1); // one stretch of host code: one touch
    kernel("k2", p, 1, 3.0f);
    planrt_emu_sync();
    x += hostRead(p + 1); // a second stretch
    device().step(0);
    x += hostRead(p + 2); // outside a step: not the audit's
    uint64_t syncs = 0, launches = 0;
    device().counters(&syncs, &launches);
    std::fprintf(stderr, "touches=%llu syncs=%llu launches=%llu sum=%g\n", (unsigned long long)device().host_touches(),
                 (unsigned long long)syncs, (unsigned long long)launches, double(x));
    std::exit(0);
  };
  EXPECT_EXIT(child(), ExitedWithCode(0), "touches=2 syncs=2 launches=2 sum=5");
}

TEST(EmulatedDeviceDeathTest, FatalModeStopsAtTheFirstTouch) {
  auto child = [] {
    setenv("PLANRT_HOST_TOUCH", "fatal", 1);
    float *p = deviceFloats(64);
    device().step(1);
    p[5] = 1.0f; // a host write, nothing queued
    std::exit(0);
  };
  EXPECT_EXIT(
      child(), ExitedWithCode(1),
      "touched device memory \\(offset [0-9]+\\) during a step, after no device work \\(PLANRT_HOST_TOUCH=fatal");
}

TEST(EmulatedDeviceDeathTest, UnknownModeIsRefused) {
  auto child = [] {
    setenv("PLANRT_HOST_TOUCH", "loud", 1);
    std::exit(planrt_emu_start(0, nullptr));
  };
  EXPECT_EXIT(child(), ExitedWithCode(1), "PLANRT_HOST_TOUCH='loud' is not count, report or fatal");
}

TEST(EmulatedDeviceDeathTest, StepEndingWithWorkQueuedIsFatal) {
  auto child = [] {
    float *p = deviceFloats(64);
    device().step(1);
    kernel("cblas_sgemm at t.plan:9", p, 0, 1.0f);
    device().step(0);
    std::exit(0);
  };
  EXPECT_EXIT(child(), ExitedWithCode(1),
              "the step program returned before waiting for the device's work \\(the last: cblas_sgemm at t.plan:9\\)");
}

TEST(EmulatedDeviceDeathTest, QueuedFillAndCopyNeedAWait) {
  {
    auto child = [] {
      float *p = deviceFloats(64);
      device().step(1);
      planrt_mem_fill_async(p, 4.0f, 64); // queued, as on the GPU
      (void)hostRead(p + 63);
      std::exit(0);
    };
    EXPECT_EXIT(child(), ExitedWithCode(1), "while planrt_mem_fill_async may still run");
  }
  {
    auto child = [] {
      float *p = deviceFloats(64);
      int32_t host[3] = {7, 8, 9};
      device().step(1);
      planrt_mem_copy_in(p, host, sizeof host);
      planrt_emu_sync();
      int32_t back[3];
      std::memcpy(back, p, sizeof back); // a counted touch, after the wait
      device().step(0);
      std::fprintf(stderr, "copied=%d,%d,%d touches=%llu\n", back[0], back[1], back[2],
                   (unsigned long long)device().host_touches());
      std::exit(0);
    };
    EXPECT_EXIT(child(), ExitedWithCode(0), "copied=7,8,9 touches=1");
  }
}

TEST(EmulatedDeviceDeathTest, BuffersOfACollectiveInFlightAreOffLimits) {
  // A touch outside its buffers is counted; one inside, on another page in the same
  // stretch of host code (the first touch opened only its own page), stops the run.
  static const int64_t page = sysconf(_SC_PAGESIZE) / int64_t(sizeof(float)); // floats a page
  auto child = [] {
    float *p = deviceFloats(size_t(4 * page)); // the flight's page is not p's
    device().step(1);
    int slot = planrt::emu::inFlight(p + 3 * page, 16 * sizeof(float), nullptr, 0);
    (void)hostRead(p);
    std::fprintf(stderr, "counted=%llu\n", (unsigned long long)device().host_touches());
    (void)hostRead(p + 3 * page + 8);
    planrt::emu::landed(slot);
    std::exit(0);
  };
  EXPECT_EXIT(child(), ExitedWithCode(1),
              "counted=1\n.*on a page of the buffers of a non-blocking collective in flight");
  // Landed, the same read is an ordinary (counted) touch.
  auto landed = [] {
    float *p = deviceFloats(size_t(4 * page));
    device().step(1);
    planrt::emu::landed(planrt::emu::inFlight(p + 3 * page, 16 * sizeof(float), nullptr, 0));
    (void)hostRead(p + 3 * page + 8);
    device().step(0);
    std::fprintf(stderr, "touches=%llu\n", (unsigned long long)device().host_touches());
    std::exit(0);
  };
  EXPECT_EXIT(landed(), ExitedWithCode(0), "touches=1");
}

TEST(EmulatedDeviceDeathTest, OtherFaultsStillKill) {
  auto child = [] {
    (void)deviceFloats(64);
    device().step(1);
    void *page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    (void)hostRead(static_cast<float *>(page)); // not device memory: the audit passes it on
    std::exit(0);
  };
  EXPECT_EXIT(child(), KilledBySignal(SIGSEGV), "");
}

} // namespace
