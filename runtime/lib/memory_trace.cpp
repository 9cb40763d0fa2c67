// PLANRT_MEM_TRACE=FILE: which buffers the executable holds at its memory peak — the
// moment `mem_device_peak_bytes` counts (live + held bytes at their largest) — written to
// FILE (".rankR" appended on ranks but 0) at exit: each block grouped by what allocated it
// (the function, by its symbol, or as object+offset where the symbol is not exported:
// `addr2line -f -e OBJECT OFFSET` names it) and by size, largest first; the committed
// parts of reserved buffers as a line of their own (the executable's arena, with its
// step region, is one of the runtime's blocks). For finding what `planc explain` does not
// count.
#include "memory_trace.h"

#include "status.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace planrt::trace {
namespace {

struct Block {
  size_t size;
  bool generated;
  const void *caller;
};

struct State {
  std::mutex mutex;
  std::string path;
  std::unordered_map<const void *, Block> live;
  int64_t committed = 0;
  // At the peak:
  uint64_t peak = 0;
  std::vector<Block> blocks;
  int64_t peakCommitted = 0;

  void snapshot(uint64_t total) {
    if (total <= peak)
      return;
    peak = total;
    blocks.clear();
    for (auto &[ptr, b] : live)
      blocks.push_back(b);
    peakCommitted = committed;
  }
  void write();
};

State *state() {
  static State *s = [] {
    const char *v = std::getenv("PLANRT_MEM_TRACE");
    if (!v || !*v)
      return static_cast<State *>(nullptr);
    auto *st = new State;
    st->path = v;
    std::atexit([] { state()->write(); });
    return st;
  }();
  return s;
}


void State::write() {
  std::lock_guard<std::mutex> lock(mutex);
  std::string file = path + (planrt::rank() ? ".rank" + std::to_string(planrt::rank()) : "");
  FILE *f = std::fopen(file.c_str(), "w");
  if (!f)
    return;
  // Grouped by (who, size): count, bytes.
  std::map<std::tuple<bool, std::string, size_t>, uint64_t> groups;
  for (const Block &b : blocks)
    ++groups[{b.generated, symbolOf(b.caller), b.size}];
  std::vector<std::tuple<uint64_t, uint64_t, std::string, size_t, bool>> rows;
  for (auto &[key, count] : groups)
    rows.emplace_back(count * std::get<2>(key), count, std::get<1>(key), std::get<2>(key), std::get<0>(key));
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(f, "# planrt memory at its peak: %llu bytes (rank %d)\n", (unsigned long long)peak, planrt::rank());
  std::fprintf(f, "# bytes\tcount\tsize\tkind\tallocated by\n");
  if (peakCommitted)
    std::fprintf(f, "%lld\t-\t-\truntime\tcommitted parts of reserved buffers (gradient buckets)\n",
                 (long long)peakCommitted);
  for (auto &[bytes, count, who, size, generated] : rows)
    std::fprintf(f, "%llu\t%llu\t%zu\t%s\t%s\n", (unsigned long long)bytes, (unsigned long long)count, size,
                 generated ? "generated" : "runtime", who.c_str());
  std::fclose(f);
}

} // namespace

bool on() { return state() != nullptr; }

void allocated(const void *ptr, size_t size, bool generated, const void *caller, uint64_t total) {
  State *s = state();
  std::lock_guard<std::mutex> lock(s->mutex);
  s->live[ptr] = {size, generated, caller};
  s->snapshot(total);
}

void released(const void *ptr) {
  State *s = state();
  std::lock_guard<std::mutex> lock(s->mutex);
  s->live.erase(ptr);
}

void committed(int64_t bytes, uint64_t total) {
  State *s = state();
  std::lock_guard<std::mutex> lock(s->mutex);
  s->committed += bytes;
  s->snapshot(total);
}

} // namespace planrt::trace

std::string planrt::trace::symbolOf(const void *caller) {
  Dl_info info;
  if (!caller || !dladdr(caller, &info))
    return "?";
  if (info.dli_sname)
    return info.dli_sname;
  char buf[64];
  std::snprintf(buf, sizeof buf, "+0x%llx",
                (unsigned long long)(reinterpret_cast<uintptr_t>(caller) - reinterpret_cast<uintptr_t>(info.dli_fbase)));
  return std::string(info.dli_fname ? info.dli_fname : "?") + buf;
}
