// The zero-bubble schedule's order of passes (schedule::zeroBubbleOrders) against the
// properties ZB-H1 must have (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", §3):
// each stage's forward and backward passes in 1F1B's order, one weight pass per
// micro-batch after its input pass on every stage but the first, at most p micro-batches
// held between a forward pass and its weight pass, and, replayed with unit-time passes,
// the paper's bubble of (p − 1)(T_F + T_B − T_W) = p − 1 units against 1F1B's
// (p − 1)(T_F + T_B + T_W) = 3(p − 1).
#include "plan/Schedule/PipelineOrder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

using namespace plan::schedule;

namespace {

using Kind = PipelinePass::Kind;

/// Replays each stage's order with F, B and W of one unit (a stage's backward pass whole
/// when `whole`: B + W; the first stage's always; the last stage's B computes its forward
/// too) and returns when the last pass ends. A pass starts when the stage is free and
/// its input is there: the previous stage's F, the next stage's B (the last stage: its
/// own forward, which is part of its B).
int64_t replay(const std::vector<std::vector<PipelinePass>> &orders, int64_t p, bool whole) {
  std::map<std::pair<int64_t, int64_t>, int64_t> forwardEnd, backwardEnd;
  std::vector<size_t> next(size_t(p), 0);
  std::vector<int64_t> clock(size_t(p), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t k = 0; k < p; ++k) {
      bool last = k + 1 == p, split = !whole && k > 0;
      for (; next[size_t(k)] < orders[size_t(k)].size(); ++next[size_t(k)]) {
        PipelinePass pass = orders[size_t(k)][next[size_t(k)]];
        int64_t ready = 0, cost = 1;
        if (pass.kind == Kind::Forward && k > 0) {
          auto it = forwardEnd.find({k - 1, pass.micro});
          if (it == forwardEnd.end())
            break;
          ready = it->second;
        } else if (pass.kind == Kind::Backward) {
          auto it = last ? forwardEnd.find({k - 1, pass.micro}) : backwardEnd.find({k + 1, pass.micro});
          if (k > 0 || !last) {
            if (it == (last ? forwardEnd.end() : backwardEnd.end()))
              break;
            ready = it->second;
          }
          cost = (split ? 1 : 2) + (last ? 1 : 0);
        }
        int64_t &t = clock[size_t(k)];
        t = std::max(t, ready) + cost;
        if (pass.kind == Kind::Forward)
          forwardEnd[{k, pass.micro}] = t;
        if (pass.kind == Kind::Backward)
          backwardEnd[{k, pass.micro}] = t;
        progress = true;
      }
    }
  }
  for (int64_t k = 0; k < p; ++k)
    EXPECT_EQ(next[size_t(k)], orders[size_t(k)].size()) << "stage " << k << " deadlocked";
  return *std::max_element(clock.begin(), clock.end());
}

std::vector<PipelinePass> without(std::vector<PipelinePass> passes, Kind kind) {
  passes.erase(std::remove_if(passes.begin(), passes.end(), [&](const PipelinePass &x) { return x.kind == kind; }),
               passes.end());
  return passes;
}

} // namespace

TEST(PipelineOrder, ZeroBubbleKeepsOneFOneBOrderAndOneWeightPassPerMicroBatch) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {int64_t(1), int64_t(2), p, 2 * p, int64_t(16)}) {
      std::vector<StageOrder> orders = zeroBubbleOrders(p, m);
      ASSERT_EQ(int64_t(orders.size()), p);
      for (int64_t k = 0; k < p; ++k) {
        const std::vector<PipelinePass> &passes = orders[size_t(k)].passes;
        std::vector<PipelinePass> fb = oneFOneBOrder(k, p, m);
        if (k + 1 == p) // the last stage's backward pass runs its forward
          fb = without(fb, Kind::Forward);
        EXPECT_EQ(without(passes, Kind::Weight), fb) << "p " << p << " m " << m << " stage " << k;
        std::vector<int64_t> weights;
        int64_t held = 0, most = 0, waiting = 0, mostWaiting = 0;
        for (const PipelinePass &x : passes) {
          if (x.kind == Kind::Weight) {
            weights.push_back(x.micro);
            EXPECT_NE(std::find(passes.begin(), passes.end(), PipelinePass{Kind::Backward, x.micro}), passes.end());
            EXPECT_LT(std::find(passes.begin(), passes.end(), PipelinePass{Kind::Backward, x.micro}) - passes.begin(),
                      std::find(passes.begin(), passes.end(), x) - passes.begin());
            --held;
            --waiting;
          }
          bool first = x.kind == (k + 1 == p ? Kind::Backward : Kind::Forward);
          held += first ? 1 : 0;
          if (x.kind == Kind::Backward && k == 0)
            --held; // the first stage's backward pass is whole
          waiting += x.kind == Kind::Backward && k > 0 ? 1 : 0;
          most = std::max(most, held);
          mostWaiting = std::max(mostWaiting, waiting);
        }
        std::vector<int64_t> all(size_t(k > 0 ? m : 0));
        for (size_t i = 0; i < all.size(); ++i)
          all[i] = int64_t(i);
        EXPECT_EQ(weights, all) << "p " << p << " m " << m << " stage " << k;
        EXPECT_LE(most, p) << "p " << p << " m " << m << " stage " << k;
        EXPECT_EQ(orders[size_t(k)].weightSlots, mostWaiting);
      }
    }
}

