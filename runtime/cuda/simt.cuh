// The few SIMT primitives libplanrt_cuda's tiled kernels use — thread and block
// indices, the block barrier, the warp's xor shuffle, dynamic shared memory, 16-byte
// loads and copies (and asynchronous ones: cp.async, its groups and their wait), the
// warp's mma.sync (TF32, and bf16) and ldmatrix, the pair of bf16
// a register holds, and the launch — written once for two builds:
//   - nvcc (libplanrt_cuda): each is the CUDA built-in or PTX instruction it names;
//   - a host C++ compiler with PLANRT_SIMT_EMULATE defined (the gtest
//     planc-simt-tests): each block's threads run as coroutines that switch at every
//     barrier, shuffles and mma exchange values through the block, and mma computes the
//     product from the fragment layout PTX documents, so the kernels' indexing, masking,
//     fragments and reductions are tested on a machine without a GPU, against the CPU
//     kernels, before any GPU runs them.
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
/// A kernel of `threads` a block that `blocks` blocks must fit on a multiprocessor at once
/// (ptxas then keeps its registers within 64K / (threads · blocks)).
#define SIMT_GLOBAL_OCCUPANCY(threads, blocks) __global__ __launch_bounds__(threads, blocks)

namespace planrt::simt {
struct Vec4 {
  float x, y, z, w;
};
/// Four floats at p, a multiple of 16 bytes, as one 16-byte load.
SIMT_DEVICE Vec4 load4(const float *p) {
  float4 v = *reinterpret_cast<const float4 *>(p);
  return {v.x, v.y, v.z, v.w};
}
/// 16 bytes from src to dst, each a multiple of 16 bytes; and 16 zero bytes at dst.
SIMT_DEVICE void copy16(void *dst, const void *src) { *static_cast<uint4 *>(dst) = *static_cast<const uint4 *>(src); }
SIMT_DEVICE void zero16(void *dst) { *static_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0); }
/// copy16 from global to shared memory without waiting (cp.async); the copies issued so
/// far become a group at commitAsync(); waitAsyncButOne() waits until every group but the
/// last committed one has landed (visible to the issuing thread; a barrier then shows
/// them to the block).
SIMT_DEVICE void copyAsync16(void *sharedDst, const void *globalSrc) {
  auto d = static_cast<uint32_t>(__cvta_generic_to_shared(sharedDst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(globalSrc) : "memory");
}
SIMT_DEVICE void commitAsync() { asm volatile("cp.async.commit_group;" ::: "memory"); }
SIMT_DEVICE void waitAsyncButOne() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
SIMT_DEVICE int threadIndex() { return int(threadIdx.x); }
SIMT_DEVICE int64_t blockIndex(int axis) { return axis == 0 ? blockIdx.x : axis == 1 ? blockIdx.y : blockIdx.z; }
SIMT_DEVICE void syncBlock() { __syncthreads(); }
SIMT_DEVICE float shuffleXor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
template <class T> SIMT_DEVICE T *dynamicShared() {
  extern __shared__ __align__(16) unsigned char simtShared[];
  return reinterpret_cast<T *>(simtShared);
}
SIMT_DEVICE float fromBits(uint32_t u) { return __uint_as_float(u); }
/// x rounded to TF32 (10 mantissa bits, to nearest, ties away from zero), as its bits.
SIMT_DEVICE uint32_t toTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
SIMT_DEVICE uint32_t bitsOf(float x) { return __float_as_uint(x); }
/// d += A · B on the tensor cores for one warp (mma.sync m16n8k16, bf16 operands, fp32
/// accumulation). Each register holds two bf16, the lower index in the low half; with
/// lane = 4 g + t: a = A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..] (A 16 x 16);
/// b = B[2t..][g], B[2t+8..][g] (B 16 x 8); d as mmaTf32's.
SIMT_DEVICE void mmaBf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/// lo and hi rounded to bf16 (to nearest, ties to even) in one register, lo in the low half.
SIMT_DEVICE uint32_t packBf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
/// ldmatrix .x4 (.trans): four 8 x 8 matrices of 16-bit elements in shared memory, whose
/// rows lanes 8 i … 8 i + 7 of the warp address (row = 16 bytes at a 16-byte boundary),
/// into r[i]: lane 4 g + t gets row g, columns 2 t and 2 t + 1 of matrix i (transposed:
/// rows 2 t and 2 t + 1 of column g), the lower index in the low half.
SIMT_DEVICE void ldmatrix4(uint32_t (&r)[4], const void *row) {
  auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
SIMT_DEVICE void ldmatrix4Trans(uint32_t (&r)[4], const void *row) {
  auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
/// d += A · B on the tensor cores for one warp (mma.sync m16n8k8, TF32 operands, fp32
/// accumulation). With lane = 4 g + t: a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]
/// (A 16 x 8); b = B[t][g], B[t+4][g] (B 8 x 8); d[q] = D[g + 8 (q / 2)][2 t + q % 2].
SIMT_DEVICE void mmaTf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
} // namespace planrt::simt

#else // PLANRT_SIMT_EMULATE

#include <cstring>
#include <functional>
#include <stdexcept>
#include <ucontext.h>
#include <vector>

#define SIMT_DEVICE inline
#define SIMT_GLOBAL
#define SIMT_GLOBAL_OCCUPANCY(threads, blocks)

namespace planrt::simt {

struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

/// One emulated block: its threads as coroutines (ucontext) on the calling host thread,
/// its shared memory, and the exchange slots of shuffles and mma. A barrier switches to
/// the next thread in turn; when the last one arrives the first runs on: every thread
/// has then reached the barrier, as CUDA's __syncthreads promises, and nothing runs
/// concurrently (the same order on every run).
struct Block {
  Block(int threads, size_t sharedBytes, std::function<void()> body)
      : threads(threads), shared(sharedBytes), slots(size_t(threads)), fragments(size_t(threads) * 6),
        rows(size_t(threads)),
        contexts(size_t(threads)), stacks(size_t(threads) * kStack), done(size_t(threads), false),
        body(std::move(body)) {}
  static constexpr size_t kStack = size_t(256) << 10;

  int threads, current = 0;
  std::vector<unsigned char> shared;
  std::vector<float> slots;
  std::vector<uint32_t> fragments; ///< each thread's a[4] and b[2] of an mma
  std::vector<const uint16_t *> rows; ///< each thread's row address of an ldmatrix
  std::vector<ucontext_t> contexts;
  ucontext_t caller;
  std::vector<char> stacks;
  std::vector<bool> done;
  std::function<void()> body;
  int64_t index[3] = {0, 0, 0};

  /// The next thread that has not returned after `from`, or -1.
  int nextLive(int from) const {
    for (int i = 1; i <= threads; ++i) {
      int t = (from + i) % threads;
      if (!done[size_t(t)])
        return t;
    }
    return -1;
  }
  void wait() {
    int me = current, next = nextLive(me);
    if (next == me || next < 0)
      return;
    current = next;
    swapcontext(&contexts[size_t(me)], &contexts[size_t(next)]);
  }
  void run();
};

inline Block *theBlock = nullptr;

inline void threadEntry() {
  Block &b = *theBlock;
  b.body();
  int me = b.current;
  b.done[size_t(me)] = true;
  int next = b.nextLive(me);
  if (next < 0) {
    setcontext(&b.caller);
  } else {
    b.current = next;
    setcontext(&b.contexts[size_t(next)]);
  }
}

inline void Block::run() {
  for (int t = 0; t < threads; ++t) {
    ucontext_t &c = contexts[size_t(t)];
    getcontext(&c);
    c.uc_stack.ss_sp = stacks.data() + size_t(t) * kStack;
    c.uc_stack.ss_size = kStack;
    c.uc_link = nullptr;
    makecontext(&c, threadEntry, 0);
  }
  current = 0;
  swapcontext(&caller, &contexts[0]);
}

struct Vec4 {
  float x, y, z, w;
};
inline Vec4 load4(const float *p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    throw std::logic_error("simt::load4: an address not a multiple of 16 bytes");
  return {p[0], p[1], p[2], p[3]};
}
inline void copy16(void *dst, const void *src) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    throw std::logic_error("simt::copy16: an address not a multiple of 16 bytes");
  std::memcpy(dst, src, 16);
}
inline void zero16(void *dst) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0)
    throw std::logic_error("simt::zero16: an address not a multiple of 16 bytes");
  std::memset(dst, 0, 16);
}
/// The copy lands at once: the kernel's choice of buffers is what the emulation checks.
inline void copyAsync16(void *sharedDst, const void *globalSrc) { copy16(sharedDst, globalSrc); }
inline void commitAsync() {}
inline void waitAsyncButOne() {}
inline int threadIndex() { return theBlock->current; }
inline int64_t blockIndex(int axis) { return theBlock->index[axis]; }
inline void syncBlock() { theBlock->wait(); }
/// Lane (thread ^ mask) of the same warp: masks below 32 keep the warp, as CUDA's.
inline float shuffleXor(float v, int mask) {
  Block &b = *theBlock;
  int me = b.current;
  b.slots[size_t(me)] = v;
  b.wait();
  float r = b.slots[size_t(me ^ mask)];
  b.wait();
  return r;
}
template <class T> T *dynamicShared() { return reinterpret_cast<T *>(theBlock->shared.data()); }

