// The files a training run writes and reads (trainer.h): output directories proven
// usable before step 0, --init and --save-init, checkpoints (one file, or sharded over
// the ranks) and resuming from them under any layout, --save-grads and --export's
// consolidated checkpoint.
#include "pretrained.h"
#include "trainer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace planrt::train {

namespace {

/// Creates dir and its parents if missing, then proves it writable by creating and
/// removing a file in it: an unusable checkpoint directory fails before step 0.
planrt_status prepareDirectory(const std::string &dir, const char *what) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string prefix = dir.substr(0, i);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(PLANRT_ERR_IO, "%s: cannot create the %s: %s", dir.c_str(), what, std::strerror(errno));
    }
  return PLANRT_OK;
}

planrt_status probeWritable(const std::string &dir, const char *what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return fail(PLANRT_ERR_IO, "%s: the %s does not exist: %s", dir.c_str(), what, std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return fail(PLANRT_ERR_IO, "%s: the %s is not a directory", dir.c_str(), what);
  char host[64] = "";
  ::gethostname(host, sizeof host - 1);
  std::string probe = dir + "/.planrt-probe." + host + "." + std::to_string(getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail(PLANRT_ERR_IO, "%s: the %s is not writable: %s", dir.c_str(), what, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return PLANRT_OK;
}

std::string parentOf(const std::string &file) {
  size_t slash = file.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

} // namespace

planrt_status Trainer::prepareOutputs() {
  checkpointDir = o.checkpointDir.empty() ? m.checkpointDir : o.checkpointDir;
  checkpointEvery = o.checkpointEvery ? *o.checkpointEvery : m.checkpointEvery;
  if (checkpointing()) {
    if (planrt_status s = prepareDirectory(checkpointDir, "checkpoint directory"))
      return s;
    if (planrt_status s = probeWritable(checkpointDir, "checkpoint directory"))
      return s;
    if (planrt_status s = probeShared(checkpointDir))
      return s;
  } else if (!o.checkpointDir.empty()) {
    progress.line("planrt: warning: --checkpoint-dir is given but the checkpoint interval is 0; no "
                  "checkpoint is written (see --checkpoint-every)",
                  true);
  }
  if (!o.saveInit.empty())
    if (planrt_status s = probeWritable(parentOf(o.saveInit), "directory of --save-init"))
      return s;
  if (!o.saveGrads.empty()) {
    if (m.sharded)
      return fail(PLANRT_ERR_ARG,
                  "--save-grads needs the whole gradient, which ZeRO stage %lld shards; "
                  "use a ZeRO-0 (DDP) or one-device build",
                  (long long)m.zero);
    if (planrt_status s = probeWritable(parentOf(o.saveGrads), "directory of --save-grads"))
      return s;
  }
  if (!o.exportFile.empty())
    if (planrt_status s = probeWritable(parentOf(o.exportFile), "directory of --export"))
      return s;
  if ((o.merge || !o.exportAdapters.empty()) && m.frozen.empty())
    return fail(PLANRT_ERR_ARG, "%s needs adapters (adapt = lora(…) in the plan); plan '%s' trains every parameter",
                o.merge ? "--merge" : "--export-adapters", m.plan.c_str());
  if (!o.exportAdapters.empty()) {
    if (planrt_status s = probeWritable(parentOf(o.exportAdapters), "directory of --export-adapters"))
      return s;
    if (planrt_status s = checkPeftNames())
      return s;
  }
  if (!o.log.empty() && rank0)
    if (planrt_status s = planrt_log_open(o.log.c_str(), &log))
      return s;
  return PLANRT_OK;
}

planrt_status Trainer::probeShared(const std::string &dir) {
  if (!ctx.mesh)
    return PLANRT_OK;
  std::string probe = dir + "/.planrt-shared-probe";
  float bad = 0;
  if (rank0) {
    std::FILE *f = std::fopen(probe.c_str(), "w");
    bad = f ? 0.0f : 1.0f;
    if (f)
      std::fclose(f);
  }
  if (planrt_status s = planrt_mesh_agree(ctx.mesh, &bad))
    return s;
  struct stat st;
  float missing = ::stat(probe.c_str(), &st) != 0 ? 1.0f : 0.0f, mine = missing;
  if (planrt_status s = planrt_mesh_agree(ctx.mesh, &missing))
    return s;
  if (rank0)
    ::unlink(probe.c_str());
  if (bad > 0 || missing > 0)
    return fail(PLANRT_ERR_IO,
                "%s: the checkpoint directory must be one directory every rank sees (a shared file system); "
                "%s",
                dir.c_str(), mine > 0 ? "this rank does not see rank 0's files in it" : "another rank does not");
  return PLANRT_OK;
}

planrt_status Trainer::read(planrt_st *st, const std::string &name, const Param &p, float *dst) {
  return planrt_st_read(st, name.c_str(), PLANRT_F32, int(p.fullShape.size()), p.fullShape.data(), dst);
}

planrt_status Trainer::loadParams(const std::string &path, const std::string &format, float *P) {
  std::unique_ptr<Pretrained> base;
  if (planrt_status s = Pretrained::open(path, format, base))
    return s;
  for (const Param &p : m.params)
    if (planrt_status s = base->read(p.name, p.fullShape, P + p.fullOffset))
      return s;
  // A model over images: its batchnorms' running statistics too, where the checkpoint
  // has them (planc's exports and checkpoints, PyTorch's state_dict); else they start
  // at PyTorch's 0, 1 and 0.
  for (planrt_step_ctx::RunningStats &r : ctx.running) {
    if (!base->has(r.name + ".running_mean"))
      continue;
    std::vector<int64_t> c{int64_t(r.mean.size())};
    if (planrt_status s = base->read(r.name + ".running_mean", c, r.mean.data()))
      return s;
    if (planrt_status s = base->read(r.name + ".running_var", c, r.var.data()))
      return s;
    r.tracked = 0; // some converted checkpoints lack the count
    if (base->has(r.name + ".num_batches_tracked"))
      if (planrt_status s = base->readCount(r.name + ".num_batches_tracked", r.tracked))
        return s;
  }
  return PLANRT_OK;
}

std::vector<planrt::FlatParam> Trainer::flatLayout(bool whole) const {
  std::vector<planrt::FlatParam> out;
  for (const Param &p : m.params)
    out.push_back(whole ? planrt::FlatParam{p.name, p.fullOffset, p.fullCount} : pieceOf(p));
  return out;
}

planrt_status Trainer::resume() {
  std::string file;
  uint64_t fileStep = 0;
  bool sharded = false;
  if (planrt_status s = planrt::latestCheckpoint(o.resume, file, fileStep, sharded))
    return s;
  std::vector<float> P(size_t(m.fullFloats), 0.0f), M(P), V(P);
  std::map<std::string, std::string> meta;
  if (sharded) {
    std::vector<std::string> elsewhere; // other pipeline stages' parameters
    for (const std::vector<Param> &stage : m.stageParams)
      for (const Param &p : stage)
        elsewhere.push_back(p.name);
    if (planrt_status s =
            planrt::shardedLoad(file, flatLayout(true), P.data(), M.data(), V.data(), meta, elsewhere, modelBuffers()))
      return s;
  } else {
    planrt_st *st = nullptr;
    if (planrt_status s = planrt_st_open(file.c_str(), &st))
      return s;
    std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(st, planrt_st_close);
    for (const char *key :
         {"format", "step", "plan", "model", "loss_scale", "loss_scale_good_steps", "optimizer_steps", "base",
          "base_sha256"})
      if (const char *v = planrt_st_metadata(st, key))
        meta[key] = v;
    if (meta["format"] != "planc-ckpt-1")
      return fail(PLANRT_ERR_FORMAT, "%s: not a planc checkpoint (metadata format '%s', expected planc-ckpt-1)",
                  file.c_str(), meta["format"].c_str());
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      if (planrt_status s = read(st, p.name, p, P.data() + p.fullOffset))
        return s;
      if (planrt_status s = read(st, names[2 * i], p, M.data() + p.fullOffset))
        return s;
      if (planrt_status s = read(st, names[2 * i + 1], p, V.data() + p.fullOffset))
        return s;
    }
    for (const planrt::ModelBuffer &b : modelBuffers())
      if (planrt_status s = b.readFrom(st))
        return s;
  }
  std::optional<int64_t> step = meta.count("step") ? count(meta["step"]) : std::nullopt;
  if (!step)
    return fail(PLANRT_ERR_FORMAT, "%s: the metadata 'step' is '%s', not a step count", file.c_str(),
                meta["step"].c_str());
  for (const char *key : {"plan", "model"}) {
    const std::string &now = std::string(key) == "plan" ? m.plan : m.model;
    if (meta.count(key) && now != meta[key])
      progress.line(std::string("planrt: warning: ") + file + " was written by " + key + " '" + meta[key] +
                        "'; this is " + key + " '" + now + "'",
                    true);
  }
  if (scaling()) {
    if (!meta.count("loss_scale") || !meta.count("loss_scale_good_steps") || !meta.count("optimizer_steps"))
      return fail(PLANRT_ERR_FORMAT, "%s: no loss_scale metadata, which an fp16 plan resumes from", file.c_str());
    state[2] = std::strtof(meta["loss_scale"].c_str(), nullptr);
    state[3] = std::strtof(meta["loss_scale_good_steps"].c_str(), nullptr);
    state[5] = std::strtof(meta["optimizer_steps"].c_str(), nullptr);
    if (!(state[2] > 0) || !std::isfinite(state[2]) || !(state[3] >= 0) || !(state[5] >= 0))
      return fail(PLANRT_ERR_FORMAT, "%s: the metadata loss_scale '%s' / loss_scale_good_steps '%s' are not valid",
                  file.c_str(), meta["loss_scale"].c_str(), meta["loss_scale_good_steps"].c_str());
  }
  if (planrt_status s = initFrozen(&meta))
    return s;
  distributeWhole(P.data(), M.data(), V.data());
  start = *step;
  progress.line("resuming from " + file + " at step " + std::to_string(start));
  return PLANRT_OK;
}

std::vector<std::string> Trainer::metadata(const char *format, int64_t step) const {
  std::vector<std::string> meta{"format", format,  "step", std::to_string(step),  "plan", m.plan,
                                "model",  m.model, "seed", std::to_string(m.seed)};
  if (scaling()) {
    char scale[32], good[32], applied[32];
    std::snprintf(scale, sizeof scale, "%.9g", double(state[2]));
    std::snprintf(good, sizeof good, "%.9g", double(state[3]));
    std::snprintf(applied, sizeof applied, "%.9g", double(state[5]));
    meta.insert(meta.end(), {"loss_scale", scale, "loss_scale_good_steps", good, "optimizer_steps", applied});
  }
  std::vector<std::string> base = baseMetadata();
  meta.insert(meta.end(), base.begin(), base.end());
  return meta;
}

std::vector<const char *> Trainer::pointers(const std::vector<std::string> &v) {
  std::vector<const char *> out;
  for (const std::string &s : v)
    out.push_back(s.c_str());
  return out;
}

planrt_status Trainer::wholeModel(const float *P, const float *M, const float *V, std::vector<float> store[3],
                                  std::vector<WholeTensor> &out) {
  const float *mine[3] = {P, M, V};
  out.clear();
  if (m.pipeline <= 1) {
    for (const Param &p : m.params)
      out.push_back({&p, {P + p.fullOffset, M ? M + p.fullOffset : nullptr, V ? V + p.fullOffset : nullptr}});
    return PLANRT_OK;
  }
  int64_t most = *std::max_element(m.stageFullFloats.begin(), m.stageFullFloats.end());
  unsigned mask = 1u << unsigned(m.pipelineAxis);
  for (int k = 0; k < 3; ++k) {
    if (!mine[k])
      continue;
    std::vector<float> padded(size_t(most), 0.0f);
    std::memcpy(padded.data(), mine[k], size_t(m.fullFloats) * sizeof(float));
    store[k].assign(size_t(most * m.pipeline), 0.0f);
    planrt::Waiting w(ctx, "all_gather over the pipeline axis of the whole model");
    if (planrt_status s = planrt_all_gather(ctx.mesh, mask, padded.data(), most, store[k].data()))
      return s;
  }
  for (int64_t q = 0; q < m.pipeline; ++q)
    for (const Param &p : m.stageParams[size_t(q)])
      if (!p.replica) {
        WholeTensor t{&p, {nullptr, nullptr, nullptr}};
        for (int k = 0; k < 3; ++k)
          if (mine[k])
            t.data[k] = store[k].data() + q * most + p.fullOffset;
        out.push_back(t);
      }
  return PLANRT_OK;
}

planrt_status Trainer::saveParams(const std::string &file, const char *format, const float *buf, int64_t step,
                                  std::vector<std::string> extra, bool withBase) {
  std::vector<float> store[3], frozenStore;
  std::vector<WholeTensor> whole;
  std::vector<FrozenTensor> frozen;
  if (planrt_status s = wholeModel(buf, nullptr, nullptr, store, whole))
    return s;
  if (withBase)
    if (planrt_status s = wholeFrozen(frozenWhole, frozenStore, frozen))
      return s;
  if (!rank0)
    return PLANRT_OK;
  std::vector<planrt_tensor> tensors;
  for (const WholeTensor &t : whole)
    tensors.push_back({t.p->name.c_str(), PLANRT_F32, int(t.p->fullShape.size()), t.p->fullShape.data(), t.data[0]});
  for (const FrozenTensor &t : frozen)
    tensors.push_back({t.p->name.c_str(), PLANRT_F32, int(t.p->fullShape.size()), t.p->fullShape.data(), t.data});
  std::vector<std::string> meta = metadata(format, step);
  meta.insert(meta.end(), extra.begin(), extra.end());
  std::vector<const char *> mp = pointers(meta);
  return planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2);
}

std::vector<planrt_tensor> Trainer::consolidated(const std::vector<WholeTensor> &whole, std::vector<std::string> &keep,
                                                 const std::vector<planrt::ModelBuffer> &buffers) const {
  std::vector<planrt_tensor> tensors;
  keep.clear();
  for (const WholeTensor &t : whole) {
    keep.push_back("optimizer.exp_avg." + t.p->name);
    keep.push_back("optimizer.exp_avg_sq." + t.p->name);
  }
  for (size_t i = 0; i < whole.size(); ++i) {
    const Param &p = *whole[i].p;
    int rank = int(p.fullShape.size());
    tensors.push_back({p.name.c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[0]});
    if (m.fed.any())
      continue; // a federated plan's global model: the clients' moments restart each round
    tensors.push_back({keep[2 * i].c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[1]});
    tensors.push_back({keep[2 * i + 1].c_str(), PLANRT_F32, rank, p.fullShape.data(), whole[i].data[2]});
  }
  for (const planrt::ModelBuffer &b : buffers)
    tensors.push_back(b.tensor());
  return tensors;
}

planrt_status Trainer::checkFinite(int64_t s) {
  int ids[3] = {master, expAvg, expAvgSq};
  const char *what[3] = {"parameters", "optimizer.exp_avg", "optimizer.exp_avg_sq"};
  for (int k = 0; k < 3; ++k) {
    // The trained parameters: not the frozen base after them (its QLoRA storage is NF4
    // codes, not floats, and nothing writes it).
    int64_t n = m.buffers[size_t(ids[k])].floats - (ids[k] == params ? m.frozenFloats : 0);
    if (planrt_status st = planrt_check_finite(data(ids[k]), n, uint64_t(s), what[k]))
      return st;
  }
  return PLANRT_OK;
}

planrt_status Trainer::checkpoint(int64_t s) {
  // batchnorm = local: data rank 0's running statistics for every rank's file (a
  // collective the watchdog times on its own, before the checkpoint's wait begins).
  if (planrt_status st = shareRunning())
    return st;
  // The watchdog times the checkpoint too, its barriers included: a rank lost during one
  // must not leave the others waiting for ever. Its writes may take long on slow storage,
  // so it is allowed kCheckpointWait seconds, or the timeout if longer.
  std::unique_ptr<planrt::Waiting> waiting;
  if (ctx.mesh)
    waiting = std::make_unique<planrt::Waiting>(ctx, "the checkpoint after step " + std::to_string(s + 1),
                                                kCheckpointWait);
  // Offloaded moments come back from their files for the write (the update done first).
  planrt_status st = settleOffload();
  st = st ? st : momentsIn(true);
  st = st ? st : saveCheckpoint(s);
  if (planrt_status out = momentsOut(false); !st)
    st = out;
  return st;
}

planrt_status Trainer::saveCheckpoint(int64_t s) {
  // Never save a non-finite state, whatever the checks of the loss and norm missed.
  if (planrt_status st = checkFinite(s))
    return st;
  std::vector<std::string> meta = metadata("planc-ckpt-1", s + 1);
  char name[64];
  if (!ctx.mesh) {
    std::vector<float> store[3];
    std::vector<WholeTensor> whole;
    std::vector<std::string> keep;
    if (planrt_status st = wholeModel(data(master), data(expAvg), data(expAvgSq), store, whole))
      return st;
    std::vector<planrt::ModelBuffer> buffers = modelBuffers();
    std::vector<planrt_tensor> tensors = consolidated(whole, keep, buffers);
    std::vector<const char *> mp = pointers(meta);
    if (planrt_status st = planrt_ckpt_save(checkpointDir.c_str(), uint64_t(s + 1), int(m.checkpointKeep),
                                            tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
      return st;
    std::snprintf(name, sizeof name, "/step-%08llu.safetensors", (unsigned long long)(s + 1));
  } else {
    planrt::StatePiece mine;
    for (int g = 0; g < 2; ++g) {
      mine.begin[g] = pieceBegin(g);
      mine.count[g] = pieceFloats(g);
      mine.params[g] = piece(master, g);
      mine.expAvg[g] = piece(expAvg, g);
      mine.expAvgSq[g] = piece(expAvgSq, g);
    }
    planrt::MeshPlace place{ctx.dataRank, m.dataParallel, tensorCoord(), m.tensorParallel, m.stage, m.pipeline};
    if (planrt_status st = planrt::shardedSave(ctx.mesh, checkpointDir, uint64_t(s + 1), int(m.checkpointKeep), place,
                                               mine, flatLayout(), meta, modelBuffers()))
      return st;
    std::snprintf(name, sizeof name, "/step-%08llu/", (unsigned long long)(s + 1));
  }
  lastCheckpoint = checkpointDir + name;
  return PLANRT_OK;
}

planrt_status Trainer::exportConsolidated(const std::string &file) {
  std::vector<float> P, M, V, store[3];
  std::vector<WholeTensor> whole;
  std::vector<std::string> keep;
  if (planrt_status s = gatherWhole(P, M, V))
    return s;
  if (planrt_status s = wholeModel(P.data(), M.data(), V.data(), store, whole))
    return s;
  if (planrt_status s = shareRunning())
    return s;
  std::vector<float> base, baseStore;
  std::vector<FrozenTensor> frozen;
  if (o.merge) {
    if (planrt_status s = frozenFromBuffer(base))
      return s;
    if (planrt_status s = wholeFrozen(base, baseStore, frozen))
      return s;
  }
  if (!rank0)
    return PLANRT_OK;
  if (!o.exportAdapters.empty()) {
    if (planrt_status s = exportAdapters(o.exportAdapters, whole))
      return s;
    progress.line("exported the adapters to " + o.exportAdapters, true);
  }
  if (file.empty())
    return PLANRT_OK;
  if (o.merge) {
    if (planrt_status s = exportMerged(file, whole, frozen))
      return s;
    progress.line("exported the merged model to " + file, true);
    return PLANRT_OK;
  }
  std::vector<planrt::ModelBuffer> buffers = modelBuffers();
  std::vector<planrt_tensor> tensors = consolidated(whole, keep, buffers);
  std::vector<std::string> meta = metadata("planc-ckpt-1", std::max(start, lastStep));
  std::vector<const char *> mp = pointers(meta);
  if (planrt_status s = planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
    return s;
  progress.line("exported " + file, true);
  return PLANRT_OK;
}

} // namespace planrt::train
