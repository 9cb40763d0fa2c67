// Internal: the step context that a training executable's planc_step acts on.
#ifndef PLANRT_LIB_STEP_CONTEXT_H
#define PLANRT_LIB_STEP_CONTEXT_H

#include "status.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace planrt {

namespace train {
class OffloadedOptimizer;
}

/// Memory of the backend (planrt_set_backend): what generated code may read and write,
/// counted (planrt_mem_alloc).
struct BackendDeleter {
  void operator()(void *p) const { planrt_mem_free(p); }
};
using Floats = std::unique_ptr<float[], BackendDeleter>;
/// 256-byte aligned, zeroed; null if n floats cannot be had.
Floats allocateFloats(int64_t n);

/// A std::vector's allocator on the backend's memory: tokens and other host-made
/// arrays the generated code reads.
template <class T> struct BackendAllocator {
  using value_type = T;
  BackendAllocator() = default;
  template <class U> BackendAllocator(const BackendAllocator<U> &) {}
  T *allocate(size_t n) {
    void *p = planrt_mem_alloc(n * sizeof(T));
    if (!p)
      throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t) { planrt_mem_free(p); }
  template <class U> bool operator==(const BackendAllocator<U> &) const { return true; }
  template <class U> bool operator!=(const BackendAllocator<U> &) const { return false; }
};
template <class T> using BackendVector = std::vector<T, BackendAllocator<T>>;

/// One buffer of the manifest's table (a sched.buffer).
struct Buffer {
  std::string name, lifetime; ///< "persistent", "step" or "transient"
  int64_t floats = 0;
  float *place = nullptr; ///< its bytes in the executable's arena, if it has one
  float *data = nullptr;  ///< null while a transient buffer is freed
  Floats owned;           ///< without an arena: the memory it allocated
  std::vector<float> host; ///< allocateOnHost's
  /// Held by parts (sched.alloc … parts, planrt_mem_reserve): the reserved floats at
  /// `data`, and which ranges are committed now (offset → count).
  bool byParts = false;
  std::vector<std::pair<int64_t, int64_t>> committed;

  /// Zeroed floats at `data` (at its place in the arena, or allocated); false if they
  /// cannot be had. With `parts`, reserved and held by parts where the backend can.
  bool allocate(bool parts = false);
  /// Zeroed floats in host memory rather than the backend's (not counted), for host code
  /// alone: a device's offloaded moments, read back between steps for a checkpoint.
  void allocateOnHost();
  void release();
  /// By parts: counts [offset, offset + count) as held (once) / gives it back.
  void commit(int64_t offset, int64_t count);
  void decommit(int64_t offset, int64_t count);
};

} // namespace planrt

