// Internal: an optimizer whose Adam moments live in files (the plan's
// `offload { optimizer = nvme(DIR) }`, ZeRO-Infinity's NVMe optimizer state), and with
// `params = nvme(DIR)` the ZeRO-3 parameter shard too. The update streams them through a
// bounded staging buffer with io_uring, reading the next chunk while the generated update
// (planrt_update_chunk_fn) runs on this one and writing chunks back as they are done.
// Every step writes a whole new generation of the state beside the one it read, then
// names it current by an atomic rename: a crash at any point leaves one complete
// generation, moments and parameters alike (docs/EXECUTABLES.md, "Offloaded state").
// Under ZeRO-3 the update may run on a thread of its own into the next step, which waits
// for the records it touches (update's `overlap`, awaitPiece, readParams, settle).
// On a device backend the update runs on the device, a record at a time, copied in and
// out of host slots; it is not overlapped.
#ifndef PLANRT_LIB_OFFLOAD_H
#define PLANRT_LIB_OFFLOAD_H

#include "planrt.h"

#include <cstdint>
#include <memory>
#include <string>

namespace planrt::train {

class OffloadedOptimizer {
public:
  /// One optimizer group's piece on this rank: its float count and the chunk update.
  struct Group {
    int64_t floats = 0;
    planrt_update_chunk_fn update = nullptr;
  };

  /// Nothing is opened yet: open() does, and says what failed. A non-empty `paramsDir`
  /// keeps this rank's parameter shard (the groups' pieces, as the moments) there too.
  OffloadedOptimizer(std::string dir, int rank, int64_t chunkFloats, Group g0, Group g1, std::string paramsDir = {});
  ~OffloadedOptimizer();
  OffloadedOptimizer(const OffloadedOptimizer &) = delete;
  OffloadedOptimizer &operator=(const OffloadedOptimizer &) = delete;

  /// Creates the directory if needed, opens both generations' files and the ring, and
  /// allocates the staging buffer.
  planrt_status open();

  /// Whether the parameter shard lives in files too.
  bool paramsOffloaded() const;
  /// Floats of optimizer group g's piece.
  int64_t groupFloats(int g) const;

  /// Writes the moments (each group's piece: m[g], v[g] of floats(g)) and, with the
  /// parameters offloaded, the shard p[g] as a new current generation: the initial
  /// state, a resumed one. Null m and v: zeros (a fresh run's moments, never held in
  /// memory). The host reads them: on a device backend, host memory (Buffer::
  /// allocateOnHost), never the device's.
  planrt_status store(const float *const m[2], const float *const v[2], const float *const *p = nullptr);
  /// Reads the current generation's moments into m[g], v[g] and, if p is given, the
  /// parameter shard into p[g] (a checkpoint, an export): host memory too.
  planrt_status load(float *const m[2], float *const v[2], float *const *p = nullptr);

  /// One optimizer step on this rank's pieces p[g], g[g] (in place on p), the moments
  /// streamed from the current generation to the next; `state` as planrt_update_fn's.
  /// With the parameters offloaded they stream with the moments and p is not read.
  /// With `overlap` (ignored on a device), it returns as soon as the state's next values are known (the first
  /// record's update) and streams the rest on a thread of its own while the caller goes
  /// on (the next step's forward pass): until settle(), the caller leaves p and g alone
  /// except where awaitPiece says the update is done with them, and reads the shard
  /// through readParams, which waits for its records.
  planrt_status update(float *const p[2], float *const g[2], int64_t step, float *state, bool overlap = false);
  /// Whether an overlapped update has not been settled yet.
  bool pending() const;
  /// Waits until the pending update (if any) is done with floats [lo, hi) of group
  /// `grp`'s pieces of p and g: their records updated and written back in place. Its
  /// failure, if it failed.
  planrt_status awaitPiece(int grp, int64_t lo, int64_t hi);
  /// Waits for the pending update to end (its generation made current) and returns
  /// how it ended; OK without one. update, store, load and the destructor settle first.
  planrt_status settle();

  /// The parameter shard's floats [offset, offset + n) of the current generation (in
  /// the shard's coordinates: group 0's piece, then group 1's) into dst: what a ZeRO-3
  /// all-gather sends, fetched just before it starts.
  planrt_status readParams(int64_t offset, int64_t n, float *dst);
  /// Starts reading the shard's floats [offset, offset + n) ahead, into the staging
  /// buffer (idle outside the update), for the readParams of the same range that the
  /// next gather makes; any other call drops it. Best effort: a part larger than the
  /// buffer, or one the ring does not take, is read when its gather starts.
  void prefetchParams(int64_t offset, int64_t n);

  /// Bytes of the staging buffer in the device's memory (counted by planrt_mem_alloc),
  /// and on a device backend (planrt_mem_is_device) those of its host side, the slots
  /// the files are read into and written from (page-locked; 0 on the host backend,
  /// whose staging is all in stagingBytes).
  int64_t stagingBytes() const;
  int64_t hostStagingBytes() const;
  /// Bytes of one generation's file (the moments'; the parameters' in paramsFileBytes).
  int64_t fileBytes() const;
  int64_t paramsFileBytes() const;
  /// Bytes read and written so far (by the updates alone: updateBytes), the seconds the
  /// updates waited for the disk, and the seconds they took in all; the parameters'
  /// bytes fetched for all-gathers and the seconds the gathers waited for them (a part
  /// read ahead: its copy out of the staging buffer, and any wait for its reads); the
  /// seconds the caller waited for overlapped updates (awaitPiece, readParams, settle).
  /// An overlapped update counts its own after it is settled.
  /// On a device backend, the bytes the updates copied to and from the device (the
  /// records, a partial chunk's pads, the step state).
  uint64_t bytesRead = 0, bytesWritten = 0, updateBytes = 0, fetchBytes = 0, deviceBytes = 0;
  double waitSeconds = 0, updateSeconds = 0, fetchSeconds = 0, overlapWaitSeconds = 0;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace planrt::train

#endif // PLANRT_LIB_OFFLOAD_H
