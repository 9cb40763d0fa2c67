// The zero-bubble schedule's order of passes (PipelineOrder.h).
#include "plan/Schedule/PipelineOrder.h"

#include <algorithm>
#include <deque>
#include <map>
#include <utility>

namespace plan::schedule {

std::vector<PipelinePass> oneFOneBOrder(int64_t k, int64_t p, int64_t m) {
  int64_t warmup = std::min(p - 1 - k, m);
  std::vector<PipelinePass> out;
  for (int64_t i = 0; i < warmup; ++i)
    out.push_back({PipelinePass::Forward, i});
  for (int64_t j = 0; j + warmup < m; ++j) {
    out.push_back({PipelinePass::Forward, warmup + j});
    out.push_back({PipelinePass::Backward, j});
  }
  for (int64_t j = std::max<int64_t>(m - warmup, 0); j < m; ++j)
    out.push_back({PipelinePass::Backward, j});
  return out;
}

bool weightPassCanWait(int64_t k, int64_t p, int64_t m, PipelinePass pass) {
  int64_t warmup = std::min(p - 1 - k, m);
  if (pass.kind == PipelinePass::Forward) // the warm-up's receives, and the steady state's first
    return k == 0 || pass.micro <= warmup;
  if (k + 1 == p) // the last stage: its first input by a receive, the others by send_recv
    return pass.micro == 0;
  return pass.micro >= m - warmup; // the cool-down's receives
}

namespace {
/// One stage of the simulation.
struct SimStage {
  std::vector<PipelinePass> fb; ///< 1F1B's forwards and backwards
  size_t next = 0;
  std::deque<int64_t> waiting; ///< micro-batches whose weight pass is due
  double clock = 0;
  int64_t forwards = 0, weights = 0;
  StageOrder order;
  std::vector<PipelinePass> fixed; ///< replay: the order to follow
  size_t at = 0;                   ///< replay: the next pass of `fixed`
};

/// Runs the step: with `decide`, puts the weight passes by the rule of zeroBubbleOrders
/// (unit costs); otherwise follows each stage's `fixed` order. Passes cost f, b (the input
/// pass; the first stage's whole backward b + w, the last stage's b + f) and w. A weight
/// pass before a pass whose input comes by a send_recv runs once that input is there, as
/// plan-schedule emits it. Returns when the last pass ends.
double simulate(std::vector<SimStage> &st, int64_t p, double f, double b, double w, bool decide) {
  std::map<std::pair<int64_t, int64_t>, double> forwardEnd, backwardEnd;
  int64_t m = 0;
  for (const PipelinePass &x : st[0].fb)
    m = std::max(m, x.micro + 1);
  auto runWeight = [&](SimStage &s) {
    s.order.passes.push_back({PipelinePass::Weight, s.waiting.front()});
    s.waiting.pop_front();
    s.clock += w;
    ++s.weights;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t k = 0; k < p; ++k) {
      SimStage &s = st[size_t(k)];
      bool split = k > 0, last = k + 1 == p;
      while (s.next < s.fb.size()) {
        PipelinePass pass = s.fb[s.next];
        // What the pass waits for: the previous stage's forward (the last stage's backward
        // too: it runs its forward), the next stage's backward.
        const std::map<std::pair<int64_t, int64_t>, double> *from = nullptr;
        std::pair<int64_t, int64_t> dep{-1, -1};
        if ((pass.kind == PipelinePass::Forward || last) && k > 0)
          dep = {k - 1, pass.micro}, from = &forwardEnd;
        else if (pass.kind == PipelinePass::Backward && !last)
          dep = {k + 1, pass.micro}, from = &backwardEnd;
        double ready = 0;
        if (from) {
          auto it = from->find(dep);
          if (it == from->end())
            break; // not yet simulated: another stage first
          ready = it->second;
        }
        bool canWait = weightPassCanWait(k, p, m, pass);
        bool weightNow;
        if (decide) {
          bool full = pass.kind == PipelinePass::Forward && s.forwards - s.weights >= p;
          weightNow = !s.waiting.empty() && ((canWait && ready >= s.clock + w) || full);
        } else {
          weightNow = s.at < s.fixed.size() && s.fixed[s.at].kind == PipelinePass::Weight;
        }
        if (weightNow) {
          if (!canWait)
            s.clock = std::max(s.clock, ready);
          runWeight(s);
          ++s.at;
          progress = true;
          continue;
        }
        double cost = pass.kind == PipelinePass::Forward ? (last ? 0 : f) : (split ? b : b + w) + (last ? f : 0);
        s.clock = std::max(s.clock, ready) + cost;
        (pass.kind == PipelinePass::Forward ? forwardEnd : backwardEnd)[{k, pass.micro}] = s.clock;
        if (!(last && pass.kind == PipelinePass::Forward)) { // the last stage's backward runs its forward
          s.order.passes.push_back(pass);
          ++s.at;
        }
        ++s.next;
        progress = true;
        if (pass.kind == PipelinePass::Forward)
          ++s.forwards;
        else if (split)
          s.waiting.push_back(pass.micro);
        else
          ++s.weights;
        s.order.weightSlots = std::max(s.order.weightSlots, int64_t(s.waiting.size()));
      }
      if (s.next == s.fb.size() && !s.waiting.empty()) {
        while (!s.waiting.empty())
          runWeight(s);
        progress = true;
      }
    }
  }
  double end = 0;
  for (const SimStage &s : st)
    end = std::max(end, s.clock);
  return end;
}

std::vector<SimStage> stages(int64_t p, int64_t m) {
  std::vector<SimStage> st(static_cast<size_t>(p));
  for (int64_t k = 0; k < p; ++k)
    st[size_t(k)].fb = oneFOneBOrder(k, p, m);
  return st;
}
} // namespace

std::vector<StageOrder> zeroBubbleOrders(int64_t p, int64_t m) {
  std::vector<SimStage> st = stages(p, m);
  simulate(st, p, 1, 1, 1, /*decide=*/true);
  std::vector<StageOrder> out;
  for (SimStage &s : st)
    out.push_back(std::move(s.order));
  return out;
}

int64_t zeroBubbleWeightSlots(int64_t k, int64_t p, int64_t m) {
  if (k <= 0 || k >= p)
    return 0;
  return m >= p ? k + 1 : zeroBubbleOrders(p, m)[size_t(k)].weightSlots;
}

double zeroBubbleStepTime(int64_t p, int64_t m, double f, double b, double w) {
  // Past 4p micro-batches each one more adds a stage's f + b + w (the steady state):
  // simulate 4p and add the rest.
  int64_t simulated = std::min(m, 4 * p);
  std::vector<StageOrder> orders = zeroBubbleOrders(p, simulated);
  std::vector<SimStage> st = stages(p, simulated);
  for (int64_t k = 0; k < p; ++k)
    st[size_t(k)].fixed = orders[size_t(k)].passes;
  return simulate(st, p, f, b, w, /*decide=*/false) + double(m - simulated) * (f + b + w);
}

} // namespace plan::schedule
