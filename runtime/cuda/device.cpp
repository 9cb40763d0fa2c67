// libplanrt_cuda's host side: starting the device, managed memory as the runtime's
// backend, error reporting, and the gpu-to-llvm launch ABI (mgpu*) on libcudart's
// library API (cudaLibraryLoadData, cudaLibraryGetKernel, cudaLaunchKernel), which
// needs no libcuda at link time: without a driver the executable starts and
// planrt_cuda_start says what is missing.
#include "device.h"

#include "planrt.h"
#include "planrt_cuda.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace planrt::cuda {
namespace {

int rankOf(const char *const *names) {
  for (const char *const *n = names; *n; ++n)
    if (const char *v = std::getenv(*n))
      return std::atoi(v);
  return 0;
}
/// The MPI rank before MPI starts (MPICH's hydra, Open MPI, Slurm), for messages.
int worldRank() {
  static const char *names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", nullptr};
  return rankOf(names);
}
/// The rank among the processes on this host: which GPU to take.
int localRank() {
  static const char *names[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", nullptr};
  return rankOf(names);
}

[[noreturn]] void die(const char *what, const char *detail) {
  std::fflush(stdout);
  std::fprintf(stderr, "planrt: error: rank %d: %s: %s\n", worldRank(), what, detail);
  std::fflush(stderr);
  std::exit(1);
}

cudaStream_t theStream = nullptr;
IndexError *theFlag = nullptr;

// Managed memory, with freed blocks kept by size: the generated code frees and
// allocates the same sizes every step, and cudaMallocManaged/cudaFree synchronise. A
// block freed while device work may still use it (launches are queued) is reused only
// after the next wait for the stream (pendingFree, then freeBlocks).
std::mutex poolMutex;
std::unordered_map<size_t, std::vector<void *>> freeBlocks;
std::vector<void *> pendingFree;
std::unordered_map<void *, size_t> blockSize;

/// PLANRT_CUDA_MEM_ADVISE=gpu: each managed block advised to live on the GPU
/// (cudaMemAdviseSetPreferredLocation): host accesses then map pages rather than
/// migrate them. A measurement knob for docs/CUDA.md; off by default.
bool adviseToGpu() {
  static bool on = [] {
    const char *v = std::getenv("PLANRT_CUDA_MEM_ADVISE");
    return v && std::strcmp(v, "gpu") == 0;
  }();
  return on;
}

void *managedAlloc(size_t bytes) {
  size_t size = (bytes + 255) / 256 * 256;
  if (size == 0)
    size = 256;
  std::lock_guard<std::mutex> lock(poolMutex);
  auto it = freeBlocks.find(size);
  if (it != freeBlocks.end() && !it->second.empty()) {
    void *p = it->second.back();
    it->second.pop_back();
    return p;
  }
  void *p = nullptr;
  if (cudaMallocManaged(&p, size, cudaMemAttachGlobal) != cudaSuccess) {
    // Out of memory: give the cached blocks of other sizes back (those freed since the
    // last wait too, once the device is done with them) and try once more.
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(theStream);
    for (void *q : pendingFree)
      freeBlocks[blockSize[q]].push_back(q);
    pendingFree.clear();
    for (auto &[bytes, blocks] : freeBlocks)
      for (void *q : blocks) {
        (void)cudaFree(q);
        blockSize.erase(q);
      }
    freeBlocks.clear();
    if (cudaMallocManaged(&p, size, cudaMemAttachGlobal) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
  }
  if (adviseToGpu()) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
#if CUDART_VERSION >= 13000
    cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
#else
    int gpu = device;
#endif
    check(cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, gpu), "cudaMemAdvise (PLANRT_CUDA_MEM_ADVISE=gpu)");
  }
  blockSize[p] = size;
  return p;
}

void managedFree(void *p) {
  if (!p)
    return;
  std::lock_guard<std::mutex> lock(poolMutex);
  if (blockSize.find(p) == blockSize.end())
    die("free", "a pointer libplanrt_cuda did not allocate");
  pendingFree.push_back(p);
}

/// The blocks freed before a wait for the stream, reusable now.
void releasePending() {
  std::lock_guard<std::mutex> lock(poolMutex);
  for (void *p : pendingFree)
    freeBlocks[blockSize[p]].push_back(p);
  pendingFree.clear();
}

size_t deviceFree() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Blocks the pool keeps are free to the executable too.
  std::lock_guard<std::mutex> lock(poolMutex);
  for (auto &[bytes, blocks] : freeBlocks)
    free += bytes * blocks.size();
  return free;
}