struct planrt_step_ctx {
  planrt_mesh *mesh = nullptr; ///< null on one device
  std::vector<planrt::Buffer> buffers;
  planrt_grad_fn grad = nullptr;
  planrt_sumsq_fn sumsq = nullptr;
  planrt_update_fn update = nullptr;
  /// An offloaded optimizer (`offload { optimizer = nvme(…) }`): the update streams the
  /// moments through it instead of calling `update`.
  planrt::train::OffloadedOptimizer *offload = nullptr;
  /// With the parameters offloaded too (`params = nvme(…)`, ZeRO-3): the shard's buffer,
  /// never allocated in a step. An all-gather from it reads this rank's part from the
  /// files into its place in the receive buffer and gathers in place.
  int32_t offloadedShard = -1;
  /// Whether the offloaded update overlaps the next step (ZeRO-3: the step touches the
  /// parameter and gradient shards through the schedule's operations alone, each of
  /// which waits in range() for the records it needs).
  bool overlapUpdate = false;
  /// The pending overlapped update's pieces of p and g: floats [offset, offset +
  /// floats) of buffer `buf`, optimizer group `group`'s.
  struct Piece {
    int32_t buf;
    int64_t offset, floats;
    int group;
  };
  std::vector<Piece> pending;
  /// Fills of those pieces made while the update still reads them (the step's
  /// zeroing of the gradient shard): done when an operation first touches one.
  struct Fill {
    int32_t buf;
    int64_t offset, count;
    float value;
  };
  std::vector<Fill> deferredFills;
  /// Waits for the pending update, then makes the deferred fills; false after
  /// recording its failure.
  bool settleUpdate();
  /// The all-gather's send pointer for `count` floats per rank from buffer `src` at
  /// `srcOffset` into `to` (the gather's first float), of which it fills the slice
  /// [begin, begin + size) (gather coordinates): the source's floats, or, from the
  /// offloaded shard, `to` + this rank's block after reading its part of the slice there
  /// (unless `fetch` is false: the part is there already). The read blocks the step's
  /// thread; with buckets it happens as the gather starts, a bucket ahead of its use.
  const float *gatherSource(int32_t src, int64_t srcOffset, int64_t count, unsigned mask, float *to, int64_t begin,
                            int64_t size, const char *op, bool fetch = true);
  planrt_data *train = nullptr;
  /// A model over images reads these instead (`tokens` then holds micro × floats
  /// floats of images, `targets` their labels), each sample drawn from (seed, index).
  planrt_images *images = nullptr;
  planrt_image_transform imageTransform{};
  uint64_t imageSeed = 0;
  int64_t imageFloats = 0;
  int64_t batch = 0, micro = 0, seq = 0;
  int64_t dataRank = 0, dataSize = 1;
  /// Tensor and pipeline parallelism: this rank's tensor coordinate and the group's size;
  /// the flat range of this rank's gradient piece per optimizer group; and each
  /// parameter's flat range with whether this rank counts it in the gradient norm (split
  /// ones everywhere, replicated ones on the tensor group's first rank, a tied parameter
  /// on the stage that owns it). Without `counted`, the generated planc_sumsq sums.
  int64_t tensorCoord = 0, tensorSize = 1;
  int64_t pieceBegin[2] = {0, 0}, pieceFloats[2] = {0, 0};
  struct Counted {
    int64_t offset, count;
    bool counted;
  };
  std::vector<Counted> counted;
  /// Pipeline parallelism: each stage this rank holds (one but under the interleaved
  /// schedule), with its entry points.
  struct Stage {
    int64_t stage = 0;
    planrt_stage_fwd_fn forward = nullptr;
    planrt_stage_bwd_fn backward = nullptr;
    planrt_stage_wgrad_fn weights = nullptr; ///< the zero-bubble schedule's weight pass
    /// Floats of the activation the stage receives and of the one it hands on (0 on the
    /// first and the last stage respectively).
    int64_t activationIn = 0, activationOut = 0;
    int64_t savedFloats = 0;  ///< `keep: activations`: floats a micro-batch's forward pass keeps
    int64_t wsavedFloats = 0; ///< zero-bubble: floats a micro-batch's input pass keeps for its weight pass
  };
  std::vector<Stage> stages;
  int64_t pipelineRank = 0; ///< this rank's coordinate on the pipeline axis
  planrt::BackendVector<int32_t> tokens, targets;
  std::vector<int32_t> hostTokens, hostTargets; ///< readBatch's host copies, copied to tokens and targets
  /// Added to a step's index where it picks samples: a federated round's local step i
  /// reads the samples of step round × local_steps + i.
  int64_t sampleStepBase = 0;
  /// A federated round (federated.cpp): the clients it sampled, and this client's part.
  struct Federated {
    uint64_t seed = 0;
    int64_t clients = 0, client = 0, localSteps = 0;
    std::vector<double> tokens;  ///< every client's data, in tokens (weighting: tokens)
    std::vector<int64_t> sampled; ///< this round's, ascending
    bool mine = false;            ///< whether this client is one of them
    double lossSum = 0;           ///< of its local steps' losses
    int64_t lossCount = 0;
  } fed;
  /// A model over images: its batchnorm layers' running statistics (train.images.running,
  /// by index), which the generated code updates in training and reads in evaluation
  /// (planrt_k_batchnorm_observe and _infer).
  struct RunningStats {
    std::string name;
    std::vector<float> mean, var; ///< C each; 0 and 1 at first, as PyTorch's
    int64_t tracked = 0;          ///< num_batches_tracked
  };
  std::vector<RunningStats> running;
  std::atomic<int64_t> step{0}; ///< read by the watchdog thread
  /// The first failure; later calls do nothing.
  planrt_status status = PLANRT_OK;
  std::string error;

