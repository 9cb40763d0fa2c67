// The NVMe optimizer state (offload.h). Each rank keeps two files under the plan's
// directory, one per generation, and a marker naming the current one. A generation
// holds, per optimizer group, one record per chunk of `chunk` floats: the chunk of
// exp_avg then the chunk of exp_avg_sq, the last one zero-padded. With the parameters
// offloaded, a second pair of files (under their own directory) holds each record's
// chunk of the parameter shard at the same index; the one marker names the generation
// of both. Records are read and written whole through io_uring (O_DIRECT where the file
// system allows it), two staging slots deep: while the update runs on one slot, the
// next record is read into the other, and each slot's record is written to the next
// generation as soon as it is done. An all-gather's part of the shard is read from the
// current generation, through the page cache: the next one ahead through the ring into
// the staging buffer (idle outside the update), while the step computes, and copied
// out when its gather starts; any other with pread.
//
// The update streams group 1's records (norms and biases, of which every layer's
// bucket holds some) before group 0's, each group's in order, so that an overlapped
// update (on a thread of its own while the next step's forward pass gathers the
// shard bucket by bucket) is done with the first buckets' records first. Its thread
// publishes how far it got: the records updated, and those written in a row from the
// first; the step waits for what it touches, and only then.
//
// On a device (the CUDA target, cuda-host's emulated device: planrt_mem_is_device),
// whose memory the kernel's file I/O does not reach, the slots are host memory
// (planrt_host_alloc: page-locked on CUDA) and the chunk update runs on the device, on
// one record's slot in device memory: each record is copied in, updated by the
// generated kernels and copied out (a wait), then written from its host slot, while
// the next record is read into the other.
#include "offload.h"
#include "planrt_manifest.h"
#include "status.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <sys/file.h>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace planrt::train {

namespace {

constexpr int64_t kAlign = planrt::manifest::offload::kAlign; // O_DIRECT: buffers, offsets and lengths
constexpr unsigned kDepth = 16;  // two reads and two writes in flight at most, of two parts each

std::string errnoText(int e) { return std::strerror(e); }

} // namespace

struct OffloadedOptimizer::Impl {
  std::string dir, paramsDir; ///< paramsDir empty: the parameters are not offloaded
  int rank = 0;
  int64_t chunk = 0; ///< floats of one moment per record
  Group groups[2];
  int64_t chunks[2] = {0, 0};
  std::string files[2], marker, lock;
  std::string paramFiles[2], paramLock;
  int fds[2] = {-1, -1}, lockFd = -1;
  int paramFds[2] = {-1, -1}, paramReadFds[2] = {-1, -1}, paramLockFd = -1;
  int current = 0;
  io_uring ring{};
  bool ringOpen = false;
  /// A read ahead could not be submitted or waited for: reads may still be in flight
  /// into the staging buffer, so nothing streams through it again (and it is not freed).
  bool ringBroken = false;
  void *staging = nullptr; ///< planrt_mem_alloc'd (planrt_host_alloc'd on a device); slots and pads aligned
  /// A slot holds a record: the moments' chunks, then (offloaded) the parameters' chunk.
  float *slots[2] = {nullptr, nullptr}, *padP = nullptr, *padG = nullptr;
  /// On a device: the update's record, padded gradient and parameters, and the step
  /// state and its next values (8 floats each), in the device's memory (planrt_mem_alloc).
  bool device = false;
  void (*hostFree)(void *) = nullptr; ///< the backend's that allocated the slots (null: the C heap's)
  float *dev = nullptr, *devPadG = nullptr, *devPadP = nullptr, *devState = nullptr, *devNext = nullptr;
  OffloadedOptimizer *self = nullptr;
  /// An all-gather's part read ahead (prefetchParams): the shard's floats [offset,
  /// offset + n) going to the staging buffer's start, `inFlight` reads of it submitted
  /// and not yet completed; `failed`: one did not read all its bytes (the part is then
  /// read again with pread).
  struct Prefetch {
    int64_t offset = -1, n = 0;
    int inFlight = 0;
    bool failed = false;
  } ahead;
  static constexpr uint64_t kPrefetchTag = uint64_t(1) << 62;
  /// The crash test's hook: PLANRT_TEST_KILL_IN_UPDATE=S kills this process (SIGKILL)
  /// in step S's update, halfway through writing the next generation.
  int64_t killStep = -1;

  /// An overlapped update: its thread, and how far it got in stream positions:
  /// `computed` records updated (their pieces of p and g done with), `written` records
  /// of the next generation on disk in a row from the first.
  struct Job {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    int64_t computed = 0, written = 0;
    bool finished = false, nextKnown = false;
    planrt_status status = PLANRT_OK;
    std::string error; ///< its message: planrt_last_error is the thread's own
    int target = 0;    ///< the generation it writes
    float *p[2] = {nullptr, nullptr}, *g[2] = {nullptr, nullptr};
    float state[8] = {}, next[8] = {}; ///< the step state it reads; the next values it makes
  };
  std::unique_ptr<Job> job; ///< touched by the caller's thread only; the job's fields under its mutex

