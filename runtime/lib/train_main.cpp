// The training driver behind every training executable: planrt_train_main reads
// the command line and the manifest, checks everything it will need (data, files,
// directories) before the first step, initialises or loads the parameters, then
// runs step s = data → grad × accumulation → update, with the log, evaluation,
// checkpoints and the progress line. docs/EXECUTABLES.md is its specification.
// Here: the run's setup and its loop; the manifest, the command line, the progress
// line, this rank's state and the checkpoints each have their own file (trainer.h).
#include "trainer.h"

#include "topology.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <malloc.h>
#include <memory>
#include <string>
#include <vector>

namespace planrt::train {

Trainer::Trainer(const Manifest &m, const Options &o, const Entries &e, planrt_mesh *mesh)
    : m(m), o(o), e(e), end(o.steps ? *o.steps : m.steps), progress(o.quiet, end, planrt_mesh_rank(mesh) > 0) {
  ctx.mesh = mesh;
  rank0 = planrt_mesh_rank(mesh) <= 0;
}

Trainer::~Trainer() {
  watchdog.reset();
  if (arenaReserved)
    planrt_arena_release();
  if (log)
    planrt_log_close(log);
  if (train)
    planrt_data_close(train);
  if (val)
    planrt_data_close(val);
  if (images)
    planrt_images_close(images);
  if (valImages)
    planrt_images_close(valImages);
}

int Trainer::run() {
  bool entries = e.grad && e.sumsq && e.update;
  if (m.pipeline > 1) {
    // Every stage's forward and backward pass, and each pipeline rank's update (under its
    // first stage's entries); the chunk updates and the weight pass are optional.
    entries = e.stages && e.nstages == m.stages;
    for (int64_t i = 0; entries && i < kStageEntries * m.stages; ++i)
      entries = i % kStageEntries >= 3 || (i % kStageEntries == 2 && i / kStageEntries >= m.pipeline) ||
                e.stages[i] != nullptr;
  }
  if (!entries || !e.step || !e.gather || !e.release || (m.fed.any() && !e.round))
    return error(fail(PLANRT_ERR_ARG, "the executable lacks one of its entry points"));
  if (planrt_status s = prepare())
    return error(s);
  if (ctx.mesh) {
    // Ranks finish loading at different times (a large --resume): start together, so
    // that the watchdog times collectives, not the slowest rank's start.
    float ready = 0;
    if (planrt_status s = planrt_mesh_agree(ctx.mesh, &ready))
      return error(s);
    // Launchers name a dead process by its pid: say which pid is which rank.
    int64_t devices = m.dataParallel * m.tensorParallel * m.pipeline * m.fed.clients;
    std::vector<char> ranks(size_t(64 * devices + 64));
    planrt_mesh_describe(ctx.mesh, ranks.data(), ranks.size());
    if (rank0)
      std::fprintf(stderr, "planrt: %lld ranks: %s\n", (long long)devices, ranks.data());
    if (planrt_status s = reportTopology(int(devices)))
      return error(s);
    watchdog = std::make_unique<planrt::Watchdog>(ctx, o.commTimeout);
  }
  if (m.fed.any())
    return runFederated();
  if (start >= end) {
    progress.line("nothing to do: the run starts at step " + std::to_string(start) + " and ends at step " +
                      std::to_string(end),
                  true);
    return finish();
  }
  for (int64_t s = start; s < end; ++s)
    if (planrt_status st = step(s))
      return error(st);
  if (planrt_status st = settleOffload()) // the last update, before its totals
    return error(st);
  progress.clear();
  std::string summary =
      "done · " + std::to_string(end - start) + " steps (to step " + std::to_string(end) + ") · final loss ";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", lastLoss);
  summary +=
      std::string(buf) + " · mean " + rate(double(tokensPerStep()) * double(end - start) / stepSeconds) +
      (m.images.any() ? " images/s" : " tok/s");
  if (ctx.mesh) {
    char share[200];
    if (m.pipeline > 1)
      std::snprintf(share, sizeof share,
                    " (%lld data- × %lld tensor-parallel ranks × %lld pipeline stages; communication %.1f%% of step "
                    "time)",
                    (long long)m.dataParallel, (long long)m.tensorParallel, (long long)m.pipeline,
                    stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
    else if (tensorParallel())
      std::snprintf(share, sizeof share,
                    " (%lld data- × %lld tensor-parallel ranks; communication %.1f%% of step time)",
                    (long long)m.dataParallel, (long long)m.tensorParallel,
                    stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
    else
      std::snprintf(share, sizeof share, " (%lld data-parallel ranks; communication %.1f%% of step time)",
                    (long long)m.dataParallel, stepSeconds > 0 ? 100.0 * stepComm / stepSeconds : 0.0);
    summary += share;
  }
  char mem[160];
  std::snprintf(mem, sizeof mem, " · step buffers peak %.1f MiB · device memory peak %.1f MiB",
                double(maxMemPeak) / (1 << 20), double(planrt_mem_total_peak()) / (1 << 20));
  summary += mem;
  if (arenaReserved) {
    std::snprintf(mem, sizeof mem, " (arena %.1f MiB: %.1f MiB of state, %.1f MiB of step buffers)",
                  double(m.rankStateBytes + m.rankStepBytes) / (1 << 20), double(m.rankStateBytes) / (1 << 20),
                  double(m.rankStepBytes) / (1 << 20));
    summary += mem;
  }
  if (offload) { // the optimizer's moments (and the parameter shard) streamed through NVMe
    double bytes = double(offload->updateBytes);
    std::snprintf(mem, sizeof mem, " · offload %.1f MiB read and written in %.2f s of updates (%.2f GB/s), %.2f s waiting",
                  bytes / (1 << 20), offload->updateSeconds,
                  offload->updateSeconds > 0 ? bytes / offload->updateSeconds / 1e9 : 0.0, offload->waitSeconds);
    summary += mem;
    if (offload->deviceBytes) { // on a device: each record copied in and out (PCIe)
      std::snprintf(mem, sizeof mem, ", %.1f MiB copied to and from the device",
                    double(offload->deviceBytes) / (1 << 20));
      summary += mem;
    }
    if (offload->paramsOffloaded()) {
      std::snprintf(mem, sizeof mem, ", %.1f MiB of parameters fetched for all-gathers in %.2f s",
                    double(offload->fetchBytes) / (1 << 20), offload->fetchSeconds);
      summary += mem;
    }
    if (ctx.overlapUpdate) { // the updates ran on into the next steps
      std::snprintf(mem, sizeof mem, ", overlapped with the next steps, which waited %.2f s for them",
                    offload->overlapWaitSeconds);
      summary += mem;
    }
  }
  if (!lastCheckpoint.empty())
    summary += " · checkpoint " + lastCheckpoint;
  progress.line(summary, true);
  return finish();
}

planrt_status Trainer::reportTopology(int ranks) {
  planrt::HostMap map = planrt::hostMap(ctx.mesh, ranks);
  std::vector<bool> within = planrt::axesWithinHosts(map, m.sizes);
  std::vector<bool> assumed = planrt::axesWithinNodes(m.perNode, m.sizes);
  if (!rank0)
    return PLANRT_OK;
  nlohmann::json hosts = nlohmann::json::array(), axes = nlohmann::json::object();
  for (size_t h = 0; h < map.hosts.size(); ++h) {
    nlohmann::json ranksOf = nlohmann::json::array();
    for (size_t r = 0; r < map.hostOf.size(); ++r)
      if (map.hostOf[r] == int(h))
        ranksOf.push_back(r);
    hosts.push_back({{"name", map.hosts[h]}, {"ranks", ranksOf}});
  }
  std::string inside, across;
  for (size_t a = 0; a < m.axes.size(); ++a) {
    axes[m.axes[a]] = within[a] ? "node" : "network";
    if (m.sizes[a] > 1)
      (within[a] ? inside : across) += (within[a] ? inside : across).empty() ? m.axes[a] : ", " + m.axes[a];
  }
  std::fprintf(stderr, "planrt: %zu host%s: %s; axes within a host: %s; across hosts: %s\n", map.hosts.size(),
               map.hosts.size() == 1 ? "" : "s", planrt::describeHosts(map).c_str(),
               inside.empty() ? "none" : inside.c_str(), across.empty() ? "none" : across.c_str());
  for (size_t a = 0; a < m.axes.size(); ++a)
    if (m.sizes[a] > 1 && assumed[a] && !within[a])
      std::fprintf(stderr,
                   "planrt: warning: axis '%s' crosses hosts, but the mesh holds %lld devices a node, which keeps it "
                   "inside one: planc explain assumed a node link for it, and its collectives take the network; "
                   "give each host %lld ranks (a hostfile's slots, Slurm's tasks per node)\n",
                   m.axes[a].c_str(), (long long)m.perNode, (long long)m.perNode);
  if (!log)
    return PLANRT_OK;
  return planrt_log_json(log, nlohmann::json{{"hosts", hosts}, {"axes", axes}}.dump().c_str());
}

int Trainer::error(planrt_status) {
  progress.clear();
  if (rank0 || !agreed) // a failure every rank has alike is reported once
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
  std::fflush(stderr);
  // Peers blocked in a collective with this rank would wait for ever: stop the job —
  // unless every rank fails here alike (a non-finite loss or norm, reduced over the
  // ranks), when they all return and finalize MPI, so that rank 0's log and message
  // are complete.
  if (ctx.mesh && !agreed)
    planrt_mesh_abort(ctx.mesh, kExitError);
  return kExitError;
}

int Trainer::finish() {
  if (planrt_status s = settleOffload())
    return error(s);
  if (!o.exportFile.empty() || !o.exportAdapters.empty()) {
    planrt_status s = momentsIn(true);
    s = s ? s : exportConsolidated(o.exportFile);
    if (planrt_status out = momentsOut(false); !s)
      s = out;
    if (s)
      return error(s);
  }
  return 0;
}

planrt_status Trainer::prepare() {
  bindStep();
  if (planrt_status s = openData())
    return s;
  if (planrt_status s = prepareOutputs())
    return s;
  if (planrt_status s = allocateBuffers())
    return s;
  // Offloaded state: fresh moments written to their files as zeros, never held; resumed
  // ones, and the parameter shard, through buffers that are freed once they are written.
  bool resuming = !o.resume.empty();
  if (offloaded())
    if (planrt_status s = openOffload(); s || (s = momentsIn(false, /*moments=*/resuming)))
      return s;
  if (planrt_status s = initialState())
    return s;
  return momentsOut(true);
}

void Trainer::bindStep() {
  ctx.dataRank = planrt_mesh_group_rank(ctx.mesh, m.dataMask);
  ctx.dataSize = m.dataParallel;
  ctx.batch = m.batch;
  ctx.micro = m.micro;
  ctx.seq = m.seq;
  ctx.grad = e.grad;
  ctx.sumsq = e.sumsq;
  ctx.update = e.update;
  if (m.pipeline > 1) {
    ctx.pipelineRank = m.stage;
    for (const Manifest::Chunk &c : m.chunks) {
      void *const *fns = e.stages + kStageEntries * c.stage;
      ctx.stages.push_back({c.stage, reinterpret_cast<planrt_stage_fwd_fn>(fns[0]),
                            reinterpret_cast<planrt_stage_bwd_fn>(fns[1]),
                            reinterpret_cast<planrt_stage_wgrad_fn>(fns[5]), c.activationIn, c.activationOut,
                            c.savedFloats, c.wsavedFloats});
    }
    // The update of this rank's parameters, under its first stage's entries.
    void *const *mine = e.stages + kStageEntries * m.stage;
    ctx.update = reinterpret_cast<planrt_update_fn>(mine[2]);
    e.chunk0 = reinterpret_cast<planrt_update_chunk_fn>(mine[3]);
    e.chunk1 = reinterpret_cast<planrt_update_chunk_fn>(mine[4]);
  }
  planrt::setActiveStep(&ctx);
  if (tensorParallel() || m.pipeline > 1) {
    // The gradient norm counts replicated parameters on the group's first rank only.
    ctx.tensorCoord = tensorCoord();
    ctx.tensorSize = m.tensorParallel;
    for (int g = 0; g < 2; ++g) {
      ctx.pieceBegin[g] = m.sharded ? pieceBegin(g) : m.groupBegin[g];
      ctx.pieceFloats[g] = spanFloats(g);
    }
    for (const Param &p : m.params)
      ctx.counted.push_back({p.offset, p.count, (p.splitDim >= 0 || ctx.tensorCoord == 0) && !p.replica});
  }
}

planrt_status Trainer::openData() {
  std::vector<std::string> trainFiles = o.data.empty() ? m.data : o.data;
  if (m.fed.perClient)
    if (planrt_status s = clientFiles(trainFiles))
      return s;
  if (trainFiles.empty())
    return fail(PLANRT_ERR_ARG, "no training data: the plan names none and no --data was given");
  if (m.images.any())
    return openImages(trainFiles, o.val.empty() ? m.val : o.val);
  std::vector<const char *> patterns;
  for (const std::string &f : trainFiles)
    patterns.push_back(f.c_str());
  // --data replaces the plan's files by files of the same kind.
  if (planrt_status s = planrt_data_open_text(patterns.data(), patterns.size(),
                                              m.dataText ? m.tokenizer.c_str() : nullptr, m.seed, m.vocab, &train))
    return s;
  ctx.train = train;
  ctx.tokens.resize(size_t(m.micro * m.seq));
  ctx.targets.resize(size_t(m.micro * m.seq));
  int32_t *tokens = ctx.tokens.data(), *targets = ctx.targets.data();
  if (planrt_status s = planrt_data_sample(train, 0, m.seq, tokens, targets))
    return s;
  std::vector<std::string> valFiles = o.val.empty() ? m.val : o.val;
  if (!valFiles.empty() && m.evalEvery > 0 && m.evalBatches > 0) {
    patterns.clear();
    for (const std::string &f : valFiles)
      patterns.push_back(f.c_str());
    if (planrt_status s = planrt_data_open_text(patterns.data(), patterns.size(),
                                                m.valText ? m.tokenizer.c_str() : nullptr, m.seed, m.vocab, &val))
      return s;
    // Windows are consecutive: if the last one exists, all do.
    uint64_t last = uint64_t(m.evalBatches * m.micro * m.dataParallel - 1);
    if (planrt_data_window(val, last, m.seq, tokens, targets) != PLANRT_OK)
      return fail(PLANRT_ERR_FORMAT,
                  "%s: the validation data holds fewer than eval_batches × micro × data-parallel ranks = %lld "
                  "windows of %lld tokens",
                  valFiles.front().c_str(), (long long)(last + 1), (long long)m.seq + 1);
  }
  return PLANRT_OK;
}

planrt_status Trainer::allocateBuffers() {
  unsigned char *arena = nullptr;
  if (m.arena && !(arena = static_cast<unsigned char *>(
                       planrt_arena_reserve(uint64_t(m.rankStateBytes), uint64_t(m.rankStepBytes)))))
    return PLANRT_ERR_ARG; // planrt_arena_reserve said why
  arenaReserved = arena != nullptr;
  for (const BufferSpec &b : m.buffers) {
    planrt::Buffer &buf = ctx.buffers.emplace_back();
    buf.name = b.name;
    buf.lifetime = b.lifetime;
    buf.floats = b.floats;
    bool mine = b.stage < 0 || b.stage == m.stage; // another pipeline rank's buffers stay unallocated
    if (mine && arena && b.offset >= 0)            // (an offloaded buffer has none: not held through the run)
      buf.place = reinterpret_cast<float *>(arena + b.offset);
    if (mine && b.lifetime != "transient" && !offloadedBuffer(b.name) && !buf.allocate())
      return fail(PLANRT_ERR_ARG, "cannot allocate buffer '%s' of %lld floats", b.name.c_str(), (long long)b.floats);
  }
  params = bufferId(m.bufferName("params"));
  grads = bufferId(m.bufferName("grads"));
  master = bufferId(m.master);
  expAvg = bufferId(m.bufferName("exp_avg"));
  expAvgSq = bufferId(m.bufferName("exp_avg_sq"));
  stateId = bufferId("state");
  frozenShard = bufferId(m.bufferName("frozen_shard"));
  state = data(stateId);
  state[2] = float(m.lossScaleInit);
  names.clear();
  for (const Param &p : m.params) {
    names.push_back("optimizer.exp_avg." + p.name);
    names.push_back("optimizer.exp_avg_sq." + p.name);
  }
  return PLANRT_OK;
}

planrt_status Trainer::initialState() {
  if (!o.resume.empty() && !m.fed.any()) // a federated run resumes its rounds (resumeRound)
    return resume();
  std::vector<float> P(size_t(m.fullFloats), 0.0f);
  // --init FILE overrides the plan's `init = checkpoint(…)`, which under adapters holds
  // the frozen base only (the adapters are drawn).
  if (!o.init.empty() || (!m.initPath.empty() && m.frozen.empty())) {
    bool flag = !o.init.empty();
    if (planrt_status s = loadParams(flag ? o.init : m.initPath, flag ? "planc" : m.initFormat, P.data()))
      return s;
    if (!flag)
      progress.line("initialised from " + m.initPath + " (" + m.initFormat + ")");
  } else {
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      // Adapters draw from the streams after the frozen base's (which a plan without
      // adapters gives the same parameters).
      uint64_t stream = uint64_t(p.index >= 0 ? p.index : int64_t(i + m.frozen.size()));
      planrt_status s =
          p.init == "normal"    ? planrt_init_normal(P.data() + p.fullOffset, p.fullCount, 0, 0.0, p.std, m.seed, stream)
          : p.init == "uniform" ? planrt_init_uniform(P.data() + p.fullOffset, p.fullCount, 0, p.std, m.seed, stream)
                                : planrt_init_fill(P.data() + p.fullOffset, p.fullCount, p.init == "ones" ? 1.0f : 0.0f);
      if (s)
        return s;
    }
  }
  if (planrt_status s = initFrozen())
    return s;
  if (!o.saveInit.empty())
    if (planrt_status s = saveParams(o.saveInit, "planc-params-1", P.data(), start, {}, /*withBase=*/true))
      return s;
  // The host's whole copy of the frozen base is not needed again (--merge reads the params
  // buffer): a 70B base is 280 GB of it.
  std::vector<float>().swap(frozenWhole);
  distributeWhole(P.data(), nullptr, nullptr);
  return PLANRT_OK;
}

planrt_status Trainer::evaluate(int64_t s) {
  if (planrt_status st = settleOffload())
    return st;
  double mean = 0, accuracy = std::numeric_limits<double>::quiet_NaN();
  if (planrt_status st = images ? imageValidation(mean, accuracy) : validationLoss(mean))
    return st;
  if (log)
    if (planrt_status st = planrt_log_eval(log, uint64_t(s), mean, accuracy))
      return st;
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "step %lld/%lld · val loss %.4f", (long long)(s + 1), (long long)end, mean);
  if (!std::isnan(accuracy))
    std::snprintf(buf + n, sizeof buf - size_t(n), " · val accuracy %.2f%%", 100 * accuracy);
  progress.line(buf);
  return PLANRT_OK;
}

planrt_status Trainer::validationLoss(double &mean) {
  e.gather(&ctx);
  if (ctx.status)
    return fail(ctx.status, "%s", ctx.error.c_str());
  float sum = 0;
  int32_t *tokens = ctx.tokens.data(), *targets = ctx.targets.data();
  for (int64_t b = 0; b < m.evalBatches; ++b) {
    uint64_t first = uint64_t((b * m.dataParallel + ctx.dataRank) * m.micro);
    for (int64_t i = 0; i < m.micro; ++i)
      if (planrt_status st =
              planrt_data_window(val, first + uint64_t(i), m.seq, tokens + i * m.seq, targets + i * m.seq)) {
        e.release(&ctx);
        return st;
      }
    float loss = 0;
    if (m.pipeline > 1) {
      if (planrt_status st = stageEval(tokens, targets, loss)) {
        e.release(&ctx);
        return st;
      }
    } else {
      planrt::BackendVector<float> out(1); // written by generated code
      e.eval(data(params), tokens, targets, out.data());
      loss = out[0];
    }
    sum += loss;
  }
  e.release(&ctx);
  if (ctx.status)
    return fail(ctx.status, "%s", ctx.error.c_str());
  if (m.pipeline > 1) { // the last stage computed the losses; the others add zero
    planrt::Waiting w(ctx, "all_reduce over the pipeline axis of the validation loss");
    if (planrt_status st = planrt_all_reduce(ctx.mesh, 1u << unsigned(m.pipelineAxis), &sum, 1, PLANRT_SUM))
      return st;
  }
  if (ctx.mesh && m.dataParallel > 1) { // tensor ranks computed the same loss
    planrt::Waiting w(ctx, "all_reduce of the validation loss");
    if (planrt_status st = planrt_all_reduce(ctx.mesh, m.dataMask, &sum, 1, PLANRT_SUM))
      return st;
  }
  mean = double(sum) / double(m.evalBatches * m.dataParallel);
  return PLANRT_OK;
}

planrt_status Trainer::stageEval(const int32_t *tokens, const int32_t *targets, float &loss) {
  int axis = m.pipelineAxis;
  loss = 0;
  for (const planrt_step_ctx::Stage &s : ctx.stages) {
    planrt::BackendVector<float> in(size_t(std::max<int64_t>(s.activationIn, 1)), 0.0f),
        out(size_t(std::max<int64_t>(s.activationOut, 1)), 0.0f);
    if (s.stage > 0) {
      planrt::Waiting w(ctx, "receive of the evaluation activations");
      if (planrt_status st = planrt_recv(ctx.mesh, axis, (s.stage - 1) % m.pipeline, in.data(), s.activationIn))
        return st;
    }
    // keep: activations: the forward pass writes what a backward pass would read into the
    // schedule's first slot, unused outside a step.
    int saved = bufferId(m.bufferName("saved", s.stage));
    float unused = 0;
    s.forward(data(params), tokens, targets, in.data(), out.data(), saved >= 0 ? data(saved) : &unused);
    if (s.stage + 1 == m.stages) {
      loss = out[0];
      continue;
    }
    planrt::Waiting w(ctx, "send of the evaluation activations");
    if (planrt_status st = planrt_send(ctx.mesh, axis, (s.stage + 1) % m.pipeline, out.data(), s.activationOut))
      return st;
  }
  return PLANRT_OK;
}

void Trainer::commTotals(uint64_t out[4]) const {
  for (int k = 0; k < 4; ++k)
    out[k] = planrt_comm_bytes_total(ctx.mesh, planrt_collective(k));
}

void Trainer::runProgram(planrt_step_fn program, int64_t s) {
  const planrt_backend *device = planrt_get_backend();
  if (device->step)
    device->step(1);
  program(&ctx, s);
  ctx.waitSends(-1); // the pipeline's last sends
  if (device->step)
    device->step(ctx.status ? -1 : 0);
}

planrt_status Trainer::step(int64_t s) {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t before[4], after[4], comm[4];
  commTotals(before);
  state[4] = 0;
  float scaleBefore = state[2];
  ctx.step = s;
  double commBefore = ctx.commSeconds;
  planrt_mem_reset_peak();
  // The step program: micro-batches, gradients, collectives, the update.
  runProgram(e.step, s);
  uint64_t memPeak = planrt_mem_peak();
  maxMemPeak = std::max(maxMemPeak, memPeak);
  stepComm += ctx.commSeconds - commBefore;
  if (ctx.status)
    return fail(ctx.status, "%s", ctx.error.c_str());
  commTotals(after);
  for (int k = 0; k < 4; ++k)
    comm[k] = after[k] - before[k];
  float loss = state[7];
  const double nan = std::numeric_limits<double>::quiet_NaN();
  bool skipped = scaling() && state[4] != 0;
  // With fp16 loss scaling an overflow is the update's to skip; otherwise it is fatal.
  if (!std::isfinite(loss) && !scaling()) {
    // The step is logged (its loss as null) so the log shows where training diverged.
    if (log)
      planrt_log_step(log, uint64_t(s), loss, nan, nan, nan, comm, memPeak, planrt_mem_total_peak());
    agreed = true; // the loss is reduced over the data-parallel ranks
    return fail(PLANRT_ERR_ARG, "step %lld: the loss is %s; stopping before anything is saved", (long long)s,
                nonFinite(loss));
  }
  if (!o.saveGrads.empty() && s == start) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", double(loss));
    // With fp16 loss scaling G holds scaled gradients: the file has the true ones.
    std::vector<float> unscaled(data(grads), data(grads) + m.numFloats), whole;
    if (scaling())
      for (float &g : unscaled)
        g /= scaleBefore;
    // Under tensor parallelism the pieces are gathered into whole tensors (collective).
    if (planrt_status st = toWhole(unscaled, whole))
      return st;
    if (planrt_status st = saveParams(o.saveGrads, "planc-grads-1", whole.data(), s, {"loss", text}))
      return st;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stepSeconds += seconds;
  double tokensPerS = seconds > 0 ? double(tokensPerStep()) / seconds : nan;
  if (log)
    if (planrt_status st = planrt_log_step(log, uint64_t(s), loss, state[1], state[0], tokensPerS, comm, memPeak,
                                           planrt_mem_total_peak()))
      return st;
  if (scaling() && log && (skipped || state[2] != scaleBefore))
    if (planrt_status st = planrt_log_loss_scale(log, uint64_t(s), state[2], skipped))
      return st;
  if (skipped) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "step %lld: fp16 gradients overflowed at loss scale %g; step skipped, scale now %g",
                  (long long)s, double(scaleBefore), double(state[2]));
    progress.line(buf);
    // The scale follows the reduced gradient norm, alike on every rank.
    if (!(state[2] >= 0x1p-24f) && (agreed = true))
      return fail(PLANRT_ERR_ARG,
                  std::isfinite(loss)
                      ? "step %lld: the fp16 loss scale fell to %g: the gradients overflow at every scale; "
                        "stopping before anything is saved"
                      : "step %lld: the fp16 loss scale fell to %g and the loss itself is not finite: the forward "
                        "pass overflows fp16, whatever the scale; stopping before anything is saved",
                  (long long)s, double(state[2]));
  } else if (!std::isfinite(state[0])) {
    agreed = true; // the norm is reduced over the ranks
    return fail(PLANRT_ERR_ARG, "step %lld: the gradient norm is %s; stopping before anything is saved", (long long)s,
                nonFinite(state[0]));
  }
  lastLoss = loss;
  int64_t done = s + 1;
  lastStep = done;
  double eta = stepSeconds / double(done - start) * double(end - done);
  progress.step(done, loss, double(tokensPerStep()) * double(done - start) / stepSeconds, eta);
  bool last = done == end;
  if (evaluating() && (done % m.evalEvery == 0 || last))
    if (planrt_status st = evaluate(s))
      return st;
  if (checkpointing() && (done % checkpointEvery == 0 || last))
    if (planrt_status st = checkpoint(s))
      return st;
  return PLANRT_OK;
}

} // namespace planrt::train

