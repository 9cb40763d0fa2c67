// The kernels of tensor-parallel ranks (planrt_kernels.h, "Tensor parallelism"):
// collectives inside the generated step functions act on the mesh of the step
// being run, which the driver makes active.
#include "step_context.h"

#include "planrt_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace planrt {

namespace {
planrt_step_ctx *gActive = nullptr;

[[noreturn]] void die(const char *what) { dieInStep(what); }

/// The size of the group along mesh axis `axis` of the active step; 0 without a mesh.
int64_t groupSize(int32_t axis) {
  return gActive && gActive->mesh ? planrt_mesh_group_size(gActive->mesh, 1u << unsigned(axis)) : 0;
}

/// Runs call(mesh, mask) on the active step's group along `axis`, watched by the watchdog
/// as `text`; a failure is fatal, naming it.
template <typename F> void collective(int32_t axis, const std::string &text, F call) {
  planrt::Waiting w(*gActive, text);
  if (call(gActive->mesh, 1u << unsigned(axis))) {
    std::string msg = text + ": " + planrt_last_error();
    die(msg.c_str());
  }
}

/// Reduces buf in place over mesh axis `axis` of the active step (nothing without a mesh).
void reduce(float *buf, int64_t count, int32_t axis, planrt_reduce_op op, const char *what) {
  if (!groupSize(axis) || count == 0)
    return;
  collective(axis,
             "tensor-parallel all_reduce (" + std::string(what) + ") of " + std::to_string(count) +
                 " floats over mesh axis " + std::to_string(axis),
             [&](planrt_mesh *mesh, unsigned mask) { return planrt_all_reduce(mesh, mask, buf, count, op); });
}

void badId(const char *what, int64_t id, int64_t limit) {
  char text[160];
  std::snprintf(text, sizeof text, "%s %lld is outside [0, %lld)", what, (long long)id, (long long)limit);
  die(text);
}
} // namespace

planrt_step_ctx *activeStep() { return gActive; }
void setActiveStep(planrt_step_ctx *ctx) { gActive = ctx; }

void dieInStep(const char *what) {
  std::fprintf(stderr, "planrt: error: rank %d: %s\n", gActive && gActive->mesh ? planrt_mesh_rank(gActive->mesh) : 0,
               what);
  std::fflush(stderr);
  if (gActive && gActive->mesh)
    planrt_mesh_abort(gActive->mesh, 1);
  std::exit(1);
}

} // namespace planrt

using planrt::reduce;

extern "C" {

int64_t planrt_k_axis_coord(int32_t axis) {
  planrt_step_ctx *ctx = planrt::activeStep();
  return ctx && ctx->mesh ? planrt_mesh_coord(ctx->mesh, axis) : 0;
}

void planrt_k_all_reduce(const float *x, float *out, int64_t count, int32_t axis, int32_t op) {
  std::memcpy(out, x, size_t(count) * sizeof(float));
  reduce(out, count, axis, op == 1 ? PLANRT_MAX : PLANRT_SUM, op == 1 ? "max" : "sum");
}

void planrt_k_all_gather_seq(const float *x, float *out, int64_t B, int64_t n, int64_t C, int32_t axis) {
  int64_t group = planrt::groupSize(axis), count = B * n * C;
  if (!group)
    return (void)std::memcpy(out, x, size_t(count) * sizeof(float));
  // The collective gives the ranks' slices one after another; the sequence interleaves
  // them per batch row.
  std::vector<float> blocks(static_cast<size_t>(count * group));
  planrt::collective(
      axis,
      "sequence-parallel all_gather of " + std::to_string(count) + " floats over mesh axis " + std::to_string(axis),
      [&](planrt_mesh *mesh, unsigned mask) { return planrt_all_gather(mesh, mask, x, count, blocks.data()); });
  for (int64_t k = 0; k < group; ++k)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(out + (b * n * group + k * n) * C, blocks.data() + k * count + b * n * C,
                  size_t(n * C) * sizeof(float));
}

void planrt_k_reduce_scatter_seq(const float *x, float *out, int64_t B, int64_t n, int64_t C, int32_t axis) {
  int64_t group = planrt::groupSize(axis), count = B * n * C;
  if (!group)
    return (void)std::memcpy(out, x, size_t(count) * sizeof(float));
  std::vector<float> blocks(static_cast<size_t>(count * group));
  for (int64_t k = 0; k < group; ++k)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(blocks.data() + k * count + b * n * C, x + (b * n * group + k * n) * C,
                  size_t(n * C) * sizeof(float));
  planrt::collective(
      axis,
      "sequence-parallel reduce_scatter of " + std::to_string(count * group) + " floats over mesh axis " +
          std::to_string(axis),
      [&](planrt_mesh *mesh, unsigned mask) { return planrt_reduce_scatter(mesh, mask, blocks.data(), count, out); });
}

void planrt_k_sequence_slice(const float *x, float *out, int64_t B, int64_t T, int64_t C, int64_t offset, int64_t n) {
  if (offset < 0 || offset + n > T)
    planrt::badId("sequence slice end", offset + n, T + 1);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(out + b * n * C, x + (b * T + offset) * C, size_t(n * C) * sizeof(float));
}

void planrt_k_sequence_unslice(const float *dy, float *dx, int64_t B, int64_t T, int64_t C, int64_t offset, int64_t n) {
  if (offset < 0 || offset + n > T)
    planrt::badId("sequence slice end", offset + n, T + 1);
  std::fill(dx, dx + B * T * C, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dx + (b * T + offset) * C, dy + b * n * C, size_t(n * C) * sizeof(float));
}

void planrt_k_embedding_slice(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t C, int64_t V,
                              int64_t offset) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t id = int64_t(ids[r]) - offset;
    if (ids[r] < 0)
      planrt::badId("embedding id", ids[r], offset + V);
    if (id >= 0 && id < V)
      std::memcpy(out + r * C, table + id * C, size_t(C) * sizeof(float));
    else
      std::fill(out + r * C, out + (r + 1) * C, 0.0f);
  }
}

