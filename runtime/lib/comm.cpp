// The device mesh over MPI: communicators per axis group, collectives, and the
// ring-model byte counters that `planc explain` predicts.
#include "emulated_device.h"
#include "status.h"

#include <mpi.h>
#if MPI_VERSION < 4
#error "libplanrt needs MPI 4's large-count calls (MPI_Allreduce_c, …): Debian's MPICH 4"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <string>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using planrt::fail;

struct planrt_mesh {
  std::vector<int64_t> sizes, coords;
  int rank = 0, world = 1;
  bool ownsMpi = false;
  std::map<unsigned, MPI_Comm> comms; ///< by axis mask
  std::map<std::pair<int, unsigned>, uint64_t> bytes;

  /// The communicator of the ranks that differ only along the axes in mask.
  MPI_Comm comm(unsigned mask) {
    auto it = comms.find(mask);
    if (it != comms.end())
      return it->second;
    // Colour: the coordinates outside the group; key: the row-major index inside it.
    int64_t color = 0, key = 0;
    for (size_t a = 0; a < sizes.size(); ++a) {
      if (mask & (1u << a))
        key = key * sizes[a] + coords[a];
      else
        color = color * sizes[a] + coords[a];
    }
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, int(color), int(key), &c);
    comms[mask] = c;
    return c;
  }
  int64_t groupSize(unsigned mask) const {
    int64_t n = 1;
    for (size_t a = 0; a < sizes.size(); ++a)
      if (mask & (1u << a))
        n *= sizes[a];
    return n;
  }
  void count(planrt_collective kind, unsigned mask, uint64_t fullBytes) {
    uint64_t n = uint64_t(groupSize(mask));
    uint64_t sent = kind == PLANRT_SEND         ? fullBytes
                    : kind == PLANRT_ALL_REDUCE ? 2 * (n - 1) * fullBytes / n
                                                : (n - 1) * fullBytes / n;
    bytes[{int(kind), mask}] += sent;
  }
  /// The floats [begin, begin + size) of a collective of `begin + size` or more: what
  /// the whole one counts for them, so that slices covering it sum to its count exactly
  /// (ring(end) − ring(begin), not the rounded ring of each slice).
  void countSlice(planrt_collective kind, unsigned mask, int64_t begin, int64_t size) {
    uint64_t n = uint64_t(groupSize(mask)), lo = uint64_t(begin) * 4, hi = uint64_t(begin + size) * 4;
    uint64_t per = kind == PLANRT_ALL_REDUCE ? 2 * (n - 1) : n - 1;
    bytes[{int(kind), mask}] += per * hi / n - per * lo / n;
  }
  planrt_status check(int rc, const char *what) {
    if (rc == MPI_SUCCESS)
      return PLANRT_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    // A peer that vanished fails the collective (or stalls it: the step's watchdog): name it.
    char peer[512];
    if (planrt_mesh_lost_peer(this, peer, sizeof peer))
      return fail(PLANRT_ERR_IO, "%s failed: %s; %s", what, msg, peer);
    return fail(PLANRT_ERR_IO, "%s failed: %s", what, msg);
  }
};

namespace {

// ---- Naming a dead peer. Every rank knows every rank's pid and host; when this
// process is stopped by a signal (the launcher cleaning up after a peer died, or the
// transport aborting on a vanished peer) it names the peers on its host that are gone.
constexpr int kMaxRanks = 4096;
pid_t gPids[kMaxRanks];
char gHosts[kMaxRanks][64];
/// Boot id and pid-namespace inode: ranks with the same host name in different
/// containers (separate pid namespaces) cannot see each other's pids.
uint64_t gSpaces[kMaxRanks];
int gWorld = 0, gRank = -1;

/// Whether rank r's pid means something here: same host, boot and pid namespace.
bool local(int r) { return std::strcmp(gHosts[r], gHosts[gRank]) == 0 && gSpaces[r] == gSpaces[gRank]; }

/// The state letter of a process in /proc (R, S, T stopped, Z zombie…), 'X' if gone.
char processState(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return 'X';
  char path[64] = "/proc/", buf[256];
  { // "/proc/<pid>/stat" without stdio (called from the signal handler)
    char digits[16];
    int n = 0;
    for (long v = pid; v > 0 && n < 15; v /= 10)
      digits[n++] = char('0' + v % 10);
    size_t at = std::strlen(path);
    while (n > 0)
      path[at++] = digits[--n];
    std::memcpy(path + at, "/stat", 6);
  }
  int fd = ::open(path, O_RDONLY);
  if (fd < 0)
    return 'X';
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0)
    return 'X';
  buf[n] = 0;
  const char *close = std::strrchr(buf, ')');
  return close && close[1] == ' ' ? close[2] : '?';
}

