// The training driver behind every training executable: planrt_train_main reads
// the command line and the manifest, checks everything it will need (data, files,
// directories) before the first step, initialises or loads the parameters, then
// runs step s = data → grad × accumulation → update, with the log, evaluation,
// checkpoints and the progress line. docs/EXECUTABLES.md is its specification.
#include "status.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <malloc.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using planrt::fail;
using json = nlohmann::json;

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
/// Bounds that keep s × batch, offsets and counts far from overflow.
constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxFloats = int64_t(1) << 40;
constexpr int64_t kMaxDim = int64_t(1) << 31;

// ---- The manifest.

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, count = 0;
  std::string init;  ///< "normal", "zeros" or "ones"
  double std = 0;
};

struct Manifest {
  std::string plan, model;
  int64_t numFloats = 0;
  std::vector<Param> params;
  int64_t batch = 0, micro = 0, seq = 0, accumulation = 0, dataParallel = 0, steps = 0, vocab = 0;
  uint64_t seed = 0;
  std::vector<std::string> data, val;
  int64_t evalEvery = 0, evalBatches = 0;
  std::string checkpointDir;
  int64_t checkpointEvery = 0, checkpointKeep = 0;
  std::string lossScaleKind = "none";  ///< "none", "dynamic" or "static" (fp16)
  double lossScaleInit = 1;
};

/// A malformed manifest: the JSON path of the field and what is wrong with it.
struct Malformed {
  std::string what;
};

const json &field(const json &object, const char *key, const std::string &where) {
  if (!object.is_object())
    throw Malformed{where + " is not an object"};
  auto it = object.find(key);
  if (it == object.end())
    throw Malformed{where + " has no '" + key + "'"};
  return *it;
}

/// The JSON path of `key` in the object at `where` ("the manifest" at the top).
std::string path(const std::string &where, const char *key) {
  return where == "the manifest" ? key : where + "." + key;
}

int64_t integer(const json &object, const char *key, const std::string &where, int64_t min, int64_t max) {
  const json &v = field(object, key, where);
  if (!v.is_number_integer())
    throw Malformed{path(where, key) + " is " + v.dump() + ", not an integer"};
  bool inRange = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(max)
                                         : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
  if (!inRange)
    throw Malformed{path(where, key) + " is " + v.dump() + ", outside [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]"};
  return v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
}

std::string text(const json &object, const char *key, const std::string &where) {
  const json &v = field(object, key, where);
  if (!v.is_string())
    throw Malformed{path(where, key) + " is " + v.dump() + ", not a string"};
  return v.get<std::string>();
}

std::vector<std::string> texts(const json &object, const char *key, const std::string &where) {
  const json &v = field(object, key, where);
  if (!v.is_array())
    throw Malformed{path(where, key) + " is not an array"};
  std::vector<std::string> out;
  for (const json &e : v) {
    if (!e.is_string() || e.get<std::string>().empty())
      throw Malformed{path(where, key) + " holds " + e.dump() + ", not a file name"};
    out.push_back(e.get<std::string>());
  }
  return out;
}