/// Page-locked host memory (the offloaded state's staging: copies at PCIe's speed).
void *pinnedAlloc(size_t bytes) {
  void *p = nullptr;
  if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void pinnedFree(void *p) {
  if (p)
    check(cudaFreeHost(p), "cudaFreeHost");
}

const planrt_backend kManaged = {"cuda",       managedAlloc,    managedFree, deviceFree,    deviceFill,
                                 counters,     deviceAdd,       nullptr,     nullptr,       deviceFillAsync,
                                 deviceCopyIn, deviceDivide,    deviceSumsq, deviceCopyOut, pinnedAlloc,
                                 pinnedFree,   planrt_cuda_sync};

/// A loaded (or not yet loaded) module of generated kernels.
struct Module {
  const void *data;
  bool loaded = false;
  cudaLibrary_t library = nullptr;
  std::unordered_map<std::string, cudaKernel_t> kernels;
};
/// "generated kernel <name>" of each kernel, for errors and the profile (the map's nodes
/// stay put: pointers to its strings stay valid), and the last one launched.
std::mutex kernelMutex;
std::unordered_map<const void *, std::string> kernelNames;
std::atomic<const std::string *> lastKernel{nullptr};

} // namespace

cudaStream_t stream() { return theStream; }
IndexError *indexError() { return theFlag; }

void check(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return;
  std::string detail = std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
  die(what, detail.c_str());
}

namespace {
std::atomic<uint64_t> syncCount{0}, launchCount{0};
/// The last launch or library call queued: what a wait's error names.
std::atomic<const char *> lastQueued{nullptr};

/// Waits for the stream; then checks it and the index flag, `what` naming the work.
void syncStream(const char *what) {
  check(cudaGetLastError(), what);
  ++syncCount;
  check(cudaStreamSynchronize(theStream), what);
  releasePending();
  if (theFlag && theFlag->kind != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %lld is outside [0, %lld)",
                  theFlag->kind == 1 ? "embedding id" : "cross-entropy target", (long long)theFlag->value,
                  (long long)theFlag->bound);
    die(what, buf);
  }
  profileMark(what);
}

/// Whether every launch and call waits: on a device without concurrent managed access
/// (the host may not touch managed memory while a kernel runs), and under the profile.
bool waitEach = false;

/// A launch or library call queued: checked, and waited for only when waitEach.
void queued(const char *what) {
  lastQueued.store(what);
  if (waitEach || profiling())
    syncStream(what);
  else
    check(cudaGetLastError(), what);
}
} // namespace

void finish(const char *what) {
  ++launchCount; // a library call: its kernels, GEMM or collective
  queued(what);
}

void finishAndWait(const char *what) {
  ++launchCount;
  lastQueued.store(what);
  syncStream(what);
}

void countWait() { ++syncCount; }

void counters(uint64_t *hostSyncs, uint64_t *launches) {
  *hostSyncs = syncCount.load();
  *launches = launchCount.load();
}

} // namespace planrt::cuda

using namespace planrt::cuda;

