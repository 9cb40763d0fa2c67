// The CPU target: lowering pipeline, object emission, linking. Its own passes are one
// a file beside this one (Passes.td in include/plan/Target/CPU).
#include "plan/Target/CPU.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Conversion/Passes.h"
#include "plan/Target/CPU/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;

namespace plan::cpu {

/// The passes the pipeline names, registered once.
static void registerPipelinePasses() {
  static bool done = [] {
    registerPlanConversionPasses();
    registerLinalgPasses();
    arith::registerArithPasses();
    bufferization::registerBufferizationPasses();
    memref::registerMemRefPasses();
    registerConversionPasses();
    registerTransformsPasses();
    registerPlanCPUPasses();
    return true;
  }();
  (void)done;
}

void buildLoweringPipeline(OpPassManager &pm, const std::string &loops, const std::string &mainBackend) {
  registerPipelinePasses();
  std::string pipeline =
      "convert-sched-to-runtime,convert-nn-to-linalg,linalg-fuse-elementwise-ops,eliminate-empty-tensors,"
      "empty-tensor-to-alloc-tensor,canonicalize,"
      "cse,"
      "one-shot-bufferize,cse,canonicalize," +
      loops +
      ","
      "plan-approximate-tanh,arith-expand{include-bf16=true},convert-math-to-llvm,convert-math-to-libm,expand-strided-"
      "metadata,lower-affine,convert-scf-to-cf,"
      "convert-cf-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,finalize-memref-to-llvm{use-generic-functions=1},"
      "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts,plan-emit-manifest,plan-emit-"
      "main{backend=" +
      mainBackend + "}";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("planc: the CPU lowering pipeline does not parse");
}

void registerTarget(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, memref::MemRefDialect, bufferization::BufferizationDialect, scf::SCFDialect,
                  cf::ControlFlowDialect, LLVM::LLVMDialect, affine::AffineDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  registerLibraryCallModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerPipelinePasses();
}

LogicalResult emitObject(ModuleOp module, const std::string &path, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> ir = translateModuleToLLVMIR(module, ctx, "planc");
  if (!ir) {
    error = "the module does not translate to LLVM IR";
    return failure();
  }
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return failure();
  llvm::SubtargetFeatures features;
  for (auto &f : llvm::sys::getHostCPUFeatures())
    features.AddFeature(f.first(), f.second);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(triple, llvm::sys::getHostCPUName(),
                                                                      features.getString(), options, llvm::Reloc::PIC_,
                                                                      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  ir->setTargetTriple(triple);
  ir->setDataLayout(tm->createDataLayout());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // No loop unrolling: the step functions are hundreds of loop nests with static trip
  // counts, which the unroller multiplies into code that takes minutes to compile
  // (gpt2_small: 16 s → 3 s to build) for no measurable speed-up — the time is in
  // BLAS and the kernels; the loops are still vectorised.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  llvm::PassBuilder pb(tm.get(), tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*ir, mam);

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  codegen.run(*ir);
  os.flush();
  return success();
}

/// The directory of libplanrt: next to an installed planc (../lib), else the
/// build tree's.
static std::string runtimeDir(const std::string &plancPath) {
  SmallString<256> dir(llvm::sys::path::parent_path(llvm::sys::path::parent_path(plancPath)));
  llvm::sys::path::append(dir, "lib", "libplanrt.so");
  if (llvm::sys::fs::exists(dir))
    return std::string(llvm::sys::path::parent_path(dir));
  return PLANC_RUNTIME_DIR;
}

LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath, std::string &error,
                   bool retrieval, ArrayRef<std::string> extraLibraries) {
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver ('cc') on PATH to link with";
    return failure();
  }
  std::string rt = runtimeDir(plancPath), rpath = "-Wl,-rpath," + rt;
  SmallVector<std::string> flags;
  for (const std::string &lib : extraLibraries)
    flags.push_back("-l" + lib);
  // -rdynamic: the generated entry points in the dynamic symbol table, so that the
  // runtime's diagnostics (PLANRT_MEM_TRACE, cuda-host's host-touch audit) name them.
  SmallVector<StringRef> args{*cc, object, "-o", exe, "-rdynamic", "-L", rt, rpath};
  args.append(flags.begin(), flags.end());
  args.append({"-lplanrt", "-lopenblas", "-lm"});
  // Kept even where nothing refers to it (GCC links --as-needed here): a generate
  // executable's `serve` is in it, which libplanrt reaches through a weak symbol.
  if (retrieval)
    args.append({"-Wl,--push-state,--no-as-needed", "-lplanrt_retrieval", "-Wl,--pop-state"});
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    error = "linking " + exe + " failed" + (message.empty() ? "" : ": " + message);
    return failure();
  }
  return success();
}

} // namespace plan::cpu