/// Parses and checks the manifest; PLANRT_ERR_FORMAT naming the field if malformed.
planrt_status parseManifest(const char *source, Manifest &m) {
  if (!source)
    return fail(PLANRT_ERR_FORMAT, "the executable has no manifest");
  try {
    json root;
    try {
      root = json::parse(source);
    } catch (const json::exception &e) {
      throw Malformed{std::string("not valid JSON: ") + e.what()};
    }
    std::string format = text(root, "format", "the manifest");
    if (format != "planc-train-1")
      throw Malformed{"format '" + format + "'; this runtime reads planc-train-1"};
    m.plan = text(root, "plan", "the manifest");
    m.model = text(root, "model", "the manifest");
    m.numFloats = integer(root, "num_floats", "the manifest", 1, kMaxFloats);

    const json &params = field(root, "params", "the manifest");
    if (!params.is_array() || params.empty())
      throw Malformed{"params is not a non-empty array"};
    for (size_t i = 0; i < params.size(); ++i) {
      std::string where = "params[" + std::to_string(i) + "]";
      const json &pj = params[i];
      Param p;
      p.name = text(pj, "name", where);
      if (p.name.empty())
        throw Malformed{where + ".name is empty"};
      where += " ('" + p.name + "')";
      const json &shape = field(pj, "shape", where);
      if (!shape.is_array())
        throw Malformed{where + ".shape is not an array"};
      int64_t elements = 1;
      for (const json &d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > kMaxDim)
          throw Malformed{where + ".shape holds " + d.dump() + ", not a dimension"};
        p.shape.push_back(d.get<int64_t>());
        if (__builtin_mul_overflow(elements, d.get<int64_t>(), &elements) || elements > kMaxFloats)
          throw Malformed{where + ".shape is too large"};
      }
      p.offset = integer(pj, "offset", where, 0, kMaxFloats);
      p.count = integer(pj, "count", where, 0, kMaxFloats);
      if (p.count != elements)
        throw Malformed{where + ".count is " + std::to_string(p.count) + " but its shape has " +
                        std::to_string(elements) + " elements"};
      if (p.offset + p.count > m.numFloats)
        throw Malformed{where + " ends at float " + std::to_string(p.offset + p.count) + ", past num_floats " +
                        std::to_string(m.numFloats)};
      p.init = text(pj, "init", where);
      if (p.init == "normal") {
        const json &s = field(pj, "std", where);
        if (!s.is_number() || !(s.get<double>() >= 0) || !std::isfinite(s.get<double>()))
          throw Malformed{where + ".std is " + s.dump() + ", not a finite number ≥ 0"};
        p.std = s.get<double>();
      } else if (p.init != "zeros" && p.init != "ones") {
        throw Malformed{where + ".init is '" + p.init + "'; expected normal, zeros or ones"};
      }
      for (const Param &q : m.params)
        if (q.name == p.name)
          throw Malformed{"two parameters are named '" + p.name + "'"};
      m.params.push_back(std::move(p));
    }
    // The parameters must not overlap in the flat buffers.
    std::vector<const Param *> order;
    for (const Param &p : m.params)
      order.push_back(&p);
    std::sort(order.begin(), order.end(), [](auto *a, auto *b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i)
      if (order[i - 1]->offset + order[i - 1]->count > order[i]->offset)
        throw Malformed{"parameters '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap"};

    const json &train = field(root, "train", "the manifest");
    m.batch = integer(train, "batch", "train", 1, kMaxDim);
    m.micro = integer(train, "micro", "train", 1, kMaxDim);
    m.seq = integer(train, "seq", "train", 1, kMaxDim);
    m.accumulation = integer(train, "accumulation", "train", 1, kMaxDim);
    m.dataParallel = integer(train, "data_parallel", "train", 1, kMaxDim);
    m.steps = integer(train, "steps", "train", 0, kMaxSteps);
    m.seed = uint64_t(integer(train, "seed", "train", 0, std::numeric_limits<int64_t>::max()));
    m.vocab = integer(train, "vocab", "train", 1, kMaxDim);
    if (m.batch != m.micro * m.accumulation * m.dataParallel)
      throw Malformed{"train.batch " + std::to_string(m.batch) + " is not micro × accumulation × data_parallel = " +
                      std::to_string(m.micro * m.accumulation * m.dataParallel)};
    if (m.dataParallel != 1)
      throw Malformed{"train.data_parallel is " + std::to_string(m.dataParallel) +
                      "; this driver runs one process, so the plan must be built for data_parallel 1"};
    m.data = texts(train, "data", "train");
    m.val = train.contains("val") ? texts(train, "val", "train") : std::vector<std::string>{};
    m.evalEvery = train.contains("eval_every") ? integer(train, "eval_every", "train", 0, kMaxSteps) : 0;
    m.evalBatches = train.contains("eval_batches") ? integer(train, "eval_batches", "train", 0, kMaxDim) : 0;
    if (train.contains("checkpoint")) {
      const json &c = train["checkpoint"];
      m.checkpointDir = text(c, "dir", "train.checkpoint");
      m.checkpointEvery = integer(c, "every", "train.checkpoint", 0, kMaxSteps);
      m.checkpointKeep = integer(c, "keep", "train.checkpoint", 0, std::numeric_limits<int>::max());
    }
    if (train.contains("loss_scale")) {
      const json &l = train["loss_scale"];
      m.lossScaleKind = text(l, "kind", "train.loss_scale");
      if (m.lossScaleKind != "none" && m.lossScaleKind != "dynamic" && m.lossScaleKind != "static")
        throw Malformed{"train.loss_scale.kind is '" + m.lossScaleKind + "'; expected none, dynamic or static"};
      const json &init = field(l, "init", "train.loss_scale");
      if (!init.is_number() || !(init.get<double>() > 0) || !std::isfinite(init.get<double>()))
        throw Malformed{"train.loss_scale.init must be a positive number"};
      m.lossScaleInit = init.get<double>();
    }
  } catch (const Malformed &e) {
    return fail(PLANRT_ERR_FORMAT, "the manifest is malformed: %s", e.what.c_str());
  } catch (const std::exception &e) {
    return fail(PLANRT_ERR_FORMAT, "the manifest is malformed: %s", e.what());
  }
  return PLANRT_OK;
}

