// The calls of a lowered sched program (planrt_sched_*): buffers, the gradient,
// update and norm entry points, and collectives on the mesh, each checked, each
// a no-op after the first failure. The watchdog turns a peer that died or hung
// into an error on every rank instead of a hang.
#include "step_context.h"
#include "offload.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unistd.h>

using planrt::fail;

namespace planrt {

Floats allocateFloats(int64_t n) {
  size_t bytes = size_t(n) * sizeof(float);
  void *p = planrt_mem_alloc(bytes);
  planrt_mem_fill(p, 0.0f, size_t(n));
  return Floats(static_cast<float *>(p));
}

bool Buffer::allocate(bool parts) {
  if (parts && !place) {
    data = static_cast<float *>(planrt_mem_reserve(size_t(floats) * sizeof(float)));
    byParts = data != nullptr;
    if (byParts)
      return true;
  }
  if (place) {
    planrt_mem_fill(place, 0.0f, size_t(floats));
    data = place;
  } else {
    owned = allocateFloats(floats);
    data = owned.get();
  }
  return data != nullptr;
}

void Buffer::allocateOnHost() {
  host.assign(size_t(floats), 0.0f);
  data = host.data();
}

void Buffer::release() {
  if (byParts) {
    while (!committed.empty())
      decommit(committed.back().first, committed.back().second);
    planrt_mem_unreserve(data, size_t(floats) * sizeof(float));
    byParts = false;
  }
  owned.reset();
  host = std::vector<float>();
  data = nullptr;
}

void Buffer::commit(int64_t offset, int64_t count) {
  if (!byParts || count <= 0 || std::find(committed.begin(), committed.end(), std::make_pair(offset, count)) !=
                                    committed.end())
    return;
  committed.emplace_back(offset, count);
  planrt_mem_commit(data + offset, size_t(count) * sizeof(float));
}

void Buffer::decommit(int64_t offset, int64_t count) {
  auto it = std::find(committed.begin(), committed.end(), std::make_pair(offset, count));
  if (!byParts || it == committed.end())
    return;
  committed.erase(it);
  planrt_mem_decommit(data + offset, size_t(count) * sizeof(float));
}

Watchdog::Watchdog(planrt_step_ctx &ctx, double seconds) : ctx(ctx), seconds(seconds) {
  thread = std::thread([this] {
    int tick = 0;
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      int rank = planrt_mesh_rank(this->ctx.mesh);
      // A peer on this host that has died: name it and stop every rank.
      if (++tick % 4 == 0) {
        char peer[128];
        if (planrt_mesh_dead_peer(this->ctx.mesh, peer, sizeof peer) >= 0) {
          std::fprintf(stderr, "planrt: error: rank %d: %s during step %lld; stopping every rank\n", rank, peer,
                       (long long)this->ctx.step.load());
          std::fflush(stderr);
          ::alarm(10); // MPI_Abort may wait for a launcher it cannot reach
          planrt_mesh_abort(this->ctx.mesh, 1);
          _exit(1);
        }
      }
      int64_t since = this->ctx.since.load();
      if (!since)
        continue;
      int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      double limit = std::max(this->seconds, this->ctx.allowed.load());
      if (double(now - since) * 1e-9 < limit)
        continue;
      std::string what;
      {
        std::lock_guard<std::mutex> lock(this->ctx.whatMutex);
        what = this->ctx.what;
      }
      char peer[512];
      if (!planrt_mesh_lost_peer(this->ctx.mesh, peer, sizeof peer))
        std::snprintf(peer, sizeof peer, "a peer rank died or hung");
      std::fprintf(stderr,
                   "planrt: error: rank %d: %s of step %lld has waited %.0f s for its peers: %s; stopping every rank\n",
                   rank, what.c_str(), (long long)this->ctx.step.load(), limit, peer);
      std::fflush(stderr);
      ::alarm(10); // MPI_Abort may wait for a launcher it cannot reach
      planrt_mesh_abort(this->ctx.mesh, 1);
      _exit(1);
    }
  });
}

Watchdog::~Watchdog() {
  stop = true;
  thread.join();
}

} // namespace planrt

namespace {
/// Whether buffer `buf`'s floats [offset, offset + count) meet floats [lo, lo + n) of
/// buffer `id`; a count of 0 stands for the rest of the buffer (a pointer to it).
bool meets(int32_t id, int64_t lo, int64_t n, int32_t buf, int64_t offset, int64_t count) {
  return id == buf && offset < lo + n && (count == 0 || lo < offset + count);
}
} // namespace

