// cuda-host's emulated device (`planc build --target cuda-host`; planrt_emu_*, planrt_abi.def).
//
// The CUDA target's host code must not touch device memory while a step runs: a host
// access to managed memory migrates pages, and one made before the host waited for the
// device's queued work reads (or overwrites) what a kernel has not finished. On a GPU
// such a bug shows as a slower step or as a loss that differs sometimes. Here it is found
// on the CPU, deterministically, and named:
//  - every buffer the generated code and the runtime use for it (the backend's memory)
//    comes from one reserved region;
//  - while a step program runs (the backend's `step` hook), the region is inaccessible
//    (PROT_NONE) except inside device work: an emulated launch, a library call, a
//    collective, a fill (planrt_emu_begin / planrt_emu_end), which the compiler and the
//    runtime bracket exactly where the CUDA target runs them on the GPU;
//  - a host access faults into onFault. After a wait (planrt_emu_sync) it is counted
//    (host_touches in the log), or fatal under PLANRT_HOST_TOUCH=fatal; before one —
//    device work not waited for — it is always fatal, naming the host code and the work.
//    PLANRT_HOST_TOUCH=report prints, at exit, where the counted ones came from.
#include "emulated_device.h"

#include "host_memory.h"

#include "memory_trace.h"
#include "planrt.h"
#include "status.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace {

/// The region: `reserved` bytes at `base`, inaccessible until handed out; `top` bytes of
/// it handed out so far (blocks of multiples of 256 bytes, never given back: a freed
/// block is kept for the next request of its size, as the CUDA runtime's pool does).
unsigned char *base = nullptr;
size_t reserved = 0;
std::atomic<size_t> top{0};
std::mutex allocMutex;
std::unordered_map<size_t, std::vector<void *>> freeBlocks;
std::unordered_map<void *, size_t> blockSize;

/// The audit: whether a step program runs; whether the region is accessible now (inside
/// device work, and outside steps); whether some of its pages were opened for a stretch of
/// host code that touched them, and that stretch counted; device work begun and not ended
/// (nesting); whether work has ended that no wait has followed.
std::atomic<bool> auditing{false}, accessible{true}, pagesOpen{false}, stretchCounted{false}, pending{false};
int depth = 0;
std::atomic<const char *> lastWork{nullptr};
std::atomic<uint64_t> syncs{0}, launches{0}, touches{0};

enum class Mode { Count, Report, Fatal };
Mode mode = Mode::Count;

/// Where the counted touches came from (PLANRT_HOST_TOUCH=report), by code address.
struct Site {
  const void *pc;
  const char *after;
  uint64_t count;
};
constexpr int kSites = 64;
Site sites[kSites];
std::atomic<int> nsites{0};

struct sigaction previous;

/// The non-blocking collectives in flight (inFlight): their buffers. A fixed table (the
/// signal handler reads it), as large as any step's buckets; beyond it a collective is
/// not tracked (said once on stderr).
struct Flight {
  std::atomic<bool> used{false};
  struct {
    const unsigned char *at;
    size_t bytes;
  } range[2];
};
constexpr int kFlights = 4096;
Flight flights[kFlights];
std::atomic<int> flightsTop{0}; ///< no slot at or above it is used

/// The collective in flight whose buffers overlap [at, at + bytes), or null.
const Flight *flightAt(const unsigned char *at, size_t bytes) {
  for (int i = 0, n = flightsTop.load(); i < n; ++i)
    if (flights[i].used.load())
      for (auto r : flights[i].range)
        if (r.bytes && at < r.at + r.bytes && r.at < at + bytes)
          return &flights[i];
  return nullptr;
}

bool anyInFlight() {
  for (int i = 0, n = flightsTop.load(); i < n; ++i)
    if (flights[i].used.load())
      return true;
  return false;
}

size_t pageSize() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
size_t pageUp(size_t n) { return (n + pageSize() - 1) / pageSize() * pageSize(); }

