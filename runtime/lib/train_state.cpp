// This rank's pieces of the training state (trainer.h): the parameters and Adam moments
// as ZeRO shards and tensor-parallel pieces, and the whole tensors that checkpoints,
// --init and --export hold, in both directions (gathering is collective).
#include "trainer.h"

#include <array>
#include <cstring>

namespace planrt::train {

std::vector<float> Trainer::toLocal(const float *whole) const {
  if (!tensorParallel())
    return std::vector<float>(whole, whole + m.numFloats);
  std::vector<float> local(size_t(m.numFloats), 0.0f);
  int64_t c = tensorCoord();
  for (const Param &p : m.params)
    runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
      std::memcpy(local.data() + p.offset + l, whole + p.fullOffset + w, size_t(n) * sizeof(float));
    });
  return local;
}

planrt_status Trainer::toWhole(const std::vector<float> &local, std::vector<float> &whole) {
  if (!tensorParallel()) {
    whole = local;
    return PLANRT_OK;
  }
  std::vector<float> all(size_t(m.numFloats * m.tensorParallel));
  {
    planrt::Waiting w(ctx, "all_gather over the tensor axis of the whole parameters");
    if (planrt_status s =
            planrt_all_gather(ctx.mesh, 1u << unsigned(m.tensorAxis), local.data(), m.numFloats, all.data()))
      return s;
  }
  whole.assign(size_t(m.fullFloats), 0.0f);
  for (int64_t c = 0; c < m.tensorParallel; ++c)
    for (const Param &p : m.params)
      runs(p, c, [&](int64_t l, int64_t w, int64_t n) {
        std::memcpy(whole.data() + p.fullOffset + w, all.data() + c * m.numFloats + p.offset + l,
                    size_t(n) * sizeof(float));
      });
  return PLANRT_OK;
}

void Trainer::distributeWhole(const float *P, const float *M, const float *V) {
  if (!tensorParallel())
    return distribute(P, M, V);
  std::vector<float> p = toLocal(P), mm, v;
  if (M)
    mm = toLocal(M);
  if (V)
    v = toLocal(V);
  distribute(p.data(), M ? mm.data() : nullptr, V ? v.data() : nullptr);
}

planrt_status Trainer::gatherWhole(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V) {
  std::vector<float> p, mm, v;
  if (planrt_status s = gatherFull(p, mm, v))
    return s;
  if (planrt_status s = toWhole(p, P))
    return s;
  if (planrt_status s = toWhole(mm, M))
    return s;
  return toWhole(v, V);
}

void Trainer::distribute(const float *P, const float *M, const float *V) {
  const float *full[3] = {P, M, V};
  int ids[3] = {master, expAvg, expAvgSq};
  for (int k = 0; k < 3; ++k) {
    if (!full[k])
      continue;
    if (!m.sharded) {
      std::memcpy(data(ids[k]), full[k], size_t(m.numFloats) * sizeof(float));
      continue;
    }
    for (int g = 0; g < 2; ++g)
      std::memcpy(piece(ids[k], g), full[k] + pieceBegin(g), size_t(pieceFloats(g)) * sizeof(float));
  }
  // Replicas of the parameters the gradient reads start equal to the master.
  if (P && m.sharded && data(params))
    std::memcpy(data(params), P, size_t(m.numFloats) * sizeof(float));
}

planrt_status Trainer::gatherFull(std::vector<float> &P, std::vector<float> &M, std::vector<float> &V) {
  std::vector<float> *full[3] = {&P, &M, &V};
  int ids[3] = {master, expAvg, expAvgSq};
  for (int k = 0; k < 3; ++k) {
    full[k]->assign(size_t(m.numFloats), 0.0f);
    if (!m.sharded) {
      std::memcpy(full[k]->data(), data(ids[k]), size_t(m.numFloats) * sizeof(float));
      continue;
    }
    for (int g = 0; g < 2; ++g)
      if (pieceFloats(g) > 0) {
        planrt::Waiting w(ctx, "all_gather of the state for --export");
        if (planrt_status s = planrt_all_gather(ctx.mesh, m.dataMask, piece(ids[k], g), pieceFloats(g),
                                                full[k]->data() + m.groupBegin[g]))
          return s;
      }
  }
  return PLANRT_OK;
}

