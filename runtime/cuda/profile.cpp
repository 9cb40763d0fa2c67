// PLANRT_CUDA_PROFILE=FILE: where a CUDA executable's time goes, with no profiler. With it
// set, every launch and library call of libplanrt_cuda ends by synchronising its stream
// (without it they are queued, and the host waits only where host code runs next), so the
// wall time from one synchronisation to the next is the time of the operation that
// ended it: its kernels, and the host work before it (a host fill of managed memory, the
// page migrations it causes). At exit FILE gets one line per operation, slowest first:
// calls, total milliseconds, milliseconds per call, the longest call and share of the
// total (test/gpu/profile_summary.py sums them by kind). The first operation after the
// start carries the start-up (parameters initialised, data opened): its longest call
// shows it.
#include "device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace planrt::cuda {
namespace {

using Clock = std::chrono::steady_clock;

struct Entry {
  int64_t calls = 0;
  double seconds = 0, longest = 0;
};

struct Profile {
  std::string path;
  std::mutex mutex;
  Clock::time_point last = Clock::now();
  std::unordered_map<std::string, Entry> entries;

  ~Profile() { write(); }

  void write() {
    std::vector<std::pair<std::string, Entry>> rows(entries.begin(), entries.end());
    std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (auto &r : rows)
      total += r.second.seconds;
    FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "planrt: warning: PLANRT_CUDA_PROFILE: cannot write %s\n", path.c_str());
      return;
    }
    std::fprintf(f, "# operation calls total_ms ms_per_call max_ms share\n");
    for (auto &[name, e] : rows)
      std::fprintf(f, "%s %lld %.3f %.4f %.4f %.4f\n", name.c_str(), (long long)e.calls, e.seconds * 1e3,
                   e.seconds * 1e3 / double(e.calls), e.longest * 1e3, total > 0 ? e.seconds / total : 0.0);
    std::fprintf(f, "# total %.3f ms\n", total * 1e3);
    std::fclose(f);
  }
};

Profile *theProfile() {
  static Profile *p = [] {
    const char *path = std::getenv("PLANRT_CUDA_PROFILE");
    if (!path || !*path)
      return static_cast<Profile *>(nullptr);
    static Profile profile;
    profile.path = path;
    return &profile;
  }();
  return p;
}

} // namespace

bool profiling() { return theProfile() != nullptr; }

void profileMark(const char *what) {
  Profile *p = theProfile();
  if (!p)
    return;
  std::lock_guard<std::mutex> lock(p->mutex);
  Clock::time_point now = Clock::now();
  Entry &e = p->entries[what];
  double dt = std::chrono::duration<double>(now - p->last).count();
  ++e.calls;
  e.seconds += dt;
  e.longest = dt > e.longest ? dt : e.longest;
  p->last = now;
}

} // namespace planrt::cuda
