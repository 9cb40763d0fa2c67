// The NVMe optimizer state (offload.h). Each rank keeps two files under the plan's
// directory, one per generation, and a marker naming the current one. A generation
// holds, per optimizer group, one record per chunk of `chunk` floats: the chunk of
// exp_avg then the chunk of exp_avg_sq, the last one zero-padded. Records are read and
// written whole through io_uring (O_DIRECT where the file system allows it), two
// staging slots deep: while the update runs on one slot, the next record is read into
// the other, and each slot's record is written to the next generation as soon as it is
// done.
#include "offload.h"
#include "planrt_manifest.h"
#include "status.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace planrt::train {

namespace {

constexpr int64_t kAlign = planrt::manifest::offload::kAlign; // O_DIRECT: buffers, offsets and lengths
constexpr unsigned kDepth = 8;   // two reads and two writes in flight at most

std::string errnoText(int e) { return std::strerror(e); }

} // namespace

struct OffloadedOptimizer::Impl {
  std::string dir;
  int rank = 0;
  int64_t chunk = 0; ///< floats of one moment per record
  Group groups[2];
  int64_t chunks[2] = {0, 0};
  std::string files[2], marker, lock;
  int fds[2] = {-1, -1}, lockFd = -1;
  int current = 0;
  io_uring ring{};
  bool ringOpen = false;
  void *staging = nullptr; ///< planrt_mem_alloc'd; slots and pads at an aligned offset
  float *slots[2] = {nullptr, nullptr}, *padP = nullptr, *padG = nullptr;
  OffloadedOptimizer *self = nullptr;
  /// The crash test's hook: PLANRT_TEST_KILL_IN_UPDATE=S kills this process (SIGKILL)
  /// in step S's update, halfway through writing the next generation.
  int64_t killStep = -1;

  int64_t records() const { return chunks[0] + chunks[1]; }
  int64_t recordBytes() const { return 2 * chunk * int64_t(sizeof(float)); }
  /// The group and chunk of record i.
  std::pair<int, int64_t> at(int64_t i) const { return i < chunks[0] ? std::pair{0, i} : std::pair{1, i - chunks[0]}; }

  planrt_status openFile(int gen) {
    fds[gen] = ::open(files[gen].c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fds[gen] < 0 && errno == EINVAL) // a file system without direct I/O (tmpfs)
      fds[gen] = ::open(files[gen].c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fds[gen] < 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot open %s: %s", files[gen].c_str(),
                  errnoText(errno).c_str());
    if (::ftruncate(fds[gen], records() * recordBytes()) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot size %s to %lld bytes: %s", files[gen].c_str(),
                  (long long)(records() * recordBytes()), errnoText(errno).c_str());
    return PLANRT_OK;
  }