/// A process that no longer exists, or a zombie.
bool gone(pid_t pid) {
  char s = processState(pid);
  return s == 'X' || s == 'Z';
}

// Only async-signal-safe calls below (write, kill, open, read): no stdio, no locale.
void say(const char *text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void sayNumber(long v) {
  char buf[24];
  int i = sizeof buf - 1;
  buf[i] = 0;
  bool negative = v < 0;
  unsigned long u = negative ? 0ul - (unsigned long)v : (unsigned long)v;
  do {
    buf[--i] = char('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (negative)
    buf[--i] = '-';
  say(buf + i);
}

const char *signalName(int sig) {
  switch (sig) {
  case SIGABRT:
    return "SIGABRT";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGBUS:
    return "SIGBUS";
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  }
  return "a signal";
}

void onFatalSignal(int sig) {
  say("planrt: error: rank ");
  sayNumber(gRank);
  say(": stopped by ");
  say(signalName(sig));
  bool any = false;
  for (int r = 0; r < gWorld; ++r)
    if (r != gRank && local(r) && gone(gPids[r])) {
      say(any ? ", rank " : "; rank ");
      sayNumber(r);
      say(" (pid ");
      sayNumber(long(gPids[r]));
      say(" on ");
      say(gHosts[r]);
      say(") has died");
      any = true;
    }
  say(any ? "\n" : "; a peer rank died or the job was cancelled\n");
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

uint64_t pidSpace() {
  uint64_t h = 1469598103934665603ull; // FNV-1a over the boot id, then the namespace inode
  char boot[64] = {0};
  int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY);
  if (fd >= 0) {
    (void)!::read(fd, boot, sizeof boot - 1);
    ::close(fd);
  }
  for (const char *c = boot; *c; ++c)
    h = (h ^ uint64_t(uint8_t(*c))) * 1099511628211ull;
  struct stat st;
  if (::stat("/proc/self/ns/pid", &st) == 0)
    h = (h ^ uint64_t(st.st_ino)) * 1099511628211ull;
  return h;
}

void rollCall(int rank, int world) {
  if (world > kMaxRanks)
    return;
  gRank = rank;
  gWorld = world;
  pid_t me = ::getpid();
  char host[64] = {0};
  ::gethostname(host, sizeof host - 1);
  uint64_t space = pidSpace();
  MPI_Allgather(&space, 8, MPI_BYTE, gSpaces, 8, MPI_BYTE, MPI_COMM_WORLD);
  MPI_Allgather(&me, sizeof(pid_t), MPI_BYTE, gPids, sizeof(pid_t), MPI_BYTE, MPI_COMM_WORLD);
  MPI_Allgather(host, 64, MPI_CHAR, gHosts, 64, MPI_CHAR, MPI_COMM_WORLD);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGTERM, SIGINT})
    std::signal(sig, onFatalSignal);
}

bool validMask(const planrt_mesh *m, unsigned mask) { return m && mask && (mask >> m->sizes.size()) == 0; }
/// Counts go to MPI 4's large-count calls (MPI_Count): any buffer the process can hold.
bool validCount(int64_t count, int64_t per = 1) {
  return count >= 0 && per >= 1 && count <= (int64_t(1) << 60) / per;
}
} // namespace

namespace {
std::atomic<const planrt_collectives *> gCollectives{nullptr};

/// Whether the installed device collectives did the transfer (`member` of the table,
/// called with the group's communicator first): false without a table or member, or
/// when it declines, and MPI does it.
template <class Member, class... Args> bool onDevice(Member member, MPI_Comm comm, Args... args) {
  const planrt_collectives *c = gCollectives.load();
  return c && c->*member && (c->*member)(&comm, args...) == 0;
}
} // namespace