/// Makes the handed-out part of the region accessible to the host, or not; either way a
/// new stretch of host code or device work starts.
void setAccessible(bool on) {
  size_t n = pageUp(top.load());
  if (n)
    mprotect(base, n, on ? PROT_READ | PROT_WRITE : PROT_NONE);
  accessible.store(on);
  pagesOpen.store(false);
  stretchCounted.store(false);
}

void *alloc(size_t bytes) {
  size_t size = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(allocMutex);
  auto it = freeBlocks.find(size);
  if (it != freeBlocks.end() && !it->second.empty()) {
    void *p = it->second.back();
    it->second.pop_back();
    return p;
  }
  size_t at = top.load();
  if (size > reserved - at)
    return nullptr;
  // The new block's pages past the handed-out ones: accessible now if the region is.
  size_t from = pageUp(at), to = pageUp(at + size);
  if (to > from && accessible.load())
    mprotect(base + from, to - from, PROT_READ | PROT_WRITE);
  top.store(at + size);
  blockSize[base + at] = size;
  return base + at;
}

[[noreturn]] void fatalNow(const char *msg) {
  // From the signal handler too: write(2), then _exit.
  (void)!write(2, msg, std::strlen(msg));
  _exit(1);
}

void release(void *p) {
  if (!p)
    return;
  std::lock_guard<std::mutex> lock(allocMutex);
  auto it = blockSize.find(p);
  if (it == blockSize.end()) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "planrt: error: rank %d: free of %p, which the emulated device did not allocate\n",
                  planrt::rank(), p);
    fatalNow(msg);
  }
  freeBlocks[it->second].push_back(p);
}

size_t available() { return reserved - top.load(); }

void counters(uint64_t *hostSyncs, uint64_t *launchCount) {
  *hostSyncs = syncs.load();
  *launchCount = launches.load();
}

uint64_t hostTouches() { return touches.load(); }

// The host's operations (host_memory.h) as device work. The CUDA runtime's fill, add,
// divide and sum of squares are kernels it waits for (runtime/cuda/fill.cu); its queued
// fill and copy are not waited for: the host waits later.
void fill(void *ptr, float value, size_t count) {
  planrt::emu::Work work("planrt_mem_fill", planrt::emu::Then::Wait);
  planrt::host::fill(ptr, value, count);
}

void fillAsync(void *ptr, float value, size_t count) {
  planrt::emu::Work work("planrt_mem_fill_async", planrt::emu::Then::Queue);
  planrt::host::fill(ptr, value, count);
}

void copyIn(void *dst, const void *src, size_t bytes) {
  planrt::emu::Work work("planrt_mem_copy_in", planrt::emu::Then::Queue);
  std::memcpy(dst, src, bytes);
}

// The CUDA runtime's device-to-host copy waits for the work queued before it.
void copyOut(void *dst, const void *src, size_t bytes) {
  planrt::emu::Work work("planrt_mem_copy_out", planrt::emu::Then::Wait);
  std::memcpy(dst, src, bytes);
}

void divide(float *p, float divisor, size_t count) {
  planrt::emu::Work work("planrt_mem_divide", planrt::emu::Then::Wait);
  planrt::host::divide(p, divisor, count);
}

void sumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out) {
  planrt::emu::Work work("planrt_mem_sumsq", planrt::emu::Then::Wait);
  planrt::host::sumsq(starts, counts, n, out);
}

void add(float *to, const float *from, size_t count) {
  planrt::emu::Work work("planrt_mem_add", planrt::emu::Then::Wait);
  planrt::host::add(to, from, count);
}

void onFault(int sig, siginfo_t *info, void *context);

/// The audit's SIGSEGV handler, installed (again) if another has replaced it since — the
/// runtime's fatal-signal report (comm.cpp) is installed after main starts — with the
/// one it replaces kept for the faults that are not the audit's.
void ensureHandler() {
  struct sigaction now;
  sigaction(SIGSEGV, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == onFault)
    return;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = onFault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previous);
}

