// The training log (JSON lines) and the NaN/Inf check.
#include "status.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

struct planrt_log {
  FILE *file = nullptr;
  std::string path;
  /// The backend's counters at the previous step line.
  uint64_t syncs = 0, launches = 0, touches = 0;
};

namespace {
/// JSON has no NaN or Infinity: write them as null.
void number(FILE *f, double v) {
  if (std::isfinite(v))
    std::fprintf(f, "%.9g", v);
  else
    std::fputs("null", f);
}
} // namespace

extern "C" {

planrt_status planrt_log_open(const char *path, planrt_log **out) {
  if (!path || !out)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_open: null argument");
  FILE *f = std::fopen(path, "a");
  if (!f)
    return planrt::fail(PLANRT_ERR_IO, "%s: cannot open the log: %s", path, std::strerror(errno));
  *out = new planrt_log{f, path};
  if (const planrt_backend *b = planrt_get_backend(); b->counters) // the first step line counts from here
    b->counters(&(*out)->syncs, &(*out)->launches);
  if (const planrt_backend *b = planrt_get_backend(); b->host_touches)
    (*out)->touches = b->host_touches();
  return PLANRT_OK;
}

/// Flushes the line just written: every line is on disk before the next step.
static planrt_status flushLine(planrt_log *log) {
  if (std::fflush(log->file) != 0 || std::ferror(log->file))
    return planrt::fail(PLANRT_ERR_IO, "%s: cannot write the log: %s", log->path.c_str(), std::strerror(errno));
  return PLANRT_OK;
}

planrt_status planrt_log_step(planrt_log *log, uint64_t step, double loss, double lr, double gradNorm,
                              double tokensPerS, const uint64_t comm[4], uint64_t memPeak, uint64_t devicePeak) {
  if (!log)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_step: null log");
  FILE *f = log->file;
  std::fprintf(f, "{\"step\": %llu, \"loss\": ", (unsigned long long)step);
  number(f, loss);
  std::fputs(", \"lr\": ", f);
  number(f, lr);
  std::fputs(", \"grad_norm\": ", f);
  number(f, gradNorm);
  std::fputs(", \"tokens_per_s\": ", f);
  number(f, tokensPerS);
  std::fprintf(
      f,
      ", \"comm_bytes\": {\"all_reduce\": %llu, \"all_gather\": %llu, \"reduce_scatter\": %llu, \"send_recv\": %llu}",
      (unsigned long long)(comm ? comm[0] : 0), (unsigned long long)(comm ? comm[1] : 0),
      (unsigned long long)(comm ? comm[2] : 0), (unsigned long long)(comm ? comm[3] : 0));
  std::fprintf(f, ", \"mem_peak_bytes\": %llu, \"mem_device_peak_bytes\": %llu", (unsigned long long)memPeak,
               (unsigned long long)devicePeak);
  // A device backend's synchronisations and launches since the previous step line.
  if (const planrt_backend *b = planrt_get_backend(); b->counters) {
    uint64_t syncs = 0, launches = 0;
    b->counters(&syncs, &launches);
    std::fprintf(f, ", \"host_syncs\": %llu, \"launches\": %llu", (unsigned long long)(syncs - log->syncs),
                 (unsigned long long)(launches - log->launches));
    log->syncs = syncs;
    log->launches = launches;
  }
  // cuda-host's emulated device: host accesses to device memory in the step.
  if (const planrt_backend *b = planrt_get_backend(); b->host_touches) {
    uint64_t touches = b->host_touches();
    std::fprintf(f, ", \"host_touches\": %llu", (unsigned long long)(touches - log->touches));
    log->touches = touches;
  }
  std::fputs("}\n", f);
  return flushLine(log);
}

planrt_status planrt_log_eval(planrt_log *log, uint64_t step, double valLoss, double valAccuracy) {
  if (!log)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_eval: null log");
  FILE *f = log->file;
  std::fprintf(f, "{\"step\": %llu, \"val_loss\": ", (unsigned long long)step);
  number(f, valLoss);
  if (!std::isnan(valAccuracy)) {
    std::fputs(", \"val_accuracy\": ", f);
    number(f, valAccuracy);
  }
  std::fputs("}\n", f);
  return flushLine(log);
}

planrt_status planrt_log_json(planrt_log *log, const char *line) {
  if (!log || !line)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_json: null argument");
  std::fputs(line, log->file);
  std::fputc('\n', log->file);
  return flushLine(log);
}

planrt_status planrt_log_round(planrt_log *log, uint64_t round, double loss, double valLoss, const int64_t *clients,
                               size_t nclients, const uint64_t comm[4]) {
  if (!log)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_round: null log");
  FILE *f = log->file;
  std::fprintf(f, "{\"round\": %llu, \"loss\": ", (unsigned long long)round);
  number(f, loss);
  if (!std::isnan(valLoss)) {
    std::fputs(", \"val_loss\": ", f);
    number(f, valLoss);
  }
  std::fputs(", \"clients\": [", f);
  for (size_t i = 0; i < nclients; ++i)
    std::fprintf(f, "%s%lld", i ? ", " : "", (long long)clients[i]);
  std::fprintf(
      f,
      "], \"comm_bytes\": {\"all_reduce\": %llu, \"all_gather\": %llu, \"reduce_scatter\": %llu, \"send_recv\": %llu}}\n",
      (unsigned long long)comm[0], (unsigned long long)comm[1], (unsigned long long)comm[2],
      (unsigned long long)comm[3]);
  return flushLine(log);
}

planrt_status planrt_log_loss_scale(planrt_log *log, uint64_t step, double scale, int skipped) {
  if (!log)
    return planrt::fail(PLANRT_ERR_ARG, "planrt_log_loss_scale: null log");
  FILE *f = log->file;
  std::fprintf(f, "{\"step\": %llu, \"loss_scale\": ", (unsigned long long)step);
  number(f, scale);
  std::fprintf(f, ", \"skipped\": %s}\n", skipped ? "true" : "false");
  return flushLine(log);
}

void planrt_log_close(planrt_log *log) {
  if (!log)
    return;
  std::fclose(log->file);
  delete log;
}

planrt_status planrt_check_finite(const float *values, int64_t count, uint64_t step, const char *what) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      return planrt::fail(PLANRT_ERR_ARG, "step %llu: %s is %s at index %lld; stopping before anything is saved",
                          (unsigned long long)step, what ? what : "a tensor",
                          std::isnan(values[i]) ? "NaN" : "infinite", (long long)i);
  return PLANRT_OK;
}

} // extern "C"
