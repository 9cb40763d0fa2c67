// The runtime's collectives on device memory through NCCL (planrt_set_collectives):
// one NCCL communicator per MPI communicator of the mesh (an axis group), made on its
// first collective — rank 0 of the group draws the unique id and MPI broadcasts it —
// so every rank of the group makes it at the same call. A group whose ranks share a GPU
// (NCCL needs one per rank: several processes on one GPU, as on a one-GPU machine) and
// a buffer in host memory (a loss summed on the host) decline, and MPI moves them; each
// such fallback is said on stderr, once per collective.
#include "device.h"

#include "planrt.h"

#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using planrt::cuda::check;

void checkNccl(ncclResult_t r, const char *what) {
  if (r == ncclSuccess)
    return;
  std::string detail = std::string(what) + ": " + ncclGetErrorString(r);
  check(cudaErrorUnknown, detail.c_str());
}

struct Group {
  bool nccl = false;
  ncclComm_t comm = nullptr;
};
std::map<MPI_Comm, Group> groups;

/// The NCCL side of an MPI communicator, made on first use (a collective over it).
Group &groupOf(const void *mpiComm) {
  MPI_Comm comm = *static_cast<const MPI_Comm *>(mpiComm);
  auto it = groups.find(comm);
  if (it != groups.end())
    return it->second;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  struct Where {
    char host[64];
    int device;
  } me{};
  gethostname(me.host, sizeof me.host - 1);
  check(cudaGetDevice(&me.device), "cudaGetDevice");
  std::vector<Where> all(static_cast<size_t>(size));
  MPI_Allgather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, comm);
  bool distinct = size > 1;
  for (int i = 0; i < size && distinct; ++i)
    for (int j = i + 1; j < size; ++j)
      if (all[size_t(i)].device == all[size_t(j)].device && std::strcmp(all[size_t(i)].host, all[size_t(j)].host) == 0)
        distinct = false;
  Group g;
  if (distinct) {
    ncclUniqueId id;
    if (rank == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    checkNccl(ncclCommInitRank(&g.comm, size, id, rank), "ncclCommInitRank");
    g.nccl = true;
  } else if (rank == 0 && size > 1) {
    std::fprintf(stderr,
                 "planrt: note: a group of %d ranks shares a GPU, which NCCL cannot do: its collectives go "
                 "through MPI on managed memory\n",
                 size);
  }
  return groups.emplace(comm, g).first->second;
}

/// Whether the device can read p: managed or device memory (not the host's stack or heap).
bool onDevice(const void *p) {
  if (!p)
    return true;
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeManaged || a.type == cudaMemoryTypeDevice;
}

/// The group's NCCL communicator when every buffer is on the device, else null (MPI).
/// A buffer in host memory sends `what` through MPI: said once per collective on stderr,
/// since it is a slow path (a sum the runtime keeps on the host, for one).
ncclComm_t usable(const void *mpiComm, std::initializer_list<const void *> buffers, const char *what) {
  for (const void *b : buffers)
    if (!onDevice(b)) {
      static std::set<std::string> said;
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (said.insert(what).second)
        std::fprintf(stderr,
                     "planrt: note: rank %d: %s of a buffer in host memory (%p) goes through MPI, not NCCL\n", rank,
                     what, b);
      return nullptr;
    }
  Group &g = groupOf(mpiComm);
  return g.nccl ? g.comm : nullptr;
}

int allReduce(const void *mpiComm, float *buf, int64_t count, int max) {
  ncclComm_t c = usable(mpiComm, {buf}, "all-reduce");
  if (!c)
    return 1;
  checkNccl(ncclAllReduce(buf, buf, size_t(count), ncclFloat, max ? ncclMax : ncclSum, c, planrt::cuda::stream()),
            "ncclAllReduce");
  planrt::cuda::finishAndWait("ncclAllReduce");
  return 0;
}

int allGather(const void *mpiComm, const float *send, int64_t count, float *recv) {
  ncclComm_t c = usable(mpiComm, {send, recv}, "all-gather");
  if (!c)
    return 1;
  checkNccl(ncclAllGather(send, recv, size_t(count), ncclFloat, c, planrt::cuda::stream()), "ncclAllGather");
  planrt::cuda::finishAndWait("ncclAllGather");
  return 0;
}

