// Internal to libplanrt_cuda: the stream every call runs on, error reporting, and the
// flag through which kernels report an out-of-range index.
#ifndef PLANRT_CUDA_DEVICE_H
#define PLANRT_CUDA_DEVICE_H

#include <cuda_runtime_api.h>

#include <cstdint>

namespace planrt::cuda {

/// The one stream of this process's kernels, GEMMs and copies.
cudaStream_t stream();
/// Prints "planrt: error: rank R: <what>: <CUDA error>" and exits 1 unless e is success.
void check(cudaError_t e, const char *what);
/// The end of a device library call (GEMM, fused kernel) that the generated code makes:
/// counted as a launch, its launch checked; the host does not wait (the compiler puts
/// planrt_cuda_sync where host code runs next), except under PLANRT_CUDA_PROFILE, which
/// times each call. `what` names the call in errors found at the next wait.
void finish(const char *what);
/// The end of a call whose result the host may read at once (the runtime's fills and
/// adds, NCCL collectives): counted as a launch; waits for the stream, then checks it and
/// the index flag.
void finishAndWait(const char *what);
/// Host synchronisations and launches (generated kernels and library calls) since the
/// start: the backend's counters, which the training log reports per step.
void counters(uint64_t *hostSyncs, uint64_t *launches);
/// A host wait for the device made elsewhere (a bucket's event), counted as one.
void countWait();

/// What a kernel found out of range: kind 0 none, 1 an embedding id, 2 a
/// cross-entropy target; the first one found wins.
struct IndexError {
  int32_t kind;
  int32_t pad;
  int64_t value, bound;
};
/// The device-visible flag (managed memory).
IndexError *indexError();

/// The backend's fill and add (fill.cu): count floats at ptr set to value, and
/// to[i] += from[i], on the device.
void deviceFill(void *ptr, float value, size_t count);
void deviceAdd(float *to, const float *from, size_t count);
/// The backend's fill_async and copy_in: as deviceFill without the wait, and a
/// host-to-device copy on the stream (cudaMemcpyAsync: pageable src is staged before it
/// returns), queued.
void deviceFillAsync(void *ptr, float value, size_t count);
void deviceCopyIn(void *dst, const void *src, size_t bytes);
/// The backend's copy_out: a device-to-host copy on the stream, waited for.
void deviceCopyOut(void *dst, const void *src, size_t bytes);
/// The backend's sumsq: *out = float(sum over the ranges of x*x), summed in double on the
/// device (a block per range, then the ranges in order), waited for.
void deviceSumsq(const float *const *starts, const int64_t *counts, int64_t n, float *out);
/// The backend's divide: p[i] /= divisor on the device (IEEE division, as the host's),
/// waited for (the runtime's host code may read the result next, as after NCCL's calls).
void deviceDivide(float *p, float divisor, size_t count);

/// planrt_cuda_gemm's staging (gemm_stage.cu), in stream-ordered scratch memory: the
/// rows × cols floats at src (leading dimension ld) converted to bf16, or fp16 when
/// fp16, into a new dstRows × dstCols buffer (leading dimension ldd), zeros beyond the
/// source; and its release once the stream's work queued so far is done.
void *stageHalves(const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t dstRows, int64_t dstCols,
                  int64_t ldd, bool fp16);
/// The same from a 16-bit source (PLANRT_GEMM_HALF_A / _B): its values copied, padded.
void *stageHalves(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, int64_t dstRows, int64_t dstCols,
                  int64_t ldd);
void releaseStaged(void *p);
/// The rows × cols 16-bit values at src (leading dimension lds) copied to dst (leading
/// dimension ldd): a 16-bit result (PLANRT_GEMM_HALF_C) out of its padded scratch.
void copyHalves(const void *src, int64_t rows, int64_t cols, int64_t lds, void *dst, int64_t ldd);
/// A GEMM's rounded result (PLANRT_GEMM_ROUND_RESULT, gemm_stage.cu): a scratch buffer of
/// `elements` 16-bit values (freed by releaseStaged); the rows × cols 16-bit values at src
/// (leading dimension lds, even) widened into float32 at dst (leading dimension ldd); the
/// rows × cols floats at p (leading dimension ld) rounded in place to bf16 (fp16) values.
void *halvesScratch(int64_t elements);
void widenHalves(const void *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd, bool fp16);
void roundToHalves(float *p, int64_t rows, int64_t cols, int64_t ld, bool fp16);

/// PLANRT_CUDA_PROFILE (profile.cpp): whether it is set, and the end of an operation
/// (the wall time since the previous end is charged to `what`).
bool profiling();
void profileMark(const char *what);

/// Makes NCCL the runtime's collectives on device memory (nccl.cpp).
void installCollectives();

} // namespace planrt::cuda

#endif // PLANRT_CUDA_DEVICE_H