  /// Waits until `ready` holds of the job or it ended, adding the wait to `seconds`;
  /// false if `ready` does not hold because it failed (what is ready is, whatever
  /// happens to the rest: the failure is reported by the next wait that needs it).
  bool await(const std::function<bool(const Job &)> &ready, double &seconds) {
    auto began = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->finished || ready(*job); });
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return ready(*job) || !job->status;
  }
  /// Whether the job ended without a failure (to be settled at no wait).
  bool jobEndedWell() {
    std::lock_guard<std::mutex> lock(job->mu);
    return job->finished && !job->status;
  }

  bool params() const { return !paramsDir.empty(); }
  int64_t records() const { return chunks[0] + chunks[1]; }
  /// Bytes of a record's two parts: the moments (in `files`) and the parameters (in
  /// `paramFiles`).
  int64_t recordBytes() const { return 2 * chunk * int64_t(sizeof(float)); }
  int64_t paramBytes() const { return chunk * int64_t(sizeof(float)); }
  int64_t slotFloats() const { return (params() ? 3 : 2) * chunk; }
  /// The group and chunk of record i.
  std::pair<int, int64_t> at(int64_t i) const { return i < chunks[0] ? std::pair{0, i} : std::pair{1, i - chunks[0]}; }
  /// The record at stream position j (group 1's first), and the position of record i.
  int64_t recordAt(int64_t j) const { return j < chunks[1] ? chunks[0] + j : j - chunks[1]; }
  int64_t positionOf(int64_t i) const { return i >= chunks[0] ? i - chunks[0] : chunks[1] + i; }
  /// The stream positions up to which group `grp`'s floats [lo, hi) lie (0: none).
  int64_t positionsFor(int grp, int64_t lo, int64_t hi) const {
    hi = std::min(hi, groups[grp].floats);
    if (hi <= std::max<int64_t>(lo, 0) || chunk <= 0)
      return 0;
    int64_t k = (hi - 1) / chunk;
    return positionOf(grp ? chunks[0] + k : k) + 1;
  }

  /// Bytes of the host's staging (the slots the ring reads into and writes from, and the
  /// pads), and on a device the device's (a slot, the pads, the state and next values).
  int64_t hostStagingBytes() const {
    // Two slots, and a chunk for the last (partial) chunk's gradient and, unless the
    // parameters stream in the slots, its parameters.
    return (2 * slotFloats() + (params() ? 1 : 2) * chunk) * int64_t(sizeof(float)) + kAlign;
  }
  int64_t deviceStagingBytes() const {
    return (slotFloats() + (params() ? 1 : 2) * chunk + 16) * int64_t(sizeof(float));
  }

  /// n floats of host memory at `src` into the device's at `to` (queued), and back
  /// (waited for), counted in deviceBytes.
  void in(float *to, const float *src, int64_t n) {
    planrt_mem_copy_in(to, src, size_t(n) * sizeof(float));
    self->deviceBytes += uint64_t(n) * sizeof(float);
  }
  void out(float *to, const float *src, int64_t n) {
    planrt_mem_copy_out(to, src, size_t(n) * sizeof(float));
    self->deviceBytes += uint64_t(n) * sizeof(float);
  }
  /// n floats of `src` (the backend's memory) into host memory at `to`.
  void fromDevice(float *to, const float *src, int64_t n) {
    if (device)
      out(to, src, n);
    else
      std::memcpy(to, src, size_t(n) * sizeof(float));
  }

  /// Record i's chunk update (group grp's floats [off, off + n)) on a device: the record
  /// in and, for a partial last chunk, its gradient and parameters (through the host's
  /// pads: the backend copies to and from the host only) padded with zeros on the
  /// device; the generated kernels; the record out (the wait), and the parameters back.
  void deviceChunk(int grp, int64_t off, int64_t n, float *slot, float *const p[2], float *const g[2], int64_t step) {
    planrt_update_chunk_fn fn = groups[grp].update;
    in(dev, slot, 2 * chunk);
    float *param = p[grp] + off, *grad = g[grp] + off;
    if (n < chunk) {
      for (auto [host, devPad, from] : {std::tuple{padG, devPadG, grad}, std::tuple{padP, devPadP, param}}) {
        out(host, from, n);
        in(devPad, host, n);
        planrt_mem_fill_async(devPad + n, 0.0f, size_t(chunk - n));
      }
      grad = devPadG;
      param = devPadP;
    }
    fn(param, grad, dev, dev + chunk, step, devState, devNext);
    out(slot, dev, 2 * chunk);
    if (n < chunk) {
      out(padP, devPadP, n);
      in(p[grp] + off, padP, n);
    }
  }

  /// Opens (creating) `file` sized to `bytes`, with direct I/O where the file system has it.
  static planrt_status openSized(const std::string &file, int64_t bytes, int &fd) {
    fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EINVAL) // a file system without direct I/O (tmpfs)
      fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot open %s: %s", file.c_str(),
                  errnoText(errno).c_str());
    if (::ftruncate(fd, bytes) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot size %s to %lld bytes: %s", file.c_str(),
                  (long long)bytes, errnoText(errno).c_str());
    return PLANRT_OK;
  }

  planrt_status openFile(int gen) {
    if (planrt_status s = openSized(files[gen], records() * recordBytes(), fds[gen]))
      return s;
    if (!params())
      return PLANRT_OK;
    if (planrt_status s = openSized(paramFiles[gen], records() * paramBytes(), paramFds[gen]))
      return s;
    paramReadFds[gen] = ::open(paramFiles[gen].c_str(), O_RDONLY | O_CLOEXEC); // all-gathers' parts
    if (paramReadFds[gen] < 0)
      return fail(PLANRT_ERR_IO, "offloaded parameters: cannot open %s: %s", paramFiles[gen].c_str(),
                  errnoText(errno).c_str());
    return PLANRT_OK;
  }

  /// Takes `lockFile` for this run alone: another run would step the same state.
  static planrt_status lockFor(const std::string &lockFile, const std::string &dirName, const char *what, int rank,
                               int &fd) {
    fd = ::open(lockFile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot create %s: %s", lockFile.c_str(),
                  errnoText(errno).c_str());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0)
      return fail(PLANRT_ERR_IO,
                  "offloaded optimizer state: another run holds %s (rank %d's %s); give each run its own "
                  "directory (--offload-dir)",
                  dirName.c_str(), rank, what);
    return PLANRT_OK;
  }

  /// Creates `d` if needed and checks that it is a directory.
  static planrt_status makeDirectory(const std::string &d) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot create the directory %s: %s", d.c_str(),
                  errnoText(errno).c_str());
    struct stat st;
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: %s is not a directory", d.c_str());
    return PLANRT_OK;
  }

  /// Submits record i's read (or write): its parts, each tagged (i, part, write).
  planrt_status submit(bool write, int64_t i, float *slot) {
    int gen = write ? 1 - current : current;
    int parts = params() ? 2 : 1;
    // Room for every part first: a part prepared but not submitted would go with a
    // later submission (at most 8 in flight of kDepth).
    if (io_uring_sq_space_left(&ring) < unsigned(parts))
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: the io_uring submission queue is full (%s)",
                  files[gen].c_str());
    for (int part = 0; part < parts; ++part) {
      io_uring_sqe *sqe = io_uring_get_sqe(&ring);
      int fd = part ? paramFds[gen] : fds[gen];
      int64_t bytes = part ? paramBytes() : recordBytes();
      float *at = part ? slot + 2 * chunk : slot;
      if (write)
        io_uring_prep_write(sqe, fd, at, unsigned(bytes), uint64_t(i * bytes));
      else
        io_uring_prep_read(sqe, fd, at, unsigned(bytes), uint64_t(i * bytes));
      io_uring_sqe_set_data64(sqe, uint64_t(i) << 2 | uint64_t(part) << 1 | uint64_t(write));
    }
    if (int rc = io_uring_submit(&ring); rc != parts)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot submit the %s of %s: %s",
                  write ? "write" : "read", files[gen].c_str(), rc < 0 ? errnoText(-rc).c_str() : "not accepted");
    return PLANRT_OK;
  }

  /// Waits until record i's read (or write) has completed, every part of it; every
  /// completion that comes first is checked and marked in `done` (by tag).
  bool completed(const std::vector<char> &done, bool write, int64_t i) const {
    size_t tag = size_t(i << 2 | int64_t(write));
    return done[tag] && (!params() || done[tag | 2]);
  }
  planrt_status wait(bool write, int64_t i, std::vector<char> &done) {
    auto began = std::chrono::steady_clock::now();
    planrt_status status = PLANRT_OK;
    while (!completed(done, write, i)) {
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
      if ((tag & kPrefetchTag) || tag >= done.size()) { // not a record's (stream drops reads ahead first)
        if (!status)
          status = fail(PLANRT_ERR_IO, "offloaded optimizer state: io_uring completed a request the update did not "
                                       "make (tag %llu)",
                        (unsigned long long)tag);
        continue;
      }
      done[tag] = 1;
      bool w = tag & 1, part = tag & 2;
      int gen = w ? 1 - current : current;
      const std::string &file = part ? paramFiles[gen] : files[gen];
      int64_t bytes = part ? paramBytes() : recordBytes(), at = int64_t(tag >> 2) * bytes;
      if (res < 0 && !status)
        status = fail(PLANRT_ERR_IO, "offloaded optimizer state: %s %s at byte %lld: %s", w ? "writing" : "reading",
                      file.c_str(), (long long)at, errnoText(-res).c_str());
      else if (res != bytes && !status)
        status = fail(PLANRT_ERR_IO, "offloaded optimizer state: %s %s at byte %lld moved %d of %lld bytes",
                      w ? "writing" : "reading", file.c_str(), (long long)at, res, (long long)bytes);
      else
        (w ? self->bytesWritten : self->bytesRead) += uint64_t(res);
    }
    self->waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return status;
  }

  /// The pieces of the shard's floats [offset, offset + n) in its file: (byte offset,
  /// floats) each, group 0's piece then group 1's (each group's chunks from its first
  /// record, whole chunks, so its floats are contiguous); empty if outside the shard.
  std::vector<std::pair<int64_t, int64_t>> paramPieces(int64_t offset, int64_t n) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    while (n > 0) {
      int g = offset < groups[0].floats ? 0 : 1;
      int64_t x = g ? offset - groups[0].floats : offset;
      int64_t take = std::min(n, groups[g].floats - x);
      if (x < 0 || take <= 0)
        return {};
      out.push_back({((g ? chunks[0] * chunk : 0) + x) * int64_t(sizeof(float)), take});
      offset += take;
      n -= take;
    }
    return out;
  }
  /// Waits for the prefetch's reads still in flight (none else is: the update does not
  /// run while one is), marking it failed if one did not read all its bytes.
  void settlePrefetch() {
    while (ahead.inFlight > 0) {
      io_uring_cqe *cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR)
        continue;
      if (rc < 0) { // the ring is broken: what is in flight may still land
        ringBroken = true;
        ahead.inFlight = 0;
        ahead.failed = true;
        break;
      }
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (!(tag & kPrefetchTag))
        continue;
      --ahead.inFlight;
      if (res < 0 || uint64_t(res) != (tag & ~kPrefetchTag))
        ahead.failed = true;
    }
  }
  /// Drops the prefetch, once its reads are done.
  void dropPrefetch() {
    settlePrefetch();
    ahead = Prefetch{};
  }

  /// Streams every record, in stream positions: read from the current generation (if
  /// `read`), `fn(i, slot)`, written to the next one (if `write`), two slots deep,
  /// telling `job` (if any) how far it got. Waits for everything in flight before it
  /// returns, even on failure. No read ahead may be in flight (dropPrefetch).
  planrt_status stream(bool read, bool write, const std::function<void(int64_t, float *)> &fn, Job *job = nullptr) {
    if (ringBroken)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: io_uring failed reading the parameters ahead; %s is not "
                                 "streamed again in this run",
                  files[current].c_str());
    int64_t n = records();
    std::vector<char> done(size_t(4 * n), 0);
    std::vector<char> submitted(size_t(2 * n), 0);
    planrt_status status = PLANRT_OK;
    auto issue = [&](bool w, int64_t j) {
      if (planrt_status s = submit(w, recordAt(j), slots[j % 2]); s && !status)
        status = s;
      else if (!s)
        submitted[size_t(j << 1 | int64_t(w))] = 1;
    };
    auto settle = [&](bool w, int64_t j) {
      if (j >= 0 && submitted[size_t(j << 1 | int64_t(w))])
        if (planrt_status s = wait(w, recordAt(j), done); s && !status)
          status = s;
    };
    int64_t inRow = 0; // positions written in a row from the first
    auto report = [&](int64_t computed) {
      if (!job)
        return;
      while (write && inRow < n && completed(done, true, recordAt(inRow)))
        ++inRow;
      std::lock_guard<std::mutex> lock(job->mu);
      job->computed = computed;
      job->written = inRow;
      job->cv.notify_all();
    };
    if (read && n > 0)
      issue(false, 0);
    for (int64_t j = 0; j < n && !status; ++j) {
      if (read && j + 1 < n) {
        settle(true, j - 1); // position j + 1 goes into the slot j - 1 was written from
        if (status)
          break;
        issue(false, j + 1);
      }
      if (read)
        settle(false, j);
      else
        settle(true, j - 2);
      if (status)
        break;
      try { // what is in flight is waited for below, whatever happens to fn
        fn(recordAt(j), slots[j % 2]);
      } catch (const std::exception &e) {
        status = fail(PLANRT_ERR_ARG, "offloaded optimizer state: the update of record %lld of %s failed: %s",
                      (long long)recordAt(j), files[current].c_str(), e.what());
        break;
      }
      if (write)
        issue(true, j);
      report(j + 1);
    }
    for (int64_t j = 0; j < n; ++j) { // nothing may stay in flight into freed slots
      settle(false, j);
      settle(true, j);
    }
    if (!status)
      report(n);
    return status;
  }

  /// One optimizer step: every record's chunk update (of `state`, its next values into
  /// `next`), then the next generation made current; `job` when overlapped.
  planrt_status runUpdate(float *const p[2], float *const g[2], int64_t step, const float *state, float *next,
                          Job *job);

  /// Makes the next generation current: its data on disk, then the marker replaced.
  planrt_status flip() {
    int next = 1 - current;
    if (::fdatasync(fds[next]) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot sync %s: %s", files[next].c_str(),
                  errnoText(errno).c_str());
    if (params() && ::fdatasync(paramFds[next]) != 0)
      return fail(PLANRT_ERR_IO, "offloaded parameters: cannot sync %s: %s", paramFiles[next].c_str(),
                  errnoText(errno).c_str());
    std::string tmp = marker + ".tmp", text = "generation " + std::to_string(next) + "\n";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fdatasync(fd) == 0;
    if (fd >= 0)
      ::close(fd);
    if (!ok || std::rename(tmp.c_str(), marker.c_str()) != 0)
      return fail(PLANRT_ERR_IO, "offloaded optimizer state: cannot write %s: %s", marker.c_str(),
                  errnoText(errno).c_str());
    // The rename itself must reach the disk: sync the directory (and the parameters'
    // directory, whose files' entries the marker's generation names).
    for (const std::string *d : {&dir, &paramsDir})
      if (!d->empty())
        if (int dfd = ::open(d->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
          ::fsync(dfd);
          ::close(dfd);
        }
    current = next;
    return PLANRT_OK;
  }
};