bool Trainer::offloadedBuffer(const std::string &name) const {
  return m.offloadedMoment(name) || (paramsOffloaded() && name == m.master);
}

planrt_status Trainer::openOffload() {
  std::string dir = o.offloadDir.empty() ? m.offloadDir : o.offloadDir;
  std::string paramsDir = !paramsOffloaded() || o.offloadDir.empty() ? m.paramsOffloadDir : o.offloadDir;
  offload = std::make_unique<OffloadedOptimizer>(dir, planrt_mesh_rank(ctx.mesh) < 0 ? 0 : planrt_mesh_rank(ctx.mesh),
                                                 m.offloadChunk,
                                                 OffloadedOptimizer::Group{spanFloats(0), e.chunk0},
                                                 OffloadedOptimizer::Group{spanFloats(1), e.chunk1}, paramsDir);
  if (planrt_status s = offload->open())
    return s;
  ctx.offload = offload.get();
  ctx.offloadedShard = paramsOffloaded() ? master : -1;
  // Under ZeRO-3 the step touches the shards through the schedule's operations alone,
  // which wait for the records they need: the update runs on into the next step. On a
  // device the update's kernels go on the step's stream: it runs inside the step.
  ctx.overlapUpdate = m.sharded && m.zero == 3 && !o.offloadSync && !planrt_mem_is_device();
  return PLANRT_OK;
}

planrt_status Trainer::settleOffload() {
  if (!ctx.settleUpdate())
    return fail(ctx.status, "%s", ctx.error.c_str());
  return PLANRT_OK;
}

planrt_status Trainer::momentsIn(bool read, bool moments) {
  if (!offloaded())
    return PLANRT_OK;
  std::vector<int> ids;
  if (moments)
    ids = {expAvg, expAvgSq};
  if (paramsOffloaded())
    ids.push_back(master);
  // On a device they come back to host memory, where the checkpoint's host code reads
  // them, not to the device's beside its arena.
  for (int id : ids) {
    planrt::Buffer &b = ctx.buffers[size_t(id)];
    if (b.data)
      continue;
    if (id != master && planrt_mem_is_device())
      b.allocateOnHost();
    else if (!b.allocate())
      return fail(PLANRT_ERR_ARG, "cannot allocate the offloaded buffer '%s' (%lld floats) for its files",
                  b.name.c_str(), (long long)b.floats);
  }
  if (!read)
    return PLANRT_OK;
  if (!moments) // the files hold both: reading is all or nothing
    return fail(PLANRT_ERR_ARG, "the offloaded parameter shard is read with its moments");
  float *const mm[2] = {span(expAvg, 0), span(expAvg, 1)}, *const v[2] = {span(expAvgSq, 0), span(expAvgSq, 1)};
  float *const p[2] = {span(master, 0), span(master, 1)};
  return offload->load(mm, v, paramsOffloaded() ? p : nullptr);
}

planrt_status Trainer::momentsOut(bool write) {
  if (!offloaded())
    return PLANRT_OK;
  planrt_status s = PLANRT_OK;
  if (write) {
    // Null where not held: a fresh run's moments (written as zeros), a shard not offloaded.
    auto spans = [&](int id, bool held) {
      return held ? std::array<const float *, 2>{span(id, 0), span(id, 1)} : std::array<const float *, 2>{};
    };
    bool moments = data(expAvg) != nullptr;
    std::array<const float *, 2> mm = spans(expAvg, moments), v = spans(expAvgSq, moments),
                                 p = spans(master, paramsOffloaded());
    s = offload->store(moments ? mm.data() : nullptr, moments ? v.data() : nullptr,
                       paramsOffloaded() ? p.data() : nullptr);
  }
  for (int id : {expAvg, expAvgSq, master})
    if (offloadedBuffer(ctx.buffers[size_t(id)].name))
      ctx.buffers[size_t(id)].release();
  return s;
}

} // namespace planrt::train