float *planrt_step_ctx::range(int32_t buf, int64_t offset, int64_t count, const char *op, bool check) {
  if (status)
    return nullptr;
  if (buf < 0 || size_t(buf) >= buffers.size()) {
    failWith(fail(PLANRT_ERR_ARG, "%s: buffer id %d is not in the manifest's table", op, buf));
    return nullptr;
  }
  planrt::Buffer &b = buffers[size_t(buf)];
  if (offset < 0 || count < 0 || offset + count > b.floats) {
    failWith(fail(PLANRT_ERR_ARG, "%s: range [%lld, %lld) lies outside buffer '%s' of %lld floats", op,
                  (long long)offset, (long long)(offset + count), b.name.c_str(), (long long)b.floats));
    return nullptr;
  }
  if (!b.data) {
    failWith(fail(PLANRT_ERR_ARG, "%s: buffer '%s' is not allocated", op, b.name.c_str()));
    return nullptr;
  }
  if (pending.empty() || check)
    return b.data + offset;
  // A range of no floats is a pointer to the rest of the buffer, any of which the update
  // may still use; a deferred fill is made once the update is done with all it reads.
  // Either waits for the whole update.
  bool whole = false;
  for (const Piece &p : pending)
    whole = whole || (count == 0 && meets(p.buf, p.offset, p.floats, buf, offset, count));
  for (const Fill &f : deferredFills)
    whole = whole || meets(f.buf, f.offset, f.count, buf, offset, count);
  if (whole)
    return settleUpdate() ? b.data + offset : nullptr;
  for (const Piece &p : pending)
    if (meets(p.buf, p.offset, p.floats, buf, offset, count))
      if (planrt_status s = offload->awaitPiece(p.group, std::max(offset, p.offset) - p.offset,
                                                std::min(offset + count, p.offset + p.floats) - p.offset)) {
        failWith(s);
        return nullptr;
      }
  return b.data + offset;
}

bool planrt_step_ctx::settleUpdate() {
  if (pending.empty())
    return !status;
  pending.clear();
  if (planrt_status s = offload->settle()) {
    failWith(s);
    return false;
  }
  for (const Fill &f : deferredFills)
    planrt_mem_fill_async(buffers[size_t(f.buf)].data + f.offset, f.value, size_t(f.count));
  deferredFills.clear();
  return !status;
}

float *planrt_step_ctx::optional(int32_t buf, int64_t offset, int64_t count, const char *op, float *none) {
  return buf == -1 && !status ? none : range(buf, offset, count, op);
}

bool planrt_step_ctx::readBatch(int64_t s, int64_t micro) {
  uint64_t first = uint64_t(s + sampleStepBase) * uint64_t(batch) + uint64_t(micro * this->micro * dataSize) +
                   uint64_t(dataRank * this->micro);
  // Read on the host, then copied to the device's buffers (queued): the host never
  // writes device memory in a step.
  hostTokens.resize(tokens.size());
  hostTargets.resize(targets.size());
  if (images) {
    static_assert(sizeof(float) == sizeof(int32_t), "images travel in the token buffer");
    float *pixels = reinterpret_cast<float *>(hostTokens.data());
    for (int64_t i = 0; i < this->micro; ++i)
      if (planrt_status st = planrt_images_sample(images, imageSeed, first + uint64_t(i), &imageTransform,
                                                  pixels + i * imageFloats, &hostTargets[size_t(i)])) {
        failWith(st);
        return false;
      }
  } else if (planrt_status st =
                 planrt_data_batch(train, first, this->micro, seq, hostTokens.data(), hostTargets.data())) {
    failWith(st);
    return false;
  }
  planrt_mem_copy_in(tokens.data(), hostTokens.data(), tokens.size() * sizeof(int32_t));
  planrt_mem_copy_in(targets.data(), hostTargets.data(), targets.size() * sizeof(int32_t));
  return true;
}

void planrt_step_ctx::failWith(planrt_status s) {
  if (!status && s) {
    status = s;
    error = planrt_last_error();
  }
}

namespace planrt {

Waiting::Waiting(planrt_step_ctx &ctx, const std::string &what, double allowed) : ctx(ctx) {
  {
    std::lock_guard<std::mutex> lock(ctx.whatMutex);
    ctx.what = what;
  }
  ctx.allowed = allowed;
  ctx.since = std::chrono::steady_clock::now().time_since_epoch().count();
}

Waiting::~Waiting() {
  int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  ctx.commSeconds += double(now - ctx.since.load()) * 1e-9;
  ctx.since = 0;
}

} // namespace planrt

namespace {
/// "all_reduce of grads[0, 128) over mesh axes mask 1".
std::string describe(const char *kind, const planrt::Buffer &b, int64_t offset, int64_t count, int32_t mask) {
  char text[256];
  std::snprintf(text, sizeof text, "%s of %s[%lld, %lld) over mesh axes mask %d", kind, b.name.c_str(),
                (long long)offset, (long long)(offset + count), mask);
  return text;
}
} // namespace

bool planrt_step_ctx::sliceWithin(const char *op, int64_t begin, int64_t size, int64_t offset, int64_t count) {
  if (begin >= offset && size >= 0 && begin + size <= offset + count)
    return true;
  failWith(fail(PLANRT_ERR_ARG, "%s: slice [%lld, +%lld) outside [%lld, +%lld)", op, (long long)begin, (long long)size,
                (long long)offset, (long long)count));
  return false;
}