OffloadedOptimizer::OffloadedOptimizer(std::string dir, int rank, int64_t chunkFloats, Group g0, Group g1,
                                       std::string paramsDir)
    : impl(std::make_unique<Impl>()) {
  impl->dir = std::move(dir);
  impl->paramsDir = std::move(paramsDir);
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
  std::string params = impl->paramsDir + "/planc-params.rank" + std::to_string(rank);
  impl->paramFiles[0] = params + ".gen0";
  impl->paramFiles[1] = params + ".gen1";
  impl->paramLock = params + ".lock";
}

OffloadedOptimizer::~OffloadedOptimizer() {
  (void)settle(); // its thread streams through the ring and the staging buffer
  if (impl->ringOpen) {
    impl->dropPrefetch(); // nothing may still read into the staging buffer it frees
    io_uring_queue_exit(&impl->ring);
  }
  if (impl->ringBroken) // reads may still land in the staging buffer: it is left to the exit
    impl->staging = nullptr;
  for (int fd : {impl->fds[0], impl->fds[1], impl->paramFds[0], impl->paramFds[1], impl->paramReadFds[0],
                 impl->paramReadFds[1]})
    if (fd >= 0)
      ::close(fd);
  for (int fd : {impl->lockFd, impl->paramLockFd})
    if (fd >= 0)
      ::close(fd); // releases the lock
  if (impl->device) {
    (impl->hostFree ? impl->hostFree : std::free)(impl->staging);
    planrt_mem_free(impl->dev);
  } else {
    planrt_mem_free(impl->staging);
  }
}

