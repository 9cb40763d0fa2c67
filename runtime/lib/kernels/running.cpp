// The batchnorm kernels that read or update the running statistics the runtime keeps
// for the step being run (planrt_kernels.h, "Vision"): PyTorch's running_mean,
// running_var and num_batches_tracked per layer, which checkpoints and exports carry.
#include "step_context.h"

#include "planrt_kernels.h"

#include <cstdio>

namespace {

/// Layer `layer`'s running statistics of the active step, checked against C.
planrt_step_ctx::RunningStats &layerOf(int64_t layer, int64_t C) {
  planrt_step_ctx *ctx = planrt::activeStep();
  char text[200];
  if (!ctx || layer < 0 || size_t(layer) >= ctx->running.size()) {
    std::snprintf(text, sizeof text, "batchnorm layer %lld has no running statistics (the executable keeps %zu)",
                  (long long)layer, ctx ? ctx->running.size() : size_t(0));
    planrt::dieInStep(text);
  }
  planrt_step_ctx::RunningStats &r = ctx->running[size_t(layer)];
  if (int64_t(r.mean.size()) != C) {
    std::snprintf(text, sizeof text, "batchnorm layer %lld ('%s') keeps %zu channels' running statistics, not %lld",
                  (long long)layer, r.name.c_str(), r.mean.size(), (long long)C);
    planrt::dieInStep(text);
  }
  return r;
}

} // namespace

extern "C" {

void planrt_k_batchnorm_observe(const float *stats, int64_t layer, int64_t C, int64_t count, float momentum) {
  planrt_step_ctx::RunningStats &r = layerOf(layer, C);
  planrt_k_batchnorm_running(stats, r.mean.data(), r.var.data(), C, count, momentum);
  ++r.tracked;
}

void planrt_k_batchnorm_infer(const float *x, const float *w, const float *b, float *y, float *stats, int64_t layer,
                              int64_t N, int64_t C, int64_t HW, float eps) {
  planrt_step_ctx::RunningStats &r = layerOf(layer, C);
  planrt_k_batchnorm_eval(x, r.mean.data(), r.var.data(), w, b, y, N, C, HW, eps);
  for (int64_t c = 0; c < C; ++c) {
    stats[c] = r.mean[size_t(c)];
    stats[C + c] = r.var[size_t(c)];
  }
}

} // extern "C"