TEST(PipelineOrder, WeightSlotsWithoutSimulatingAgreeWithTheSimulation) {
  for (int64_t p = 2; p <= 16; ++p)
    for (int64_t m = 1; m <= 3 * p; ++m) {
      std::vector<StageOrder> orders = zeroBubbleOrders(p, m);
      for (int64_t k = 0; k < p; ++k)
        EXPECT_EQ(zeroBubbleWeightSlots(k, p, m), orders[size_t(k)].weightSlots) << "p " << p << " m " << m << " k " << k;
    }
}

TEST(PipelineOrder, ZeroBubbleHasThePapersBubbleWithPMicroBatchesAndLessThan1F1BsWithMore) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {p, 2 * p, int64_t(32)}) {
      std::vector<std::vector<PipelinePass>> onef;
      for (int64_t k = 0; k < p; ++k) // the last stage's backward pass runs its forward
        onef.push_back(k + 1 == p ? without(oneFOneBOrder(k, p, m), Kind::Forward) : oneFOneBOrder(k, p, m));
      EXPECT_EQ(replay(onef, p, /*whole=*/true), 3 * m + 3 * (p - 1)) << "p " << p << " m " << m;
      // Unit-time passes: 3m units of work per stage; the paper's bubble is p - 1.
      double zb = zeroBubbleStepTime(p, m, 1, 1, 1);
      if (m == p)
        EXPECT_EQ(zb, double(3 * m + (p - 1))) << "p " << p;
      EXPECT_GE(zb, double(3 * m + (p - 1))) << "p " << p << " m " << m;
      EXPECT_LT(zb, double(3 * m + 3 * (p - 1))) << "p " << p << " m " << m;
    }
}

TEST(PipelineOrder, ZeroBubbleStepTimeGrowsByAStagePerMicroBatchPastTheWarmUp) {
  // The steady state adds f + b + w per micro-batch: the simulation of 4p micro-batches
  // extended (zeroBubbleStepTime) agrees with the simulation of more.
  for (int64_t p : {2, 3, 4})
    for (int64_t m = 2 * p; m <= 6 * p; ++m) {
      double a = zeroBubbleStepTime(p, m, 1.0, 1.5, 0.75), b = zeroBubbleStepTime(p, m + 1, 1.0, 1.5, 0.75);
      EXPECT_DOUBLE_EQ(b - a, 3.25) << "p " << p << " m " << m;
    }
}