extern "C" {

planrt_status planrt_mesh_init(int *argc, char ***argv, const int64_t *sizes, int axes, planrt_mesh **out) {
  if (!out || axes < 1 || axes > 16 || !sizes)
    return fail(PLANRT_ERR_ARG, "planrt_mesh_init: bad argument");
  auto m = std::make_unique<planrt_mesh>();
  int64_t product = 1;
  for (int a = 0; a < axes; ++a) {
    if (sizes[a] < 1 || __builtin_mul_overflow(product, sizes[a], &product) || product > INT32_MAX)
      return fail(PLANRT_ERR_ARG, "mesh axis %d has size %lld", a, (long long)sizes[a]);
    m->sizes.push_back(sizes[a]);
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // The watchdog thread may call MPI_Abort while the main thread waits in a collective.
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    m->ownsMpi = true;
  }
  // Failures come back as codes (named in planrt_last_error), not as aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->world);
  planrt_set_rank(m->rank);
  if (product != m->world) {
    planrt_status s =
        fail(PLANRT_ERR_ARG, "the mesh has %lld devices but %d processes were launched; run with mpirun -n %lld",
             (long long)product, m->world, (long long)product);
    if (m->ownsMpi)
      MPI_Finalize();
    return s;
  }
  rollCall(m->rank, m->world);
  // Row-major: the last axis varies fastest.
  m->coords.assign(size_t(axes), 0);
  int64_t r = m->rank;
  for (int a = axes - 1; a >= 0; --a) {
    m->coords[size_t(a)] = r % sizes[a];
    r /= sizes[a];
  }
  // Communicators are made by a collective call on every rank, so they are all made
  // here, in the same order everywhere: every group of axes (up to 6 axes: 63 groups).
  unsigned groups = axes <= 6 ? (1u << axes) - 1 : 0;
  for (unsigned mask = 1; mask <= groups; ++mask)
    m->comm(mask);
  for (int a = 0; groups == 0 && a < axes; ++a)
    m->comm(1u << a);
  *out = m.release();
  return PLANRT_OK;
}

int planrt_mesh_rank(const planrt_mesh *mesh) { return mesh ? mesh->rank : -1; }

void planrt_set_collectives(const planrt_collectives *collectives) { gCollectives.store(collectives); }

int64_t planrt_mesh_coord(const planrt_mesh *mesh, int axis) {
  return mesh && axis >= 0 && size_t(axis) < mesh->coords.size() ? mesh->coords[size_t(axis)] : -1;
}

planrt_status planrt_all_reduce(planrt_mesh *mesh, unsigned mask, float *buf, int64_t count, planrt_reduce_op op) {
  if (!validMask(mesh, mask) || (count && !buf) || !validCount(count) || (op == PLANRT_SUM_U64 && count % 2))
    return fail(PLANRT_ERR_ARG, "planrt_all_reduce: bad argument");
  mesh->count(PLANRT_ALL_REDUCE, mask, uint64_t(count) * 4);
  if (op == PLANRT_SUM_U64) { // integers wrap modulo 2^64: exact in any order
    if (gCollectives.load())
      return fail(PLANRT_ERR_ARG, "planrt_all_reduce: 64-bit integer sums run over MPI only, not a device backend");
    planrt::emu::Work device("all_reduce (MPI, 64-bit integers)", planrt::emu::Then::Wait);
    return mesh->check(MPI_Allreduce_c(MPI_IN_PLACE, buf, MPI_Count(count / 2), MPI_UINT64_T, MPI_SUM, mesh->comm(mask)),
                       "all_reduce (64-bit integers)");
  }
  if (onDevice(&planrt_collectives::all_reduce, mesh->comm(mask), buf, count, int(op == PLANRT_MAX)))
    return PLANRT_OK;
  planrt::emu::Work device("all_reduce (MPI)", planrt::emu::Then::Wait);
  return mesh->check(
      MPI_Allreduce_c(MPI_IN_PLACE, buf, MPI_Count(count), MPI_FLOAT, op == PLANRT_MAX ? MPI_MAX : MPI_SUM, mesh->comm(mask)),
      "all_reduce");
}

// startedAtOnce: on cuda-host's emulated device, a non-blocking collective (the CUDA
// target's NCCL on a stream of its own) is done in its start, by MPI's blocking call, and
// waited for (for the audit) at planrt_wait. MPI's non-blocking transfer would go on
// while the host runs code that may not touch device memory — another rank reads this
// one's buffers through CMA (process_vm_readv) whenever it progresses — and a device's
// collective needs no host to progress. Every rank starts them in the same order.
struct planrt_request {
  planrt_mesh *mesh = nullptr;
  MPI_Request mpi = MPI_REQUEST_NULL;
  const planrt_collectives *device = nullptr; ///< the table whose member started it, or null (MPI)
  void *handle = nullptr;
  bool done = false;
  std::vector<MPI_Count> counts; ///< MPI_Iallgatherv_c's, alive until it completes
  std::vector<MPI_Aint> displs;
  const char *what = "all_reduce (non-blocking)";
  int flight = -1; ///< its buffers in flight on cuda-host's emulated device (planrt::emu::inFlight)

  ~planrt_request() { planrt::emu::landed(flight); } // waited for, or failed to start
};

planrt_status planrt_all_reduce_start(planrt_mesh *mesh, unsigned mask, float *buf, int64_t count, planrt_reduce_op op,
                                      planrt_request **out) {
  if (!out || !validMask(mesh, mask) || (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_all_reduce_start: bad argument");
  mesh->count(PLANRT_ALL_REDUCE, mask, uint64_t(count) * 4);
  auto r = std::make_unique<planrt_request>();
  r->mesh = mesh;
  MPI_Comm comm = mesh->comm(mask);
  const planrt_collectives *c = gCollectives.load();
  if (c && c->all_reduce_start && c->wait &&
      c->all_reduce_start(&comm, buf, count, int(op == PLANRT_MAX), &r->handle) == 0) {
    r->device = c;
  } else if (planrt::emu::active()) { // see startedAtOnce
    planrt::emu::Work device("all_reduce start (MPI)", planrt::emu::Then::Aside);
    r->done = true;
    r->flight = planrt::emu::inFlight(buf, size_t(count) * 4, nullptr, 0);
    if (planrt_status s = mesh->check(MPI_Allreduce_c(MPI_IN_PLACE, buf, MPI_Count(count), MPI_FLOAT,
                                                      op == PLANRT_MAX ? MPI_MAX : MPI_SUM, comm),
                                      "all_reduce (non-blocking)"))
      return s;
  } else if (planrt_status s = mesh->check(MPI_Iallreduce_c(MPI_IN_PLACE, buf, MPI_Count(count), MPI_FLOAT,
                                                          op == PLANRT_MAX ? MPI_MAX : MPI_SUM, comm, &r->mpi),
                                           "all_reduce (non-blocking)")) {
    return s;
  }
  *out = r.release();
  return PLANRT_OK;
}

int planrt_test(planrt_request *r) {
  if (!r || r->done)
    return 1;
  if (r->device)
    return r->device->test && r->device->test(r->handle);
  int flag = 0;
  if (MPI_Test(&r->mpi, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    return 1; // planrt_wait reports it
  r->done = flag != 0;
  return flag;
}

planrt_status planrt_wait(planrt_request *request) {
  std::unique_ptr<planrt_request> r(request);
  if (!r)
    return fail(PLANRT_ERR_ARG, "planrt_wait: no request");
  if (r->device) {
    r->device->wait(r->handle);
    return PLANRT_OK;
  }
  planrt::emu::Work device("wait (MPI)", planrt::emu::Then::Wait); // the host waits, done or not
  if (r->done)
    return PLANRT_OK;
  return r->mesh->check(MPI_Wait(&r->mpi, MPI_STATUS_IGNORE), r->what);
}

} // extern "C"

namespace {
/// Rank k's part of the slice [begin, begin + size) of n blocks of `count` floats: its
/// block [k·count, (k+1)·count) cut to the slice, as MPI's counts and displacements
/// (from begin).
void slicePartsOf(int64_t n, int64_t count, int64_t begin, int64_t size, planrt_request &r) {
  for (int64_t k = 0; k < n; ++k) {
    int64_t lo = std::max(begin, k * count), hi = std::min(begin + size, (k + 1) * count);
    r.counts.push_back(MPI_Count(std::max<int64_t>(0, hi - lo)));
    r.displs.push_back(MPI_Aint(std::max<int64_t>(0, lo - begin)));
  }
}

/// The checks and bookkeeping of a slice start: the request, or null after recording why.
/// A device member `start` that accepts leaves it to the device; else *mpi is to be set.
template <class Start>
std::unique_ptr<planrt_request> startSlice(planrt_mesh *mesh, unsigned mask, planrt_collective kind, const char *what,
                                           Start planrt_collectives::*start, const float *send, int64_t count,
                                           float *recv, int64_t begin, int64_t size) {
  int64_t n = validMask(mesh, mask) ? mesh->groupSize(mask) : 0;
  if (!n || !validCount(count, n) || begin < 0 || size < 0 || begin + size > count * n || (size && (!send || !recv))) {
    fail(PLANRT_ERR_ARG, "planrt_%s_start: bad argument", what);
    return nullptr;
  }
  mesh->countSlice(kind, mask, begin, size);
  auto r = std::make_unique<planrt_request>();
  r->mesh = mesh;
  r->what = kind == PLANRT_ALL_GATHER ? "all_gather (non-blocking)" : "reduce_scatter (non-blocking)";
  MPI_Comm comm = mesh->comm(mask);
  const planrt_collectives *c = gCollectives.load();
  if (c && c->*start && c->wait && (c->*start)(&comm, send, count, recv, begin, size, &r->handle) == 0)
    r->device = c;
  else
    slicePartsOf(n, count, begin, size, *r);
  return r;
}
} // namespace

extern "C" {

planrt_status planrt_all_gather_start(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv,
                                      int64_t begin, int64_t size, planrt_request **out) {
  if (!out)
    return fail(PLANRT_ERR_ARG, "planrt_all_gather_start: bad argument");
  std::unique_ptr<planrt_request> r = startSlice(mesh, mask, PLANRT_ALL_GATHER, "all_gather",
                                                 &planrt_collectives::all_gather_start, send, count, recv, begin, size);
  if (!r)
    return PLANRT_ERR_ARG;
  if (!r->device) {
    int64_t me = planrt_mesh_group_rank(mesh, mask);
    const float *part = r->counts[size_t(me)] ? send + (std::max(begin, me * count) - me * count) : send;
    // A send buffer that is this rank's block of recv is gathered in place: its part of
    // the slice is already where it would be received.
    const void *from = send == recv + me * count ? MPI_IN_PLACE : part;
    planrt::emu::Work device("all_gather start (MPI)", planrt::emu::Then::Aside);
    r->done = planrt::emu::active(); // see startedAtOnce
    r->flight = planrt::emu::inFlight(part, size_t(r->counts[size_t(me)]) * 4, recv + begin, size_t(size) * 4);
    if (planrt_status s = mesh->check(
            r->done ? MPI_Allgatherv_c(from, r->counts[size_t(me)], MPI_FLOAT, recv + begin, r->counts.data(),
                                       r->displs.data(), MPI_FLOAT, mesh->comm(mask))
                    : MPI_Iallgatherv_c(from, r->counts[size_t(me)], MPI_FLOAT, recv + begin, r->counts.data(),
                                        r->displs.data(), MPI_FLOAT, mesh->comm(mask), &r->mpi),
            r->what))
      return s;
  }
  *out = r.release();
  return PLANRT_OK;
}

planrt_status planrt_reduce_scatter_start(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count,
                                          float *recv, int64_t begin, int64_t size, planrt_request **out) {
  if (!out)
    return fail(PLANRT_ERR_ARG, "planrt_reduce_scatter_start: bad argument");
  std::unique_ptr<planrt_request> r =
      startSlice(mesh, mask, PLANRT_REDUCE_SCATTER, "reduce_scatter", &planrt_collectives::reduce_scatter_start, send,
                 count, recv, begin, size);
  if (!r)
    return PLANRT_ERR_ARG;
  if (!r->device) {
    int64_t me = planrt_mesh_group_rank(mesh, mask);
    float *part = r->counts[size_t(me)] ? recv + (std::max(begin, me * count) - me * count) : recv;
    planrt::emu::Work device("reduce_scatter start (MPI)", planrt::emu::Then::Aside);
    r->done = planrt::emu::active(); // see startedAtOnce
    r->flight = planrt::emu::inFlight(send + begin, size_t(size) * 4, part, size_t(r->counts[size_t(me)]) * 4);
    if (planrt_status s = mesh->check(
            r->done ? MPI_Reduce_scatter_c(send + begin, part, r->counts.data(), MPI_FLOAT, MPI_SUM, mesh->comm(mask))
                    : MPI_Ireduce_scatter_c(send + begin, part, r->counts.data(), MPI_FLOAT, MPI_SUM,
                                            mesh->comm(mask), &r->mpi),
            r->what))
      return s;
  }
  *out = r.release();
  return PLANRT_OK;
}

planrt_status planrt_all_gather(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv) {
  if (!validMask(mesh, mask) || (count && (!send || !recv)) || !validCount(count, mesh->groupSize(mask)))
    return fail(PLANRT_ERR_ARG, "planrt_all_gather: bad argument");
  mesh->count(PLANRT_ALL_GATHER, mask, uint64_t(count) * 4 * uint64_t(mesh->groupSize(mask)));
  if (onDevice(&planrt_collectives::all_gather, mesh->comm(mask), send, count, recv))
    return PLANRT_OK;
  // A send buffer that is this rank's block of recv is gathered in place.
  const void *from = send == recv + planrt_mesh_group_rank(mesh, mask) * count ? MPI_IN_PLACE : send;
  planrt::emu::Work device("all_gather (MPI)", planrt::emu::Then::Wait);
  return mesh->check(MPI_Allgather_c(from, MPI_Count(count), MPI_FLOAT, recv, MPI_Count(count), MPI_FLOAT, mesh->comm(mask)),
                     "all_gather");
}

planrt_status planrt_reduce_scatter(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv) {
  if (!validMask(mesh, mask) || (count && (!send || !recv)) || !validCount(count, mesh->groupSize(mask)))
    return fail(PLANRT_ERR_ARG, "planrt_reduce_scatter: bad argument");
  mesh->count(PLANRT_REDUCE_SCATTER, mask, uint64_t(count) * 4 * uint64_t(mesh->groupSize(mask)));
  if (onDevice(&planrt_collectives::reduce_scatter, mesh->comm(mask), send, count, recv))
    return PLANRT_OK;
  planrt::emu::Work device("reduce_scatter (MPI)", planrt::emu::Then::Wait);
  return mesh->check(MPI_Reduce_scatter_block_c(send, recv, MPI_Count(count), MPI_FLOAT, MPI_SUM, mesh->comm(mask)),
                     "reduce_scatter");
}

planrt_status planrt_send(planrt_mesh *mesh, int axis, int64_t peer, const float *buf, int64_t count) {
  if (!mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || peer < 0 || peer >= mesh->sizes[size_t(axis)] ||
      (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_send: bad argument");
  mesh->count(PLANRT_SEND, 1u << axis, uint64_t(count) * 4);
  if (onDevice(&planrt_collectives::send, mesh->comm(1u << axis), peer, buf, count))
    return PLANRT_OK;
  planrt::emu::Work device("send (MPI)", planrt::emu::Then::Wait);
  return mesh->check(MPI_Send_c(buf, MPI_Count(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis)), "send");
}

planrt_status planrt_send_start(planrt_mesh *mesh, int axis, int64_t peer, const float *buf, int64_t count,
                                planrt_request **out) {
  if (!out || !mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || peer < 0 ||
      peer >= mesh->sizes[size_t(axis)] || (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_send_start: bad argument");
  auto r = std::make_unique<planrt_request>();
  r->mesh = mesh;
  r->what = "send (non-blocking)";
  mesh->count(PLANRT_SEND, 1u << axis, uint64_t(count) * 4);
  if (onDevice(&planrt_collectives::send, mesh->comm(1u << axis), peer, buf, count)) {
    r->done = true;
  } else {
    planrt::emu::Work device("send start (MPI)", planrt::emu::Then::Aside);
    r->done = planrt::emu::active(); // see startedAtOnce
    if (planrt_status s = mesh->check(
            r->done ? MPI_Send_c(buf, MPI_Count(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis))
                    : MPI_Isend_c(buf, MPI_Count(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis), &r->mpi),
            r->what))
      return s;
  }
  *out = r.release();
  return PLANRT_OK;
}

planrt_status planrt_recv(planrt_mesh *mesh, int axis, int64_t peer, float *buf, int64_t count) {
  if (!mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || peer < 0 || peer >= mesh->sizes[size_t(axis)] ||
      (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_recv: bad argument");
  if (onDevice(&planrt_collectives::recv, mesh->comm(1u << axis), peer, buf, count))
    return PLANRT_OK;
  planrt::emu::Work device("recv (MPI)", planrt::emu::Then::Wait);
  return mesh->check(MPI_Recv_c(buf, MPI_Count(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis), MPI_STATUS_IGNORE),
                     "recv");
}

planrt_status planrt_sendrecv(planrt_mesh *mesh, int axis, int64_t to, const float *send, int64_t count, int64_t from,
                              float *recv, int64_t recv_count) {
  if (!mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || to < 0 || to >= mesh->sizes[size_t(axis)] ||
      from < 0 || from >= mesh->sizes[size_t(axis)] || (count && !send) || (recv_count && !recv) ||
      !validCount(count) || !validCount(recv_count))
    return fail(PLANRT_ERR_ARG, "planrt_sendrecv: bad argument");
  mesh->count(PLANRT_SEND, 1u << axis, uint64_t(count) * 4);
  if (onDevice(&planrt_collectives::sendrecv, mesh->comm(1u << axis), to, send, count, from, recv, recv_count))
    return PLANRT_OK;
  planrt::emu::Work device("sendrecv (MPI)", planrt::emu::Then::Wait);
  return mesh->check(MPI_Sendrecv_c(send, MPI_Count(count), MPI_FLOAT, int(to), 0, recv, MPI_Count(recv_count), MPI_FLOAT, int(from),
                                  0, mesh->comm(1u << axis), MPI_STATUS_IGNORE),
                     "sendrecv");
}

int64_t planrt_mesh_group_rank(const planrt_mesh *mesh, unsigned mask) {
  if (!mesh)
    return 0;
  int64_t key = 0;
  for (size_t a = 0; a < mesh->sizes.size(); ++a)
    if (mask & (1u << a))
      key = key * mesh->sizes[a] + mesh->coords[a];
  return key;
}

int64_t planrt_mesh_group_size(const planrt_mesh *mesh, unsigned mask) { return mesh ? mesh->groupSize(mask) : 1; }

planrt_status planrt_mesh_agree(planrt_mesh *mesh, float *flag) {
  if (!mesh)
    return PLANRT_OK;
  return mesh->check(MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), "barrier");
}

int planrt_mesh_lost_peer(const planrt_mesh *mesh, char *buf, size_t size) {
  if (!buf || !size)
    return 0;
  buf[0] = 0;
  if (planrt_mesh_stopped_peer(mesh, buf, size) >= 0 || planrt_mesh_dead_peer(mesh, buf, size) >= 0)
    return 1;
  char remote[400];
  if (planrt_mesh_remote_peers(mesh, remote, sizeof remote) <= 0)
    return 0;
  std::snprintf(buf, size, "no peer on this host died; a host of the job died or lost its link, or a rank there hung (%s)",
                remote);
  return 1;
}

void planrt_mesh_abort(planrt_mesh *mesh, int code) {
  (void)mesh;
  // Every caller has just written its reason to stderr. MPICH's launcher kills the job as
  // soon as one rank aborts and drops what the ranks wrote but it had not yet forwarded
  // (seen: one run in six lost the watchdog's message). Give it a moment to forward it.
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  MPI_Abort(MPI_COMM_WORLD, code);
}

void planrt_mesh_describe(const planrt_mesh *mesh, char *buf, size_t size) {
  if (!buf || !size)
    return;
  buf[0] = 0;
  size_t at = 0;
  for (int r = 0; mesh && r < gWorld && at + 1 < size; ++r) {
    int n = std::snprintf(buf + at, size - at, "%srank %d = pid %d on %s", r ? ", " : "", r, int(gPids[r]), gHosts[r]);
    if (n < 0)
      break;
    at += size_t(n);
  }
}

int planrt_mesh_host(const planrt_mesh *mesh, int rank, char *name, size_t size) {
  if (!mesh || gRank < 0 || rank < 0 || rank >= gWorld)
    return -1;
  // Each rank's host index, numbered in the order of the hosts' first ranks: made once.
  static std::vector<int> index;
  if (index.size() != size_t(gWorld)) {
    std::map<std::pair<std::string, uint64_t>, int> seen;
    index.clear();
    for (int r = 0; r < gWorld; ++r)
      index.push_back(seen.emplace(std::make_pair(std::string(gHosts[r]), gSpaces[r]), int(seen.size())).first->second);
  }
  if (name && size)
    std::snprintf(name, size, "%s", gHosts[rank]);
  return index[size_t(rank)];
}

int planrt_mesh_remote_peers(const planrt_mesh *mesh, char *buf, size_t size) {
  if (!mesh || gRank < 0 || !buf || !size)
    return 0;
  buf[0] = 0;
  size_t at = 0;
  int hosts = 0;
  char me[64], name[64];
  int mine = planrt_mesh_host(mesh, gRank, me, sizeof me);
  for (int h = 0;; ++h) { // each other host, in order, with its ranks
    bool any = false, seen = false;
    for (int r = 0; r < gWorld && at + 1 < size; ++r) {
      int hr = planrt_mesh_host(mesh, r, name, sizeof name);
      seen |= hr == h;
      if (hr != h || h == mine)
        continue;
      int n = any ? std::snprintf(buf + at, size - at, ", %d", r)
                  : std::snprintf(buf + at, size - at, "%s%s: rank %d", hosts ? "; " : "", name, r);
      if (n < 0)
        break;
      at = std::min(size - 1, at + size_t(n));
      any = true;
    }
    hosts += any;
    if (!seen)
      return hosts;
  }
}

int planrt_mesh_dead_peer(const planrt_mesh *mesh, char *buf, size_t size) {
  if (!mesh || gRank < 0)
    return -1;
  for (int r = 0; r < gWorld; ++r)
    if (r != gRank && local(r) && gone(gPids[r])) {
      if (buf && size)
        std::snprintf(buf, size, "rank %d (pid %d on %s) has died", r, int(gPids[r]), gHosts[r]);
      return r;
    }
  return -1;
}

int planrt_mesh_stopped_peer(const planrt_mesh *mesh, char *buf, size_t size) {
  if (!mesh || gRank < 0)
    return -1;
  for (int r = 0; r < gWorld; ++r)
    if (r != gRank && local(r) && processState(gPids[r]) == 'T') {
      if (buf && size)
        std::snprintf(buf, size, "rank %d (pid %d on %s) is stopped", r, int(gPids[r]), gHosts[r]);
      return r;
    }
  return -1;
}

uint64_t planrt_comm_bytes_total(const planrt_mesh *mesh, planrt_collective kind) {
  uint64_t total = 0;
  if (mesh)
    for (auto &[key, bytes] : mesh->bytes)
      if (key.first == int(kind))
        total += bytes;
  return total;
}

uint64_t planrt_comm_bytes(const planrt_mesh *mesh, planrt_collective kind, unsigned mask) {
  if (!mesh)
    return 0;
  auto it = mesh->bytes.find({int(kind), mask});
  return it == mesh->bytes.end() ? 0 : it->second;
}

void planrt_mesh_finalize(planrt_mesh *mesh) {
  if (!mesh)
    return;
  for (auto &[mask, c] : mesh->comms)
    MPI_Comm_free(&c);
  bool owns = mesh->ownsMpi;
  delete mesh;
  if (owns)
    MPI_Finalize();
}

} // extern "C"
