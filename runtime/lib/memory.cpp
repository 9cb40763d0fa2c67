// The generated code's buffers: planc lowers memref.alloc / memref.dealloc to MLIR's
// generic allocation functions (finalize-memref-to-llvm{use-generic-functions}), which
// the runtime defines here on malloc with a size header, counting the bytes live and
// their peak — what a step really holds in activations and temporaries — and, with
// the buffers the runtime holds for the generated code (planrt_mem_alloc: parameters,
// gradients, optimizer state, the step's buffers, tokens), the peak of all the memory
// the executable used: what `planc explain`'s per-device total predicts.
#include "planrt.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

/// Bytes the generated code holds (live, and their peak since planrt_mem_reset_peak);
/// bytes the runtime holds for it (held); the peak of both together since the start.
std::atomic<uint64_t> live{0}, peak{0}, held{0}, totalPeak{0};

/// Just before every pointer handed out: the size asked for and what malloc returned.
struct Header {
  size_t size;
  void *base;
};
static_assert(sizeof(Header) == 16, "the header keeps 16-byte alignment");

void raise(std::atomic<uint64_t> &peak, uint64_t now) {
  uint64_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void *hostAlloc(size_t bytes) { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
const planrt_backend kHost = {"cpu", hostAlloc, std::free};
std::atomic<const planrt_backend *> backend{&kHost};

/// `size` bytes at a multiple of `alignment` (a power of two, at least 16), counted in
/// `counter` (live or held).
void *allocate(size_t size, size_t alignment, std::atomic<uint64_t> &counter) {
  void *base = backend.load()->alloc(size + sizeof(Header) + alignment);
  if (!base)
    return nullptr;
  uintptr_t p = (reinterpret_cast<uintptr_t>(base) + sizeof(Header) + alignment - 1) & ~uintptr_t(alignment - 1);
  Header h{size, base};
  std::memcpy(reinterpret_cast<void *>(p - sizeof(Header)), &h, sizeof h);
  uint64_t now = counter.fetch_add(size, std::memory_order_relaxed) + size;
  if (&counter == &live)
    raise(peak, now);
  raise(totalPeak, live.load(std::memory_order_relaxed) + held.load(std::memory_order_relaxed));
  return reinterpret_cast<void *>(p);
}

void release(void *ptr, std::atomic<uint64_t> &counter) {
  if (!ptr)
    return;
  Header h;
  std::memcpy(&h, static_cast<unsigned char *>(ptr) - sizeof(Header), sizeof h);
  counter.fetch_sub(h.size, std::memory_order_relaxed);
  backend.load()->free(h.base);
}

} // namespace

extern "C" {

void *_mlir_memref_to_llvm_alloc(size_t size) { return allocate(size, 16, live); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return allocate(size, alignment < 16 ? 16 : alignment, live);
}

void _mlir_memref_to_llvm_free(void *ptr) { release(ptr, live); }

void *planrt_mem_alloc(size_t bytes) { return allocate(bytes, 256, held); }
void planrt_mem_free(void *ptr) { release(ptr, held); }

void planrt_set_backend(const planrt_backend *b) { backend.store(b ? b : &kHost); }
const planrt_backend *planrt_get_backend(void) { return backend.load(); }

uint64_t planrt_mem_live(void) { return live.load(std::memory_order_relaxed); }
uint64_t planrt_mem_peak(void) { return peak.load(std::memory_order_relaxed); }
void planrt_mem_reset_peak(void) { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }
uint64_t planrt_mem_held(void) { return held.load(std::memory_order_relaxed); }
uint64_t planrt_mem_total_peak(void) { return totalPeak.load(std::memory_order_relaxed); }

} // extern "C"