// ---- The command line.

struct Options {
  std::optional<int64_t> steps, checkpointEvery;
  std::string log, init, saveInit, resume, checkpointDir, saveGrads;
  std::vector<std::string> data, val;
  bool quiet = false, help = false;
};

const char kUsage[] =
    "usage: %s [options]\n"
    "Trains plan '%s' (model '%s'); docs/EXECUTABLES.md describes the run.\n"
    "\n"
    "  --steps N              run until step N (the plan's steps by default); the\n"
    "                         learning-rate schedule stays the plan's\n"
    "  --data PATTERN         training token files (repeatable; replaces the plan's)\n"
    "  --val PATTERN          validation token files (repeatable; replaces the plan's)\n"
    "  --log FILE             append one JSON line per step (and per evaluation) to FILE\n"
    "  --init FILE            load the parameters from a safetensors file, by name\n"
    "  --save-init FILE       write the parameters to FILE before the first step\n"
    "  --resume DIR           continue from the newest checkpoint in DIR\n"
    "  --checkpoint-dir DIR   write checkpoints to DIR (replaces the plan's)\n"
    "  --checkpoint-every N   a checkpoint every N steps (replaces the plan's; 0: none)\n"
    "  --save-grads FILE      write the accumulated gradient of the first step to FILE\n"
    "  --quiet                no progress or evaluation lines; errors and the final\n"
    "                         line only\n"
    "  --help                 this text\n"
    "\n"
    "Exit status: 0 done, 1 an error (named on stderr), 2 a bad command line.\n";

enum class Arg { Steps, Data, Val, Log, Init, SaveInit, Resume, CheckpointDir, CheckpointEvery, SaveGrads, Quiet, Help };

struct Flag {
  const char *name;
  Arg arg;
  bool value;
};
const Flag kFlags[] = {{"--steps", Arg::Steps, true},
                       {"--data", Arg::Data, true},
                       {"--val", Arg::Val, true},
                       {"--log", Arg::Log, true},
                       {"--init", Arg::Init, true},
                       {"--save-init", Arg::SaveInit, true},
                       {"--resume", Arg::Resume, true},
                       {"--checkpoint-dir", Arg::CheckpointDir, true},
                       {"--checkpoint-every", Arg::CheckpointEvery, true},
                       {"--save-grads", Arg::SaveGrads, true},
                       {"--quiet", Arg::Quiet, false},
                       {"--help", Arg::Help, false},
                       {"-h", Arg::Help, false}};

int usageError(const std::string &message) {
  std::fprintf(stderr, "planrt: error: %s (see --help)\n", message.c_str());
  return kExitUsage;
}

/// A whole decimal number in [0, kMaxSteps], or nothing.
std::optional<int64_t> count(const std::string &s) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t v = std::stoll(s);
  if (v > kMaxSteps)
    return std::nullopt;
  return v;
}

/// Fills `o`; returns 0, or the exit status after printing the error.
int parseOptions(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i] ? argv[i] : "";
    std::string name = a, value;
    bool inlineValue = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      name = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
      inlineValue = true;
    }
    const Flag *flag = nullptr;
    for (const Flag &f : kFlags)
      if (name == f.name)
        flag = &f;
    if (!flag) {
      if (a.empty() || a[0] != '-')
        return usageError("unexpected argument '" + a + "'");
      return usageError("unknown option '" + name + "'");
    }
    if (flag->value && !inlineValue) {
      if (i + 1 >= argc)
        return usageError("option '" + name + "' needs a value");
      value = argv[++i];
    } else if (!flag->value && inlineValue) {
      return usageError("option '" + name + "' takes no value");
    }
    if (flag->value && value.empty())
      return usageError("option '" + name + "' needs a non-empty value");
    switch (flag->arg) {
    case Arg::Steps:
    case Arg::CheckpointEvery: {
      std::optional<int64_t> n = count(value);
      if (!n)
        return usageError("bad value '" + value + "' for " + name + ": expected a whole number ≥ 0");
      (flag->arg == Arg::Steps ? o.steps : o.checkpointEvery) = n;
      break;
    }
    case Arg::Data: o.data.push_back(value); break;
    case Arg::Val: o.val.push_back(value); break;
    case Arg::Log: o.log = value; break;
    case Arg::Init: o.init = value; break;
    case Arg::SaveInit: o.saveInit = value; break;
    case Arg::Resume: o.resume = value; break;
    case Arg::CheckpointDir: o.checkpointDir = value; break;
    case Arg::SaveGrads: o.saveGrads = value; break;
    case Arg::Quiet: o.quiet = true; break;
    case Arg::Help: o.help = true; break;
    }
  }
  if (!o.init.empty() && !o.resume.empty())
    return usageError("--init and --resume cannot be combined: a checkpoint holds the parameters");
  return 0;
}

