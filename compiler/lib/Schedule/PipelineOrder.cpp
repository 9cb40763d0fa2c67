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

namespace {
/// One stage of the simulation.
struct SimStage {
  std::vector<PipelinePass> fb; ///< 1F1B's forwards and backwards
  size_t next = 0;
  std::deque<int64_t> waiting; ///< micro-batches whose weight pass is due
  int64_t clock = 0, forwards = 0, weights = 0;
  StageOrder order;
};
} // namespace

std::vector<StageOrder> zeroBubbleOrders(int64_t p, int64_t m) {
  std::vector<SimStage> st(static_cast<size_t>(p));
  for (int64_t k = 0; k < p; ++k)
    st[size_t(k)].fb = oneFOneBOrder(k, p, m);
  // When each stage's forward and backward of each micro-batch ended.
  std::map<std::pair<int64_t, int64_t>, int64_t> forwardEnd, backwardEnd;
  auto runWeight = [](SimStage &s) {
    s.order.passes.push_back({PipelinePass::Weight, s.waiting.front()});
    s.waiting.pop_front();
    s.clock += 1;
    ++s.weights;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t k = 0; k < p; ++k) {
      SimStage &s = st[size_t(k)];
      bool split = k > 0, last = k + 1 == p;
      while (s.next < s.fb.size()) {
        PipelinePass pass = s.fb[s.next];
        // What the pass waits for: the previous stage's forward, the next stage's
        // backward (the last stage: its own forward).
        std::pair<int64_t, int64_t> dep{-1, -1};
        const std::map<std::pair<int64_t, int64_t>, int64_t> *from = nullptr;
        if (pass.kind == PipelinePass::Forward && k > 0)
          dep = {k - 1, pass.micro}, from = &forwardEnd;
        else if (pass.kind == PipelinePass::Backward)
          dep = last ? std::make_pair(k, pass.micro) : std::make_pair(k + 1, pass.micro),
          from = last ? &forwardEnd : &backwardEnd;
        int64_t ready = 0;
        if (from) {
          auto it = from->find(dep);
          if (it == from->end())
            break; // not yet simulated: another stage first
          ready = it->second;
        }
        bool full = pass.kind == PipelinePass::Forward && s.forwards - s.weights >= p;
        if (!s.waiting.empty() && (ready >= s.clock + 1 || full)) {
          runWeight(s);
          progress = true;
          continue;
        }
        int64_t cost = pass.kind == PipelinePass::Forward ? (last ? 0 : 1) : (split ? 1 : 2) + (last ? 1 : 0);
        s.clock = std::max(s.clock, ready) + cost;
        (pass.kind == PipelinePass::Forward ? forwardEnd : backwardEnd)[{k, pass.micro}] = s.clock;
        if (!(last && pass.kind == PipelinePass::Forward)) // the last stage's backward runs its forward
          s.order.passes.push_back(pass);
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

} // namespace plan::schedule
