// Layout search: every data × tensor × pipeline factorisation of the mesh, ZeRO
// stage, recompute mode, micro-batch size and sequence-parallel choice that passes
// sema::checkLayout and fits the device memory, fastest first; by default only the
// layouts the code generator builds.
#include "plan/Compiler/CostModel.h"
#include "plan/Training/DataParallel.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

using namespace plan;
using namespace plan::cost;

/// Divisors of n up to `cap` (tensor, pipeline and micro-batch sizes beyond a few
/// thousand are never useful, and this keeps absurd batches cheap).
static std::vector<int64_t> divisors(int64_t n, int64_t cap = 4096) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= cap && i <= n; ++i)
    if (n % i == 0)
      out.push_back(i);
  return out;
}

bool plan::cost::buildable(const sema::Layout &l, const Estimate &e) {
  // QLoRA: not with a tensor axis (sema).
  if (l.adapt.rank > 0 && l.adapt.nf4Block > 0 && l.tensor > 1)
    return false;
  // Offload: the optimizer's moments to NVMe, and on a cpu mesh with them (the same
  // buffer) the ZeRO-3 shard over more than one data rank (plan-train-abi).
  if (e.onCuda &&
      ((l.optimizerOffload.any() && l.optimizerOffload.target != sema::OffloadTarget::NVMe) || l.paramsOffload.any()))
    return false;
  if (l.paramsOffload.any() && (!l.optimizerOffload.any() || l.data < 2 ||
                                l.paramsOffload.bufferBytes != l.optimizerOffload.bufferBytes))
    return false;
  // The interleaved schedule: micro-batches a multiple of the pipeline ranks (sema).
  return l.schedule != sema::PipelineSchedule::Interleaved || l.microBatches() % l.pipeline == 0;
}

namespace {
struct Offloads {
  sema::Offload optimizer, params;
};
} // namespace

/// The offloads a layout that does not fit may try, least first: on a cpu mesh the
/// optimizer's moments to NVMe, then under ZeRO-3 over several data ranks the parameter
/// shard too; on a cuda mesh the optimizer's moments to NVMe (what the executables
/// build), the optimizer (and gradients) to the host, then under ZeRO-3 the parameters
/// too, then both to NVMe (ZeRO-Infinity). A plan that names an
/// NVMe directory lends it; otherwise "nvme" stands for one.
static std::vector<Offloads> offloads(const sema::Mesh &mesh, const sema::Layout &base, int zero, int64_t data) {
  std::string dir = base.optimizerOffload.target == sema::OffloadTarget::NVMe ? base.optimizerOffload.dir
                    : base.paramsOffload.target == sema::OffloadTarget::NVMe  ? base.paramsOffload.dir
                                                                               : "nvme";
  sema::Offload cpu, nvme;
  cpu.target = sema::OffloadTarget::CPU;
  nvme.target = sema::OffloadTarget::NVMe;
  nvme.dir = dir;
  nvme.bufferBytes = sema::kDefaultOffloadBufferBytes;
  if (mesh.kind != sema::DeviceKind::CUDA) {
    if (zero == 3 && data > 1)
      return {{nvme, {}}, {nvme, nvme}};
    return {{nvme, {}}};
  }
  std::vector<Offloads> out{{nvme, {}}, {cpu, {}}};
  if (zero == 3)
    out.insert(out.end(), {{cpu, cpu}, {nvme, nvme}});
  return out;
}

/// Replaces (l, e) by the first offload of `offloads` under which l fits, if any.
static void offloadToFit(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &base, int zero,
                         const Calibration &cal, sema::Layout &l, Estimate &e) {
  // What offload cannot move decides first, without another estimate: on a cpu mesh
  // everything but the optimizer's state (and ZeRO-3's shard over several data ranks)
  // stays; on a cuda mesh the activations do (a bound: the moments' offload, tried
  // first there, keeps the parameters and gradients too).
  // (A bound: `params` counts a frozen base's shard too, which stays.)
  bool shardMoves = zero == 3 && l.data > 1;
  int64_t stays = mesh.kind == sema::DeviceKind::CUDA
                      ? e.perDevice.activations
                      : e.perDevice.total() - e.perDevice.optimizer - (shardMoves ? e.perDevice.params : 0);
  if (mesh.memoryBytes && stays > *mesh.memoryBytes)
    return;
  std::vector<Offloads> tries = offloads(mesh, base, zero, l.data);
  auto with = [&](const Offloads &o) {
    sema::Layout out = l;
    out.optimizerOffload = o.optimizer;
    out.paramsOffload = o.params;
    return out;
  };
  // Least first (moving the parameters off may hold more on the device: two gathered
  // units against a shard), each a memory-only estimate.
  for (const Offloads &o : tries)
    if (sema::Layout t = with(o); fits(model, mesh, t, cal)) {
      l = t;
      e = estimate(model, mesh, l, {}, cal);
      return;
    }
}

