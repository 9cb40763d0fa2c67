// Errors of the runtime: one message per thread, prefixed with the rank.
#include "status.h"

#include <cstdarg>
#include <cstdio>

namespace {
thread_local std::string lastError;
int currentRank = 0;
} // namespace

const char *planrt_last_error(void) { return lastError.c_str(); }

void planrt_set_rank(int rank) { currentRank = rank; }

int planrt::rank() { return currentRank; }

planrt_status planrt::restore(planrt_status status, const std::string &message) {
  lastError = message;
  return status;
}

planrt_status planrt::fail(planrt_status status, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  lastError = "rank " + std::to_string(currentRank) + ": " + buf;
  return status;
}