  // The watchdog: while a collective waits, `since` holds when it started (ns of the
  // steady clock) and `what` names it.
  std::atomic<int64_t> since{0};
  /// The wait `since` allows, in seconds, if more than the watchdog's (a checkpoint's
  /// barriers wait for the slowest rank's writes too); 0: the watchdog's.
  std::atomic<double> allowed{0};
  std::mutex whatMutex;
  std::string what;
  /// Gradient buckets of the next planc_grad call: each range's all-reduce (DDP,
  /// planrt_sched_bucket_all_reduce) or slice of a reduce-scatter (ZeRO-1,
  /// planrt_sched_bucket_reduce_scatter), started when the entry point reports its
  /// bucket ready.
  struct Bucket {
    int64_t bucket;
    int32_t mask, buf;
    int64_t offset, count; ///< the all-reduce's range; the reduce-scatter's source offset and count per rank
    int32_t reduce;
    int32_t dst = -1; ///< a reduce-scatter's destination (-1: an all-reduce)
    int64_t dstOffset = 0, begin = 0, size = 0;
    /// Accumulating (ZeRO-2 and 3): this rank's part of the slice, [partBegin, partBegin +
    /// partFloats) of its block, goes to `sum`, which is added to the destination when
    /// the reduce-scatter is done.
    bool accumulate = false;
    planrt::Floats sum;
    int64_t partBegin = 0, partFloats = 0;
    planrt_request *request = nullptr; ///< once started
    bool done = false;
  };
  std::vector<Bucket> buckets;
  /// Starts bucket b's all-reduce or reduce-scatter (recording a failure).
  void startBucket(Bucket &b);
  /// Counts gradient bucket `bucket`'s slices of a source held by parts as held: from when
  /// the backward pass starts writing them (the previous bucket's planrt_grad_ready).
  void commitBucket(int64_t bucket);
  /// Waits for bucket b's collective; adds an accumulating one's sum to its destination;
  /// gives back its slice of a source held by parts.
  void completeBucket(Bucket &b);
  /// Whether the slice [begin, begin + size) lies in [offset, offset + count); records
  /// a failure naming `op` if not.
  bool sliceWithin(const char *op, int64_t begin, int64_t size, int64_t offset, int64_t count);
  /// ZeRO-3 parameter buckets in flight (planrt_sched_bucket_all_gather), until the
  /// next planc_grad call waits for them.
  struct Gather {
    int64_t bucket;
    std::string what; ///< for the watchdog
    int32_t mask, src, dst;
    int64_t srcOffset, count, dstOffset, begin, size;
    planrt_request *request = nullptr; ///< once started
    bool started = false, done = false, released = false;
  };
  std::vector<Gather> gathers; ///< in the order handed over; cleared when sched.grad returns
  /// Pipeline sends under way (sched.send starts them): the buffer each reads, which a
  /// pass writes again only once they are done (waitSends), and every one before the step
  /// returns.
  struct Send {
    int32_t buf, mask;
    int64_t offset, count;
    planrt_request *request;
  };
  std::vector<Send> sends;
  /// Waits for the sends from buffer `buf` (-1: every one), recording a failure.
  void waitSends(int32_t buf);
  /// Starts every gather handed over up to the last of bucket `bucket` (-1: all), in order.
  void startGathers(int64_t bucket);
  /// Starts them up to bucket `bucket` and, if `ahead`, the next bucket's, then waits
  /// for bucket `bucket`'s (all of them: -1), recording a failure.
  void waitGathers(int64_t bucket, bool ahead);
  /// Waits for bucket `bucket`'s gathers, then gives their floats back (a buffer by parts).
  void releaseGathers(int64_t bucket);
  /// Whether another gather of g's floats (the forward pass's last bucket and the
  /// backward pass's first, gathered again a bucket ahead) has started and holds them.
  bool heldByAnother(const Gather &g) const;
  /// An offloaded shard: reads the next gather's part ahead (OffloadedOptimizer::
  /// prefetchParams) while the step computes, unless another gather holds its floats.
  void prefetchNextGather();
  /// Seconds spent in collectives and point-to-point transfers so far.
  double commSeconds = 0;

  /// A buffer's floats [offset, offset + count), or null after recording why not.
  /// Unless `check` (an operation recording what it touches later), first waits for
  /// the pending update to be done with them.
  float *range(int32_t buf, int64_t offset, int64_t count, const char *op, bool check = false);
  /// As range, for a buffer id of -1 (a range the op does not have): `none`.
  float *optional(int32_t buf, int64_t offset, int64_t count, const char *op, float *none);
  /// Reads micro-batch `micro` of step `step` into tokens and targets; false on failure.
  bool readBatch(int64_t step, int64_t micro);
  void failWith(planrt_status s);
};

namespace planrt {

/// Marks a collective as waiting, for the watchdog, while it runs (and adds its time to
/// commSeconds). `what` names it in the watchdog's message.
class Waiting {
public:
  /// `allowed`: seconds this wait may take if more than the watchdog's timeout.
  Waiting(planrt_step_ctx &ctx, const std::string &what, double allowed = 0);
  ~Waiting();

private:
  planrt_step_ctx &ctx;
};

/// Exits every rank when a collective of this rank waits longer than `seconds`:
/// prints which collective of which step, on which rank, then aborts the job.
class Watchdog {
public:
  Watchdog(planrt_step_ctx &ctx, double seconds);
  ~Watchdog();

private:
  planrt_step_ctx &ctx;
  double seconds;
  std::atomic<bool> stop{false};
  std::thread thread;
};

/// The step context whose mesh the collectives inside generated code (tensor
/// parallelism: planrt_k_all_reduce and friends) use; null before the driver sets it.
planrt_step_ctx *activeStep();
void setActiveStep(planrt_step_ctx *ctx);
/// A failure inside generated code: prints `what` with the active step's rank, aborts
/// the job's other ranks, exits.
[[noreturn]] void dieInStep(const char *what);

} // namespace planrt

#endif // PLANRT_LIB_STEP_CONTEXT_H