void planrt_step_ctx::startBucket(Bucket &b) {
  if (b.dst >= 0) {
    int64_t n = planrt_mesh_group_size(mesh, unsigned(b.mask));
    float *from = range(b.buf, b.offset, b.count * n, "bucket reduce_scatter"),
          *to = range(b.dst, b.dstOffset, b.count, "bucket reduce_scatter");
    if (!from || !to)
      return;
    if (b.accumulate) {
      // The sum lands in a buffer of this rank's part of the slice alone, which is all the
      // collective writes of the block it is given.
      int64_t me = planrt_mesh_group_rank(mesh, unsigned(b.mask)), rel = b.begin - b.offset;
      b.partBegin = std::max(rel, me * b.count) - me * b.count;
      b.partFloats = std::max<int64_t>(0, std::min(rel + b.size, (me + 1) * b.count) - me * b.count - b.partBegin);
      if (b.partFloats == 0) // no part of this rank's block in the slice
        b.partBegin = 0;
      if (!(b.sum = planrt::allocateFloats(std::max<int64_t>(1, b.partFloats))))
        return failWith(fail(PLANRT_ERR_ARG, "bucket reduce_scatter: cannot allocate %lld floats for the sum to add",
                             (long long)b.partFloats));
      to = reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(b.sum.get()) -
                                     uintptr_t(b.partBegin) * sizeof(float));
    }
    planrt::Waiting w(*this,
                      describe("reduce_scatter (bucket start)", buffers[size_t(b.buf)], b.begin, b.size, b.mask));
    if (planrt_status s = planrt_reduce_scatter_start(mesh, unsigned(b.mask), from, b.count, to, b.begin - b.offset,
                                                      b.size, &b.request)) {
      b.sum.reset();
      failWith(s);
    }
    return;
  }
  float *p = range(b.buf, b.offset, b.count, "bucket all_reduce");
  if (!p)
    return;
  // The first start on a group may set up its communicator (NCCL): watched as a collective.
  planrt::Waiting w(*this, describe("all_reduce (bucket start)", buffers[size_t(b.buf)], b.offset, b.count, b.mask));
  if (planrt_status s = planrt_all_reduce_start(mesh, unsigned(b.mask), p, b.count,
                                                b.reduce == 1 ? PLANRT_MAX : PLANRT_SUM, &b.request))
    failWith(s);
}

void planrt_step_ctx::commitBucket(int64_t bucket) {
  for (const Bucket &b : buckets)
    if (b.bucket == bucket && b.dst >= 0)
      buffers[size_t(b.buf)].commit(b.begin, b.size);
}

void planrt_step_ctx::completeBucket(Bucket &b) {
  planrt_request *r = b.request;
  if (!r)
    return;
  b.request = nullptr; // planrt_wait frees it
  b.done = true;
  {
    planrt::Waiting w(
        *this, b.dst >= 0 ? describe("reduce_scatter (bucket)", buffers[size_t(b.buf)], b.begin, b.size, b.mask)
                          : describe("all_reduce (bucket)", buffers[size_t(b.buf)], b.offset, b.count, b.mask));
    if (planrt_status s = planrt_wait(r))
      failWith(s);
  }
  if (b.accumulate && b.sum && b.partFloats > 0 && !status) {
    if (float *to = range(b.dst, b.dstOffset + b.partBegin, b.partFloats, "bucket reduce_scatter"))
      planrt_mem_add(to, b.sum.get(), size_t(b.partFloats));
  }
  b.sum.reset();
  if (b.dst >= 0)
    buffers[size_t(b.buf)].decommit(b.begin, b.size);
}