bool OffloadedOptimizer::paramsOffloaded() const { return impl->params(); }

int64_t OffloadedOptimizer::groupFloats(int g) const { return impl->groups[g].floats; }

int64_t OffloadedOptimizer::stagingBytes() const {
  return impl->device ? impl->deviceStagingBytes() : impl->hostStagingBytes();
}

int64_t OffloadedOptimizer::hostStagingBytes() const { return impl->device ? impl->hostStagingBytes() : 0; }

int64_t OffloadedOptimizer::fileBytes() const { return impl->records() * impl->recordBytes(); }

int64_t OffloadedOptimizer::paramsFileBytes() const {
  return impl->params() ? impl->records() * impl->paramBytes() : 0;
}

planrt_status OffloadedOptimizer::open() {
  Impl &d = *impl;
  if (d.chunk <= 0 || (d.chunk * int64_t(sizeof(float))) % kAlign)
    return fail(PLANRT_ERR_ARG, "offloaded optimizer state: a chunk of %lld floats is not a multiple of 4 KiB",
                (long long)d.chunk);
  for (int g = 0; g < 2; ++g)
    if (d.groups[g].floats > 0 && !d.groups[g].update)
      return fail(PLANRT_ERR_ARG, "the executable lacks the offloaded update of optimizer group %d", g);
  d.device = planrt_mem_is_device();
  if (d.device && d.params())
    return fail(PLANRT_ERR_ARG,
                "offloaded parameters: a parameter shard in files (under %s) with the update on a "
                "device (%s) is not implemented in this version of planc's runtime; offload the "
                "optimizer alone there",
                d.paramsDir.c_str(), planrt_get_backend()->name);
  if (planrt_status s = Impl::makeDirectory(d.dir))
    return s;
  // One run per directory and rank: another would step these moments too.
  if (planrt_status s = Impl::lockFor(d.lock, d.dir, "moments", d.rank, d.lockFd))
    return s;
  if (d.params()) {
    if (planrt_status s = Impl::makeDirectory(d.paramsDir))
      return s;
    if (planrt_status s = Impl::lockFor(d.paramLock, d.paramsDir, "parameters", d.rank, d.paramLockFd))
      return s;
  }
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
  d.hostFree = d.device ? planrt_get_backend()->host_free : nullptr;
  d.staging = d.device ? planrt_host_alloc(size_t(d.hostStagingBytes())) : planrt_mem_alloc(size_t(stagingBytes()));
  if (!d.staging)
    return fail(PLANRT_ERR_ARG, "offloaded optimizer state: cannot allocate the %lld-byte staging buffer%s",
                (long long)d.hostStagingBytes(), d.device ? " in page-locked host memory" : "");
  if (d.device) {
    d.dev = static_cast<float *>(planrt_mem_alloc(size_t(d.deviceStagingBytes())));
    if (!d.dev)
      return fail(PLANRT_ERR_ARG,
                  "offloaded optimizer state: cannot allocate the %lld-byte staging buffer on the "
                  "device",
                  (long long)d.deviceStagingBytes());
    d.devPadG = d.dev + d.slotFloats();
    d.devPadP = d.devPadG + d.chunk;
    d.devState = d.devPadP + d.chunk;
    d.devNext = d.devState + 8;
  }
  auto base = reinterpret_cast<uintptr_t>(d.staging);
  auto *aligned = reinterpret_cast<float *>((base + kAlign - 1) / kAlign * kAlign);
  d.slots[0] = aligned;
  d.slots[1] = aligned + d.slotFloats();
  d.padG = aligned + 2 * d.slotFloats();
  d.padP = d.params() ? nullptr : d.padG + d.chunk;
  return PLANRT_OK;
}

