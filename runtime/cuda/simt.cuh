// The few SIMT primitives libplanrt_cuda's tiled kernels use — thread and block
// indices, the block barrier, the warp's xor shuffle, dynamic shared memory, and the
// launch — written once for two builds:
//   - nvcc (libplanrt_cuda): each is the CUDA built-in it names;
//   - a host C++ compiler with PLANRT_SIMT_EMULATE defined (the gtest
//     planc-simt-tests): each block's threads run as host threads with a real barrier,
//     so the kernels' indexing, masking and reductions are tested on a machine without
//     a GPU, against the CPU kernels, before any GPU runs them.
// A kernel written on these must reach every barrier and shuffle with all the threads
// of its block (uniform control flow), which the emulation needs and CUDA's full-mask
// shuffles require anyway.
#ifndef PLANRT_CUDA_SIMT_CUH
#define PLANRT_CUDA_SIMT_CUH

#include <cmath>
#include <cstddef>
#include <cstdint>

#ifndef PLANRT_SIMT_EMULATE

#define SIMT_DEVICE __device__ __forceinline__
#define SIMT_GLOBAL __global__

namespace planrt::simt {
struct Vec4 {
  float x, y, z, w;
};
/// Four floats at p, a multiple of 16 bytes, as one 16-byte load.
SIMT_DEVICE Vec4 load4(const float *p) {
  float4 v = *reinterpret_cast<const float4 *>(p);
  return {v.x, v.y, v.z, v.w};
}
SIMT_DEVICE int threadIndex() { return int(threadIdx.x); }
SIMT_DEVICE int64_t blockIndex(int axis) { return axis == 0 ? blockIdx.x : axis == 1 ? blockIdx.y : blockIdx.z; }
SIMT_DEVICE void syncBlock() { __syncthreads(); }
SIMT_DEVICE float shuffleXor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <class T> SIMT_DEVICE T *dynamicShared() {
  extern __shared__ __align__(16) unsigned char simtShared[];
  return reinterpret_cast<T *>(simtShared);
}
} // namespace planrt::simt

#else // PLANRT_SIMT_EMULATE

#include <condition_variable>
#include <stdexcept>
#include <mutex>
#include <thread>
#include <vector>

#define SIMT_DEVICE inline
#define SIMT_GLOBAL

namespace planrt::simt {

struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

/// One emulated block: its barrier, its shared memory and the shuffles' exchange slots.
struct Block {
  explicit Block(int threads, size_t sharedBytes) : threads(threads), shared(sharedBytes), slots(threads) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    unsigned gen = generation;
    if (++arrived == threads) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
  }
  int threads;
  std::vector<unsigned char> shared;
  std::vector<float> slots;
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  unsigned generation = 0;
};

struct ThreadState {
  Block *block = nullptr;
  int thread = 0;
  int64_t index[3] = {0, 0, 0};
};
inline thread_local ThreadState self;

struct Vec4 {
  float x, y, z, w;
};
inline Vec4 load4(const float *p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    throw std::logic_error("simt::load4: an address not a multiple of 16 bytes");
  return {p[0], p[1], p[2], p[3]};
}
inline int threadIndex() { return self.thread; }
inline int64_t blockIndex(int axis) { return self.index[axis]; }
inline void syncBlock() { self.block->wait(); }
/// Lane (thread ^ mask) of the same warp: masks below 32 keep the warp, as CUDA's.
inline float shuffleXor(float v, int mask) {
  Block &b = *self.block;
  b.slots[self.thread] = v;
  b.wait();
  float r = b.slots[self.thread ^ mask];
  b.wait();
  return r;
}
template <class T> T *dynamicShared() { return reinterpret_cast<T *>(self.block->shared.data()); }

/// Runs kernel(args...) over the grid, one block after another, each block's threads
/// as host threads.
template <class Kernel, class... Args>
void launch(Grid grid, int threads, size_t sharedBytes, Kernel kernel, Args... args) {
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block block(threads, sharedBytes);
        std::vector<std::thread> pool;
        pool.reserve(size_t(threads));
        for (int t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            self.block = &block;
            self.thread = t;
            self.index[0] = x;
            self.index[1] = y;
            self.index[2] = z;
            kernel(args...);
          });
        for (std::thread &th : pool)
          th.join();
      }
}

} // namespace planrt::simt

#endif // PLANRT_SIMT_EMULATE

#endif // PLANRT_CUDA_SIMT_CUH