void step(int phase) {
  if (phase == 1) {
    ensureHandler();
    auditing.store(true);
    setAccessible(false);
    return;
  }
  if (phase == 0 && pending.load()) {
    // The runtime reads the loss next: the step program must have waited.
    const char *w = lastWork.load();
    std::string msg = "planrt: error: rank " + std::to_string(planrt::rank()) +
                      ": the step program returned before waiting for the device's work (the last: " +
                      (w ? w : "?") + "); the host reads the loss next\n";
    fatalNow(msg.c_str());
  }
  setAccessible(true);
  auditing.store(false);
  pending.store(false); // waited for, or left behind by a failed step that ends the run
}

// Its host memory (host_alloc) is the C heap, outside the region: the host's own.
const planrt_backend kEmulated = {"cuda-host", alloc,   release,     available, fill,           counters,
                                  add,         step,    hostTouches, fillAsync, copyIn,         divide,
                                  sumsq,       copyOut, nullptr,     nullptr,   planrt_emu_sync};

const void *pcOf(void *context) {
  auto *uc = static_cast<ucontext_t *>(context);
#if defined(__x86_64__)
  return reinterpret_cast<const void *>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void *>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return nullptr;
#endif
}

void record(const void *pc, const char *after) {
  int n = nsites.load();
  for (int i = 0; i < n; ++i)
    if (sites[i].pc == pc && sites[i].after == after) {
      ++sites[i].count;
      return;
    }
  if (n < kSites) {
    sites[n] = {pc, after, 1};
    nsites.store(n + 1);
  }
}

/// A fault that is not the audit's goes to the handler the audit replaced, or, where that
/// was the default, faults again under it.
void passOn(int sig, siginfo_t *info, void *context) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction)
      return previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    return previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);
  if (info->si_code <= 0) // sent, not a fault: nothing would raise it again
    raise(sig);
}

void onFault(int sig, siginfo_t *info, void *context) {
  auto *at = static_cast<unsigned char *>(info->si_addr);
  if (!auditing.load() || accessible.load() || !base || at < base || at >= base + top.load())
    return passOn(sig, info, context);
  const void *pc = pcOf(context);
  const char *after = lastWork.load();
  // A page is what the host would pull over (managed memory moves by pages): a touch of
  // a page that a collective in flight uses is one of its buffers'.
  auto *page = reinterpret_cast<unsigned char *>(reinterpret_cast<uintptr_t>(at) & ~uintptr_t(pageSize() - 1));
  const Flight *flight = flightAt(page, pageSize());
  if (pending.load() || flight || mode == Mode::Fatal) {
    std::string where = planrt::trace::symbolOf(pc);
    std::string msg = "planrt: error: rank " + std::to_string(planrt::rank()) + ": host code (" + where +
                      ") touched device memory (offset " + std::to_string(at - base) + ") during a step";
    if (pending.load())
      msg += std::string(" while ") + (after ? after : "device work") +
             " may still run: no wait (planrt_cuda_sync) between them, so on a GPU it would race the device\n";
    else if (flight)
      msg += ", on a page of the buffers of a non-blocking collective in flight (not waited for): on a GPU it "
             "would race the collective\n";
    else
      msg += std::string(", after ") + (after ? after : "no device work") +
             " (PLANRT_HOST_TOUCH=fatal: the CUDA target's host code must leave device memory alone in a step)\n";
    fatalNow(msg.c_str());
  }
  if (!stretchCounted.exchange(true)) {
    touches.fetch_add(1);
    record(pc, after);
  }
  // This stretch of host code goes on; the next device work or wait closes the region
  // again. With collectives in flight only the page is opened, so that their buffers
  // stay guarded; otherwise (or if the page cannot be) the whole region.
  if (!anyInFlight() || mprotect(page, pageSize(), PROT_READ | PROT_WRITE) != 0) {
    if (mprotect(base, pageUp(top.load()), PROT_READ | PROT_WRITE) != 0)
      fatalNow("planrt: error: the emulated device cannot open its memory to the host (mprotect)\n");
  }
  pagesOpen.store(true);
}

