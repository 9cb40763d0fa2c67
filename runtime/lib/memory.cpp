// The generated code's buffers: planc lowers memref.alloc / memref.dealloc to MLIR's
// generic allocation functions (finalize-memref-to-llvm{use-generic-functions}), which
// the runtime defines here on malloc with a size header, counting the bytes live and
// their peak — what a step really holds in activations and temporaries — and, with
// the buffers the runtime holds for the generated code (planrt_mem_alloc: parameters,
// gradients, optimizer state, the step's buffers, tokens), the peak of all the memory
// the executable used: what `planc explain`'s per-device total predicts.
#include "host_memory.h"
#include "memory_trace.h"
#include "planrt.h"
#include "status.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unordered_map>
#include <unistd.h>

void planrt::host::fill(void *ptr, float value, size_t count) {
  float *p = static_cast<float *>(ptr);
  if (value == 0.0f && !std::signbit(value))
    std::memset(p, 0, count * sizeof(float));
  else
    std::fill(p, p + count, value);
}

void planrt::host::add(float *to, const float *from, size_t count) {
  for (size_t i = 0; i < count; ++i)
    to[i] += from[i];
}

void planrt::host::divide(float *p, float divisor, size_t count) {
  for (size_t i = 0; i < count; ++i)
    p[i] /= divisor;
}

void planrt::host::sumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out) {
  double sum = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < counts[r]; ++i) {
      double x = starts[r][i];
      sum += x * x;
    }
  *out = float(sum);
}

