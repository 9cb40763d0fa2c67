// Pipeline schedules' orders of passes: zero-bubble's, interleaved 1F1B's, and a
// placement of transfers that cannot deadlock (PipelineOrder.h).
#include "plan/Schedule/PipelineOrder.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
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
  int64_t m = 0;
  for (const PipelinePass &x : st[0].fb)
    m = std::max(m, x.micro + 1);
  // When each stage's forward and backward of each micro-batch end, by k * m + micro;
  // negative: not yet simulated.
  std::vector<double> forwardEnd(size_t(p * m), -1), backwardEnd(size_t(p * m), -1);
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
        const std::vector<double> *from = nullptr;
        int64_t dep = 0;
        if ((pass.kind == PipelinePass::Forward || last) && k > 0)
          dep = (k - 1) * m + pass.micro, from = &forwardEnd;
        else if (pass.kind == PipelinePass::Backward && !last)
          dep = (k + 1) * m + pass.micro, from = &backwardEnd;
        double ready = 0;
        if (from) {
          ready = (*from)[size_t(dep)];
          if (ready < 0)
            break; // not yet simulated: another stage first
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
        (pass.kind == PipelinePass::Forward ? forwardEnd : backwardEnd)[size_t(k * m + pass.micro)] = s.clock;
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
  // Pure in (p, m), and asked for by every zero-bubble layout a search estimates.
  static std::mutex lock;
  static std::map<std::pair<int64_t, int64_t>, std::vector<StageOrder>> cache;
  {
    std::lock_guard<std::mutex> hold(lock);
    auto it = cache.find({p, m});
    if (it != cache.end())
      return it->second;
  }
  std::vector<SimStage> st = stages(p, m);
  simulate(st, p, 1, 1, 1, /*decide=*/true);
  std::vector<StageOrder> out;
  for (SimStage &s : st)
    out.push_back(std::move(s.order));
  std::lock_guard<std::mutex> hold(lock);
  return cache.emplace(std::make_pair(p, m), std::move(out)).first->second;
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

std::vector<std::vector<StagePass>> interleavedOrders(int64_t p, int64_t v, int64_t m) {
  std::vector<std::vector<StagePass>> out(static_cast<size_t>(p));
  int64_t n = m * v; // passes of each kind on a rank
  for (int64_t r = 0; r < p; ++r) {
    auto pass = [&](PipelinePass::Kind kind, int64_t k) {
      int64_t chunk = k % (p * v) / p, micro = k / (p * v) * p + k % p;
      if (kind == PipelinePass::Backward)
        chunk = v - 1 - chunk;
      return StagePass{kind, chunk * p + r, micro};
    };
    int64_t warmup = std::min(n, 2 * (p - r - 1) + (v - 1) * p);
    std::vector<StagePass> &order = out[size_t(r)];
    for (int64_t k = 0; k < warmup; ++k)
      order.push_back(pass(PipelinePass::Forward, k));
    for (int64_t k = 0; k + warmup < n; ++k) {
      order.push_back(pass(PipelinePass::Forward, warmup + k));
      order.push_back(pass(PipelinePass::Backward, k));
    }
    for (int64_t k = std::max<int64_t>(n - warmup, 0); k < n; ++k)
      order.push_back(pass(PipelinePass::Backward, k));
  }
  return out;
}

namespace {
using Key = std::pair<int64_t, int64_t>; // (stage, micro)

/// When each pass of `orders` starts and ends, each rank running its passes in turn as
/// their inputs arrive; false if some rank waits forever.
bool replayPasses(const std::vector<std::vector<StagePass>> &orders, int64_t stages, double f, double b,
                  std::map<Key, double> &fwdEnd, std::map<Key, double> &bwdEnd,
                  std::vector<std::vector<double>> &start) {
  size_t p = orders.size();
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0);
  start.assign(p, {});
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < p; ++r)
      for (; next[r] < orders[r].size(); ++next[r]) {
        const StagePass &x = orders[r][next[r]];
        bool last = x.stage + 1 == stages, fwd = x.kind == PipelinePass::Forward;
        // Its input: the previous stage's activation; the next stage's gradient (the last
        // stage: its own forward pass, which took its input).
        const std::map<Key, double> &from = fwd || last ? fwdEnd : bwdEnd;
        Key dep = fwd ? Key{x.stage - 1, x.micro} : last ? Key{x.stage, x.micro} : Key{x.stage + 1, x.micro};
        double ready = 0;
        if (!(fwd && x.stage == 0)) {
          auto it = from.find(dep);
          if (it == from.end())
            break;
          ready = it->second;
        }
        start[r].push_back(std::max(clock[r], ready));
        clock[r] = start[r].back() + (fwd ? (last ? 0 : f) : (last ? f + b : b));
        (fwd ? fwdEnd : bwdEnd)[{x.stage, x.micro}] = clock[r];
        progress = true;
      }
  }
  for (size_t r = 0; r < p; ++r)
    if (next[r] < orders[r].size())
      return false;
  return true;
}