using namespace planrt::train;
using planrt::fail;

extern "C" int planrt_train_main(int argc, char **argv, const char *manifest, planrt_grad_fn grad,
                                 planrt_sumsq_fn sumsq, planrt_update_fn update, planrt_eval_fn eval,
                                 planrt_step_fn step, planrt_program_fn gather, planrt_program_fn release,
                                 planrt_update_chunk_fn chunk0, planrt_update_chunk_fn chunk1, void *const *stages,
                                 int64_t nstages, planrt_step_fn round) {
  // The step functions allocate and free the same activation buffers every step: keep
  // them in the heap (up to glibc's 32 MiB maximum) rather than mapping and unmapping
  // them, which costs a page fault per 4 KiB touched each step.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  planrt_mesh *mesh = nullptr;
  // No exception may leave this C function.
  try {
    planrt_set_rank(0);
    Options o;
    if (int rc = parseOptions(argc, argv, o))
      return rc;
    Manifest m;
    planrt_status parsed = parseManifest(manifest, m);
    if (o.help) {
      printUsage(argc > 0 && argv[0] ? argv[0] : "train", parsed ? "?" : m.plan.c_str(),
                 parsed ? "?" : m.model.c_str());
      return 0;
    }
    if (parsed) {
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
      return kExitError;
    }
    // More than one device: one process per device, started by mpirun (or srun).
    if (m.dataParallel * m.tensorParallel * m.pipeline * m.fed.clients > 1) {
      if (planrt_mesh_init(&argc, &argv, m.sizes.data(), int(m.sizes.size()), &mesh) != PLANRT_OK) {
        std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
        return kExitError;
      }
    }
    // Pipeline parallelism: this rank's coordinate on the pipeline axis names its table (the
    // parameters of the stages it holds); it knows every rank's.
    std::vector<std::vector<Param>> stageParams, stageFrozen;
    std::vector<int64_t> stageFullFloats, stageFrozenFullFloats;
    if (m.pipeline > 1) {
      int64_t mine = planrt_mesh_coord(mesh, m.pipelineAxis);
      for (int64_t k = 0; k < m.pipeline; ++k) {
        Manifest mk;
        if (parseManifest(manifest, mk, k)) {
          std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
          planrt_mesh_finalize(mesh);
          return kExitError;
        }
        stageParams.push_back(mk.params);
        stageFullFloats.push_back(mk.fullFloats);
        stageFrozen.push_back(mk.frozen);
        stageFrozenFullFloats.push_back(mk.frozenFullFloats);
        if (k == mine)
          m = std::move(mk);
      }
      m.stageParams = stageParams;
      m.stageFullFloats = stageFullFloats;
      m.stageFrozen = stageFrozen;
      m.stageFrozenFullFloats = stageFrozenFullFloats;
    }
    int rc;
    {
      Trainer t(m, o, Entries{grad, sumsq, update, eval, step, gather, release, chunk0, chunk1, stages, nstages, round},
                mesh);
      rc = t.run();
    }
    planrt_mesh_finalize(mesh);
    return rc;
  } catch (const std::exception &e) {
    fail(PLANRT_ERR_ARG, "internal error: %s", e.what());
  } catch (...) {
    fail(PLANRT_ERR_ARG, "internal error");
  }
  std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
  std::fflush(stderr);
  if (mesh)
    planrt_mesh_abort(mesh, kExitError); // the other ranks would wait in a collective
  return kExitError;
}