planrt_status OffloadedOptimizer::store(const float *const m[2], const float *const v[2], const float *const *p) {
  Impl &d = *impl;
  if (d.params() && !p)
    return fail(PLANRT_ERR_ARG, "offloaded parameters: no parameter shard to write to %s", d.paramFiles[0].c_str());
  if (planrt_status s = settle())
    return s;
  d.dropPrefetch(); // its reads go into the slots
  if (planrt_status s = d.stream(false, true,
                                 [&](int64_t i, float *slot) {
                                   auto [g, k] = d.at(i);
                                   int64_t off = k * d.chunk, n = std::min(d.chunk, d.groups[g].floats - off);
                                   std::fill(slot, slot + d.slotFloats(), 0.0f);
                                   if (m && v) {
                                     std::memcpy(slot, m[g] + off, size_t(n) * sizeof(float));
                                     std::memcpy(slot + d.chunk, v[g] + off, size_t(n) * sizeof(float));
                                   }
                                   if (d.params())
                                     std::memcpy(slot + 2 * d.chunk, p[g] + off, size_t(n) * sizeof(float));
                                 }))
    return s;
  return d.flip();
}

planrt_status OffloadedOptimizer::load(float *const m[2], float *const v[2], float *const *p) {
  Impl &d = *impl;
  if (planrt_status s = settle())
    return s;
  d.dropPrefetch();
  return d.stream(true, false, [&](int64_t i, float *slot) {
    auto [g, k] = d.at(i);
    int64_t off = k * d.chunk, n = std::min(d.chunk, d.groups[g].floats - off);
    std::memcpy(m[g] + off, slot, size_t(n) * sizeof(float));
    std::memcpy(v[g] + off, slot + d.chunk, size_t(n) * sizeof(float));
    if (p && d.params())
      std::memcpy(p[g] + off, slot + 2 * d.chunk, size_t(n) * sizeof(float));
  });
}

