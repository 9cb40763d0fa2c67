// The data-parallel facts that the schedule builder (plan-schedule), the entry
// points (plan-train-abi) and the cost model (`planc explain`) share: where the
// parameters lie in the flat buffers, how those buffers are sharded over the data
// axis, and what a step communicates. One definition, so that the runtime's byte
// counters and explain's prediction cannot drift apart.
#ifndef PLAN_TRAINING_DATAPARALLEL_H
#define PLAN_TRAINING_DATAPARALLEL_H

#include <cstdint>
#include <string>
#include <vector>

namespace plan::training {

/// Where parameters lie in the flat parameter, gradient and moment buffers. Two
/// optimizer groups, as PyTorch's param groups: matrices (decayed) first, then
/// vectors. Each parameter starts on a 64-byte boundary and each group's span is
/// padded to a multiple of 16 × `shards` floats, so that it splits into `shards`
/// equal, aligned pieces: data-parallel rank r owns piece r of every group. The
/// padding stays zero.
struct FlatLayout {
  std::vector<int64_t> offset; ///< per parameter
  int64_t groupBegin[2] = {0, 0};
  int64_t groupEnd[2] = {0, 0};
  int64_t total = 0; ///< floats per full buffer
  int64_t shards = 1;
  int64_t groupFloats(int g) const { return groupEnd[g] - groupBegin[g]; }
  /// Floats of group g that one rank owns.
  int64_t shardFloats(int g) const { return groupFloats(g) / shards; }
  /// Floats one rank owns over both groups.
  int64_t shardTotal() const { return total / shards; }
};
FlatLayout flatLayout(const std::vector<int64_t> &counts, const std::vector<bool> &decayed, int64_t shards);

/// The pipeline stage of layer `layer` of `layers` over `stages` balanced,
/// contiguous stages: ⌊layer·stages/layers⌋ (nn-pipeline-split and the cost model).
inline int64_t pipelineStageOfLayer(int64_t layer, int64_t layers, int64_t stages) {
  return layers > 0 ? layer * stages / layers : 0;
}

enum class Collective { AllReduce, AllGather, ReduceScatter };
const char *collectiveName(Collective c);

/// Bytes one rank sends in one ring collective over n ranks of a full buffer of
/// `fullBytes` (all-reduce 2(n−1)/n·S, the others (n−1)/n·S), rounded down: the
/// runtime's counters (planrt_comm_bytes) use the same rule.
uint64_t ringBytes(Collective c, int64_t n, uint64_t fullBytes);

/// DDP gradient buckets (a plan's `bucket`): the parameters, each with the floats it
/// owns in the gradient buffer (padding included), taken in the order given (the order
/// the backward pass finishes their gradients); a bucket closes once it holds
/// `bucketBytes` or more of fp32 gradients (PyTorch DDP's rule; a parameter is never
/// split). Each bucket's members, as positions in `floats`. plan-train-abi buckets the
/// executable's gradients with it, and the cost model estimates them with it.
std::vector<std::vector<size_t>> gradientBuckets(const std::vector<int64_t> &floats, int64_t bucketBytes);

/// Whether a plan with `bucket` set reduces its gradients in buckets: DDP and ZeRO-1
/// always (sema refuses ZeRO-1 buckets with sequence parallelism); ZeRO-2 and 3 unless
/// sequence parallelism sums the replicated parameters' gradients over the tensor axis
/// before the reduce-scatter. plan-train-abi and the cost model both ask it.
inline bool gradientsInBuckets(int64_t zero, bool sequenceParallel) { return zero <= 1 || !sequenceParallel; }

/// How many times per step ZeRO-2 and 3 reduce a gradient, and ZeRO-3 gathers what it
/// shards: once per micro-batch, or under a pipeline once per step (plan-schedule).
inline int64_t zeroCollectivesPerStep(int64_t micro, bool pipelined) { return pipelined ? 1 : micro; }

/// One collective over the data axis, as the step issues it.
struct DataCollective {
  Collective kind;
  std::string purpose;
  int64_t floats; ///< the full buffer (summed over both optimizer groups)
  int64_t times;  ///< per optimizer step
  int64_t calls;  ///< calls per time (one per optimizer group for the big buffers)
};

/// What one optimizer step communicates over a data axis of `d` ranks with ZeRO
/// stage `zero` and `micro` micro-steps, for flat buffers of layout `l`:
///  - DDP: all-reduce the gradients once;
///  - ZeRO-1: reduce-scatter them once, all-gather the updated parameters;
///  - ZeRO-2: reduce-scatter after every micro-step, all-gather once;
///  - ZeRO-3: all-gather the parameters before every micro-step (with `oneGather`,
///    forward and backward of a micro-step share one gather: parameters gathered whole;
///    otherwise, with buckets, each bucket is gathered for the forward pass, freed, and
///    gathered again for the backward pass) and reduce-scatter the gradients after it;
///  - under a pipeline (`pipelined`), ZeRO-2 and 3 reduce-scatter a stage's gradient
///    once, after its last backward pass, and ZeRO-3 gathers its parameters once, before
///    its first forward pass (plan-schedule);
///  - and always: the mean loss for the log (1 float), and under ZeRO the partial
///    sums of squared gradients for the global norm (1 float).
std::vector<DataCollective> dataCollectives(int64_t zero, int64_t d, int64_t micro, const FlatLayout &l,
                                            bool oneGather, bool pipelined = false);

} // namespace plan::training

#endif // PLAN_TRAINING_DATAPARALLEL_H