namespace {
/// Every layout of data d × tensor t × pipeline p that the search estimates, before the
/// static rules: the schedules, what a stage keeps, micro, ZeRO, recompute and sequence
/// parallelism.
std::vector<sema::Layout> layoutsOf(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &base,
                                    int64_t d, int64_t t, int64_t p, const std::set<std::string> &tensorDims) {
  std::vector<sema::PipelineSchedule> schedules = {sema::PipelineSchedule::OneFOneB};
  if (p > 1)
    schedules.push_back(sema::PipelineSchedule::ZeroBubble);
  if (p > 1 && model.layers >= 2 * p)
    schedules.push_back(sema::PipelineSchedule::Interleaved);
  // Under a pipeline each stage keeps its inputs or its activations (`keep:`).
  std::vector<bool> keeps = {false};
  if (p > 1)
    keeps.push_back(true);
  std::vector<sema::Layout> out;
  for (sema::PipelineSchedule sched : schedules)
    for (bool keep : keeps)
      for (int64_t micro : divisors(base.batch / d))
        for (int zero = 0; zero <= (d > 1 ? 3 : 0); ++zero)
          for (sema::Recompute rc : {sema::Recompute::None, sema::Recompute::Selective, sema::Recompute::Full})
            for (bool sp : {false, true}) {
              // Under a pipeline ZeRO-2 and 3 move the bytes ZeRO-1 moves and hold as much
              // at the peak (a stage's parameters and gradient are whole through its
              // micro-batches: plan-schedule), so they never beat it: left out.
              if ((sp && t == 1) || (p > 1 && zero >= 2))
                continue;
              sema::Layout l = base;
              l.data = d;
              l.tensor = t;
              l.pipeline = p;
              l.schedule = sched;
              l.keepActivations = keep;
              l.stages = sched == sema::PipelineSchedule::Interleaved ? 2 * p : p;
              l.micro = micro;
              l.zero = zero;
              l.recompute = rc;
              l.sequence = sp;
              l.bucketBytes = sema::defaultBucketBytes(mesh.kind, d, zero, t, p);
              l.tensorDims = t > 1 ? tensorDims : std::set<std::string>();
              out.push_back(std::move(l));
            }
  return out;
}
} // namespace

std::vector<Candidate> plan::cost::search(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &base,
                                          const SearchOptions &options, const Calibration &cal) {
  int64_t n = mesh.devices();
  std::set<std::string> tensorDims = base.tensorDims;
  if (tensorDims.empty())
    tensorDims = sema::defaultTensorDims();
  std::vector<sema::Layout> layouts;
  for (int64_t t : divisors(n)) {
    for (int64_t p : divisors(n / t)) {
      if (p > 1 && !options.allowPipeline)
        continue;
      if (model.images && (t > 1 || p > 1)) // data parallelism and ZeRO only (sema)
        continue;
      int64_t d = n / t / p;
      if (base.batch % d != 0)
        continue;
      for (sema::Layout &l : layoutsOf(model, mesh, base, d, t, p, tensorDims))
        layouts.push_back(std::move(l));
    }
  }
  // Each layout is estimated on its own (the estimates share only the schedule caches,
  // which lock): over the machine's cores, each result in its layout's place, so that
  // the order below is the same however many threads ran.
  std::vector<std::optional<Candidate>> found(layouts.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < layouts.size();) {
      sema::Layout &l = layouts[i];
      if (!sema::checkLayout(&model, l).empty())
        continue;
      Estimate e = estimate(model, mesh, l, {}, cal);
      // What does not fit may with its state offloaded: the least offload that fits,
      // tried once the most does (else none would).
      if (!e.fits())
        offloadToFit(model, mesh, base, l.zero, cal, l, e);
      if (!e.fits() || (options.buildableOnly && !buildable(l, e)))
        continue;
      found[i] = Candidate{l, std::move(e)};
    }
  };
  size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  threads = std::min(threads, std::max<size_t>(layouts.size() / 64, 1));
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k)
    pool.emplace_back(work);
  work();
  for (std::thread &th : pool)
    th.join();
  std::vector<Candidate> out;
  for (std::optional<Candidate> &c : found)
    if (c)
      out.push_back(std::move(*c));
  // Fastest first; of equally fast layouts the one that needs less memory, then the lower
  // ZeRO stage.
  std::stable_sort(out.begin(), out.end(), [](const Candidate &a, const Candidate &b) {
    return std::make_tuple(a.estimate.stepSeconds, a.estimate.perDevice.total(), a.layout.zero) <
           std::make_tuple(b.estimate.stepSeconds, b.estimate.perDevice.total(), b.layout.zero);
  });
  return out;
}
