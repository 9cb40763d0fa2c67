// Internal: the training driver's terminal output: the progress line with its rate and
// ETA, and the lines that stay above it.
#ifndef PLANRT_LIB_TRAIN_PROGRESS_H
#define PLANRT_LIB_TRAIN_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace planrt::train {

/// Tokens per second for people: "950", "12.3k", "4.56M"; "-" if not a rate.
std::string rate(double tokensPerS);
/// Seconds for people: "42s", "3m07s", "2h05m".
std::string duration(double seconds);

/// The progress line on stderr: redrawn in place on a terminal, one plain line every
/// `every` steps (and at the last) otherwise.
class Progress {
public:
  /// `silent`: another rank reports (only errors are printed).
  Progress(bool quiet, int64_t end, bool silent = false);

  void step(int64_t done, double loss, double tokensPerS, double eta);

  /// A line that stays: on a terminal the progress line is cleared first and redrawn
  /// by the next step.
  void line(const std::string &text, bool always = false);

  /// Ends a progress line left on the terminal (before an error or the final line).
  void clear();

private:
  bool quiet, silent, tty;
  int64_t end, every = 1;
  bool drawn = false;
  std::chrono::steady_clock::time_point lastDraw;
};

} // namespace planrt::train

#endif // PLANRT_LIB_TRAIN_PROGRESS_H