void planrt_k_embedding_slice_bwd(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t C,
                                  int64_t V, int64_t offset) {
  std::fill(dtable, dtable + V * C, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t id = int64_t(ids[r]) - offset;
    if (id < 0 || id >= V)
      continue;
    float *dst = dtable + id * C;
    const float *src = dout + r * C;
    for (int64_t c = 0; c < C; ++c)
      dst[c] += src[c];
  }
}

void planrt_k_cross_entropy_vp(const float *logits, const int32_t *targets, float *loss, float *lse, int64_t rows,
                               int64_t V, int64_t offset, int32_t axis) {
  int64_t group = std::max<int64_t>(planrt::groupSize(axis), 1);
  std::vector<float> max(static_cast<size_t>(rows)), sum(static_cast<size_t>(rows)), target(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    max[size_t(r)] = *std::max_element(logits + r * V, logits + (r + 1) * V);
  reduce(max.data(), rows, axis, PLANRT_MAX, "cross-entropy max");
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = logits + r * V;
    double s = 0;
    for (int64_t j = 0; j < V; ++j)
      s += std::exp(double(lr[j]) - double(max[size_t(r)]));
    sum[size_t(r)] = float(s);
    int64_t t = targets[r];
    if (t < 0 || t >= V * group)
      planrt::badId("cross-entropy target", t, V * group);
    target[size_t(r)] = t >= offset && t < offset + V ? lr[t - offset] : 0.0f;
  }
  reduce(sum.data(), rows, axis, PLANRT_SUM, "cross-entropy sum");
  reduce(target.data(), rows, axis, PLANRT_SUM, "cross-entropy target");
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double l = double(max[size_t(r)]) + std::log(double(sum[size_t(r)]));
    lse[r] = float(l);
    total += l - double(target[size_t(r)]);
  }
  *loss = rows > 0 ? float(total / double(rows)) : 0.0f;
}

void planrt_k_cross_entropy_vp_bwd(const float *dloss, const float *logits, const int32_t *targets, const float *lse,
                                   float *dlogits, int64_t rows, int64_t V, int64_t offset) {
  double scale = rows > 0 ? double(*dloss) / double(rows) : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = logits + r * V;
    float *dr = dlogits + r * V;
    int64_t t = int64_t(targets[r]) - offset;
    for (int64_t j = 0; j < V; ++j) {
      double p = scale * std::exp(double(lr[j]) - double(lse[r]));
      dr[j] = float(j == t ? p - scale : p);
    }
  }
}

} // extern "C"