extern "C" {

void planrt_sched_fill(planrt_step_ctx *ctx, int32_t buf, int64_t offset, int64_t count, float value) {
  float *p = ctx->range(buf, offset, count, "fill", /*check=*/true);
  if (!p || count == 0)
    return;
  for (const planrt_step_ctx::Piece &piece : ctx->pending) // the update still reads it: later
    if (meets(piece.buf, piece.offset, piece.floats, buf, offset, count)) {
      ctx->deferredFills.push_back({buf, offset, count, value});
      return;
    }
  planrt_mem_fill_async(p, value, size_t(count)); // the step program waits before the host reads
}

void planrt_sched_alloc(planrt_step_ctx *ctx, int32_t buf, int32_t parts) {
  if (ctx->status || buf < 0 || size_t(buf) >= ctx->buffers.size())
    return ctx->failWith(ctx->status ? PLANRT_OK : fail(PLANRT_ERR_ARG, "alloc: bad buffer id %d", buf));
  planrt::Buffer &b = ctx->buffers[size_t(buf)];
  if (!b.data && !b.allocate(parts != 0))
    ctx->failWith(
        fail(PLANRT_ERR_ARG, "cannot allocate buffer '%s' of %lld floats", b.name.c_str(), (long long)b.floats));
}

void planrt_sched_free(planrt_step_ctx *ctx, int32_t buf) {
  if (!ctx->status && buf >= 0 && size_t(buf) < ctx->buffers.size())
    ctx->buffers[size_t(buf)].release();
}

void planrt_sched_grad(planrt_step_ctx *ctx, int64_t step, int64_t micro, int32_t params, int32_t grads,
                       int32_t state) {
  float *p = ctx->range(params, 0, 0, "grad"), *g = ctx->range(grads, 0, 0, "grad"),
        *s = ctx->range(state, 0, 8, "grad");
  if (p && g && s) {
    ctx->step = step;
    if (!ctx->gathers.empty()) // the first bucket now; each next one a bucket ahead of its read
      ctx->startGathers(ctx->gathers.front().bucket);
    ctx->commitBucket(0); // the gradient bucket the backward pass writes first
    if (ctx->readBatch(step, micro))
      ctx->grad(p, g, ctx->tokens.data(), ctx->targets.data(), s + 7, s);
  }
  // Any bucket the entry point did not wait for, on every path (a failed step too:
  // nothing may still be writing the parameters when they are freed).
  ctx->waitGathers(-1, /*ahead=*/false);
  ctx->gathers.clear();
}

namespace {
/// The stage a sched.forward, sched.backward or sched.wgrad names must be one this rank
/// holds: that stage, or null after failing the step.
const planrt_step_ctx::Stage *checkStage(planrt_step_ctx *ctx, int64_t stage, const char *op) {
  if (ctx->status)
    return nullptr;
  for (const planrt_step_ctx::Stage &s : ctx->stages)
    if (s.stage == stage && s.forward)
      return &s;
  ctx->failWith(fail(PLANRT_ERR_ARG, "%s: stage %lld's entry point called on pipeline rank %lld, which does not hold it",
                     op, (long long)stage, (long long)ctx->pipelineRank));
  return nullptr;
}
} // namespace

void planrt_sched_forward(planrt_step_ctx *ctx, int64_t step, int64_t micro, int64_t stage, int32_t params, int32_t in,
                          int64_t in_offset, int32_t out, int64_t out_offset, int32_t saved, int64_t saved_offset) {
  const planrt_step_ctx::Stage *st = checkStage(ctx, stage, "forward");
  if (!st)
    return;
  float none[2] = {0, 0};
  float *p = ctx->range(params, 0, 0, "forward"), *x = ctx->optional(in, in_offset, st->activationIn, "forward", none),
        *y = ctx->range(out, out_offset, st->activationOut, "forward"),
        *kept = ctx->optional(saved, saved_offset, st->savedFloats, "forward", none + 1);
  if (!p || !x || !y || !kept)
    return;
  ctx->waitSends(out); // what it hands on goes where an earlier send may still read
  ctx->step = step;
  if (ctx->readBatch(step, micro))
    st->forward(p, ctx->tokens.data(), ctx->targets.data(), x, y, kept);
}

void planrt_sched_backward(planrt_step_ctx *ctx, int64_t step, int64_t micro, int64_t stage, int32_t params,
                           int32_t grads, int32_t state, int32_t in, int64_t in_offset, int32_t cotangent,
                           int64_t cotangent_offset, int32_t dinput, int64_t dinput_offset, int32_t saved,
                           int64_t saved_offset, int32_t wsaved, int64_t wsaved_offset) {
  const planrt_step_ctx::Stage *st = checkStage(ctx, stage, "backward");
  if (!st)
    return;
  float none[4] = {0, 0, 0, 0};
  float *p = ctx->range(params, 0, 0, "backward"), *g = ctx->range(grads, 0, 0, "backward"),
        *s = ctx->range(state, 0, 8, "backward"), *x = ctx->optional(in, in_offset, st->activationIn, "backward", none),
        *dy = ctx->optional(cotangent, cotangent_offset, st->activationOut, "backward", none),
        *dx = ctx->optional(dinput, dinput_offset, st->activationIn, "backward", none + 1),
        *kept = ctx->optional(saved, saved_offset, st->savedFloats, "backward", none + 2),
        *forWeights = ctx->optional(wsaved, wsaved_offset, st->wsavedFloats, "backward", none + 3);
  if (!p || !g || !s || !x || !dy || !dx || !kept || !forWeights)
    return;
  if (dinput >= 0)
    ctx->waitSends(dinput);
  ctx->step = step;
  if (ctx->readBatch(step, micro))
    st->backward(p, g, ctx->tokens.data(), ctx->targets.data(), x, dy, dx, s + 7, s, kept, forWeights);
}

void planrt_sched_wgrad(planrt_step_ctx *ctx, int64_t step, int64_t micro, int64_t stage, int32_t params,
                        int32_t grads, int32_t state, int32_t wsaved, int64_t wsaved_offset) {
  const planrt_step_ctx::Stage *st = checkStage(ctx, stage, "wgrad");
  if (!st)
    return;
  if (!st->weights) {
    ctx->failWith(fail(PLANRT_ERR_ARG, "wgrad: stage %lld has no weight pass (a zero-bubble schedule's)",
                       (long long)stage));
    return;
  }
  float *p = ctx->range(params, 0, 0, "wgrad"), *g = ctx->range(grads, 0, 0, "wgrad"),
        *s = ctx->range(state, 0, 8, "wgrad"), *kept = ctx->range(wsaved, wsaved_offset, st->wsavedFloats, "wgrad");
  if (!p || !g || !s || !kept)
    return;
  ctx->step = step;
  if (ctx->readBatch(step, micro))
    st->weights(p, g, ctx->tokens.data(), ctx->targets.data(), s, kept);
}

void planrt_sched_sumsq(planrt_step_ctx *ctx, int32_t b0, int64_t o0, int32_t b1, int64_t o1, int32_t state) {
  float *g0 = ctx->range(b0, o0, 0, "sumsq"), *g1 = ctx->range(b1, o1, 0, "sumsq"),
        *s = ctx->range(state, 0, 8, "sumsq");
  if (!g0 || !g1 || !s)
    return;
  if (ctx->counted.empty())
    return ctx->sumsq(g0, g1, s);
  // Tensor and pipeline parallelism: the sum over the ranks (all-reduces follow) must
  // count each replicated or tied parameter once: the counted ranges of the two pieces,
  // summed where the memory is.
  const float *piece[2] = {g0, g1};
  std::vector<const float *> starts;
  std::vector<int64_t> counts;
  for (const planrt_step_ctx::Counted &c : ctx->counted) {
    if (!c.counted)
      continue;
    for (int g = 0; g < 2; ++g) {
      int64_t lo = std::max(c.offset, ctx->pieceBegin[g]),
              hi = std::min(c.offset + c.count, ctx->pieceBegin[g] + ctx->pieceFloats[g]);
      if (hi > lo) {
        starts.push_back(piece[g] + (lo - ctx->pieceBegin[g]));
        counts.push_back(hi - lo);
      }
    }
  }
  planrt_mem_sumsq(starts.data(), counts.data(), int64_t(starts.size()), s + 6);
}

void planrt_sched_update(planrt_step_ctx *ctx, int64_t step, int32_t pb0, int64_t po0, int32_t pb1, int64_t po1,
                         int32_t gb0, int64_t go0, int32_t gb1, int64_t go1, int32_t mb0, int64_t mo0, int32_t mb1,
                         int64_t mo1, int32_t vb0, int64_t vo0, int32_t vb1, int64_t vo1, int32_t state) {
  if (ctx->offload) { // the moments are in files, streamed through the offloaded update
    if (!ctx->settleUpdate())
      return;
    bool streamed = ctx->offload->paramsOffloaded(); // and the parameters too
    float *p[2] = {streamed ? nullptr : ctx->range(pb0, po0, 0, "update"),
                   streamed ? nullptr : ctx->range(pb1, po1, 0, "update")};
    float *g[2] = {ctx->range(gb0, go0, 0, "update"), ctx->range(gb1, go1, 0, "update")};
    float *s = ctx->range(state, 0, 8, "update");
    if (!((p[0] && p[1]) || streamed) || !g[0] || !g[1] || !s)
      return;
    if (planrt_status st = ctx->offload->update(p, g, step, s, ctx->overlapUpdate))
      return ctx->failWith(st);
    if (!ctx->offload->pending())
      return;
    // Until it ends, the next step waits for the pieces it touches (range()).
    for (int k = 0; k < 2; ++k) {
      int64_t floats = ctx->offload->groupFloats(k);
      if (!streamed)
        ctx->pending.push_back({k ? pb1 : pb0, k ? po1 : po0, floats, k});
      ctx->pending.push_back({k ? gb1 : gb0, k ? go1 : go0, floats, k});
    }
    return;
  }
  float *p[8] = {ctx->range(pb0, po0, 0, "update"), ctx->range(pb1, po1, 0, "update"),
                 ctx->range(gb0, go0, 0, "update"), ctx->range(gb1, go1, 0, "update"),
                 ctx->range(mb0, mo0, 0, "update"), ctx->range(mb1, mo1, 0, "update"),
                 ctx->range(vb0, vo0, 0, "update"), ctx->range(vb1, vo1, 0, "update")};
  float *s = ctx->range(state, 0, 8, "update");
  for (float *x : p)
    if (!x)
      return;
  if (s)
    ctx->update(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], step, s);
}