extern "C" {

int planrt_cuda_start(int argc, char **argv) {
  (void)argc;
  (void)argv;
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr,
                 "planrt: error: rank %d: no CUDA device: %s (%s); this executable was built with --target cuda: "
                 "run it on a machine with an NVIDIA GPU and its driver, or build the plan with --target cpu\n",
                 worldRank(), e == cudaSuccess ? "the driver reports no device" : cudaGetErrorString(e),
                 e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
    return 1;
  }
  int device = localRank() % devices;
  check(cudaSetDevice(device), "cudaSetDevice");
  int managed = 0;
  check(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device), "cudaDeviceGetAttribute");
  if (!managed) {
    std::fprintf(stderr,
                 "planrt: error: rank %d: CUDA device %d has no managed memory, which this version of "
                 "the CUDA target needs\n",
                 worldRank(), device);
    return 1;
  }
  int concurrent = 0;
  check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device), "cudaDeviceGetAttribute");
  if (!concurrent) {
    waitEach = true;
    std::fprintf(stderr,
                 "planrt: note: rank %d: CUDA device %d has no concurrent managed access: every launch waits for "
                 "the device (slower)\n",
                 worldRank(), device);
  }
  check(cudaStreamCreateWithFlags(&theStream, cudaStreamNonBlocking), "cudaStreamCreate");
  // The kernels' scratch memory (cudaMallocAsync) stays in the pool between calls.
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  check(cudaMallocManaged(reinterpret_cast<void **>(&theFlag), sizeof(IndexError), cudaMemAttachGlobal),
        "cudaMallocManaged of the index flag");
  std::memset(theFlag, 0, sizeof(IndexError));
  planrt_set_backend(&kManaged);
  installCollectives();
  return 0;
}

void planrt_cuda_sync(void) {
  // An error found here belongs to some work queued since the last wait; name the last.
  static thread_local std::string what;
  const char *last = lastQueued.load();
  what = std::string("the device work up to ") + (last ? last : "this point");
  syncStream(what.c_str());
}

void *mgpuModuleLoad(void *data, size_t) { return new Module{data}; }
void *mgpuModuleLoadJIT(void *data, int) { return new Module{data}; }

void mgpuModuleUnload(void *module) {
  // Runs from a destructor at exit; the driver may already be gone, so errors are not reported.
  auto *m = static_cast<Module *>(module);
  if (m && m->loaded)
    (void)cudaLibraryUnload(m->library);
  delete m;
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  auto *m = static_cast<Module *>(module);
  if (!m->loaded) {
    check(cudaLibraryLoadData(&m->library, m->data, nullptr, nullptr, 0, nullptr, nullptr, 0),
          "loading the generated kernels (cudaLibraryLoadData)");
    m->loaded = true;
  }
  auto it = m->kernels.find(name);
  if (it != m->kernels.end())
    return reinterpret_cast<void *>(it->second);
  cudaKernel_t k = nullptr;
  std::string what = std::string("finding kernel ") + name;
  check(cudaLibraryGetKernel(&k, m->library, name), what.c_str());
  m->kernels[name] = k;
  std::lock_guard<std::mutex> lock(kernelMutex);
  kernelNames[reinterpret_cast<const void *>(k)] = std::string("generated kernel ") + name;
  return reinterpret_cast<void *>(k);
}

void *mgpuStreamCreate(void) { return theStream; }
// gpu-to-llvm follows every launch by a synchronisation of its stream. The host does not
// wait there (plan-cuda-host-sync's planrt_cuda_sync does, where host code runs next),
// except under PLANRT_CUDA_PROFILE, which charges the wait to the kernel it waits for.
void mgpuStreamSynchronize(void *) {
  const std::string *last = lastKernel.load();
  queued(last ? last->c_str() : "a generated kernel");
}
void mgpuStreamDestroy(void *) {}

void mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz,
                      int32_t shared, void *, void **params, void **, size_t) {
  const std::string *name = nullptr;
  {
    std::lock_guard<std::mutex> lock(kernelMutex);
    auto it = kernelNames.find(function);
    name = it == kernelNames.end() ? nullptr : &it->second;
  }
  const char *what = name ? name->c_str() : "generated kernel ?";
  if (gx < 0 || gy < 0 || gz < 0 || bx <= 0 || by <= 0 || bz <= 0) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "grid %lld x %lld x %lld of blocks %lld x %lld x %lld", (long long)gx,
                  (long long)gy, (long long)gz, (long long)bx, (long long)by, (long long)bz);
    die((std::string(what) + ": a negative grid or an empty block").c_str(), buf);
  }
  lastKernel.store(name);
  if (gx == 0 || gy == 0 || gz == 0)
    return; // an empty loop: nothing to launch (CUDA refuses a zero-sized grid)
  ++launchCount;
  check(cudaLaunchKernel(function, dim3(unsigned(gx), unsigned(gy), unsigned(gz)),
                         dim3(unsigned(bx), unsigned(by), unsigned(bz)), params, size_t(shared), theStream),
        what);
}

} // extern "C"