planrt_status OffloadedOptimizer::Impl::runUpdate(float *const p[2], float *const g[2], int64_t step,
                                                  const float *state, float *next, Job *job) {
  // Every chunk reads the step state as it was and writes the same next values (norm,
  // lr, the loss scale's): they depend on the state alone.
  auto began = std::chrono::steady_clock::now();
  uint64_t before = self->bytesRead + self->bytesWritten;
  auto chunkUpdate = [&](int64_t i, float *slot) {
    if (step == killStep && i == records() / 2)
      std::raise(SIGKILL);
    auto [grp, k] = at(i);
    int64_t off = k * chunk, n = std::min(chunk, groups[grp].floats - off);
    if (device)
      return deviceChunk(grp, off, n, slot, p, g, step);
    planrt_update_chunk_fn fn = groups[grp].update;
    float *grad = g[grp] + off;
    if (n < chunk) { // the last chunk: zero-padded copies (AdamW keeps zeros zero)
      std::fill(padG, padG + chunk, 0.0f);
      std::memcpy(padG, grad, size_t(n) * sizeof(float));
      grad = padG;
    }
    if (params()) // the parameters' chunk streams in the slot, zero-padded in its file
      fn(slot + 2 * chunk, grad, slot, slot + chunk, step, state, next);
    else if (n == chunk)
      fn(p[grp] + off, grad, slot, slot + chunk, step, state, next);
    else {
      std::fill(padP, padP + chunk, 0.0f);
      std::memcpy(padP, p[grp] + off, size_t(n) * sizeof(float));
      fn(padP, grad, slot, slot + chunk, step, state, next);
      std::memcpy(p[grp] + off, padP, size_t(n) * sizeof(float));
    }
    if (job && !job->nextKnown) { // what the caller waits for first
      std::lock_guard<std::mutex> lock(job->mu);
      std::memcpy(job->next, next, sizeof job->next);
      job->nextKnown = true;
    }
  };
  if (device) { // the kernels read the step state, and write its next values, in the device's memory
    in(devState, state, 8);
    in(devNext, next, 8);
  }
  planrt_status streamed = stream(true, true, chunkUpdate, job);
  if (device && !streamed)
    out(next, devNext, 8);
  else if (device) // nothing left queued (the state's copies, a record's kernels) when it fails
    planrt_mem_sync();
  if (streamed)
    return streamed;
  if (planrt_status s = flip())
    return s;
  self->updateSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  self->updateBytes += self->bytesRead + self->bytesWritten - before;
  return PLANRT_OK;
}

