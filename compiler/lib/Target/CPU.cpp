// The CPU target: lowering pipeline, object emission, linking.
#include "plan/Target/CPU.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Conversion/Passes.h"

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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
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

namespace {
/// `main(argc, argv)` → planrt_train_main(argc, argv, manifest, grad, sumsq, update, eval,
/// step, gather, release).
struct PlanEmitMain : PassWrapper<PlanEmitMain, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanEmitMain)
  PlanEmitMain() = default;
  PlanEmitMain(const PlanEmitMain &other) : PassWrapper(other) {}
  StringRef getArgument() const override { return "plan-emit-main"; }
  StringRef getDescription() const override { return "Add the executable's main, which starts the runtime"; }
  Option<std::string> backend{*this, "backend",
                              llvm::cl::desc("cpu, or cuda: main first starts the device (planrt_cuda_start) "
                                             "and returns its status if that fails"),
                              llvm::cl::init("cpu")};

  /// On the CUDA backend: `if ((rc = planrt_cuda_start(argc, argv)) != 0) return rc;`
  /// at the start of main; the builder is left in the block that goes on.
  void startDevice(OpBuilder &b, ModuleOp m, LLVM::LLVMFuncOp main) {
    if (backend != "cuda")
      return;
    Location loc = main.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto i32 = b.getI32Type();
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(m.getBody());
      LLVM::LLVMFuncOp::create(b, loc, "planrt_cuda_start", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    }
    Block *entry = b.getInsertionBlock();
    Block *failed = main.addBlock(), *started = main.addBlock();
    auto rc = LLVM::CallOp::create(b, loc, TypeRange{i32}, "planrt_cuda_start",
                                   ValueRange{entry->getArgument(0), entry->getArgument(1)});
    Value zero = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0));
    Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, rc.getResult(), zero);
    LLVM::CondBrOp::create(b, loc, bad, failed, started);
    b.setInsertionPointToStart(failed);
    LLVM::ReturnOp::create(b, loc, rc.getResult());
    b.setInsertionPointToStart(started);
  }

  void runOnOperation() override {
    if (backend != "cpu" && backend != "cuda") {
      getOperation().emitError() << "plan-emit-main: unknown backend '" << backend << "' (cpu or cuda)";
      return signalPassFailure();
    }
    ModuleOp m = getOperation();
    if (m.lookupSymbol("planc_generate_manifest"))
      return emitGenerateMain(m);
    if (m.lookupSymbol("planc_retrieval_manifest"))
      return emitRetrievalMain(m);
    if (!m.lookupSymbol("planc_manifest"))
      return;
    OpBuilder b(m.getBodyRegion());
    b.setInsertionPointToEnd(m.getBody());
    Location loc = m.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto i32 = b.getI32Type();
    static const char *entries[] = {"planc_manifest", "planc_grad", "planc_sumsq", "planc_update",
                                    "planc_eval",     "planc_step", "planc_gather", "planc_release"};
    // A pipeline-parallel executable has per-stage entry points instead of the four
    // whole-model ones: planc_stages lists (forward, backward, update) of each stage.
    int64_t stages = 0;
    while (m.lookupSymbol("planc_fwd_s" + std::to_string(stages)))
      ++stages;
    auto perModel = [&](StringRef sym) {
      return stages > 0 && (sym == "planc_grad" || sym == "planc_sumsq" || sym == "planc_update" || sym == "planc_eval");
    };
    SmallVector<Type> params{i32, ptr};
    for (const char *sym : entries) {
      if (!perModel(sym) && !m.lookupSymbol(sym)) {
        m.emitError() << "plan-emit-main: the executable's entry point '" << sym
                      << "' is missing (plan-train-abi and plan-schedule make them)";
        return signalPassFailure();
      }
      params.push_back(ptr);
    }
    params.append({ptr, b.getI64Type()});
    if (stages > 0) {
      auto table = LLVM::LLVMArrayType::get(ptr, uint64_t(3 * stages));
      auto g = LLVM::GlobalOp::create(b, loc, table, /*isConstant=*/true, LLVM::Linkage::Internal, "planc_stages",
                                      Attribute());
      OpBuilder::InsertionGuard guard(b);
      b.createBlock(&g.getInitializerRegion());
      Value v = LLVM::UndefOp::create(b, loc, table);
      int64_t i = 0;
      for (int64_t k = 0; k < stages; ++k)
        for (const char *kind : {"planc_fwd_s", "planc_bwd_s", "planc_update_s"}) {
          std::string sym = kind + std::to_string(k);
          if (!m.lookupSymbol(sym)) {
            m.emitError() << "plan-emit-main: the pipeline stage entry point '" << sym << "' is missing";
            return signalPassFailure();
          }
          v = LLVM::InsertValueOp::create(b, loc, v, LLVM::AddressOfOp::create(b, loc, ptr, sym), i++);
        }
      LLVM::ReturnOp::create(b, loc, v);
    }
    LLVM::LLVMFuncOp::create(b, loc, "planrt_train_main", LLVM::LLVMFunctionType::get(i32, params));
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    startDevice(b, m, main);
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (const char *sym : entries)
      args.push_back(perModel(sym) ? Value(LLVM::ZeroOp::create(b, loc, ptr))
                                   : Value(LLVM::AddressOfOp::create(b, loc, ptr, sym)));
    args.push_back(stages > 0 ? Value(LLVM::AddressOfOp::create(b, loc, ptr, "planc_stages"))
                              : Value(LLVM::ZeroOp::create(b, loc, ptr)));
    args.push_back(LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(stages)));
    auto call = LLVM::CallOp::create(b, loc, TypeRange{i32}, "planrt_train_main", args);
    LLVM::ReturnOp::create(b, loc, call.getResult());
  }

  /// `planc_retrieval_models`, the planrt_retrieval_models of planrt.h: the model
  /// embedder's and re-ranker's manifests and entries, null where the graph has none.
  void emitModels(OpBuilder &b, ModuleOp m, Location loc) {
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto st = LLVM::LLVMStructType::getLiteral(&getContext(), {ptr, ptr, ptr, ptr});
    auto g = LLVM::GlobalOp::create(b, loc, st, /*isConstant=*/true, LLVM::Linkage::Internal,
                                    "planc_retrieval_models", Attribute());
    OpBuilder::InsertionGuard guard(b);
    b.createBlock(&g.getInitializerRegion());
    Value v = LLVM::UndefOp::create(b, loc, st);
    int64_t i = 0;
    for (StringRef sym : {"planc_embed_manifest", "planc_embed", "planc_rerank_manifest", "planc_rerank"}) {
      Value f = m.lookupSymbol(sym) ? Value(LLVM::AddressOfOp::create(b, loc, ptr, sym))
                                    : Value(LLVM::ZeroOp::create(b, loc, ptr));
      v = LLVM::InsertValueOp::create(b, loc, v, f, ArrayRef<int64_t>{i++});
    }
    LLVM::ReturnOp::create(b, loc, v);
  }

  /// `main(argc, argv)` → planrt_retrieval_main_manifest(argc, argv, manifest, models).
  void emitRetrievalMain(ModuleOp m) {
    OpBuilder b(m.getBodyRegion());
    b.setInsertionPointToEnd(m.getBody());
    Location loc = m.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto i32 = b.getI32Type();
    emitModels(b, m, loc);
    LLVM::LLVMFuncOp::create(b, loc, "planrt_retrieval_main_manifest",
                             LLVM::LLVMFunctionType::get(i32, {i32, ptr, ptr, ptr}));
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (StringRef sym : {"planc_retrieval_manifest", "planc_retrieval_models"})
      args.push_back(LLVM::AddressOfOp::create(b, loc, ptr, sym));
    auto call = LLVM::CallOp::create(b, loc, TypeRange{i32}, "planrt_retrieval_main_manifest", args);
    LLVM::ReturnOp::create(b, loc, call.getResult());
  }

  /// `main(argc, argv)` → planrt_generate_main(argc, argv, manifest, prefill, step,
  /// retrieval manifest, models, ground), the last three null without a context graph.
  void emitGenerateMain(ModuleOp m) {
    OpBuilder b(m.getBodyRegion());
    b.setInsertionPointToEnd(m.getBody());
    Location loc = m.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto i32 = b.getI32Type();
    for (const char *sym : {"planc_prefill", "planc_step"})
      if (!m.lookupSymbol(sym)) {
        m.emitError() << "plan-emit-main: the executable's entry point '" << sym
                      << "' is missing (plan-generate-abi makes it)";
        return signalPassFailure();
      }
    bool grounded = m.lookupSymbol("planc_retrieval_manifest") != nullptr;
    LLVM::LLVMFuncOp::create(b, loc, "planrt_generate_main",
                             LLVM::LLVMFunctionType::get(i32, {i32, ptr, ptr, ptr, ptr, ptr, ptr, ptr}));
    if (grounded) {
      emitModels(b, m, loc);
      LLVM::LLVMFuncOp::create(b, loc, "planrt_retrieval_ground",
                               LLVM::LLVMFunctionType::get(i32, {ptr, ptr, ptr, ptr, b.getI64Type(), ptr, ptr}));
    }
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    auto addr = [&](StringRef sym) -> Value {
      if (!grounded && (sym == "planc_retrieval_manifest" || sym == "planc_retrieval_models" ||
                        sym == "planrt_retrieval_ground"))
        return LLVM::ZeroOp::create(b, loc, ptr);
      return LLVM::AddressOfOp::create(b, loc, ptr, sym);
    };
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (StringRef sym : {"planc_generate_manifest", "planc_prefill", "planc_step", "planc_retrieval_manifest",
                          "planc_retrieval_models", "planrt_retrieval_ground"})
      args.push_back(addr(sym));
    auto call = LLVM::CallOp::create(b, loc, TypeRange{i32}, "planrt_generate_main", args);
    LLVM::ReturnOp::create(b, loc, call.getResult());
  }
};
/// tanh (GELU and its gradient) as MLIR's polynomial approximation: plain
/// arithmetic that LLVM vectorises, rather than one libm call per element.
struct PlanApproximateTanh : PassWrapper<PlanApproximateTanh, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanApproximateTanh)
  StringRef getArgument() const override { return "plan-approximate-tanh"; }
  StringRef getDescription() const override { return "Rewrite math.tanh into a polynomial approximation"; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, math::MathDialect, vector::VectorDialect>();
  }
  void runOnOperation() override {
    // Scalars and vectors only: the approximation builds arith on the operand type.
    WalkResult tensors = getOperation()->walk([&](math::TanhOp op) {
      if (!isa<TensorType>(op.getType()))
        return WalkResult::advance();
      op.emitOpError() << "on a tensor: plan-approximate-tanh runs after bufferization, on scalars and vectors";
      return WalkResult::interrupt();
    });
    if (tensors.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populatePolynomialApproximateTanhPattern(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

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
    PassRegistration<PlanEmitMain>();
    PassRegistration<PlanApproximateTanh>();
    return true;
  }();
  (void)done;
}

void buildLoweringPipeline(OpPassManager &pm, const std::string &loops) {
  registerPipelinePasses();
  std::string pipeline =
      "convert-sched-to-runtime,convert-nn-to-linalg,linalg-fuse-elementwise-ops,eliminate-empty-tensors,canonicalize,cse,"
      "one-shot-bufferize,cse,canonicalize," + loops + ","
      "plan-approximate-tanh,arith-expand{include-bf16=true},convert-math-to-llvm,convert-math-to-libm,expand-strided-metadata,lower-affine,convert-scf-to-cf,"
      "convert-cf-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,finalize-memref-to-llvm{use-generic-functions=1},"
      "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts,plan-emit-main";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("planc: the CPU lowering pipeline does not parse");
}

void registerTarget(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, memref::MemRefDialect, bufferization::BufferizationDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect, affine::AffineDialect>();
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
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(), options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
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

LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath,
                   std::string &error, bool retrieval, ArrayRef<std::string> extraLibraries) {
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver ('cc') on PATH to link with";
    return failure();
  }
  std::string rt = runtimeDir(plancPath), rpath = "-Wl,-rpath," + rt;
  SmallVector<std::string> flags;
  for (const std::string &lib : extraLibraries)
    flags.push_back("-l" + lib);
  SmallVector<StringRef> args{*cc, object, "-o", exe, "-L", rt, rpath};
  args.append(flags.begin(), flags.end());
  args.append({"-lplanrt", "-lopenblas", "-lm"});
  if (retrieval)
    args.push_back("-lplanrt_retrieval");
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    error = "linking " + exe + " failed" + (message.empty() ? "" : ": " + message);
    return failure();
  }
  return success();
}

} // namespace plan::cpu