namespace {

/// Bytes the generated code holds (live, and their peak since planrt_mem_reset_peak);
/// bytes the runtime holds for it (held); the peak of both together since the start.
std::atomic<uint64_t> live{0}, peak{0}, held{0}, totalPeak{0};

/// Of every pointer handed out: the size asked for and what the backend's alloc returned.
/// On the host backend it is stored just before the pointer; on a device backend in a map
/// on the host, since writing it next to the block would be a host access to device
/// memory (cuda-host's audit counts those). (A map for the host backend too would cost
/// the CPU target's heap about 3 MiB of a 270 MiB peak: e2e-offload measures it.)
struct Header {
  size_t size;
  void *base;
};
static_assert(sizeof(Header) == 16, "the header keeps 16-byte alignment");
/// A device backend's blocks: their headers and the backend that allocated them (which
/// frees them, whatever the backend is by then); how many there are (none: nothing to look up).
struct DeviceBlock {
  Header header;
  const planrt_backend *by;
};
std::mutex headerMutex;
std::unordered_map<const void *, DeviceBlock> deviceBlocks;
std::atomic<size_t> deviceBlockCount{0};

void raise(std::atomic<uint64_t> &peak, uint64_t now) {
  uint64_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void *hostAlloc(size_t bytes) { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
const planrt_backend kHost = {"cpu",   hostAlloc, std::free, nullptr, planrt::host::fill,
                              nullptr, nullptr,   nullptr,   nullptr, nullptr,
                              nullptr, nullptr,   nullptr};
std::atomic<const planrt_backend *> backend{&kHost};

/// `size` bytes at a multiple of `alignment` (a power of two, at least 16), counted in
/// `counter` (live or held), for code at `caller` (PLANRT_MEM_TRACE).
void *allocate(size_t size, size_t alignment, std::atomic<uint64_t> &counter, const void *caller) {
  const planrt_backend *b = backend.load();
  void *base = b->alloc(size + sizeof(Header) + alignment);
  if (!base)
    return nullptr;
  uintptr_t p = (reinterpret_cast<uintptr_t>(base) + sizeof(Header) + alignment - 1) & ~uintptr_t(alignment - 1);
  if (b == &kHost) {
    Header h{size, base};
    std::memcpy(reinterpret_cast<void *>(p - sizeof(Header)), &h, sizeof h);
  } else {
    std::lock_guard<std::mutex> lock(headerMutex);
    deviceBlocks[reinterpret_cast<void *>(p)] = DeviceBlock{Header{size, base}, b};
    deviceBlockCount.store(deviceBlocks.size());
  }
  uint64_t now = counter.fetch_add(size, std::memory_order_relaxed) + size;
  if (&counter == &live)
    raise(peak, now);
  uint64_t total = live.load(std::memory_order_relaxed) + held.load(std::memory_order_relaxed);
  raise(totalPeak, total);
  if (planrt::trace::on())
    planrt::trace::allocated(reinterpret_cast<void *>(p), size, &counter == &live, caller, total);
  return reinterpret_cast<void *>(p);
}

void release(void *ptr, std::atomic<uint64_t> &counter) {
  if (!ptr)
    return;
  DeviceBlock block{{0, nullptr}, &kHost};
  bool found = false;
  if (deviceBlockCount.load() > 0) {
    std::lock_guard<std::mutex> lock(headerMutex);
    if (auto it = deviceBlocks.find(ptr); it != deviceBlocks.end()) {
      block = it->second;
      found = true;
      deviceBlocks.erase(it);
      deviceBlockCount.store(deviceBlocks.size());
    }
  }
  if (!found) // the host backend's, its header before it
    std::memcpy(&block.header, static_cast<unsigned char *>(ptr) - sizeof(Header), sizeof(Header));
  if (planrt::trace::on())
    planrt::trace::released(ptr);
  counter.fetch_sub(block.header.size, std::memory_order_relaxed);
  block.by->free(block.header.base);
}

/// The arena of planrt_arena_reserve: its base, and where its step region starts and ends.
struct Arena {
  unsigned char *base = nullptr;
  uint64_t state = 0, step = 0;
} arena;

/// The pages wholly inside [ptr, ptr + bytes): their start and length (null, 0: none).
std::pair<void *, size_t> wholePages(void *ptr, size_t bytes) {
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (reinterpret_cast<uintptr_t>(ptr) + page - 1) & ~(page - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(ptr) + bytes) & ~(page - 1);
  if (!ptr || hi <= lo)
    return {nullptr, 0};
  return {reinterpret_cast<void *>(lo), size_t(hi - lo)};
}
} // namespace

extern "C" {

void *_mlir_memref_to_llvm_alloc(size_t size) { return allocate(size, 16, live, __builtin_return_address(0)); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return allocate(size, alignment < 16 ? 16 : alignment, live, __builtin_return_address(0));
}

void _mlir_memref_to_llvm_free(void *ptr) { release(ptr, live); }

void *planrt_mem_alloc(size_t bytes) { return allocate(bytes, 256, held, __builtin_return_address(0)); }
void planrt_mem_free(void *ptr) { release(ptr, held); }
void planrt_mem_fill(void *ptr, float value, size_t count) {
  if (!ptr || count == 0)
    return;
  const planrt_backend *b = backend.load();
  (b->fill ? b->fill : planrt::host::fill)(ptr, value, count);
}
void planrt_mem_fill_async(void *ptr, float value, size_t count) {
  if (!ptr || count == 0)
    return;
  const planrt_backend *b = backend.load();
  if (b->fill_async)
    return b->fill_async(ptr, value, count);
  planrt_mem_fill(ptr, value, count);
}
void planrt_mem_copy_in(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return;
  const planrt_backend *b = backend.load();
  if (b->copy_in)
    return b->copy_in(dst, src, bytes);
  std::memcpy(dst, src, bytes);
}
void planrt_mem_copy_out(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return;
  const planrt_backend *b = backend.load();
  if (b->copy_out)
    return b->copy_out(dst, src, bytes);
  std::memcpy(dst, src, bytes);
}
int planrt_mem_is_device(void) { return backend.load()->copy_out != nullptr; }
void planrt_mem_sync(void) {
  if (const planrt_backend *b = backend.load(); b->sync)
    b->sync();
}
void *planrt_host_alloc(size_t bytes) {
  const planrt_backend *b = backend.load();
  if (b->host_alloc)
    return b->host_alloc(bytes);
  return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}
void planrt_mem_divide(float *p, float divisor, size_t count) {
  if (count == 0)
    return;
  const planrt_backend *b = backend.load();
  (b->divide ? b->divide : planrt::host::divide)(p, divisor, count);
}
void planrt_mem_sumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out) {
  const planrt_backend *b = backend.load();
  (b->sumsq ? b->sumsq : planrt::host::sumsq)(starts, counts, n, out);
}
void planrt_mem_add(float *to, const float *from, size_t count) {
  if (count == 0)
    return;
  const planrt_backend *b = backend.load();
  (b->add ? b->add : planrt::host::add)(to, from, count);
}

void planrt_set_backend(const planrt_backend *b) { backend.store(b ? b : &kHost); }
const planrt_backend *planrt_get_backend(void) { return backend.load(); }

uint64_t planrt_mem_live(void) { return live.load(std::memory_order_relaxed); }
uint64_t planrt_mem_peak(void) { return peak.load(std::memory_order_relaxed); }
void planrt_mem_reset_peak(void) { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }
uint64_t planrt_mem_held(void) { return held.load(std::memory_order_relaxed); }
uint64_t planrt_mem_total_peak(void) { return totalPeak.load(std::memory_order_relaxed); }

void *planrt_mem_reserve(size_t bytes) {
  if (backend.load() != &kHost || bytes == 0)
    return nullptr;
  // Anonymous pages read as zero and are taken only when written.
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void planrt_mem_commit(void *ptr, size_t bytes) {
  uint64_t now = held.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  // Its pages populated writable in one call (Linux 5.14; an older kernel refuses it, and
  // they are then taken as they are written).
#ifdef MADV_POPULATE_WRITE
  if (auto [lo, n] = wholePages(ptr, bytes); lo && n > 0)
    madvise(lo, n, MADV_POPULATE_WRITE);
#endif
  raise(totalPeak, live.load(std::memory_order_relaxed) + now);
  if (planrt::trace::on())
    planrt::trace::committed(int64_t(bytes), live.load(std::memory_order_relaxed) + now);
}

void planrt_mem_decommit(void *ptr, size_t bytes) {
  held.fetch_sub(bytes, std::memory_order_relaxed);
  if (planrt::trace::on())
    planrt::trace::committed(-int64_t(bytes), 0);
  // Only the pages wholly inside: a page shared with a neighbouring range stays.
  if (auto [lo, n] = wholePages(ptr, bytes); lo && n > 0)
    madvise(lo, n, MADV_DONTNEED); // read as zero again
}

void planrt_mem_unreserve(void *ptr, size_t bytes) {
  if (ptr)
    munmap(ptr, bytes);
}

void *planrt_arena_reserve(uint64_t stateBytes, uint64_t stepBytes) {
  constexpr double MiB = 1 << 20;
  if (arena.base) {
    planrt::fail(PLANRT_ERR_ARG, "the executable's arena is reserved already");
    return nullptr;
  }
  uint64_t total = stateBytes + stepBytes;
  const planrt_backend *b = backend.load();
  size_t available = b->available ? b->available() : 0;
  if (available && total > available) {
    planrt::fail(PLANRT_ERR_ARG,
                 "the plan needs %.1f MiB of %s memory (%.1f MiB of parameters, gradients and optimizer state, %.1f "
                 "MiB for the step's buffers), but only %.1f MiB are free: choose a layout that holds less per "
                 "device (planc explain --search)",
                 total / MiB, b->name, stateBytes / MiB, stepBytes / MiB, available / MiB);
    return nullptr;
  }
  void *p = planrt_mem_alloc(total ? total : 1);
  if (!p) {
    planrt::fail(PLANRT_ERR_ARG, "cannot allocate the executable's arena of %.1f MiB of %s memory", total / MiB,
                 b->name);
    return nullptr;
  }
  planrt_mem_fill(p, 0.0f, (stateBytes + 3) / sizeof(float)); // the step region is the step functions' scratch
  arena = {static_cast<unsigned char *>(p), stateBytes, stepBytes};
  return p;
}

void planrt_arena_release(void) {
  planrt_mem_free(arena.base);
  arena = {};
}

void *planrt_step_arena(int64_t bytes) {
  if (!arena.base || bytes < 0 || uint64_t(bytes) > arena.step) {
    if (!arena.base)
      planrt::fail(PLANRT_ERR_ARG, "a step function asks for the executable's arena, which the runtime has not "
                                   "reserved (the manifest has no memory plan)");
    else
      planrt::fail(PLANRT_ERR_ARG,
                   "a step function needs %lld bytes of the step region, which has %llu (the "
                   "manifest's memory.step_bytes is not the generated code's)",
                   (long long)bytes, (unsigned long long)arena.step);
    std::fflush(stdout);
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    std::exit(1);
  }
  // The step buffers' peak: what the function holds at once, with the generated code's other buffers.
  raise(peak, live.load(std::memory_order_relaxed) + uint64_t(bytes));
  return arena.base + arena.state;
}

} // extern "C"