void planrt_sched_all_reduce(planrt_step_ctx *ctx, int32_t mask, int32_t buf, int64_t offset, int64_t count,
                             int32_t reduce) {
  float *p = ctx->range(buf, offset, count, "all_reduce");
  if (!p)
    return;
  planrt::Waiting w(*ctx, describe("all_reduce", ctx->buffers[size_t(buf)], offset, count, mask));
  planrt_reduce_op op = reduce == 1 ? PLANRT_MAX : reduce == 3 ? PLANRT_SUM_U64 : PLANRT_SUM;
  if (planrt_status s = planrt_all_reduce(ctx->mesh, unsigned(mask), p, count, op))
    return ctx->failWith(s);
  if (reduce == 2) // the mean: divided where the memory is
    planrt_mem_divide(p, float(planrt_mesh_group_size(ctx->mesh, unsigned(mask))), size_t(count));
}

void planrt_sched_bucket_all_reduce(planrt_step_ctx *ctx, int64_t bucket, int32_t mask, int32_t buf, int64_t offset,
                                    int64_t count, int32_t reduce) {
  if (ctx->range(buf, offset, count, "bucket all_reduce", /*check=*/true)) // touched when it starts
    ctx->buckets.push_back({bucket, mask, buf, offset, count, reduce});
}