int reduceScatter(const void *mpiComm, const float *send, int64_t count, float *recv) {
  ncclComm_t c = usable(mpiComm, {send, recv}, "reduce-scatter");
  if (!c)
    return 1;
  checkNccl(ncclReduceScatter(send, recv, size_t(count), ncclFloat, ncclSum, c, planrt::cuda::stream()),
            "ncclReduceScatter");
  planrt::cuda::finishAndWait("ncclReduceScatter");
  return 0;
}

int sendTo(const void *mpiComm, int64_t peer, const float *buf, int64_t count) {
  ncclComm_t c = usable(mpiComm, {buf}, "send");
  if (!c)
    return 1;
  checkNccl(ncclSend(buf, size_t(count), ncclFloat, int(peer), c, planrt::cuda::stream()), "ncclSend");
  planrt::cuda::finishAndWait("ncclSend");
  return 0;
}

int recvFrom(const void *mpiComm, int64_t peer, float *buf, int64_t count) {
  ncclComm_t c = usable(mpiComm, {buf}, "receive");
  if (!c)
    return 1;
  checkNccl(ncclRecv(buf, size_t(count), ncclFloat, int(peer), c, planrt::cuda::stream()), "ncclRecv");
  planrt::cuda::finishAndWait("ncclRecv");
  return 0;
}

int sendRecv(const void *mpiComm, int64_t to, const float *send, int64_t count, int64_t from, float *recv,
             int64_t recvCount) {
  ncclComm_t c = usable(mpiComm, {send, recv}, "send-receive");
  if (!c)
    return 1;
  // Both halves in one group: NCCL runs them together, as MPI_Sendrecv.
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  checkNccl(ncclSend(send, size_t(count), ncclFloat, int(to), c, planrt::cuda::stream()), "ncclSend");
  checkNccl(ncclRecv(recv, size_t(recvCount), ncclFloat, int(from), c, planrt::cuda::stream()), "ncclRecv");
  checkNccl(ncclGroupEnd(), "ncclGroupEnd");
  planrt::cuda::finishAndWait("ncclSend/ncclRecv");
  return 0;
}

/// The stream the non-blocking collectives (DDP buckets) run on, beside the compute
/// stream, so that a bucket's all-reduce overlaps the kernels of the backward pass.
cudaStream_t commStream() {
  static cudaStream_t s = [] {
    cudaStream_t made = nullptr;
    check(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (communication)");
    return made;
  }();
  return s;
}

/// The host goes on (the step's host code, MPI) while NCCL works on managed memory
/// from the communication stream: only a device that allows concurrent managed access
/// can; on others the non-blocking collectives decline and MPI does them.
bool concurrentManagedAccess() {
  static const bool concurrent = [] {
    int device = 0, value = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&value, cudaDevAttrConcurrentManagedAccess, device),
          "cudaDeviceGetAttribute (concurrent managed access)");
    return value != 0;
  }();
  return concurrent;
}

/// Queues `work` (NCCL calls on the stream it is given) on the communication stream
/// behind everything queued on the compute stream so far (an event it waits for);
/// returns the event recorded after it, the request's handle.
template <class Work> void *afterCompute(Work work) {
  cudaEvent_t ready = nullptr, done = nullptr;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(ready, planrt::cuda::stream()), "cudaEventRecord (compute so far)");
  check(cudaStreamWaitEvent(commStream(), ready, 0), "cudaStreamWaitEvent (communication waits for compute)");
  work(commStream());
  check(cudaEventRecord(done, commStream()), "cudaEventRecord (bucket done)");
  check(cudaEventDestroy(ready), "cudaEventDestroy");
  return done;
}

/// A DDP bucket's all-reduce on the communication stream.
int allReduceStart(const void *mpiComm, float *buf, int64_t count, int max, void **handle) {
  ncclComm_t c = concurrentManagedAccess() ? usable(mpiComm, {buf}, "all-reduce (bucket)") : nullptr;
  if (!c)
    return 1;
  *handle = afterCompute([&](cudaStream_t s) {
    checkNccl(ncclAllReduce(buf, buf, size_t(count), ncclFloat, max ? ncclMax : ncclSum, c, s),
              "ncclAllReduce (bucket)");
  });
  return 0;
}