// ---- Files and directories.

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
  std::string probe = dir + "/.planrt-probe." + std::to_string(getpid());
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

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};
using Floats = std::unique_ptr<float[], FreeDeleter>;

/// n floats, zeroed, 64-byte aligned.
Floats allocate(int64_t n) {
  size_t bytes = (size_t(n) * sizeof(float) + 63) / 64 * 64;
  auto *p = static_cast<float *>(std::aligned_alloc(64, bytes));
  if (p)
    std::memset(p, 0, bytes);
  return Floats(p);
}

// ---- Terminal output.

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

/// The progress line on stderr: redrawn in place on a terminal, one plain line every
/// `every` steps (and at the last) otherwise.
class Progress {
public:
  Progress(bool quiet, int64_t end) : quiet(quiet), tty(::isatty(STDERR_FILENO)), end(end) {
    every = std::max<int64_t>(1, end / 20);
  }

  void step(int64_t done, double loss, double tokensPerS, double eta) {
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
    std::snprintf(buf, sizeof buf, "step %lld/%lld · loss %.4f · %s tok/s · ETA %s", (long long)done,
                  (long long)end, loss, rate(tokensPerS).c_str(), duration(eta).c_str());
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", buf);
      drawn = true;
      lastDraw = now;
    } else {
      std::fprintf(stderr, "%s\n", buf);
    }
    std::fflush(stderr);
  }

  /// A line that stays: on a terminal the progress line is cleared first and redrawn
  /// by the next step.
  void line(const std::string &text, bool always = false) {
    if (quiet && !always)
      return;
    clear();
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }

  /// Ends a progress line left on the terminal (before an error or the final line).
  void clear() {
    if (tty && drawn) {
      std::fputs("\r\033[K", stderr);
      drawn = false;
    }
  }

private:
  bool quiet, tty;
  int64_t end, every = 1;
  bool drawn = false;
  std::chrono::steady_clock::time_point lastDraw;
};

// ---- The run.

class Trainer {
public:
  Trainer(const Manifest &m, const Options &o, planrt_grad_fn grad, planrt_update_fn update, planrt_eval_fn eval)
      : m(m), o(o), gradFn(grad), updateFn(update), evalFn(eval),
        end(o.steps ? *o.steps : m.steps), progress(o.quiet, end) {
    state[2] = float(m.lossScaleInit);
  }

  ~Trainer() {
    if (log)
      planrt_log_close(log);
    if (train)
      planrt_data_close(train);
    if (val)
      planrt_data_close(val);
  }

  int run() {
    if (!gradFn || !updateFn)
      return error(fail(PLANRT_ERR_ARG, "the executable lacks its grad or update function"));
    if (planrt_status s = prepare())
      return error(s);
    if (start >= end) {
      progress.line("nothing to do: the run starts at step " + std::to_string(start) + " and ends at step " +
                        std::to_string(end),
                    true);
      return 0;
    }
    if (!o.saveInit.empty())
      if (planrt_status s = saveParams(o.saveInit, "planc-params-1", P.get(), start, {}))
        return error(s);
    for (int64_t s = start; s < end; ++s)
      if (planrt_status st = step(s))
        return error(st);
    progress.clear();
    std::string summary = "done · " + std::to_string(end - start) + " steps (to step " + std::to_string(end) +
                          ") · final loss ";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", lastLoss);
    summary += std::string(buf) + " · mean " + rate(double(tokensPerStep()) * double(end - start) / stepSeconds) +
               " tok/s";
    if (!lastCheckpoint.empty())
      summary += " · checkpoint " + lastCheckpoint;
    progress.line(summary, true);
    return 0;
  }

private:
  int error(planrt_status) {
    progress.clear();
    std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
    return kExitError;
  }

  int64_t tokensPerStep() const { return m.micro * m.accumulation * m.seq; }