void planrt_sched_bucket_reduce_scatter(planrt_step_ctx *ctx, int64_t bucket, int32_t mask, int32_t src,
                                        int64_t src_offset, int64_t count, int32_t dst, int64_t dst_offset,
                                        int64_t begin, int64_t size, int32_t accumulate) {
  int64_t n = planrt_mesh_group_size(ctx->mesh, unsigned(mask));
  if (!ctx->range(src, src_offset, count * n, "bucket reduce_scatter", /*check=*/true) || // touched when it starts
      !ctx->range(dst, dst_offset, count, "bucket reduce_scatter", /*check=*/true))
    return;
  if (!ctx->sliceWithin("bucket reduce_scatter", begin, size, src_offset, count * n))
    return;
  planrt_step_ctx::Bucket b{bucket, mask, src, src_offset, count, 0};
  b.dst = dst;
  b.dstOffset = dst_offset;
  b.begin = begin;
  b.size = size;
  b.accumulate = accumulate != 0;
  ctx->buckets.push_back(std::move(b));
}

void planrt_grad_ready(int64_t bucket) {
  planrt_step_ctx *ctx = planrt::activeStep();
  if (!ctx || ctx->status)
    return;
  // ZeRO-2 and 3's buckets (a gradient held by parts, or sums to add) complete two
  // behind, before the next one is committed: at most three of them are held at once
  // (the two in flight and the one written), never four.
  for (planrt_step_ctx::Bucket &b : ctx->buckets)
    if (b.dst >= 0 && (b.accumulate || ctx->buffers[size_t(b.buf)].byParts) && b.bucket <= bucket - 2)
      ctx->completeBucket(b);
  for (planrt_step_ctx::Bucket &b : ctx->buckets)
    if (b.bucket == bucket && !b.request && !b.done)
      ctx->startBucket(b);
  ctx->commitBucket(bucket + 1); // the backward pass writes the next one now
  for (planrt_step_ctx::Bucket &b : ctx->buckets) // MPI moves them only inside MPI calls
    if (b.request)
      planrt_test(b.request);
}

namespace {
/// The floats [lo, hi) of a gather's slice [begin, begin + size) (in the gathered
/// range's coordinates) that rank `me` of its group holds, blocks of `count` each.
std::pair<int64_t, int64_t> shardPart(int64_t me, int64_t count, int64_t begin, int64_t size) {
  return {std::max(begin, me * count), std::min(begin + size, (me + 1) * count)};
}
} // namespace

void planrt_step_ctx::startGathers(int64_t bucket) {
  size_t last = gathers.size();
  for (size_t i = 0; i < gathers.size(); ++i)
    if (bucket < 0 || gathers[i].bucket == bucket)
      last = i + 1;
  for (size_t i = 0; i < std::min(last, gathers.size()) && !status; ++i) {
    Gather &g = gathers[i];
    if (g.started)
      continue;
    g.started = true;
    int64_t n = planrt_mesh_group_size(mesh, unsigned(g.mask));
    float *to = range(g.dst, g.dstOffset, g.count * n, "bucket all_gather");
    if (!to)
      return;
    buffers[size_t(g.dst)].commit(g.begin, g.size); // held from now (a buffer by parts)
    // An offloaded shard's part is read into place unless an earlier gather of the same
    // floats (the forward pass's last bucket, gathered again for the backward) still holds
    // it: that one may be sending it now, and the bytes are there.
    const float *from = gatherSource(g.src, g.srcOffset, g.count, unsigned(g.mask), to, g.begin - g.dstOffset, g.size,
                                     "bucket all_gather", /*fetch=*/!heldByAnother(g));
    if (!from)
      return;
    planrt::Waiting w(*this, g.what);
    if (planrt_status s = planrt_all_gather_start(mesh, unsigned(g.mask), from, g.count, to, g.begin - g.dstOffset,
                                                  g.size, &g.request))
      return failWith(s);
  }
  prefetchNextGather();
}

void planrt_step_ctx::prefetchNextGather() {
  if (!offload || status)
    return;
  auto next = std::find_if(gathers.begin(), gathers.end(), [](const Gather &g) { return !g.started; });
  if (next == gathers.end() || next->src != offloadedShard || heldByAnother(*next))
    return;
  int64_t me = planrt_mesh_group_rank(mesh, unsigned(next->mask));
  auto [lo, hi] = shardPart(me, next->count, next->begin - next->dstOffset, next->size);
  if (hi > lo)
    offload->prefetchParams(next->srcOffset + (lo - me * next->count), hi - lo);
}