  planrt_status submit(bool write, int64_t i, float *slot) {
    int gen = write ? 1 - current : current;
    io_uring_sqe *sqe = io_uring_get_sqe(&ring); // at most 3 in flight of kDepth
    if (!sqe)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: the io_uring submission queue is full (%s)",
                  files[gen].c_str());
    if (write)
      io_uring_prep_write(sqe, fds[gen], slot, unsigned(recordBytes()), uint64_t(i * recordBytes()));
    else
      io_uring_prep_read(sqe, fds[gen], slot, unsigned(recordBytes()), uint64_t(i * recordBytes()));
    io_uring_sqe_set_data64(sqe, uint64_t(i) << 1 | uint64_t(write));
    if (int rc = io_uring_submit(&ring); rc != 1)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot submit the %s of %s: %s",
                  write ? "write" : "read", files[gen].c_str(), rc < 0 ? errnoText(-rc).c_str() : "not accepted");
    return PLANRT_OK;
  }

  /// Waits until record i's read (or write) has completed; every completion that comes
  /// first is checked and marked in `done`.
  planrt_status wait(bool write, int64_t i, std::vector<char> &done) {
    auto began = std::chrono::steady_clock::now();
    planrt_status status = PLANRT_OK;
    while (!done[size_t(i << 1 | int64_t(write))]) {
      io_uring_cqe *cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR)
        continue;
      if (rc < 0) {
        status = fail(PLANRT_ERR_IO, "offloaded optimizer state: io_uring: %s", errnoText(-rc).c_str());
        break;
      }
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      done[tag] = 1;
      bool w = tag & 1;
      const std::string &file = files[w ? 1 - current : current];
      if (res < 0 && !status)
        status = fail(PLANRT_ERR_IO, "offloaded optimizer state: %s %s at byte %lld: %s", w ? "writing" : "reading",
                      file.c_str(), (long long)(int64_t(tag >> 1) * recordBytes()), errnoText(-res).c_str());
      else if (res != recordBytes() && !status)
        status = fail(PLANRT_ERR_IO, "offloaded optimizer state: %s %s at byte %lld moved %d of %lld bytes",
                      w ? "writing" : "reading", file.c_str(), (long long)(int64_t(tag >> 1) * recordBytes()), res,
                      (long long)recordBytes());
      else
        (w ? self->bytesWritten : self->bytesRead) += uint64_t(res);
    }
    self->waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return status;
  }

  /// Streams every record: read from the current generation (if `read`), `fn(i, slot)`,
  /// written to the next one (if `write`), two slots deep. Waits for everything in
  /// flight before it returns, even on failure.
  planrt_status stream(bool read, bool write, const std::function<void(int64_t, float *)> &fn) {
    int64_t n = records();
    std::vector<char> done(size_t(2 * n), 0);
    std::vector<char> submitted(size_t(2 * n), 0);
    planrt_status status = PLANRT_OK;
    auto issue = [&](bool w, int64_t i) {
      if (planrt_status s = submit(w, i, slots[i % 2]); s && !status)
        status = s;
      else if (!s)
        submitted[size_t(i << 1 | int64_t(w))] = 1;
    };
    auto settle = [&](bool w, int64_t i) {
      if (i >= 0 && submitted[size_t(i << 1 | int64_t(w))])
        if (planrt_status s = wait(w, i, done); s && !status)
          status = s;
    };
    if (read && n > 0)
      issue(false, 0);
    for (int64_t i = 0; i < n && !status; ++i) {
      if (read && i + 1 < n) {
        settle(true, i - 1); // record i + 1 goes into the slot record i - 1 was written from
        if (status)
          break;
        issue(false, i + 1);
      }
      if (read)
        settle(false, i);
      else
        settle(true, i - 2);
      if (status)
        break;
      fn(i, slots[i % 2]);
      if (write)
        issue(true, i);
    }
    for (int64_t i = 0; i < n; ++i) { // nothing may stay in flight into freed slots
      settle(false, i);
      settle(true, i);
    }
    return status;
  }

  /// Makes the next generation current: its data on disk, then the marker replaced.
  planrt_status flip() {
    int next = 1 - current;
    if (::fdatasync(fds[next]) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot sync %s: %s", files[next].c_str(),
                  errnoText(errno).c_str());
    std::string tmp = marker + ".tmp", text = "generation " + std::to_string(next) + "\n";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fdatasync(fd) == 0;
    if (fd >= 0)
      ::close(fd);
    if (!ok || std::rename(tmp.c_str(), marker.c_str()) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot write %s: %s", marker.c_str(),
                  errnoText(errno).c_str());
    // The rename itself must reach the disk: sync the directory.
    if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    current = next;
    return PLANRT_OK;
  }
};

OffloadedOptimizer::OffloadedOptimizer(std::string dir, int rank, int64_t chunkFloats, Group g0, Group g1)
    : impl(std::make_unique<Impl>()) {
  impl->dir = std::move(dir);
  impl->rank = rank;
  impl->chunk = chunkFloats;
  impl->groups[0] = g0;
  impl->groups[1] = g1;
  impl->self = this;
  for (int g = 0; g < 2; ++g)
    impl->chunks[g] = chunkFloats > 0 ? (impl->groups[g].floats + chunkFloats - 1) / chunkFloats : 0;
  std::string base = impl->dir + "/planc-optimizer.rank" + std::to_string(rank);
  impl->files[0] = base + ".gen0";
  impl->files[1] = base + ".gen1";
  impl->marker = base + ".current";
  impl->lock = base + ".lock";
}

OffloadedOptimizer::~OffloadedOptimizer() {
  if (impl->ringOpen)
    io_uring_queue_exit(&impl->ring);
  for (int fd : impl->fds)
    if (fd >= 0)
      ::close(fd);
  if (impl->lockFd >= 0)
    ::close(impl->lockFd); // releases the lock
  planrt_mem_free(impl->staging);
}

int64_t OffloadedOptimizer::stagingBytes() const { return 3 * impl->recordBytes() + kAlign; }

int64_t OffloadedOptimizer::fileBytes() const { return impl->records() * impl->recordBytes(); }

