// `plan-emit-main`: the executable's main, which hands the entry points to the runtime's driver.
#include "plan/Target/CPU/Passes.h"

#include "plan/Target/RuntimeABI.h"
#include "planrt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace plan {
#define GEN_PASS_DEF_PLANEMITMAIN
#include "plan/Target/CPU/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanEmitMain : plan::impl::PlanEmitMainBase<PlanEmitMain> {
  using PlanEmitMainBase::PlanEmitMainBase;

  /// On the CUDA backend: `if ((rc = planrt_cuda_start(argc, argv)) != 0) return rc;`
  /// at the start of main (cuda-host: planrt_emu_start, the emulated device); the
  /// builder is left in the block that goes on.
  void startDevice(OpBuilder &b, ModuleOp m, LLVM::LLVMFuncOp main) {
    if (backend == "cpu")
      return;
    rt::Fn start = backend == "cuda" ? rt::Fn::planrt_cuda_start : rt::Fn::planrt_emu_start;
    Location loc = main.getLoc();
    auto i32 = b.getI32Type();
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(m.getBody());
      if (!m.lookupSymbol(rt::name(start)))
        LLVM::LLVMFuncOp::create(b, loc, rt::name(start), rt::llvmFuncType(&getContext(), start));
    }
    Block *entry = b.getInsertionBlock();
    Block *failed = main.addBlock(), *started = main.addBlock();
    auto rc = rt::callLLVMFunc(b, loc, m, start,
                               ValueRange{entry->getArgument(0), entry->getArgument(1)});
    Value zero = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0));
    Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, rc.getResult(), zero);
    LLVM::CondBrOp::create(b, loc, bad, failed, started);
    b.setInsertionPointToStart(failed);
    LLVM::ReturnOp::create(b, loc, rc.getResult());
    b.setInsertionPointToStart(started);
  }

  void runOnOperation() override {
    if (backend != "cpu" && backend != "cuda" && backend != "cuda-host") {
      getOperation().emitError() << "plan-emit-main: unknown backend '" << backend << "' (cpu, cuda or cuda-host)";
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
    static const char *entries[] = {"planc_manifest", "planc_grad", "planc_sumsq",  "planc_update",
                                    "planc_eval",     "planc_step", "planc_gather", "planc_release"};
    // A pipeline-parallel executable has per-stage entry points instead of the four
    // whole-model ones: planc_stages lists (forward, backward, update, an offloaded
    // optimizer's chunk updates of groups 0 and 1, and the zero-bubble weight pass, each
    // or null) of each stage: PLANRT_STAGE_ENTRIES (planrt.h).
    int64_t stages = 0;
    while (m.lookupSymbol("planc_fwd_s" + std::to_string(stages)))
      ++stages;
    auto perModel = [&](StringRef sym) {
      return stages > 0 &&
             (sym == "planc_grad" || sym == "planc_sumsq" || sym == "planc_update" || sym == "planc_eval");
    };
    for (const char *sym : entries)
      if (!perModel(sym) && !m.lookupSymbol(sym)) {
        m.emitError() << "plan-emit-main: the executable's entry point '" << sym
                      << "' is missing (plan-train-abi and plan-schedule make them)";
        return signalPassFailure();
      }
    if (stages > 0) {
      auto table = LLVM::LLVMArrayType::get(ptr, uint64_t(PLANRT_STAGE_ENTRIES * stages));
      auto g = LLVM::GlobalOp::create(b, loc, table, /*isConstant=*/true, LLVM::Linkage::Internal, "planc_stages",
                                      Attribute());
      OpBuilder::InsertionGuard guard(b);
      b.createBlock(&g.getInitializerRegion());
      Value v = LLVM::UndefOp::create(b, loc, table);
      int64_t i = 0;
      // The update and the offloaded optimizer's chunk updates are a pipeline rank's, under
      // the entries of its first stage: rank r's under stage r, so the updates are those of
      // the first stages, one a rank (the interleaved schedule's later stages have none).
      // The weight pass is the zero-bubble schedule's.
      int64_t ranks = 0;
      while (ranks < stages && m.lookupSymbol("planc_update_s" + std::to_string(ranks)))
        ++ranks;
      for (int64_t k = 0; k < stages; ++k) {
        for (const char *kind : {"planc_fwd_s", "planc_bwd_s", "planc_update_s", "planc_update_chunk_g0_s",
                                 "planc_update_chunk_g1_s", "planc_wgrad_s"}) {
          std::string sym = kind + std::to_string(k);
          bool update = StringRef(kind) == "planc_update_s";
          bool required = StringRef(kind) == "planc_fwd_s" || StringRef(kind) == "planc_bwd_s" || (update && k == 0);
          if (update && k >= ranks && m.lookupSymbol(sym)) {
            m.emitError() << "plan-emit-main: '" << sym << "' follows a stage without an update: the updates are "
                          << "a pipeline rank's, under its first stage";
            return signalPassFailure();
          }
          if (required && !m.lookupSymbol(sym)) {
            m.emitError() << "plan-emit-main: the pipeline stage entry point '" << sym << "' is missing";
            return signalPassFailure();
          }
          Value fn = m.lookupSymbol(sym) ? Value(LLVM::AddressOfOp::create(b, loc, ptr, sym))
                                         : Value(LLVM::ZeroOp::create(b, loc, ptr));
          v = LLVM::InsertValueOp::create(b, loc, v, fn, i++);
        }
      }
      LLVM::ReturnOp::create(b, loc, v);
    }
    LLVM::LLVMFuncOp::create(b, loc, rt::name(rt::Fn::planrt_train_main),
                             rt::llvmFuncType(&getContext(), rt::Fn::planrt_train_main));
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    startDevice(b, m, main);
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (const char *sym : entries)
      args.push_back(perModel(sym) ? Value(LLVM::ZeroOp::create(b, loc, ptr))
                                   : Value(LLVM::AddressOfOp::create(b, loc, ptr, sym)));
    // An offloaded optimizer's chunk updates, per group; null where there are none.
    for (const char *sym : {"planc_update_chunk_g0", "planc_update_chunk_g1"})
      args.push_back(m.lookupSymbol(sym) ? Value(LLVM::AddressOfOp::create(b, loc, ptr, sym))
                                         : Value(LLVM::ZeroOp::create(b, loc, ptr)));
    args.push_back(stages > 0 ? Value(LLVM::AddressOfOp::create(b, loc, ptr, "planc_stages"))
                              : Value(LLVM::ZeroOp::create(b, loc, ptr)));
    args.push_back(LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(stages)));
    // A federated executable's round program.
    args.push_back(m.lookupSymbol("planc_round") ? Value(LLVM::AddressOfOp::create(b, loc, ptr, "planc_round"))
                                                 : Value(LLVM::ZeroOp::create(b, loc, ptr)));
    auto call = rt::callLLVMFunc(b, loc, m, rt::Fn::planrt_train_main, args);
    LLVM::ReturnOp::create(b, loc, call.getResult());
  }

  /// `planc_retrieval_models`, the planrt_retrieval_models of planrt.h: the model
  /// embedder's and re-ranker's manifests and entries, null where the graph has none.
  void emitModels(OpBuilder &b, ModuleOp m, Location loc) {
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto st = LLVM::LLVMStructType::getLiteral(&getContext(), {ptr, ptr, ptr, ptr});
    auto g = LLVM::GlobalOp::create(b, loc, st, /*isConstant=*/true, LLVM::Linkage::Internal, "planc_retrieval_models",
                                    Attribute());
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
    LLVM::LLVMFuncOp::create(b, loc, rt::name(rt::Fn::planrt_retrieval_main_manifest),
                             rt::llvmFuncType(&getContext(), rt::Fn::planrt_retrieval_main_manifest));
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (StringRef sym : {"planc_retrieval_manifest", "planc_retrieval_models"})
      args.push_back(LLVM::AddressOfOp::create(b, loc, ptr, sym));
    auto call = rt::callLLVMFunc(b, loc, m, rt::Fn::planrt_retrieval_main_manifest, args);
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
    LLVM::LLVMFuncOp::create(b, loc, rt::name(rt::Fn::planrt_generate_main),
                             rt::llvmFuncType(&getContext(), rt::Fn::planrt_generate_main));
    if (grounded) {
      emitModels(b, m, loc);
      LLVM::LLVMFuncOp::create(b, loc, rt::name(rt::Fn::planrt_retrieval_ground),
                               rt::llvmFuncType(&getContext(), rt::Fn::planrt_retrieval_ground));
    }
    auto main = LLVM::LLVMFuncOp::create(b, loc, "main", LLVM::LLVMFunctionType::get(i32, {i32, ptr}));
    Block *e = main.addEntryBlock(b);
    b.setInsertionPointToStart(e);
    auto addr = [&](StringRef sym) -> Value {
      if (!grounded && (sym == "planc_retrieval_manifest" || sym == "planc_retrieval_models" ||
                        sym == rt::name(rt::Fn::planrt_retrieval_ground)))
        return LLVM::ZeroOp::create(b, loc, ptr);
      return LLVM::AddressOfOp::create(b, loc, ptr, sym);
    };
    SmallVector<Value> args{e->getArgument(0), e->getArgument(1)};
    for (StringRef sym : {StringRef("planc_generate_manifest"), StringRef("planc_prefill"), StringRef("planc_step"),
                          StringRef("planc_retrieval_manifest"), StringRef("planc_retrieval_models"),
                          rt::name(rt::Fn::planrt_retrieval_ground)})
      args.push_back(addr(sym));
    auto call = rt::callLLVMFunc(b, loc, m, rt::Fn::planrt_generate_main, args);
    LLVM::ReturnOp::create(b, loc, call.getResult());
  }
};

} // namespace