bool planrt_step_ctx::heldByAnother(const Gather &g) const {
  return std::any_of(gathers.begin(), gathers.end(), [&](const Gather &h) {
    return &h != &g && h.started && !h.released && h.dst == g.dst && h.begin == g.begin && h.size == g.size;
  });
}

void planrt_step_ctx::waitGathers(int64_t bucket, bool ahead) {
  startGathers(bucket);
  if (ahead && bucket >= 0) // one bucket ahead: the first one not started yet
    for (const Gather &g : gathers)
      if (!g.started) {
        startGathers(g.bucket);
        break;
      }
  for (Gather &g : gathers) {
    if (!g.request || g.done)
      continue;
    if (bucket >= 0 && g.bucket != bucket) {
      planrt_test(g.request); // MPI moves the others only inside MPI calls
      continue;
    }
    planrt::Waiting w(*this, g.what);
    g.done = true;
    planrt_request *r = g.request;
    g.request = nullptr; // planrt_wait frees it
    if (planrt_status s = planrt_wait(r))
      failWith(s);
  }
}

void planrt_step_ctx::releaseGathers(int64_t bucket) {
  waitGathers(bucket, /*ahead=*/false);
  for (Gather &g : gathers) {
    if (g.bucket != bucket || !g.done || g.released)
      continue;
    g.released = true;
    // Kept while a later gather of the same floats (the backward pass's, started a
    // bucket ahead) is in flight or in use: that one's release gives them back.
    if (!heldByAnother(g))
      buffers[size_t(g.dst)].decommit(g.begin, g.size);
  }
}

const float *planrt_step_ctx::gatherSource(int32_t src, int64_t srcOffset, int64_t count, unsigned mask, float *to,
                                           int64_t begin, int64_t size, const char *op, bool fetch) {
  int64_t me = planrt_mesh_group_rank(mesh, mask);
  auto [lo, hi] = shardPart(me, count, begin, size);
  if (src != offloadedShard || !offload) {
    // The gather sends this rank's part of the slice alone: what an overlapped update
    // must be done with (a ZeRO-3 bucket's part of a shard holding a whole group).
    float *from = range(src, srcOffset, count, op, /*check=*/true);
    if (from && hi > lo && !range(src, srcOffset + (lo - me * count), hi - lo, op))
      return nullptr;
    return from;
  }
  if (srcOffset < 0 || count < 0 || srcOffset + count > buffers[size_t(src)].floats) {
    failWith(fail(PLANRT_ERR_ARG, "%s: range [%lld, %lld) lies outside the offloaded shard '%s'", op,
                  (long long)srcOffset, (long long)(srcOffset + count), buffers[size_t(src)].name.c_str()));
    return nullptr;
  }
  if (fetch && hi > lo)
    if (planrt_status s = offload->readParams(srcOffset + (lo - me * count), hi - lo, to + lo)) {
      failWith(s);
      return nullptr;
    }
  return to + me * count; // in place (planrt_all_gather)
}

void planrt_sched_bucket_all_gather(planrt_step_ctx *ctx, int64_t bucket, int32_t mask, int32_t src, int64_t src_offset,
                                    int64_t count, int32_t dst, int64_t dst_offset, int64_t begin, int64_t size) {
  int64_t n = planrt_mesh_group_size(ctx->mesh, unsigned(mask));
  // Checked now, touched when the gather starts.
  if ((src != ctx->offloadedShard && !ctx->range(src, src_offset, count, "bucket all_gather", /*check=*/true)) ||
      !ctx->range(dst, dst_offset, count * n, "bucket all_gather", /*check=*/true) || ctx->status)
    return;
  if (!ctx->sliceWithin("bucket all_gather", begin, size, dst_offset, count * n))
    return;
  planrt_step_ctx::Gather g{bucket, describe("all_gather (bucket)", ctx->buffers[size_t(dst)], begin, size, mask),
                            mask, src, dst, src_offset, count, dst_offset, begin, size};
  ctx->gathers.push_back(std::move(g));
}

void planrt_params_ready(int64_t bucket) {
  if (planrt_step_ctx *ctx = planrt::activeStep(); ctx && !ctx->status)
    ctx->waitGathers(bucket, /*ahead=*/true);
}

void planrt_params_release(int64_t bucket) {
  if (planrt_step_ctx *ctx = planrt::activeStep(); ctx && !ctx->status)
    ctx->releaseGathers(bucket);
}

void planrt_sched_wait(planrt_step_ctx *ctx) {
  for (planrt_step_ctx::Bucket &b : ctx->buckets)
    if (!b.request && !b.done && !ctx->status)
      ctx->startBucket(b); // a bucket its entry point did not report: started now
  for (planrt_step_ctx::Bucket &b : ctx->buckets) // every one started, a failed step's too
    ctx->completeBucket(b);
  ctx->buckets.clear();
}