  bool checkpointing() const { return !checkpointDir.empty() && checkpointEvery > 0; }

  bool evaluating() const { return val && evalFn && m.evalEvery > 0 && m.evalBatches > 0; }

  /// Everything that can fail before compute: data, files, directories, buffers,
  /// the initial parameters.
  planrt_status prepare() {
    // Data: open and validate every file, and draw the first sample.
    std::vector<std::string> trainFiles = o.data.empty() ? m.data : o.data;
    if (trainFiles.empty())
      return fail(PLANRT_ERR_ARG, "no training data: the plan names none and no --data was given");
    std::vector<const char *> patterns;
    for (const std::string &f : trainFiles)
      patterns.push_back(f.c_str());
    if (planrt_status s = planrt_data_open(patterns.data(), patterns.size(), m.seed, m.vocab, &train))
      return s;
    tokens.resize(size_t(m.micro * m.seq));
    targets.resize(size_t(m.micro * m.seq));
    if (planrt_status s = planrt_data_sample(train, 0, m.seq, tokens.data(), targets.data()))
      return s;
    std::vector<std::string> valFiles = o.val.empty() ? m.val : o.val;
    if (!valFiles.empty() && m.evalEvery > 0 && m.evalBatches > 0) {
      patterns.clear();
      for (const std::string &f : valFiles)
        patterns.push_back(f.c_str());
      if (planrt_status s = planrt_data_open(patterns.data(), patterns.size(), m.seed, m.vocab, &val))
        return s;
      // Windows are consecutive: if the last one exists, all do.
      uint64_t last = uint64_t(m.evalBatches * m.micro - 1);
      if (planrt_data_window(val, last, m.seq, tokens.data(), targets.data()) != PLANRT_OK)
        return fail(PLANRT_ERR_FORMAT,
                    "%s: the validation data holds fewer than eval_batches × micro = %lld windows of %lld tokens",
                    valFiles.front().c_str(), (long long)(last + 1), (long long)m.seq + 1);
    }

    // Output files and directories, before any compute.
    checkpointDir = o.checkpointDir.empty() ? m.checkpointDir : o.checkpointDir;
    checkpointEvery = o.checkpointEvery ? *o.checkpointEvery : m.checkpointEvery;
    if (checkpointing()) {
      if (planrt_status s = prepareDirectory(checkpointDir, "checkpoint directory"))
        return s;
      if (planrt_status s = probeWritable(checkpointDir, "checkpoint directory"))
        return s;
    } else if (!o.checkpointDir.empty()) {
      progress.line("planrt: warning: --checkpoint-dir is given but the checkpoint interval is 0; no "
                    "checkpoint is written (see --checkpoint-every)",
                    true);
    }
    if (!o.saveInit.empty())
      if (planrt_status s = probeWritable(parentOf(o.saveInit), "directory of --save-init"))
        return s;
    if (!o.saveGrads.empty())
      if (planrt_status s = probeWritable(parentOf(o.saveGrads), "directory of --save-grads"))
        return s;
    if (!o.log.empty())
      if (planrt_status s = planrt_log_open(o.log.c_str(), &log))
        return s;

    // Buffers.
    P = allocate(m.numFloats);
    G = allocate(m.numFloats);
    M = allocate(m.numFloats);
    V = allocate(m.numFloats);
    if (!P || !G || !M || !V)
      return fail(PLANRT_ERR_ARG, "cannot allocate 4 × %lld floats for the parameters, gradients and moments",
                  (long long)m.numFloats);
    names.clear();
    for (const Param &p : m.params) {
      names.push_back("optimizer.exp_avg." + p.name);
      names.push_back("optimizer.exp_avg_sq." + p.name);
    }

    // Initial state.
    if (!o.resume.empty())
      return resume();
    if (!o.init.empty())
      return loadParams(o.init);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      planrt_status s = p.init == "normal"
                            ? planrt_init_normal(P.get() + p.offset, p.count, 0, 0.0, p.std, m.seed, uint64_t(i))
                            : planrt_init_fill(P.get() + p.offset, p.count, p.init == "ones" ? 1.0f : 0.0f);
      if (s)
        return s;
    }
    return PLANRT_OK;
  }

  /// Reads `name` (f32, the parameter's shape) from st into dst.
  static planrt_status read(planrt_st *st, const std::string &name, const Param &p, float *dst) {
    return planrt_st_read(st, name.c_str(), PLANRT_F32, int(p.shape.size()), p.shape.data(), dst);
  }

  planrt_status loadParams(const std::string &file) {
    planrt_st *st = nullptr;
    if (planrt_status s = planrt_st_open(file.c_str(), &st))
      return s;
    planrt_status s = PLANRT_OK;
    for (const Param &p : m.params)
      if ((s = read(st, p.name, p, P.get() + p.offset)))
        break;
    planrt_st_close(st);
    return s;
  }

  planrt_status resume() {
    char file[4096];
    uint64_t fileStep = 0;
    if (planrt_status s = planrt_ckpt_latest(o.resume.c_str(), file, sizeof file, &fileStep))
      return s;
    planrt_st *st = nullptr;
    if (planrt_status s = planrt_st_open(file, &st))
      return s;
    std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(st, planrt_st_close);
    const char *format = planrt_st_metadata(st, "format");
    const char *stepText = planrt_st_metadata(st, "step");
    if (!format || std::string(format) != "planc-ckpt-1")
      return fail(PLANRT_ERR_FORMAT, "%s: not a planc checkpoint (metadata format '%s', expected planc-ckpt-1)", file,
                  format ? format : "");
    std::optional<int64_t> step = stepText ? count(stepText) : std::nullopt;
    if (!step)
      return fail(PLANRT_ERR_FORMAT, "%s: the metadata 'step' is '%s', not a step count", file,
                  stepText ? stepText : "");
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      if (planrt_status s = read(st, p.name, p, P.get() + p.offset))
        return s;
      if (planrt_status s = read(st, names[2 * i], p, M.get() + p.offset))
        return s;
      if (planrt_status s = read(st, names[2 * i + 1], p, V.get() + p.offset))
        return s;
    }
    for (const char *key : {"plan", "model"}) {
      const char *was = planrt_st_metadata(st, key);
      const std::string &now = std::string(key) == "plan" ? m.plan : m.model;
      if (was && now != was)
        progress.line(std::string("planrt: warning: ") + file + " was written by " + key + " '" + was +
                          "'; this is " + key + " '" + now + "'",
                      true);
    }
    if (scaling()) {
      const char *scale = planrt_st_metadata(st, "loss_scale"), *good = planrt_st_metadata(st, "loss_scale_good_steps"),
                 *applied = planrt_st_metadata(st, "optimizer_steps");
      if (!scale || !good || !applied)
        return fail(PLANRT_ERR_FORMAT, "%s: no loss_scale metadata, which an fp16 plan resumes from", file);
      state[2] = std::strtof(scale, nullptr);
      state[3] = std::strtof(good, nullptr);
      state[5] = std::strtof(applied, nullptr);
      if (!(state[2] > 0) || !std::isfinite(state[2]) || !(state[3] >= 0) || !(state[5] >= 0))
        return fail(PLANRT_ERR_FORMAT, "%s: the metadata loss_scale '%s' / loss_scale_good_steps '%s' are not valid",
                    file, scale, good);
    }
    start = *step;
    progress.line("resuming from " + std::string(file) + " at step " + std::to_string(start));
    return PLANRT_OK;
  }

  /// The metadata every file the driver writes carries.
  std::vector<std::string> metadata(const char *format, int64_t step) const {
    return {"format", format, "step", std::to_string(step), "plan", m.plan, "model", m.model, "seed",
            std::to_string(m.seed)};
  }

  static std::vector<const char *> pointers(const std::vector<std::string> &v) {
    std::vector<const char *> out;
    for (const std::string &s : v)
      out.push_back(s.c_str());
    return out;
  }

  /// Writes one buffer laid out like P (parameters or gradients) under the parameter names.
  planrt_status saveParams(const std::string &file, const char *format, const float *buf, int64_t step,
                           std::vector<std::string> extra) {
    std::vector<planrt_tensor> tensors;
    for (const Param &p : m.params)
      tensors.push_back({p.name.c_str(), PLANRT_F32, int(p.shape.size()), p.shape.data(), buf + p.offset});
    std::vector<std::string> meta = metadata(format, step);
    meta.insert(meta.end(), extra.begin(), extra.end());
    std::vector<const char *> mp = pointers(meta);
    return planrt_st_save(file.c_str(), tensors.data(), tensors.size(), mp.data(), mp.size() / 2);
  }

  planrt_status checkpoint(int64_t s) {
    // Never save a non-finite state, whatever the checks of the loss and norm missed.
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      if (planrt_status st = planrt_check_finite(P.get() + p.offset, p.count, uint64_t(s),
                                                 ("parameter '" + p.name + "'").c_str()))
        return st;
      if (planrt_status st = planrt_check_finite(M.get() + p.offset, p.count, uint64_t(s), names[2 * i].c_str()))
        return st;
      if (planrt_status st = planrt_check_finite(V.get() + p.offset, p.count, uint64_t(s), names[2 * i + 1].c_str()))
        return st;
    }
    std::vector<planrt_tensor> tensors;
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Param &p = m.params[i];
      int rank = int(p.shape.size());
      tensors.push_back({p.name.c_str(), PLANRT_F32, rank, p.shape.data(), P.get() + p.offset});
      tensors.push_back({names[2 * i].c_str(), PLANRT_F32, rank, p.shape.data(), M.get() + p.offset});
      tensors.push_back({names[2 * i + 1].c_str(), PLANRT_F32, rank, p.shape.data(), V.get() + p.offset});
    }
    std::vector<std::string> meta = metadata("planc-ckpt-1", s + 1);
    if (scaling()) {
      char scale[32], good[32];
      std::snprintf(scale, sizeof scale, "%.9g", double(state[2]));
      std::snprintf(good, sizeof good, "%.9g", double(state[3]));
      char applied[32];
      std::snprintf(applied, sizeof applied, "%.9g", double(state[5]));
      meta.insert(meta.end(), {"loss_scale", scale, "loss_scale_good_steps", good, "optimizer_steps", applied});
    }
    std::vector<const char *> mp = pointers(meta);
    if (planrt_status st = planrt_ckpt_save(checkpointDir.c_str(), uint64_t(s + 1), int(m.checkpointKeep),
                                            tensors.data(), tensors.size(), mp.data(), mp.size() / 2))
      return st;
    char name[64];
    std::snprintf(name, sizeof name, "/step-%08llu.safetensors", (unsigned long long)(s + 1));
    lastCheckpoint = checkpointDir + name;
    return PLANRT_OK;
  }

  planrt_status evaluate(int64_t s) {
    double sum = 0;
    for (int64_t b = 0; b < m.evalBatches; ++b) {
      for (int64_t i = 0; i < m.micro; ++i)
        if (planrt_status st = planrt_data_window(val, uint64_t(b * m.micro + i), m.seq,
                                                  tokens.data() + i * m.seq, targets.data() + i * m.seq))
          return st;
      float loss = 0;
      evalFn(P.get(), tokens.data(), targets.data(), &loss);
      sum += loss;
    }
    double mean = sum / double(m.evalBatches);
    if (log)
      if (planrt_status st = planrt_log_eval(log, uint64_t(s), mean))
        return st;
    char buf[128];
    std::snprintf(buf, sizeof buf, "step %lld/%lld · val loss %.4f", (long long)(s + 1), (long long)end, mean);
    progress.line(buf);
    return PLANRT_OK;
  }

  static const char *nonFinite(double v) { return std::isnan(v) ? "NaN" : "infinite"; }

  planrt_status step(int64_t s) {
    auto t0 = std::chrono::steady_clock::now();
    std::memset(G.get(), 0, size_t(m.numFloats) * sizeof(float));
    float loss = 0;
    for (int64_t a = 0; a < m.accumulation; ++a) {
      uint64_t first = uint64_t(s) * uint64_t(m.batch) + uint64_t(a * m.micro);
      if (planrt_status st = planrt_data_batch(train, first, m.micro, m.seq, tokens.data(), targets.data()))
        return st;
      gradFn(P.get(), G.get(), tokens.data(), targets.data(), &loss, state);
    }
    static const uint64_t noComm[4] = {0, 0, 0, 0};
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // With fp16 loss scaling an overflow is the update's to skip; otherwise it is fatal.
    if (!std::isfinite(loss) && !scaling()) {
      // The step is logged (its loss as null) so the log shows where training diverged.
      if (log)
        planrt_log_step(log, uint64_t(s), loss, nan, nan, nan, noComm);
      return fail(PLANRT_ERR_ARG, "step %lld: the loss is %s; stopping before anything is saved", (long long)s,
                  nonFinite(loss));
    }
    if (!o.saveGrads.empty() && s == start) {
      char text[32];
      std::snprintf(text, sizeof text, "%.9g", double(loss));
      // With fp16 loss scaling G holds scaled gradients: the file has the true ones.
      std::vector<float> unscaled;
      const float *grads = G.get();
      if (scaling()) {
        unscaled.assign(G.get(), G.get() + m.numFloats);
        for (float &g : unscaled)
          g /= state[2];
        grads = unscaled.data();
      }
      if (planrt_status st = saveParams(o.saveGrads, "planc-grads-1", grads, s, {"loss", text}))
        return st;
    }
    float scaleBefore = state[2];
    state[4] = 0;
    updateFn(P.get(), G.get(), M.get(), V.get(), s, state);
    const float *stats = state;
    bool skipped = scaling() && state[4] != 0;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stepSeconds += seconds;
    double tokensPerS = seconds > 0 ? double(tokensPerStep()) / seconds : nan;
    if (log)
      if (planrt_status st = planrt_log_step(log, uint64_t(s), loss, stats[1], stats[0], tokensPerS, noComm))
        return st;
    if (scaling() && log && (skipped || state[2] != scaleBefore))
      if (planrt_status st = planrt_log_loss_scale(log, uint64_t(s), state[2], skipped))
        return st;
    if (skipped) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "step %lld: fp16 gradients overflowed at loss scale %g; step skipped, scale now %g",
                    (long long)s, double(scaleBefore), double(state[2]));
      progress.line(buf);
      if (!(state[2] >= 0x1p-24f))
        return fail(PLANRT_ERR_ARG,
                    std::isfinite(loss)
                        ? "step %lld: the fp16 loss scale fell to %g: the gradients overflow at every scale; "
                          "stopping before anything is saved"
                        : "step %lld: the fp16 loss scale fell to %g and the loss itself is not finite: the forward "
                          "pass overflows fp16, whatever the scale; stopping before anything is saved",
                    (long long)s, double(state[2]));
    } else if (!std::isfinite(stats[0])) {
      return fail(PLANRT_ERR_ARG, "step %lld: the gradient norm is %s; stopping before anything is saved",
                  (long long)s, nonFinite(stats[0]));
    }
    lastLoss = loss;
    int64_t done = s + 1;
    double eta = stepSeconds / double(done - start) * double(end - done);
    progress.step(done, loss, double(tokensPerStep()) * double(done - start) / stepSeconds, eta);
    bool last = done == end;
    if (evaluating() && (done % m.evalEvery == 0 || last))
      if (planrt_status st = evaluate(s))
        return st;
    if (checkpointing() && (done % checkpointEvery == 0 || last))
      if (planrt_status st = checkpoint(s))
        return st;
    return PLANRT_OK;
  }

  const Manifest &m;
  const Options &o;
  planrt_grad_fn gradFn;
  planrt_update_fn updateFn;
  planrt_eval_fn evalFn;
  int64_t start = 0, end;
  Progress progress;
  planrt_data *train = nullptr, *val = nullptr;
  planrt_log *log = nullptr;
  std::string checkpointDir, lastCheckpoint;
  int64_t checkpointEvery = 0;
  Floats P, G, M, V;
  std::vector<std::string> names;  ///< exp_avg and exp_avg_sq names, two per parameter
  std::vector<int32_t> tokens, targets;
  double stepSeconds = 0, lastLoss = 0;
  /// The step state of planrt.h: [2] loss scale and [3] its good steps persist.
  float state[8] = {0, 0, 1, 0, 0, 0, 0, 0};  // [2] set from the manifest in the constructor
  bool scaling() const { return m.lossScaleKind != "none"; }
};

} // namespace

