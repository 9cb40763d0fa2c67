// The order of a pipeline stage's passes under the zero-bubble schedule (ZB-H1, Qi et
// al. 2023, "Zero Bubble Pipeline Parallelism"), shared by plan-schedule, which emits
// it, and the cost model, which sizes its slots and its bubble from it; and the
// interleaved schedule's (Narayanan et al. 2021) with a placement of its transfers that
// cannot deadlock.
#ifndef PLAN_SCHEDULE_PIPELINEORDER_H
#define PLAN_SCHEDULE_PIPELINEORDER_H

#include <cstdint>
#include <vector>

namespace plan::schedule {

/// One pass of one micro-batch on a stage: its forward pass (F), its backward pass (B;
/// under the zero-bubble schedule the input pass), or its weight pass (W).
struct PipelinePass {
  enum Kind { Forward, Backward, Weight } kind;
  int64_t micro;
  bool operator==(const PipelinePass &o) const { return kind == o.kind && micro == o.micro; }
};

/// A stage's passes in the order it runs them (the last stage's backward pass runs its
/// forward pass: it has no forward passes of its own).
struct StageOrder {
  std::vector<PipelinePass> passes;
  /// The most weight passes waiting at once: the slots of what input passes keep.
  int64_t weightSlots = 0;
};

/// 1F1B's order of stage k of p over m micro-batches (PipeDream-Flush): min(p − k − 1, m)
/// forwards, then a forward and a backward in turn, then the remaining backwards.
std::vector<PipelinePass> oneFOneBOrder(int64_t k, int64_t p, int64_t m);

/// Whether a weight pass that stage k runs before `pass` can fill the wait for that
/// pass's input: the input comes by a receive of its own (the warm-up's activations, the
/// cool-down's gradients, the last stage's first input), before which plan-schedule emits
/// the weight pass. In the steady state it comes by 1F1B's send_recv, which also sends
/// what the stage just made; the weight pass then runs after it.
bool weightPassCanWait(int64_t k, int64_t p, int64_t m, PipelinePass pass);

/// ZB-H1 for p stages and m micro-batches, each stage's order: its forward and backward
/// passes in 1F1B's order (so its transfers are 1F1B's, which cannot deadlock), and the
/// weight passes of every stage but the first (whose backward pass is whole: no stage
/// waits for its input's gradient). The places come from a simulation in which F, B and
/// W take one unit each (the last stage's B two: it computes its forward too): a W goes
/// before the next pass when that pass's input would not be there before the W ends and
/// the W can fill the wait (weightPassCanWait), or when the stage holds p micro-batches
/// between a forward pass and its weight pass (1F1B's first stage holds p). With m = p
/// the step takes 3m + p − 1 units, the paper's ZB-H1 bubble, against 1F1B's
/// 3m + 3(p − 1); with more micro-batches the steady state's weight passes cannot fill
/// its waits and the bubble lies between (PipelineOrderTest).
std::vector<StageOrder> zeroBubbleOrders(int64_t p, int64_t m);

/// The time of one step in zeroBubbleOrders(p, m)'s order when a forward pass takes f, an
/// input pass b and a weight pass w on every stage (the first stage's backward pass b + w,
/// the last stage's b + f), transfers taking no time: what `planc explain` predicts.
double zeroBubbleStepTime(int64_t p, int64_t m, double f, double b, double w);

/// zeroBubbleOrders(p, m)[k].weightSlots without simulating a long step: k + 1 when
/// m ≥ p (every stage but the first then fills its k + 1 slots; PipelineOrderTest checks
/// the two agree), the simulation's otherwise; 0 on the first stage.
int64_t zeroBubbleWeightSlots(int64_t k, int64_t p, int64_t m);

/// One pass of one micro-batch on one stage of a pipeline whose ranks may hold several
/// stages (model chunks): under the interleaved schedule rank r of p holds stages r,
/// r + p, …, r + (v − 1)p of v·p.
struct StagePass {
  PipelinePass::Kind kind; ///< Forward or Backward
  int64_t stage, micro;
  bool operator==(const StagePass &o) const { return kind == o.kind && stage == o.stage && micro == o.micro; }
};

/// Interleaved 1F1B (Narayanan et al. 2021 §2.2, as Megatron-LM runs it): each rank's
/// passes over m micro-batches (a multiple of p) with v stages a rank. Its k-th forward
/// is micro-batch (k / pv)·p + k mod p on its chunk (k mod pv) / p, its k-th backward the
/// same micro-batch on chunk v − 1 − (k mod pv) / p: the chunks take p micro-batches in
/// turn. Rank r runs min(mv, 2(p − r − 1) + (v − 1)p) forwards to fill the pipeline, then
/// one forward and one backward in turn, then the remaining backwards. Each pass is
/// StagePass{kind, chunk·p + r, micro}.
std::vector<std::vector<StagePass>> interleavedOrders(int64_t p, int64_t v, int64_t m);

/// One step of a rank's program: a pass, or a transfer with a neighbouring stage's rank.
/// A transfer is named by its pass: a Send of a forward pass hands its activation on to
/// stage + 1, of a backward pass its input's gradient back to stage − 1; a Recv of a
/// forward pass brings its input from stage − 1, of a backward pass its output's
/// gradient from stage + 1.
struct ProgramStep {
  enum Kind { Compute, Send, Recv } kind;
  StagePass pass;
  int64_t peer = -1; ///< the rank sent to or received from
};

/// Every rank's program, and what its receives keep.
struct PipelineProgram {
  std::vector<std::vector<ProgramStep>> ranks;
  /// Per stage, the slots of inputs it holds (received, held until its backward pass ends)
  /// and of output gradients (received, held until that pass ends): micro-batch i's in
  /// slot i mod slots, never two held at once in one slot.
  std::vector<int64_t> inputSlots, gradientSlots;
  /// Per stage, the slots of what a forward pass keeps for its backward pass (`keep:
  /// activations`), held from the forward pass until the backward pass ends.
  std::vector<int64_t> savedSlots;
  double stepTime = 0; ///< when the last pass ends, transfers taking no time
};

/// Places the transfers of `orders` (each rank's passes, stages of `stages` spread over
/// p ranks as stage mod p, each holding its stages' passes in the order it runs them) so
/// that no program can wait forever when a send completes only once its receive is
/// posted: the passes are replayed (a forward pass taking f, a backward pass b; the last
/// stage's forward nothing and its backward f + b, as it computes its forward), every
/// transfer is given the time its data is made, and each rank's program takes its passes
/// and transfers in the order of those times (at one time, transfers first, in one order
/// on every rank: a send's data is always made, and a receive's always needed, no
/// earlier). Every rank then meets its transfers in one global order, so the earliest
/// transfer not done always has both ends waiting for it. Empty when the orders
/// themselves deadlock.
PipelineProgram pipelineProgram(const std::vector<std::vector<StagePass>> &orders, int64_t p, int64_t stages, double f,
                                double b);

/// The interleaved schedule's program for p ranks of v stages each over m micro-batches:
/// pipelineProgram over interleavedOrders(p, v, m), a backward pass taking twice a forward
/// pass. plan-schedule emits it, and `planc explain` sizes each rank's buffers from it.
PipelineProgram interleavedProgram(int64_t p, int64_t v, int64_t m);

} // namespace plan::schedule

#endif // PLAN_SCHEDULE_PIPELINEORDER_H