// Interleaved 1F1B (schedule::interleavedOrders) and the transfers placed around it
// (schedule::pipelineProgram), run by an executor written here: a send completes only
// when its peer's next step is the matching receive (no buffering: MPI_Ssend, NCCL), and
// a receive only from its send.
namespace {

std::vector<std::tuple<int64_t, int64_t, int64_t>> interleavedShapes() {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out; // p, v, m
  for (int64_t p : {2, 3, 4})
    for (int64_t v : {2, 3})
      for (int64_t m : {p, 2 * p, 4 * p})
        out.push_back({p, v, m});
  return out;
}

/// Runs `prog` to its end; an empty string, or what went wrong: a deadlock, a receive of
/// another transfer than the one sent, a pass before its input, a stage's output
/// overwritten before it was sent, a slot received into while it holds another
/// micro-batch, a forward pass keeping its values (`keep: activations`) in a slot another
/// micro-batch's backward pass has not read yet.
std::string execute(const PipelineProgram &prog, int64_t p, int64_t stages) {
  using Key = std::pair<int64_t, int64_t>;
  std::vector<size_t> at(size_t(p), 0);
  std::set<Key> input, gradient, forwardDone, backwardDone;
  std::map<int64_t, std::map<int64_t, int64_t>> inputSlot, gradientSlot, savedSlot; // stage -> slot -> micro
  std::map<std::pair<int, int64_t>, bool> unsent; // (kind, stage) -> output waiting for its send
  auto hold = [&](std::map<int64_t, std::map<int64_t, int64_t>> &slots, int64_t s, int64_t micro, int64_t n) {
    if (n <= 0)
      return false;
    auto [it, fresh] = slots[s].insert({micro % n, micro});
    return fresh;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      const std::vector<ProgramStep> &steps = prog.ranks[size_t(r)];
      if (at[size_t(r)] >= steps.size())
        continue;
      const ProgramStep &x = steps[at[size_t(r)]];
      Key k{x.pass.stage, x.pass.micro};
      bool fwd = x.pass.kind == PipelinePass::Forward, last = x.pass.stage + 1 == stages;
      if (x.kind == ProgramStep::Compute) {
        if (x.pass.stage % p != r)
          return "a pass on another stage's rank";
        if (fwd && x.pass.stage > 0 && !input.count(k))
          return "a forward pass before its input";
        if (!fwd && (!forwardDone.count(k) || (!last && !gradient.count(k))))
          return "a backward pass before its forward pass or its gradient";
        if (unsent[{int(x.pass.kind), x.pass.stage}])
          return "a stage's output overwritten before its send";
        if (fwd && !prog.savedSlots.empty() &&
            !hold(savedSlot, x.pass.stage, x.pass.micro, prog.savedSlots[size_t(x.pass.stage)]))
          return "a forward pass keeping its values in a slot another micro-batch holds";
        (fwd ? forwardDone : backwardDone).insert(k);
        unsent[{int(x.pass.kind), x.pass.stage}] = fwd ? !last : x.pass.stage > 0;
        if (!fwd) { // its input and gradient are let go
          inputSlot[x.pass.stage].erase(x.pass.micro % std::max<int64_t>(1, prog.inputSlots[size_t(x.pass.stage)]));
          gradientSlot[x.pass.stage].erase(x.pass.micro %
                                           std::max<int64_t>(1, prog.gradientSlots[size_t(x.pass.stage)]));
          if (!prog.savedSlots.empty())
            savedSlot[x.pass.stage].erase(x.pass.micro % std::max<int64_t>(1, prog.savedSlots[size_t(x.pass.stage)]));
        }
        ++at[size_t(r)];
        progress = true;
        continue;
      }
      if (x.kind == ProgramStep::Recv)
        continue; // completes with its send
      const std::vector<ProgramStep> &peer = prog.ranks[size_t(x.peer)];
      if (at[size_t(x.peer)] >= peer.size() || peer[at[size_t(x.peer)]].kind != ProgramStep::Recv ||
          peer[at[size_t(x.peer)]].peer != r)
        continue; // the peer is not receiving from this rank yet
      const ProgramStep &y = peer[at[size_t(x.peer)]];
      int64_t to = fwd ? x.pass.stage + 1 : x.pass.stage - 1;
      if (!(y.pass == StagePass{x.pass.kind, to, x.pass.micro}))
        return "a receive of another transfer than the one sent";
      if (!(fwd ? forwardDone : backwardDone).count(k))
        return "a send before its pass";
      unsent[{int(x.pass.kind), x.pass.stage}] = false;
      Key got{to, x.pass.micro};
      (fwd ? input : gradient).insert(got);
      if (!hold(fwd ? inputSlot : gradientSlot, to, x.pass.micro,
                (fwd ? prog.inputSlots : prog.gradientSlots)[size_t(to)]))
        return "a receive into a slot that holds another micro-batch";
      ++at[size_t(r)];
      ++at[size_t(x.peer)];
      progress = true;
    }
  }
  for (int64_t r = 0; r < p; ++r)
    if (at[size_t(r)] < prog.ranks[size_t(r)].size())
      return "deadlock: rank " + std::to_string(r) + " waits at step " + std::to_string(at[size_t(r)]);
  return "";
}

} // namespace

TEST(PipelineOrder, InterleavedRunsEachPassOnceOnItsRankInMicroBatchOrder) {
  for (auto [p, v, m] : interleavedShapes()) {
    std::vector<std::vector<StagePass>> orders = interleavedOrders(p, v, m);
    ASSERT_EQ(int64_t(orders.size()), p);
    for (int64_t r = 0; r < p; ++r) {
      SCOPED_TRACE("p " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m) + " rank " +
                   std::to_string(r));
      const std::vector<StagePass> &o = orders[size_t(r)];
      EXPECT_EQ(int64_t(o.size()), 2 * m * v);
      std::map<std::pair<int, int64_t>, int64_t> nextMicro; // (kind, stage) -> the micro-batch due
      std::set<std::pair<int64_t, int64_t>> forwards;
      for (const StagePass &x : o) {
        EXPECT_EQ(x.stage % p, r);
        EXPECT_LT(x.stage, p * v);
        int64_t &due = nextMicro[std::make_pair(int(x.kind), x.stage)];
        EXPECT_EQ(x.micro, due++);
        if (x.kind == PipelinePass::Forward)
          forwards.insert({x.stage, x.micro});
        else
          EXPECT_TRUE(forwards.count({x.stage, x.micro}));
      }
    }
  }
}