planrt_status OffloadedOptimizer::open() {
  Impl &d = *impl;
  if (d.chunk <= 0 || (d.chunk * int64_t(sizeof(float))) % kAlign)
    return fail(PLANRT_ERR_ARG, "offloaded optimizer state: a chunk of %lld floats is not a multiple of 4 KiB",
                (long long)d.chunk);
  for (int g = 0; g < 2; ++g)
    if (d.groups[g].floats > 0 && !d.groups[g].update)
      return fail(PLANRT_ERR_ARG, "the executable lacks the offloaded update of optimizer group %d", g);
  if (::mkdir(d.dir.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot create the directory %s: %s", d.dir.c_str(),
                errnoText(errno).c_str());
  struct stat st;
  if (::stat(d.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(PLANRT_ERR_IO, "offloaded optimizer state: %s is not a directory", d.dir.c_str());
  // One run per directory and rank: another would step these moments too.
  d.lockFd = ::open(d.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (d.lockFd < 0)
    return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot create %s: %s", d.lock.c_str(),
                errnoText(errno).c_str());
  if (::flock(d.lockFd, LOCK_EX | LOCK_NB) != 0)
    return fail(PLANRT_ERR_IO,
                "offloaded optimizer state: another run holds %s (rank %d's moments); give each run its own "
                "directory (--offload-dir)",
                d.dir.c_str(), d.rank);
  for (int gen = 0; gen < 2; ++gen)
    if (planrt_status s = d.openFile(gen))
      return s;
  // The generation the marker names is the complete one (a fresh directory: the first).
  if (FILE *f = std::fopen(d.marker.c_str(), "r")) {
    int gen = -1;
    bool ok = std::fscanf(f, "generation %d", &gen) == 1 && (gen == 0 || gen == 1);
    std::fclose(f);
    if (!ok)
      return fail(PLANRT_ERR_FORMAT, "offloaded optimizer state: %s does not name generation 0 or 1",
                  d.marker.c_str());
    d.current = gen;
  }
  if (int rc = io_uring_queue_init(kDepth, &d.ring, 0); rc < 0)
    return fail(PLANRT_ERR_IO, "offloaded optimizer state: io_uring is not available (%s); it streams %s",
                errnoText(-rc).c_str(), d.files[0].c_str());
  d.ringOpen = true;
  if (const char *kill = std::getenv("PLANRT_TEST_KILL_IN_UPDATE"))
    d.killStep = std::strtoll(kill, nullptr, 10);
  // Two record slots, then a chunk each for the last (partial) chunk's p and g.
  d.staging = planrt_mem_alloc(size_t(stagingBytes()));
  if (!d.staging)
    return fail(PLANRT_ERR_ARG, "offloaded optimizer state: cannot allocate the %lld-byte staging buffer",
                (long long)stagingBytes());
  auto base = reinterpret_cast<uintptr_t>(d.staging);
  auto *aligned = reinterpret_cast<float *>((base + kAlign - 1) / kAlign * kAlign);
  d.slots[0] = aligned;
  d.slots[1] = aligned + 2 * d.chunk;
  d.padP = aligned + 4 * d.chunk;
  d.padG = aligned + 5 * d.chunk;
  return PLANRT_OK;
}

planrt_status OffloadedOptimizer::store(const float *const m[2], const float *const v[2]) {
  Impl &d = *impl;
  if (planrt_status s = d.stream(false, true,
                                 [&](int64_t i, float *slot) {
                                   auto [g, k] = d.at(i);
                                   int64_t off = k * d.chunk, n = std::min(d.chunk, d.groups[g].floats - off);
                                   std::fill(slot, slot + 2 * d.chunk, 0.0f);
                                   if (m && v) {
                                     std::memcpy(slot, m[g] + off, size_t(n) * sizeof(float));
                                     std::memcpy(slot + d.chunk, v[g] + off, size_t(n) * sizeof(float));
                                   }
                                 }))
    return s;
  return d.flip();
}

planrt_status OffloadedOptimizer::load(float *const m[2], float *const v[2]) {
  Impl &d = *impl;
  return d.stream(true, false, [&](int64_t i, float *slot) {
    auto [g, k] = d.at(i);
    int64_t off = k * d.chunk, n = std::min(d.chunk, d.groups[g].floats - off);
    std::memcpy(m[g] + off, slot, size_t(n) * sizeof(float));
    std::memcpy(v[g] + off, slot + d.chunk, size_t(n) * sizeof(float));
  });
}

planrt_status OffloadedOptimizer::update(float *const p[2], float *const g[2], int64_t step, float *state) {
  Impl &d = *impl;
  // Every chunk reads the step state as it was; what the update writes (norm, lr, the
  // loss scale's next values) is kept aside and copied over at the end.
  auto began = std::chrono::steady_clock::now();
  uint64_t before = bytesRead + bytesWritten;
  float next[8];
  std::memcpy(next, state, sizeof next);
  if (planrt_status s = d.stream(true, true,
                                 [&](int64_t i, float *slot) {
                                   if (step == d.killStep && i == d.records() / 2)
                                     std::raise(SIGKILL);
                                   auto [grp, k] = d.at(i);
                                   int64_t off = k * d.chunk, n = std::min(d.chunk, d.groups[grp].floats - off);
                                   planrt_update_chunk_fn fn = d.groups[grp].update;
                                   if (n == d.chunk) {
                                     fn(p[grp] + off, g[grp] + off, slot, slot + d.chunk, step, state, next);
                                     return;
                                   }
                                   // The last chunk: zero-padded copies (AdamW keeps zeros zero).
                                   std::fill(d.padP, d.padP + 2 * d.chunk, 0.0f);
                                   std::memcpy(d.padP, p[grp] + off, size_t(n) * sizeof(float));
                                   std::memcpy(d.padG, g[grp] + off, size_t(n) * sizeof(float));
                                   fn(d.padP, d.padG, slot, slot + d.chunk, step, state, next);
                                   std::memcpy(p[grp] + off, d.padP, size_t(n) * sizeof(float));
                                 }))
    return s;
  if (planrt_status s = d.flip())
    return s;
  std::memcpy(state, next, 6 * sizeof(float)); // norm, lr, loss scale, good steps, skipped, applied
  updateSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  updateBytes += bytesRead + bytesWritten - before;
  return PLANRT_OK;
}

} // namespace planrt::train