planrt_status OffloadedOptimizer::update(float *const p[2], float *const g[2], int64_t step, float *state,
                                         bool overlap) {
  Impl &d = *impl;
  if (planrt_status s = settle())
    return s;
  d.dropPrefetch();                           // its reads go into the slots
  constexpr size_t kNext = 6 * sizeof(float); // norm, lr, loss scale, good steps, skipped, applied
  if (!overlap || d.device) {                 // (a device's update is not overlapped: it launches on the step's stream)
    float now[8], next[8];
    d.fromDevice(now, state, 8);
    std::memcpy(next, now, sizeof next);
    if (planrt_status s = d.runUpdate(p, g, step, now, next, nullptr))
      return s;
    if (d.device) { // waited for: the update ends done, as the runtime's other device work
      d.in(state, next, kNext / sizeof(float));
      planrt_mem_sync();
    } else
      std::memcpy(state, next, kNext);
    return PLANRT_OK;
  }
  d.job = std::make_unique<Impl::Job>();
  Impl::Job *job = d.job.get();
  std::memcpy(job->state, state, sizeof job->state);
  std::memcpy(job->next, state, sizeof job->next);
  job->target = 1 - d.current;
  for (int k = 0; k < 2; ++k) {
    job->p[k] = p ? p[k] : nullptr; // none with the parameters offloaded
    job->g[k] = g[k];
  }
  auto body = [&d, job, step] {
    planrt_status s = PLANRT_OK;
    try { // nothing may leave a thread's function (a record's failure is stream's status)
      float next[8];
      std::memcpy(next, job->state, sizeof next);
      s = d.runUpdate(job->p, job->g, step, job->state, next, job);
    } catch (const std::exception &e) {
      s = fail(PLANRT_ERR_ARG, "offloaded optimizer state: the update of step %lld failed: %s", (long long)step,
               e.what());
    }
    std::lock_guard<std::mutex> lock(job->mu);
    job->finished = true;
    job->status = s;
    if (s)
      job->error = planrt_last_error();
    job->cv.notify_all();
  };
  try {
    job->thread = std::thread(body);
  } catch (const std::system_error &) { // no thread to be had: the update in this one
    body();
  }
  // The next step starts from the state's next values: the first record's update has them.
  if (!d.await([](const Impl::Job &j) { return j.nextKnown; }, overlapWaitSeconds))
    return settle();
  std::lock_guard<std::mutex> lock(job->mu);
  std::memcpy(state, job->next, kNext);
  return PLANRT_OK;
}

bool OffloadedOptimizer::pending() const { return impl->job != nullptr; }

planrt_status OffloadedOptimizer::awaitPiece(int grp, int64_t lo, int64_t hi) {
  Impl &d = *impl;
  int64_t need = d.job && grp >= 0 && grp < 2 ? d.positionsFor(grp, lo, hi) : 0;
  if (need > 0 && !d.await([need](const Impl::Job &j) { return j.computed >= need; }, overlapWaitSeconds))
    return settle();
  return PLANRT_OK;
}