void planrt_sched_all_gather(planrt_step_ctx *ctx, int32_t mask, int32_t src, int64_t src_offset, int64_t count,
                             int32_t dst, int64_t dst_offset) {
  int64_t n = planrt_mesh_group_size(ctx->mesh, unsigned(mask));
  float *to = ctx->range(dst, dst_offset, count * n, "all_gather");
  if (!to)
    return;
  ctx->buffers[size_t(dst)].commit(dst_offset, count * n); // a buffer by parts holds it from now
  const float *from = ctx->gatherSource(src, src_offset, count, unsigned(mask), to, 0, count * n, "all_gather");
  if (!from)
    return;
  planrt::Waiting w(*ctx, describe("all_gather", ctx->buffers[size_t(src)], src_offset, count, mask));
  ctx->failWith(planrt_all_gather(ctx->mesh, unsigned(mask), from, count, to));
}

void planrt_sched_reduce_scatter(planrt_step_ctx *ctx, int32_t mask, int32_t src, int64_t src_offset, int64_t count,
                                 int32_t dst, int64_t dst_offset, int32_t accumulate) {
  int64_t n = planrt_mesh_group_size(ctx->mesh, unsigned(mask));
  float *from = ctx->range(src, src_offset, count * n, "reduce_scatter"),
        *to = ctx->range(dst, dst_offset, count, "reduce_scatter");
  if (!from || !to)
    return;
  planrt::Waiting w(*ctx, describe("reduce_scatter", ctx->buffers[size_t(src)], src_offset, count * n, mask));
  if (!accumulate)
    return ctx->failWith(planrt_reduce_scatter(ctx->mesh, unsigned(mask), from, count, to));
  // The sum, then added to the shard. On a device backend (one with its own add: CUDA) the
  // sum is device memory, which NCCL reduces into and the device adds from — outside the
  // arena, not yet in the memory plan; on the host, a vector.
  if (planrt_get_backend()->add) {
    planrt::Floats sum = planrt::allocateFloats(count);
    if (!sum)
      return ctx->failWith(fail(PLANRT_ERR_ARG, "reduce_scatter: cannot allocate %lld floats for the sum to add",
                                (long long)count));
    if (planrt_status s = planrt_reduce_scatter(ctx->mesh, unsigned(mask), from, count, sum.get()))
      return ctx->failWith(s);
    return planrt_mem_add(to, sum.get(), size_t(count));
  }
  std::vector<float> sum(static_cast<size_t>(count));
  if (planrt_status s = planrt_reduce_scatter(ctx->mesh, unsigned(mask), from, count, sum.data()))
    return ctx->failWith(s);
  planrt_mem_add(to, sum.data(), size_t(count));
}

void planrt_step_ctx::waitSends(int32_t buf) {
  for (auto it = sends.begin(); it != sends.end();) {
    if (buf >= 0 && it->buf != buf) {
      ++it;
      continue;
    }
    planrt::Waiting w(*this, describe("send", buffers[size_t(it->buf)], it->offset, it->count, it->mask));
    failWith(planrt_wait(it->request));
    it = sends.erase(it);
  }
}

void planrt_sched_send(planrt_step_ctx *ctx, int32_t axis, int64_t peer, int32_t buf, int64_t offset, int64_t count) {
  float *p = ctx->range(buf, offset, count, "send");
  if (!p)
    return;
  // Started, not waited for: the rank goes on to its next pass while the peer takes it.
  planrt_request *r = nullptr;
  planrt_status s = planrt_send_start(ctx->mesh, axis, peer, p, count, &r);
  ctx->failWith(s);
  if (s == PLANRT_OK)
    ctx->sends.push_back({buf, 1 << axis, offset, count, r});
}

void planrt_sched_recv(planrt_step_ctx *ctx, int32_t axis, int64_t peer, int32_t buf, int64_t offset, int64_t count) {
  float *p = ctx->range(buf, offset, count, "recv");
  if (!p)
    return;
  planrt::Waiting w(*ctx, describe("recv", ctx->buffers[size_t(buf)], offset, count, 1 << axis));
  ctx->failWith(planrt_recv(ctx->mesh, axis, peer, p, count));
}

void planrt_sched_send_recv(planrt_step_ctx *ctx, int32_t axis, int64_t to, int32_t buf, int64_t offset, int64_t count,
                            int64_t from, int32_t recv_buf, int64_t recv_offset, int64_t recv_count) {
  float *p = ctx->range(buf, offset, count, "send_recv"),
        *q = ctx->range(recv_buf, recv_offset, recv_count, "send_recv");
  if (!p || !q)
    return;
  planrt::Waiting w(*ctx, describe("send_recv", ctx->buffers[size_t(buf)], offset, count, 1 << axis));
  ctx->failWith(planrt_sendrecv(ctx->mesh, axis, to, p, count, from, q, recv_count));
}

int64_t planrt_sched_coord(planrt_step_ctx *ctx, int32_t axis) {
  return ctx->mesh ? planrt_mesh_coord(ctx->mesh, axis) : 0;
}

} // extern "C"