/// The fewest slots in which micro-batch i takes slot i mod slots and no two of the
/// holds [first, last] (program positions on one rank) share a slot while both last: from
/// the most holds that last at once up, each count checked in one sweep in order of
/// first position (a hold clashes when one before it in its slot lasts past its start).
int64_t slotsFor(std::vector<std::tuple<int64_t, size_t, size_t>> holds) {
  if (holds.empty())
    return 0;
  std::sort(holds.begin(), holds.end(), [](const auto &x, const auto &y) { return std::get<1>(x) < std::get<1>(y); });
  std::multiset<size_t> lasting;
  int64_t most = 0;
  for (auto &[micro, first, last] : holds) {
    lasting.erase(lasting.begin(), lasting.upper_bound(first));
    lasting.insert(last);
    most = std::max(most, int64_t(lasting.size()));
  }
  for (int64_t k = most;; ++k) {
    std::vector<size_t> end(static_cast<size_t>(k), 0);
    std::vector<bool> used(static_cast<size_t>(k), false);
    bool clash = false;
    for (auto &[micro, first, last] : holds) {
      size_t slot = size_t(micro % k);
      if (used[slot] && end[slot] > first) {
        clash = true;
        break;
      }
      used[slot] = true;
      end[slot] = std::max(end[slot], last);
    }
    if (!clash)
      return k;
  }
}
} // namespace

PipelineProgram pipelineProgram(const std::vector<std::vector<StagePass>> &orders, int64_t p, int64_t stages, double f,
                                double b) {
  std::map<Key, double> fwdEnd, bwdEnd;
  std::vector<std::vector<double>> start;
  PipelineProgram out;
  if (!replayPasses(orders, stages, f, b, fwdEnd, bwdEnd, start))
    return out;
  // Each rank's steps by (time, transfers before passes, then a transfer's name or a
  // pass's place in its order): one order of the transfers on every rank.
  using Sort = std::tuple<double, int, int, int64_t, int64_t>;
  std::vector<std::vector<std::pair<Sort, ProgramStep>>> steps(static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r)
    for (size_t i = 0; i < orders[size_t(r)].size(); ++i) {
      const StagePass &x = orders[size_t(r)][i];
      steps[size_t(r)].push_back({{start[size_t(r)][i], 1, 0, int64_t(i), 0}, {ProgramStep::Compute, x, -1}});
    }
  auto transfer = [&](const StagePass &x, double at, int64_t to) {
    int64_t from = x.stage % p;
    Sort key{at, 0, x.kind == PipelinePass::Forward ? 0 : 1, x.stage, x.micro};
    StagePass needs = x.kind == PipelinePass::Forward ? StagePass{x.kind, x.stage + 1, x.micro}
                                                       : StagePass{x.kind, x.stage - 1, x.micro};
    steps[size_t(from)].push_back({key, {ProgramStep::Send, x, to}});
    steps[size_t(to)].push_back({key, {ProgramStep::Recv, needs, from}});
  };
  for (auto &[k, t] : fwdEnd)
    if (k.first + 1 < stages)
      transfer({PipelinePass::Forward, k.first, k.second}, t, (k.first + 1) % p);
  for (auto &[k, t] : bwdEnd)
    if (k.first > 0)
      transfer({PipelinePass::Backward, k.first, k.second}, t, (k.first - 1) % p);
  out.ranks.resize(size_t(p));
  std::map<Key, size_t> inputAt, gradientAt, forwardAt, backwardAt; // program positions on the stage's rank
  for (int64_t r = 0; r < p; ++r) {
    std::sort(steps[size_t(r)].begin(), steps[size_t(r)].end(),
              [](const auto &a, const auto &c) { return a.first < c.first; });
    for (auto &entry : steps[size_t(r)]) {
      const ProgramStep &step = entry.second;
      size_t at = out.ranks[size_t(r)].size();
      Key k{step.pass.stage, step.pass.micro};
      if (step.kind == ProgramStep::Recv)
        (step.pass.kind == PipelinePass::Forward ? inputAt : gradientAt)[k] = at;
      if (step.kind == ProgramStep::Compute)
        (step.pass.kind == PipelinePass::Backward ? backwardAt : forwardAt)[k] = at;
      out.ranks[size_t(r)].push_back(step);
    }
  }
  for (auto &[k, t] : bwdEnd) // each rank ends on a backward pass
    out.stepTime = std::max(out.stepTime, t);
  out.inputSlots.assign(size_t(stages), 0);
  out.gradientSlots.assign(size_t(stages), 0);
  out.savedSlots.assign(size_t(stages), 0);
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<std::tuple<int64_t, size_t, size_t>> inputs, gradients, saved;
    for (auto &[k, at] : backwardAt)
      if (k.first == s) {
        if (auto it = inputAt.find(k); it != inputAt.end())
          inputs.push_back({k.second, it->second, at});
        if (auto it = gradientAt.find(k); it != gradientAt.end())
          gradients.push_back({k.second, it->second, at});
        if (auto it = forwardAt.find(k); it != forwardAt.end())
          saved.push_back({k.second, it->second, at});
      }
    out.inputSlots[size_t(s)] = slotsFor(inputs);
    out.gradientSlots[size_t(s)] = slotsFor(gradients);
    out.savedSlots[size_t(s)] = slotsFor(saved);
  }
  return out;
}

PipelineProgram interleavedProgram(int64_t p, int64_t v, int64_t m) {
  // `planc explain --search` weighs thousands of layouts of a few shapes: each built once.
  static std::mutex lock;
  static std::map<std::tuple<int64_t, int64_t, int64_t>, PipelineProgram> built;
  std::lock_guard<std::mutex> hold(lock);
  auto it = built.find({p, v, m});
  if (it == built.end())
    it = built.emplace(std::make_tuple(p, v, m), pipelineProgram(interleavedOrders(p, v, m), p, p * v, 1, 2)).first;
  return it->second;
}

} // namespace plan::schedule
