// Reading the training executable's command line (train_options.h): the flags, their
// values and the usage text.
#include "train_options.h"

#include "train_manifest.h"

#include <cstdio>

namespace planrt::train {

namespace {

const char kUsage[] = "usage: %s [options]\n"
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
                      "  --export FILE          at the end, write one consolidated checkpoint (parameters\n"
                      "                         and optimizer state, Hugging Face names) to FILE\n"
                      "  --merge                with --export, under adapters: the base with the trained\n"
                      "                         adapters merged in, under the base's names\n"
                      "  --export-adapters FILE at the end, the adapters in PEFT's layout and names, with\n"
                      "                         adapter_config.json beside FILE\n"
                      "  --offload-dir DIR      put the offloaded optimizer state (offload { optimizer =\n"
                      "                         nvme(…) }) under DIR instead of the plan's directory\n"
                      "  --offload-sync         under ZeRO-3, finish each offloaded update before the\n"
                      "                         next step starts (by default it runs on into the next\n"
                      "                         step's forward pass; the results are the same)\n"
                      "  --comm-timeout SECONDS a collective that waits longer stops every rank, naming\n"
                      "                         it (default 300)\n"
                      "  --quiet                no progress or evaluation lines; errors and the final\n"
                      "                         line only\n"
                      "  --help                 this text\n"
                      "\n"
                      "Exit status: 0 done, 1 an error (named on stderr), 2 a bad command line.\n";

enum class Arg {
  Steps,
  Data,
  Val,
  Log,
  Init,
  SaveInit,
  Resume,
  CheckpointDir,
  CheckpointEvery,
  SaveGrads,
  Export,
  ExportAdapters,
  Merge,
  OffloadDir,
  OffloadSync,
  CommTimeout,
  Quiet,
  Help
};

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
                       {"--export", Arg::Export, true},
                       {"--export-adapters", Arg::ExportAdapters, true},
                       {"--merge", Arg::Merge, false},
                       {"--offload-dir", Arg::OffloadDir, true},
                       {"--offload-sync", Arg::OffloadSync, false},
                       {"--comm-timeout", Arg::CommTimeout, true},
                       {"--quiet", Arg::Quiet, false},
                       {"--help", Arg::Help, false},
                       {"-h", Arg::Help, false}};

int usageError(const std::string &message) {
  std::fprintf(stderr, "planrt: error: %s (see --help)\n", message.c_str());
  return kExitUsage;
}

} // namespace

std::optional<int64_t> count(const std::string &s) {
  if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t v = std::stoll(s);
  if (v > kMaxSteps)
    return std::nullopt;
  return v;
}

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
    case Arg::Data:
      o.data.push_back(value);
      break;
    case Arg::Val:
      o.val.push_back(value);
      break;
    case Arg::Log:
      o.log = value;
      break;
    case Arg::Init:
      o.init = value;
      break;
    case Arg::SaveInit:
      o.saveInit = value;
      break;
    case Arg::Resume:
      o.resume = value;
      break;
    case Arg::CheckpointDir:
      o.checkpointDir = value;
      break;
    case Arg::SaveGrads:
      o.saveGrads = value;
      break;
    case Arg::Export:
      o.exportFile = value;
      break;
    case Arg::ExportAdapters:
      o.exportAdapters = value;
      break;
    case Arg::Merge:
      o.merge = true;
      break;
    case Arg::OffloadDir:
      o.offloadDir = value;
      break;
    case Arg::OffloadSync:
      o.offloadSync = true;
      break;
    case Arg::CommTimeout: {
      std::optional<int64_t> n = count(value);
      if (!n || *n < 1)
        return usageError("bad value '" + value + "' for " + name + ": expected whole seconds ≥ 1");
      o.commTimeout = double(*n);
      break;
    }
    case Arg::Quiet:
      o.quiet = true;
      break;
    case Arg::Help:
      o.help = true;
      break;
    }
  }
  if (!o.init.empty() && !o.resume.empty())
    return usageError("--init and --resume cannot be combined: a checkpoint holds the parameters");
  if (o.merge && o.exportFile.empty())
    return usageError("--merge needs --export FILE, which it changes into the merged model");
  return 0;
}

void printUsage(const char *argv0, const char *plan, const char *model) { std::printf(kUsage, argv0, plan, model); }

} // namespace planrt::train
