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