TEST(PipelineOrder, InterleavedTransfersCannotDeadlockAndMeetTheirReceives) {
  for (auto [p, v, m] : interleavedShapes()) {
    SCOPED_TRACE("p " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m));
    PipelineProgram prog = interleavedProgram(p, v, m);
    ASSERT_EQ(int64_t(prog.ranks.size()), p);
    EXPECT_EQ(execute(prog, p, p * v), "");
    // Every stage but the first holds inputs, every one but the last gradients, every one
    // a forward pass's kept values; never more than the micro-batches.
    for (int64_t s = 0; s < p * v; ++s) {
      EXPECT_EQ(prog.inputSlots[size_t(s)] > 0, s > 0);
      EXPECT_EQ(prog.gradientSlots[size_t(s)] > 0, s + 1 < p * v);
      EXPECT_GT(prog.savedSlots[size_t(s)], 0);
      EXPECT_LE(prog.inputSlots[size_t(s)], m);
      EXPECT_LE(prog.gradientSlots[size_t(s)], m);
      EXPECT_LE(prog.savedSlots[size_t(s)], m);
    }
  }
  // The same placement around 1F1B's orders (one stage a rank).
  for (int64_t p : {2, 4})
    for (int64_t m : {1, 3, 8}) {
      std::vector<std::vector<StagePass>> orders(static_cast<size_t>(p));
      for (int64_t k = 0; k < p; ++k)
        for (const PipelinePass &x : oneFOneBOrder(k, p, m))
          orders[size_t(k)].push_back({x.kind, k, x.micro});
      PipelineProgram prog = pipelineProgram(orders, p, p, 1, 2);
      EXPECT_EQ(execute(prog, p, p), "") << "1F1B p " << p << " m " << m;
    }
}

// Narayanan et al. 2021 §2.2.1: with v stages a rank, each taking 1/v of a rank's
// forward and backward time, the bubble is (p − 1)/v of a micro-batch's time on a rank:
// the step takes m·v·(f + b) + (p − 1)(f + b) in stage units.
TEST(PipelineOrder, InterleavedHasThePapersBubble) {
  for (auto [p, v, m] : interleavedShapes()) {
    PipelineProgram prog = pipelineProgram(interleavedOrders(p, v, m), p, p * v, 1, 2);
    EXPECT_DOUBLE_EQ(prog.stepTime, double(m * v * 3 + (p - 1) * 3))
        << "p " << p << " v " << v << " m " << m;
  }
}

TEST(PipelineOrder, OrdersThatDeadlockGiveNoProgram) {
  // Rank 1 runs stage 1's backward first: it waits for stage 1's forward, which waits on
  // stage 0's, which rank 0 runs only after stage 0's backward, which waits on stage 1's.
  std::vector<std::vector<StagePass>> orders = {
      {{PipelinePass::Backward, 0, 0}, {PipelinePass::Forward, 0, 0}},
      {{PipelinePass::Forward, 1, 0}, {PipelinePass::Backward, 1, 0}}};
  EXPECT_TRUE(pipelineProgram(orders, 2, 2, 1, 2).ranks.empty());
}

// The executor above sees a deadlock: two ranks that each send before they receive.
TEST(PipelineOrder, TheExecutorSeesTwoSendsFacingEachOther) {
  PipelineProgram prog;
  StagePass f0{PipelinePass::Forward, 0, 0}, f1{PipelinePass::Forward, 1, 0};
  StagePass b1{PipelinePass::Backward, 1, 0}, b0{PipelinePass::Backward, 0, 0};
  prog.ranks = {{{ProgramStep::Compute, f0, -1}, {ProgramStep::Send, b1, 1}, {ProgramStep::Send, f0, 1},
                 {ProgramStep::Recv, b0, 1}, {ProgramStep::Compute, b0, -1}},
                {{ProgramStep::Send, b1, 0}, {ProgramStep::Recv, f1, 0}, {ProgramStep::Compute, f1, -1},
                 {ProgramStep::Compute, b1, -1}, {ProgramStep::Send, b1, 0}}};
  prog.inputSlots = {0, 1};
  prog.gradientSlots = {1, 0};
  EXPECT_EQ(execute(prog, 2, 2).rfind("deadlock", 0), 0u);
}
