// The training driver's progress line (train_progress.h): redrawn in place at most
// every 100 ms on a terminal, about twenty plain lines a run elsewhere (a log file).
#include "train_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace planrt::train {

std::string rate(double tokensPerS) {
  char buf[32];
  if (!(tokensPerS >= 0) || !std::isfinite(tokensPerS))
    return "-";
  if (tokensPerS < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f", tokensPerS);
  else if (tokensPerS < 1e6)
    std::snprintf(buf, sizeof buf, "%.1fk", tokensPerS / 1e3);
  else if (tokensPerS < 1e9)
    std::snprintf(buf, sizeof buf, "%.2fM", tokensPerS / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2fG", tokensPerS / 1e9);
  return buf;
}

std::string duration(double seconds) {
  char buf[32];
  long s = std::isfinite(seconds) && seconds > 0 ? long(seconds + 0.5) : 0;
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

Progress::Progress(bool quiet, int64_t end, bool silent)
    : quiet(quiet || silent), silent(silent), tty(::isatty(STDERR_FILENO)), end(end) {
  every = std::max<int64_t>(1, end / 20);
}

void Progress::step(int64_t done, double loss, double tokensPerS, double eta) {
  if (quiet)
    return;
  auto now = std::chrono::steady_clock::now();
  bool last = done == end;
  if (tty) {
    if (!last && drawn && now - lastDraw < std::chrono::milliseconds(100))
      return;
  } else if (done % every != 0 && !last) {
    return;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %lld/%lld · loss %.4f · %s tok/s · ETA %s", (long long)done, (long long)end,
                loss, rate(tokensPerS).c_str(), duration(eta).c_str());
  if (tty) {
    std::fprintf(stderr, "\r\033[K%s", buf);
    drawn = true;
    lastDraw = now;
  } else {
    std::fprintf(stderr, "%s\n", buf);
  }
  std::fflush(stderr);
}

void Progress::line(const std::string &text, bool always) {
  if (silent || (quiet && !always))
    return;
  clear();
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (tty && drawn) {
    std::fputs("\r\033[K", stderr);
    drawn = false;
  }
}

} // namespace planrt::train