void report() {
  int n = nsites.load();
  for (int i = 0; i < n; ++i)
    std::fprintf(stderr, "planrt: note: rank %d: %llu host touch%s of device memory from %s, after %s\n",
                 planrt::rank(), (unsigned long long)sites[i].count, sites[i].count == 1 ? "" : "es",
                 planrt::trace::symbolOf(sites[i].pc).c_str(), sites[i].after ? sites[i].after : "no device work");
}

} // namespace

namespace planrt::emu {

bool active() { return base != nullptr; }


Work::Work(const char *what, Then then) : on_(active()), then_(then) {
  if (!on_)
    return;
  pendingBefore_ = pending.load();
  lastBefore_ = lastWork.load();
  planrt_emu_begin(what);
}

Work::~Work() {
  if (!on_)
    return;
  planrt_emu_end();
  if (then_ == Then::Wait)
    planrt_emu_sync();
  else if (then_ == Then::Aside) { // the compute stream's pending work, and its name, as before
    pending.store(pendingBefore_);
    if (pendingBefore_)
      lastWork.store(lastBefore_);
  }
}

int inFlight(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  if (!active())
    return -1;
  for (int i = 0; i < kFlights; ++i)
    if (!flights[i].used.load()) {
      flights[i].range[0] = {static_cast<const unsigned char *>(a), aBytes};
      flights[i].range[1] = {static_cast<const unsigned char *>(b), bBytes};
      flights[i].used.store(true);
      if (i >= flightsTop.load())
        flightsTop.store(i + 1);
      return i;
    }
  static std::once_flag said;
  std::call_once(said, [] {
    std::fprintf(stderr, "planrt: note: rank %d: more than %d collectives in flight: the emulated device does "
                         "not guard the buffers of the others\n", planrt::rank(), kFlights);
  });
  return -1;
}

void landed(int slot) {
  if (slot >= 0 && slot < kFlights)
    flights[slot].used.store(false);
}

} // namespace planrt::emu

extern "C" {

int planrt_emu_start(int argc, char **argv) {
  (void)argc;
  (void)argv;
  if (base)
    return 0;
  if (const char *v = std::getenv("PLANRT_HOST_TOUCH")) {
    if (!std::strcmp(v, "fatal"))
      mode = Mode::Fatal;
    else if (!std::strcmp(v, "report"))
      mode = Mode::Report;
    else if (std::strcmp(v, "count") != 0) {
      std::fprintf(stderr, "planrt: error: PLANRT_HOST_TOUCH='%s' is not count, report or fatal\n", v);
      return 1;
    }
  }
  // Address space only: no page is taken before it is handed out and written.
  for (size_t gib = 256; gib >= 1 && !base; gib /= 2) {
    void *p = mmap(nullptr, gib << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      base = static_cast<unsigned char *>(p);
      reserved = gib << 30;
    }
  }
  if (!base) {
    std::fprintf(stderr, "planrt: error: the emulated device (cuda-host) cannot reserve its memory: %s\n",
                 std::strerror(errno));
    return 1;
  }
  if (mode == Mode::Report)
    std::atexit(report);
  planrt_set_backend(&kEmulated);
  return 0;
}

void planrt_emu_begin(const char *what) {
  launches.fetch_add(1);
  lastWork.store(what);
  if (depth++ == 0 && auditing.load())
    setAccessible(true);
}

void planrt_emu_end(void) {
  if (depth == 0 || --depth > 0)
    return;
  pending.store(true);
  if (auditing.load())
    setAccessible(false);
}

void planrt_emu_sync(void) {
  syncs.fetch_add(1);
  pending.store(false);
  if (depth == 0 && auditing.load() && (accessible.load() || pagesOpen.load()))
    setAccessible(false);
}

} // extern "C"