inline float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
/// cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero (the magnitude's bits).
inline uint32_t toTf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u + 0x1000u) & 0xFFFFE000u;
}
/// An mma.sync over the calling thread's warp, as the CUDA version's fragments say:
/// every lane posts its a and b, then computes its four elements of D (row g + 8 (q / 2),
/// column 2 t + q % 2) from the warp's A and B over k < K — element(fragments, r, k) of
/// A and element(fragments, k, n) of B read the posted registers of the warp's lanes
/// (six a lane: a[4], b[2]) — products in double, summed in k order, rounded once.
template <class ElementA, class ElementB>
inline void warpMma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], int K, ElementA A, ElementB B) {
  Block &blk = *theBlock;
  int me = blk.current;
  uint32_t *mine = &blk.fragments[size_t(me) * 6];
  for (int i = 0; i < 4; ++i)
    mine[i] = a[i];
  mine[4] = b[0];
  mine[5] = b[1];
  blk.wait();
  int lane = me % 32, g = lane / 4, t = lane % 4;
  const uint32_t *warp = &blk.fragments[size_t(me - lane) * 6];
  float out[4];
  for (int q = 0; q < 4; ++q) {
    int r = g + 8 * (q / 2), c = 2 * t + q % 2;
    double acc = d[q];
    for (int k = 0; k < K; ++k)
      acc += double(A(warp, r, k)) * double(B(warp, k, c));
    out[q] = float(acc);
  }
  blk.wait();
  for (int q = 0; q < 4; ++q)
    d[q] = out[q];
}