planrt_status OffloadedOptimizer::settle() {
  Impl &d = *impl;
  if (!d.job)
    return PLANRT_OK;
  auto began = std::chrono::steady_clock::now();
  if (d.job->thread.joinable())
    d.job->thread.join();
  overlapWaitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::unique_ptr<Impl::Job> job = std::move(d.job);
  return job->status ? planrt::restore(job->status, job->error) : PLANRT_OK;
}

planrt_status OffloadedOptimizer::readParams(int64_t offset, int64_t n, float *dst) {
  Impl &d = *impl;
  if (!d.params())
    return fail(PLANRT_ERR_ARG, "offloaded parameters: the parameters are not offloaded");
  if (d.job && d.jobEndedWell())
    (void)settle();
  std::vector<std::pair<int64_t, int64_t>> pieces = d.paramPieces(offset, n);
  if (pieces.empty() && n > 0)
    return fail(PLANRT_ERR_ARG, "offloaded parameters: floats [%lld, %lld) lie outside the shard of %lld",
                (long long)offset, (long long)(offset + n), (long long)(d.groups[0].floats + d.groups[1].floats));
  int gen = d.job ? d.job->target : d.current; // the job's thread flips `current`
  if (d.job) { // an update still writing the next generation: its records of the range first
    int64_t need = std::max(d.positionsFor(0, offset, offset + n),
                            d.positionsFor(1, offset - d.groups[0].floats, offset + n - d.groups[0].floats));
    if (!d.await([need](const Impl::Job &j) { return j.written >= need; }, overlapWaitSeconds))
      return settle();
  }
  auto began = std::chrono::steady_clock::now(); // the fetch's own time (the wait above is the update's)
  bool ready = d.ahead.offset == offset && d.ahead.n == n;
  if (ready) { // read ahead: wait for what is still in flight, then copy it out
    d.settlePrefetch();
    ready = !d.ahead.failed;
    if (ready) {
      std::memcpy(dst, d.slots[0], size_t(n) * sizeof(float));
      fetchBytes += uint64_t(n) * sizeof(float);
    }
  }
  d.dropPrefetch();
  if (ready)
    pieces.clear(); // nothing left to read
  const std::string &file = d.paramFiles[gen];
  for (auto [at, floats] : pieces) {
    auto *to = reinterpret_cast<char *>(dst);
    int64_t bytes = floats * int64_t(sizeof(float));
    while (bytes > 0) {
      ssize_t got = ::pread(d.paramReadFds[gen], to, size_t(bytes), off_t(at));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return fail(PLANRT_ERR_IO, "offloaded parameters: reading %s at byte %lld: %s", file.c_str(), (long long)at,
                    got < 0 ? errnoText(errno).c_str() : "the file ends early");
      to += got;
      at += got;
      bytes -= got;
      fetchBytes += uint64_t(got);
    }
    dst += floats;
  }
  fetchSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return PLANRT_OK;
}

void OffloadedOptimizer::prefetchParams(int64_t offset, int64_t n) {
  Impl &d = *impl;
  if (d.job && !d.jobEndedWell())
    return; // the update streams through the ring and the staging buffer
  if (d.job)
    (void)settle();
  if (d.ahead.offset == offset && d.ahead.n == n && !d.ahead.failed)
    return; // on its way already
  d.dropPrefetch();
  // The staging buffer's floats (its slots and pads), whole parts only; a part the ring
  // cannot take at once is read with pread when its gather starts.
  int64_t room = (stagingBytes() - kAlign) / int64_t(sizeof(float));
  std::vector<std::pair<int64_t, int64_t>> pieces = d.paramPieces(offset, n);
  if (!d.params() || !d.ringOpen || d.ringBroken || n <= 0 || n > room || pieces.empty() ||
      io_uring_sq_space_left(&d.ring) < unsigned(pieces.size()))
    return;
  float *to = d.slots[0];
  for (auto [at, floats] : pieces) {
    io_uring_sqe *sqe = io_uring_get_sqe(&d.ring);
    uint64_t bytes = uint64_t(floats) * sizeof(float);
    io_uring_prep_read(sqe, d.paramReadFds[d.current], to, unsigned(bytes), uint64_t(at));
    io_uring_sqe_set_data64(sqe, Impl::kPrefetchTag | bytes);
    to += floats;
  }
  // Every piece in, or the ring is given up on: a piece left queued would go out with
  // the update's next submission, into its slots.
  int submitted = 0;
  while (submitted < int(pieces.size())) {
    int rc = io_uring_submit(&d.ring);
    if (rc == -EINTR || rc == -EAGAIN)
      continue;
    if (rc <= 0) {
      d.ringBroken = true;
      break;
    }
    submitted += rc;
  }
  d.ahead = {offset, n, submitted, submitted != int(pieces.size())};
}

} // namespace planrt::train