extern "C" int planrt_train_main(int argc, char **argv, const char *manifest, planrt_grad_fn grad,
                                 planrt_update_fn update, planrt_eval_fn eval) {
  // The step functions allocate and free the same activation buffers every step: keep
  // them in the heap (up to glibc's 32 MiB maximum) rather than mapping and unmapping
  // them, which costs a page fault per 4 KiB touched each step.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // No exception may leave this C function.
  try {
    planrt_set_rank(0);
    Options o;
    if (int rc = parseOptions(argc, argv, o))
      return rc;
    Manifest m;
    planrt_status parsed = parseManifest(manifest, m);
    if (o.help) {
      std::printf(kUsage, argc > 0 && argv[0] ? argv[0] : "train", parsed ? "?" : m.plan.c_str(),
                  parsed ? "?" : m.model.c_str());
      return 0;
    }
    if (parsed) {
      std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
      return kExitError;
    }
    Trainer t(m, o, grad, update, eval);
    return t.run();
  } catch (const std::exception &e) {
    fail(PLANRT_ERR_ARG, "internal error: %s", e.what());
  } catch (...) {
    fail(PLANRT_ERR_ARG, "internal error");
  }
  std::fprintf(stderr, "planrt: error: %s\n", planrt_last_error());
  return kExitError;
}