/// mma.sync m16n8k8 TF32: A[r][k] in lane 4 (r % 8) + k % 4, register (r >= 8) + 2 (k >= 4);
/// B[k][n] in lane 4 n + k % 4, register 4 + (k >= 4).
inline void mmaTf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warpMma(
      d, a, b, 8,
      [](const uint32_t *w, int r, int k) { return fromBits(w[(4 * (r % 8) + k % 4) * 6 + (r >= 8) + 2 * (k >= 4)]); },
      [](const uint32_t *w, int k, int n) { return fromBits(w[(4 * n + k % 4) * 6 + 4 + (k >= 4)]); });
}

/// mma.sync m16n8k16 bf16: each register two bf16 (the lower index in the low half),
/// A[r][k] in lane 4 (r % 8) + (k % 8) / 2, register (r >= 8) + 2 (k >= 8); B[k][n] in
/// lane 4 n + (k % 8) / 2, register 4 + (k >= 8).
inline float bf16Half(uint32_t reg, int k) { return fromBits(k % 2 ? reg & 0xFFFF0000u : reg << 16); }
inline void mmaBf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warpMma(
      d, a, b, 16,
      [](const uint32_t *w, int r, int k) {
        return bf16Half(w[(4 * (r % 8) + (k % 8) / 2) * 6 + (r >= 8) + 2 * (k >= 8)], k);
      },
      [](const uint32_t *w, int k, int n) { return bf16Half(w[(4 * n + (k % 8) / 2) * 6 + 4 + (k >= 8)], k); });
}

/// ldmatrix .x4 (.trans) as the CUDA version says: every lane posts its row's address,
/// then reads its two elements of each matrix from the rows the warp posted.
inline void ldmatrix(uint32_t (&r)[4], const void *row, bool trans) {
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
    throw std::logic_error("simt::ldmatrix: a row not at a 16-byte boundary");
  Block &blk = *theBlock;
  int me = blk.current, lane = me % 32, g = lane / 4, t = lane % 4;
  blk.rows[size_t(me)] = static_cast<const uint16_t *>(row);
  blk.wait();
  const uint16_t *const *warp = &blk.rows[size_t(me - lane)];
  uint32_t out[4];
  for (int i = 0; i < 4; ++i) {
    const uint16_t *const *m = warp + 8 * i;
    out[i] = trans ? uint32_t(m[2 * t][g]) | uint32_t(m[2 * t + 1][g]) << 16
                   : uint32_t(m[g][2 * t]) | uint32_t(m[g][2 * t + 1]) << 16;
  }
  blk.wait();
  for (int i = 0; i < 4; ++i)
    r[i] = out[i];
}
inline void ldmatrix4(uint32_t (&r)[4], const void *row) { ldmatrix(r, row, false); }
inline void ldmatrix4Trans(uint32_t (&r)[4], const void *row) { ldmatrix(r, row, true); }
/// Runs kernel(args...) over the grid, one block after another, each block's threads
/// as coroutines.
template <class Kernel, class... Args>
void launch(Grid grid, int threads, size_t sharedBytes, Kernel kernel, Args... args) {
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block block(threads, sharedBytes, [&] { kernel(args...); });
        block.index[0] = x;
        block.index[1] = y;
        block.index[2] = z;
        Block *outer = theBlock;
        theBlock = &block;
        block.run();
        theBlock = outer;
      }
}

} // namespace planrt::simt

#endif // PLANRT_SIMT_EMULATE

namespace planrt::simt {
/// x rounded to bf16 (to nearest, ties to even; a NaN stays a quiet NaN), as its 16 bits.
SIMT_DEVICE uint32_t bf16Bits(float x) {
  uint32_t u = bitsOf(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
#ifdef PLANRT_SIMT_EMULATE
/// cvt.rn.bf16x2.f32's result (NaN aside: the device's is canonical).
inline uint32_t packBf16(float lo, float hi) { return bf16Bits(lo) | bf16Bits(hi) << 16; }
#endif
} // namespace planrt::simt

#endif // PLANRT_CUDA_SIMT_CUH
