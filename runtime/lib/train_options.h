// Internal: the training executable's command line (docs/EXECUTABLES.md) and its
// exit statuses.
#ifndef PLANRT_LIB_TRAIN_OPTIONS_H
#define PLANRT_LIB_TRAIN_OPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace planrt::train {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::optional<int64_t> steps, checkpointEvery;
  std::string log, init, saveInit, resume, checkpointDir, saveGrads, exportFile, exportAdapters, offloadDir;
  double commTimeout = 300;
  std::vector<std::string> data, val;
  bool quiet = false, help = false, merge = false, offloadSync = false;
};

/// Fills `o`; returns 0, or the exit status after printing the error.
int parseOptions(int argc, char **argv, Options &o);

/// --help's text on stdout, naming the executable, its plan and its model.
void printUsage(const char *argv0, const char *plan, const char *model);

/// A whole decimal number in [0, kMaxSteps], or nothing.
std::optional<int64_t> count(const std::string &s);

} // namespace planrt::train

#endif // PLANRT_LIB_TRAIN_OPTIONS_H