/// A bucket's slice [begin, begin + size) of a collective over n blocks of `count`
/// floats (NCCL has none of unequal parts): one rooted NCCL call per rank k whose block
/// has a part [lo, hi) in the slice, `part(k, me, lo, hi, comm, stream)`, in one NCCL
/// group on the communication stream.
template <class Part>
int perRootSlice(const void *mpiComm, const float *send, float *recv, int64_t count, int64_t begin, int64_t size,
                 void **handle, Part part) {
  ncclComm_t c = concurrentManagedAccess() ? usable(mpiComm, {send, recv}, "bucket collective") : nullptr;
  if (!c)
    return 1;
  int me = 0, n = 0;
  checkNccl(ncclCommUserRank(c, &me), "ncclCommUserRank");
  checkNccl(ncclCommCount(c, &n), "ncclCommCount");
  *handle = afterCompute([&](cudaStream_t s) {
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    for (int64_t k = 0; k < n; ++k) {
      int64_t lo = std::max(begin, k * count), hi = std::min(begin + size, (k + 1) * count);
      if (lo < hi)
        part(k, int64_t(me), lo, hi, c, s);
    }
    checkNccl(ncclGroupEnd(), "ncclGroupEnd");
  });
  return 0;
}

/// A ZeRO-3 parameter bucket, a slice of the all-gather of `count` floats per rank:
/// each rank with a part in it broadcasts that part.
int allGatherStart(const void *mpiComm, const float *send, int64_t count, float *recv, int64_t begin, int64_t size,
                   void **handle) {
  return perRootSlice(mpiComm, send, recv, count, begin, size, handle,
                      [&](int64_t k, int64_t me, int64_t lo, int64_t hi, ncclComm_t c, cudaStream_t s) {
                        const float *from = k == me ? send + (lo - k * count) : recv + lo;
                        checkNccl(ncclBroadcast(from, recv + lo, size_t(hi - lo), ncclFloat, int(k), c, s),
                                  "ncclBroadcast (parameter bucket)");
                      });
}

/// A ZeRO-1 gradient bucket, a slice of the reduce-scatter of n blocks of `count` floats:
/// each rank whose block has a part in it receives that part's sum (one NCCL reduce; the
/// receive buffer, the part's place in the rank's block, is used on the root only).
int reduceScatterStart(const void *mpiComm, const float *send, int64_t count, float *recv, int64_t begin, int64_t size,
                       void **handle) {
  return perRootSlice(mpiComm, send, recv, count, begin, size, handle,
                      [&](int64_t k, int64_t me, int64_t lo, int64_t hi, ncclComm_t c, cudaStream_t s) {
                        float *to = k == me ? recv + (lo - k * count) : recv;
                        checkNccl(ncclReduce(send + lo, to, size_t(hi - lo), ncclFloat, ncclSum, int(k), c, s),
                                  "ncclReduce (gradient bucket)");
                      });
}

/// The compute stream waits for the bucket's collective, and so does the host (which
/// may read the range next: the runtime's calls here wait for their work).
void waitFor(void *handle) {
  auto done = static_cast<cudaEvent_t>(handle);
  check(cudaStreamWaitEvent(planrt::cuda::stream(), done, 0), "cudaStreamWaitEvent (compute waits for a bucket)");
  check(cudaEventSynchronize(done), "NCCL bucket collective");
  planrt::cuda::countWait(); // host_syncs counts it, as cuda-host's emulated device does
  check(cudaEventDestroy(done), "cudaEventDestroy");
}

int isDone(void *handle) {
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle));
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return 0;
  }
  check(e, "NCCL bucket collective");
  return 1;
}

const planrt_collectives kNccl = {"nccl",  allReduce, allGather,      reduceScatter,
                                  sendTo,  recvFrom,  sendRecv,       allReduceStart,
                                  waitFor, isDone,    allGatherStart, reduceScatterStart};

} // namespace

namespace planrt::cuda {
void installCollectives() { planrt_set_collectives(&kNccl); }
} // namespace planrt::cuda
