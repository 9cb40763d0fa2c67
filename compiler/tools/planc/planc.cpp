// planc: the command-line driver (check, emit, build, explain, run).
#include "Launch.h"
#include "plan/Compiler/CostModel.h"
#include "plan/Compiler/FitCheck.h"
#include "plan/Compiler/Pipeline.h"
#include "plan/Compiler/PlanGen.h"
#include "plan/Lang/Sema.h"
#include "plan/Target/CPU.h"
#include "plan/Target/CUDA.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cerrno>
#include <cstring>
#include <set>
#include <unistd.h>

#ifndef PLANC_VERSION
#define PLANC_VERSION "dev"
#endif

using namespace plan;

namespace {

const char *kUsage = R"(usage: planc <command> FILE [options]

commands:
  check FILE                 diagnostics only; exit 0 when clean, 1 on errors
  emit FILE --stage STAGE    print the IR at STAGE (ast|plan|nn|grad|sharded|spmd|sched|llvm|ptx)
  build FILE [-o OUT]        an executable for a train, retrieval or generate declaration
  explain FILE               per-device memory, communication and step time of a train plan
  run FILE [-- ARGS]         build, then launch (mpirun for a mesh of several devices)

options:
  -I DIR                     search DIR for imports (after the importing file's directory)
  -o OUT                     (build, run) the executable (default: the plan's name)
  --target cpu|cuda|cuda-host  (build, run, emit --stage llvm) the target (default cpu;
                             cuda-host: the CUDA target's kernels run by host loops)
  --cuda-arch sm_NN[,sm_NN]  (cuda target, emit --stage ptx) the GPU architectures, sm_80 or
                             later (default sm_90: H100, H200; sm_80: A100); several make
                             one fat binary with a cubin for each
  --cuda-host-order forward|reverse|shuffle[:SEED]  (cuda-host target) the order each
                             launch's blocks and threads run in; reverse runs them last
                             first, shuffle in an order drawn from SEED (default 1), so that
                             a race between threads changes the results (default forward)
  --entry NAME               the declaration to compile or emit
  --hosts HOSTFILE           (run) launch across the hosts of HOSTFILE ('host:slots' lines,
                             MPICH's format), each holding one node of the mesh
  --summary                  (check) print what each declaration amounts to
  --json                     (explain) machine-readable output (fields: docs/EXPLAIN.md)
  --search                   (explain) rank every layout of the mesh that fits
  --trace FILE               (explain) write one predicted step as a Chrome trace (Perfetto)
  --per-layer                (explain) the memory of each layer
  --print-ir-after-all       (emit) print the IR after every pass to stderr
  --dump-ir DIR              (emit) write the IR after every pass to DIR
  --version, --help
)";

struct Options {
  std::string command, file, stage, entry, output, dumpDir, trace, hosts, target = "cpu", cudaArch = "sm_90",
                                                                          hostOrder = "forward";
  std::vector<std::string> includeDirs, runArgs;
  bool printAfterAll = false, summary = false, json = false, searchLayouts = false, perLayer = false;
};

/// forward, reverse, shuffle or shuffle:SEED (0 <= SEED <= 10^9).
bool validHostOrder(llvm::StringRef order) {
  if (order == "forward" || order == "reverse" || order == "shuffle")
    return true;
  uint64_t seed = 0;
  return order.consume_front("shuffle:") && !order.getAsInteger(10, seed) && seed <= 1000000000;
}

int usageError(const std::string &msg) {
  llvm::errs() << "planc: error: " << msg << "\n"
               << "run 'planc --help' for usage\n";
  return 2;
}

/// --dump-ir DIR: one file per pass, numbered in pipeline order.
class DumpIR : public mlir::PassInstrumentation {
public:
  DumpIR(std::string dir, int start) : dir(std::move(dir)), counter(start) {}
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override { write(pass->getArgument().str(), op); }
  void write(const std::string &name, mlir::Operation *op) {
    llvm::SmallString<256> path(dir);
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%02d-", counter++);
    llvm::sys::path::append(path, std::string(prefix) + name + ".mlir");
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      llvm::errs() << "planc: error: cannot write '" << path << "': " << ec.message() << "\n";
      return;
    }
    op->print(os, mlir::OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/false));
  }

private:
  std::string dir;
  int counter;
};

void printSummary(const sema::Program &p) {
  auto &os = llvm::outs();
  for (const sema::Mesh &m : p.meshes) {
    if (m.loc.file != 0)
      continue;
    os << "mesh " << m.name << ": " << m.devices() << " " << sema::deviceKindName(m.kind)
       << (m.devices() == 1 ? " device" : " devices") << ", axes";
    for (const sema::MeshAxis &a : m.axes)
      os << " " << a.name << "=" << a.size;
    os << "\n";
  }
  for (const sema::Model &m : p.models) {
    if (m.loc.file != 0)
      continue;
    os << "model " << m.name << ": " << m.numParameters() << " parameters in " << m.params.size() << " tensors, "
       << m.layers << " layers, " << m.ops.size() << " ops\n";
  }
  for (const sema::Train &t : p.trains) {
    if (t.loc.file != 0)
      continue;
    os << "train " << t.name << ": model " << p.models[t.model].name << " (" << p.models[t.model].numParameters()
       << " parameters) on mesh " << p.meshes[t.mesh].name << "; data " << t.dataParallel << " x tensor "
       << t.tensorParallel << " x pipeline " << t.pipelineParallel << "; batch " << t.batch << " = micro " << t.micro
       << " x data " << t.dataParallel << " x accumulation " << t.accumulation << "; "
       << (t.images.any() ? "images " + std::to_string(t.images.channels) + "x" + std::to_string(t.images.height) +
                                "x" + std::to_string(t.images.width)
                          : "seq " + std::to_string(t.seq))
       << "; zero " << t.parallel.zero << "; " << sema::precisionName(t.precision) << "\n";
  }
  for (const sema::Retrieval &r : p.retrievals)
    if (r.loc.file == 0)
      os << "retrieval " << r.name << ": index \"" << r.index.factory << "\", store \"" << r.store << "\", guard "
         << (r.quarantine ? "quarantine" : "off") << "\n";
  for (const sema::Generate &g : p.generates)
    if (g.loc.file == 0)
      os << "generate " << g.name << ": model " << p.models[g.model].name << "\n";
}

/// The program lowered to `stage`, or null after printing errors.
mlir::OwningOpRef<mlir::ModuleOp> lowerProgram(const Options &opts, Stage stage, const sema::Program &program,
                                               lang::Diags &diags) {
  mlir::OwningOpRef<mlir::ModuleOp> module = genPlanModule(program, diags);
  if (failed(mlir::verify(*module))) {
    llvm::errs() << "planc: error: internal: the generated plan IR does not verify\n";
    return nullptr;
  }
  mlir::MLIRContext &ctx = *module->getContext();
  std::unique_ptr<DumpIR> dump;
  if (!opts.dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(opts.dumpDir)) {
      llvm::errs() << "planc: error: cannot create '" << opts.dumpDir << "': " << ec.message() << "\n";
      return nullptr;
    }
    dump = std::make_unique<DumpIR>(opts.dumpDir, 0);
    dump->write("plan-gen", module->getOperation());
  }
  if (opts.printAfterAll) {
    llvm::errs() << "// -----// IR Dump After PlanGen (plan-gen) //----- //\n";
    module->print(llvm::errs());
    llvm::errs() << "\n";
  }
  mlir::PassManager pm(&ctx);
  if (opts.printAfterAll)
    pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                        [](mlir::Pass *, mlir::Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  if (dump)
    pm.addInstrumentation(std::move(dump));
  PipelineOptions pipeline;
  pipeline.entry = opts.entry;
  pipeline.target = opts.target;
  pipeline.cudaArch = opts.cudaArch;
  pipeline.hostOrder = opts.hostOrder;
  buildPipeline(pm, stage, pipeline);
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

int runEmitIR(const Options &opts, Stage stage, const sema::Program &program, lang::Diags &diags) {
  mlir::OwningOpRef<mlir::ModuleOp> module = lowerProgram(opts, stage, program, diags);
  if (!module)
    return 1;
  if (stage == Stage::PTX) {
    std::string error;
    if (failed(cuda::printPTX(*module, llvm::outs(), error))) {
      llvm::errs() << "planc: error: " << error << "\n";
      return 1;
    }
    return 0;
  }
  module->print(llvm::outs(), mlir::OpPrintingFlags().enableDebugInfo(false));
  llvm::outs() << "\n";
  return 0;
}

/// planc build: the plan lowered to LLVM, an object file, an executable.
int runBuild(const Options &opts, const sema::Program &program, lang::Diags &diags, const char *argv0,
             std::string &exe) {
  if (opts.target != "cpu") {
    // The CUDA target builds training executables; retrieval and generation hand the
    // generated functions host buffers.
    const char *kind = nullptr;
    for (const auto &r : program.retrievals)
      if (r.loc.file == 0 && (opts.entry.empty() || opts.entry == r.name))
        kind = "retrieval";
    for (const auto &g : program.generates)
      if (g.loc.file == 0 && (opts.entry.empty() || opts.entry == g.name))
        kind = "generate";
    if (kind) {
      llvm::errs() << "planc: error: the CUDA target builds train executables; a " << kind
                   << " executable for CUDA is not implemented in this version of planc: build it with "
                      "--target cpu\n";
      return 1;
    }
    if (opts.target == "cuda" && !cuda::available()) {
      llvm::errs() << "planc: error: this planc was built without the CUDA toolkit; rebuild it where "
                      "/usr/local/cuda exists (or set CUDAToolkit_ROOT), or build with --target cpu\n";
      return 1;
    }
  }
  if (opts.entry.empty()) {
    // An executable runs one declaration: several in the file need --entry.
    std::vector<std::string> entries;
    for (const auto &t : program.trains)
      if (t.loc.file == 0)
        entries.push_back(t.name);
    for (const auto &r : program.retrievals)
      if (r.loc.file == 0)
        entries.push_back(r.name);
    for (const auto &g : program.generates)
      if (g.loc.file == 0)
        entries.push_back(g.name);
    if (entries.size() > 1) {
      llvm::errs() << "planc: error: '" << opts.file << "' declares " << entries.size()
                   << " entries; name the one to build with --entry (";
      for (size_t i = 0; i < entries.size(); ++i)
        llvm::errs() << (i ? ", " : "") << entries[i];
      llvm::errs() << ")\n";
      return 1;
    }
  }
  mlir::OwningOpRef<mlir::ModuleOp> module = lowerProgram(opts, Stage::LLVM, program, diags);
  if (!module)
    return 1;
  exe = opts.output;
  if (exe.empty())
    exe = llvm::sys::path::stem(opts.file).str();
  llvm::SmallString<256> object;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("planc", "o", object)) {
    llvm::errs() << "planc: error: cannot create a temporary object file: " << ec.message() << "\n";
    return 1;
  }
  std::string error;
  std::string self = llvm::sys::fs::getMainExecutable(argv0, (void *)&usageError);
  // The host code of either target is native code; the CUDA target's kernels are
  // inside it as a fat binary.
  bool ok = succeeded(cpu::emitObject(*module, std::string(object), error)) &&
            (opts.target == "cuda" ? succeeded(cuda::link(std::string(object), exe, self, error))
                                   // cuda-host: the CPU's libraries (host loops, the CPU kernels).
                                   : succeeded(cpu::link(std::string(object), exe, self, error,
                                                         module->lookupSymbol("planc_retrieval_manifest") ||
                                                             module->lookupSymbol("planc_generate_manifest"))));
  llvm::sys::fs::remove(object);
  if (!ok) {
    llvm::errs() << "planc: error: " << error << "\n";
    return 1;
  }
  return 0;
}

int runExplain(const Options &opts, lang::Diags &diags, const lang::FrontendOptions &fe) {
  auto program = lang::analyzeFile(opts.file, fe, diags);
  if (!program)
    return 1;
  std::vector<const sema::Train *> trains;
  for (const sema::Train &t : program->trains)
    if (t.loc.file == 0 && (opts.entry.empty() || t.name == opts.entry))
      trains.push_back(&t);
  if (trains.size() != 1) {
    std::string names;
    for (const sema::Train &t : program->trains)
      if (t.loc.file == 0)
        names += (names.empty() ? "" : ", ") + t.name;
    llvm::errs() << "planc: error: "
                 << (trains.empty()
                         ? (opts.entry.empty() ? std::string("'") + opts.file + "' has no train plan to explain"
                                               : "no train plan named '" + opts.entry + "'")
                         : std::string("'") + opts.file + "' has several train plans; name one with --entry")
                 << (names.empty() ? "" : " (train plans: " + names + ")") << "\n";
    return 1;
  }
  const sema::Train &t = *trains.front();
  const sema::Model &model = program->models[t.model];
  const sema::Mesh &mesh = program->meshes[t.mesh];
  sema::Layout layout = sema::layoutOf(t);
  cost::Estimate e = cost::estimate(model, mesh, layout, cost::axisRolesOf(t, mesh), cost::Calibration::defaults(),
                                    /*withTrace=*/!opts.trace.empty());
  cost::addFederated(e, model, t, mesh);
  if (opts.searchLayouts) {
    cost::SearchOptions all;
    all.buildableOnly = false;
    std::vector<cost::Candidate> found;
    size_t unbuilt = 0;
    for (cost::Candidate &c : cost::search(model, mesh, layout, all)) {
      if (cost::buildable(c.layout, c.estimate))
        found.push_back(std::move(c));
      else
        ++unbuilt;
    }
    if (opts.json) {
      llvm::outs() << "[\n";
      for (size_t i = 0; i < found.size() && i < 10; ++i)
        llvm::outs() << (i ? ",\n" : "") << cost::renderJson(found[i].estimate, model, mesh, found[i].layout);
      llvm::outs() << "]\n";
    } else {
      std::vector<cost::Candidate> top(found.begin(), found.begin() + std::min<size_t>(found.size(), 10));
      llvm::outs() << cost::renderSearch(top, found.size(), model, mesh, unbuilt);
    }
    return 0;
  }
  if (!opts.trace.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(opts.trace, ec);
    if (ec) {
      llvm::errs() << "planc: error: cannot write '" << opts.trace << "': " << ec.message() << "\n";
      return 1;
    }
    os << cost::renderTrace(e);
  }
  llvm::outs() << (opts.json ? cost::renderJson(e, model, mesh, layout)
                             : cost::renderText(e, model, mesh, layout, opts.perLayer));
  return 0;
}

int run(const Options &opts, const char *argv0) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // IR printing needs a single thread (a function printed while a sibling is rewritten
  // reads the module around it); a failing pass must not dump the module.
  if (opts.printAfterAll || !opts.dumpDir.empty())
    ctx.disableMultithreading();
  ctx.printOpOnDiagnostic(false);
  lang::SourceFiles files;
  lang::DiagnosticPrinter printer(ctx, files, llvm::errs());
  lang::Diags diags(&ctx, files);
  lang::FrontendOptions fe;
  fe.includeDirs = opts.includeDirs;
  fe.stdlibDir = lang::defaultStdlibDir(argv0);

  if (opts.command == "check") {
    auto program = lang::analyzeFile(opts.file, fe, diags);
    if (!program)
      return 1;
    if (!opts.entry.empty()) {
      bool found = false;
      std::string names;
      auto consider = [&](const std::string &n, ast::Loc at) {
        if (at.file != 0)
          return;
        found |= n == opts.entry;
        names += (names.empty() ? "" : ", ") + n;
      };
      for (const auto &t : program->trains)
        consider(t.name, t.loc);
      for (const auto &r : program->retrievals)
        consider(r.name, r.loc);
      for (const auto &g : program->generates)
        consider(g.name, g.loc);
      if (!found) {
        const char *kind = nullptr;
        for (const auto &m : program->models)
          if (m.name == opts.entry)
            kind = "model";
        for (const auto &m : program->meshes)
          if (m.name == opts.entry)
            kind = "mesh";
        llvm::errs() << "planc: error: ";
        if (kind)
          llvm::errs() << "'" << opts.entry << "' is a " << kind
                       << "; the entry is a train, retrieval or generate declaration";
        else
          llvm::errs() << "no declaration named '" << opts.entry << "'";
        llvm::errs() << "; the entries are: " << (names.empty() ? "none" : names) << "\n";
        return 1;
      }
    }
    if (!checkFit(*program, diags, opts.entry))
      return 1;
    if (opts.summary)
      printSummary(*program);
    return 0;
  }

  if (opts.command == "explain")
    return runExplain(opts, diags, fe);

  if (opts.command == "emit") {
    std::optional<Stage> stage = parseStage(opts.stage);
    if (opts.stage.empty())
      return usageError("emit needs --stage " + stageNames());
    if (!stage)
      return usageError("unknown stage '" + opts.stage + "'; the stages are " + stageNames());
    if (opts.target != "cpu" && *stage != Stage::LLVM && *stage != Stage::PTX)
      return usageError("--target selects the llvm stage's target; stage '" + opts.stage +
                        "' is the same for every target");
    if (*stage == Stage::AST && !opts.entry.empty())
      return usageError("--entry selects a declaration of the plan IR; it does not apply to --stage ast");
    if (*stage == Stage::AST) {
      auto parsed = lang::parseFiles(opts.file, fe, diags);
      if (!parsed)
        return 1;
      llvm::outs() << ast::printAST(parsed->front());
      return 0;
    }
    auto program = lang::analyzeFile(opts.file, fe, diags);
    if (!program)
      return 1;
    return runEmitIR(opts, *stage, *program, diags);
  }

  // build and run need the later stages of the pipeline.
  auto program = lang::analyzeFile(opts.file, fe, diags);
  if (!program)
    return 1;
  std::string exe;
  if (int rc = runBuild(opts, *program, diags, argv0, exe))
    return rc;
  if (opts.command == "build")
    return 0;
  // planc run: the executable replaces planc, with the arguments after `--`; a mesh of
  // more than one device is launched through mpirun, one process per device, here, on
  // the hosts of --hosts, or in a Slurm allocation (Launch.h).
  llvm::SmallString<256> path(exe);
  llvm::sys::fs::make_absolute(path);
  sema::Mesh one;
  one.name = "(none)";
  const sema::Mesh *mesh = &one;
  for (const sema::Train &t : program->trains)
    if (t.loc.file == 0 && (opts.entry.empty() || t.name == opts.entry) &&
        program->meshes[t.mesh].devices() > mesh->devices())
      mesh = &program->meshes[t.mesh];
  std::optional<std::vector<std::string>> launch = launchCommand(*mesh, std::string(path), opts.hosts);
  if (!launch)
    return 1;
  std::vector<std::string> argvStrings = std::move(*launch);
  argvStrings.insert(argvStrings.end(), opts.runArgs.begin(), opts.runArgs.end());
  std::vector<char *> args;
  for (std::string &a : argvStrings)
    args.push_back(a.data());
  args.push_back(nullptr);
  llvm::outs().flush();
  execv(args[0], args.data());
  llvm::errs() << "planc: error: cannot run " << args[0] << ": " << std::strerror(errno) << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    llvm::errs() << kUsage;
    return 2;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&](const char *flag) -> std::optional<std::string> {
      if (i + 1 >= args.size()) {
        usageError(std::string(flag) + " needs a value");
        return std::nullopt;
      }
      return args[++i];
    };
    auto takeInline = [&](const char *flag, std::string &out) {
      size_t n = std::strlen(flag);
      if (a.size() > n + 1 && a.compare(0, n, flag) == 0 && a[n] == '=') {
        out = a.substr(n + 1);
        return true;
      }
      return false;
    };
    if (a == "--help" || a == "-h") {
      llvm::outs() << kUsage;
      return 0;
    }
    if (a == "--version") {
      llvm::outs() << "planc " << PLANC_VERSION << " (MLIR " << LLVM_VERSION_STRING << ")\n";
      return 0;
    }
    if (a == "--") {
      opts.runArgs.assign(args.begin() + i + 1, args.end());
      break; // the rest belongs to the executable (planc run)
    } else if (a == "-I") {
      auto v = value("-I");
      if (!v)
        return 2;
      opts.includeDirs.push_back(*v);
    } else if (a.size() > 2 && a.compare(0, 2, "-I") == 0) {
      opts.includeDirs.push_back(a.substr(2));
    } else if (a == "--stage" || a == "--entry" || a == "-o" || a == "--dump-ir" || a == "--target" ||
               a == "--cuda-arch" || a == "--cuda-host-order" || a == "--hosts") {
      auto v = value(a.c_str());
      if (!v)
        return 2;
      std::string &out = a == "--stage"             ? opts.stage
                         : a == "--entry"           ? opts.entry
                         : a == "-o"                ? opts.output
                         : a == "--dump-ir"         ? opts.dumpDir
                         : a == "--cuda-arch"       ? opts.cudaArch
                         : a == "--cuda-host-order" ? opts.hostOrder
                         : a == "--hosts"           ? opts.hosts
                                                    : opts.target;
      out = *v;
    } else if (takeInline("--stage", opts.stage) || takeInline("--entry", opts.entry) ||
               takeInline("--dump-ir", opts.dumpDir) || takeInline("--target", opts.target) ||
               takeInline("--cuda-arch", opts.cudaArch) || takeInline("--trace", opts.trace) ||
               takeInline("--cuda-host-order", opts.hostOrder) || takeInline("--hosts", opts.hosts)) {
    } else if (a == "--print-ir-after-all") {
      opts.printAfterAll = true;
    } else if (a == "--summary") {
      opts.summary = true;
    } else if (a == "--json") {
      opts.json = true;
    } else if (a == "--search") {
      opts.searchLayouts = true;
    } else if (a == "--per-layer") {
      opts.perLayer = true;
    } else if (a == "--trace") {
      auto v = value("--trace");
      if (!v)
        return 2;
      opts.trace = *v;
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (opts.command.empty()) {
      opts.command = a;
    } else if (opts.file.empty()) {
      opts.file = a;
    } else {
      return usageError("unexpected argument '" + a + "'");
    }
  }
  static const char *commands[] = {"check", "emit", "build", "explain", "run"};
  if (std::find_if(std::begin(commands), std::end(commands), [&](const char *c) { return opts.command == c; }) ==
      std::end(commands))
    return usageError(opts.command.empty() ? "no command given" : "unknown command '" + opts.command + "'");
  if (opts.file.empty())
    return usageError("'" + opts.command + "' needs a .plan file");
  // sm_80 (Ampere) and later: libplanrt_cuda is built for sm_80 and sm_90. A list
  // (sm_80,sm_90) makes one fat binary; each architecture once.
  {
    llvm::SmallVector<llvm::StringRef> archs;
    llvm::StringRef(opts.cudaArch).split(archs, ',');
    std::set<std::string> seen;
    for (llvm::StringRef arch : archs) {
      unsigned sm = 0;
      if (arch.size() < 5 || arch.size() > 6 || !arch.starts_with("sm_") || arch.drop_front(3).getAsInteger(10, sm) ||
          sm < 80)
        return usageError("--cuda-arch '" + arch.str() +
                          "' is not an NVIDIA architecture this version supports "
                          "(sm_80 or later, as sm_80 or sm_90; several separated by commas)");
      if (!seen.insert(arch.str()).second)
        return usageError("--cuda-arch names " + arch.str() + " twice");
    }
  }
  if (opts.target != "cpu" && opts.target != "cuda" && opts.target != "cuda-host")
    return usageError("unknown target '" + opts.target + "'; the targets are cpu, cuda and cuda-host");
  if (!validHostOrder(opts.hostOrder))
    return usageError("--cuda-host-order '" + opts.hostOrder +
                      "' is neither forward, reverse nor shuffle[:SEED] (SEED a number from 0 to 1000000000)");
  if (opts.hostOrder != "forward" && opts.target != "cuda-host")
    return usageError("--cuda-host-order applies to --target cuda-host only");
  return run(opts, argv[0]);
}
