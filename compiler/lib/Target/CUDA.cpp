// The CUDA target: loops to GPU kernels, library calls to the CUDA runtime,
// the lowering pipeline, PTX printing, linking.
//
// The step functions run on the host and launch one kernel per loop nest that
// convert-linalg-to-parallel-loops leaves (every element of the loop's parallel
// dimensions a thread, its reduction dimensions a loop in that thread), so every
// linalg op the CPU target generates runs on the device; GEMMs, attention, the
// normalisations, embeddings and the loss are calls of libplanrt_cuda. Buffers are
// CUDA managed memory (libplanrt_cuda's allocator), so the host code that remains —
// scalar loads of a loss, the runtime's collectives, the tensor-parallel kernels that
// have no device version yet — reads the same pointers; every launch and call is
// synchronous, so the host never reads a buffer a kernel is writing. The one exception
// is DDP's gradient buckets: their NCCL all-reduces run on a communication stream while
// the backward pass goes on, on ranges nothing touches until sched.wait (and only on a
// device with concurrent managed access; MPI does them elsewhere).
#include "plan/Target/CUDA.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Target/CPU.h"
#include "plan/Training/Manifest.h"
#include "planrt_cuda.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <map>
#include <optional>

using namespace mlir;

namespace plan::cuda {

static std::string toolkitDir();

namespace {

/// Threads per block of a generated kernel.
constexpr int64_t kThreads = 256;
/// The gpu.module every kernel is outlined into.
constexpr const char *kKernelModule = "planc_kernels";

/// `plan-gemm-precision`: marks each GEMM (nn.matmul, nn.matmul_wgrad) with the
/// precision its cuBLASLt call may compute in (kGemmPrecisionAttr). A mixed-precision
/// program rounds every activation, parameter and gradient with nn.round (the CPU's
/// emulation of bf16 and fp16), so a GEMM whose two operands are both results of
/// nn.round to bf16 (fp16) computes on tensor cores with nothing lost converting
/// them; the program's other GEMMs (an operand that a collective, a pipeline receive
/// or a sum produced) get TF32. A program without nn.round (fp32) is left as it is.
struct PlanGemmPrecision : PassWrapper<PlanGemmPrecision, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanGemmPrecision)
  StringRef getArgument() const override { return "plan-gemm-precision"; }
  StringRef getDescription() const override {
    return "Mark each GEMM with the precision its operands are exact in (bf16, fp16), or TF32 under mixed "
           "precision";
  }
  void runOnOperation() override {
    ModuleOp m = getOperation();
    bool mixed = false;
    m.walk([&](nn::RoundOp) { mixed = true; });
    if (!mixed)
      return;
    auto exactIn = [](Value v) -> Type {
      auto round = v.getDefiningOp<nn::RoundOp>();
      return round ? round.getTo() : Type();
    };
    MLIRContext *ctx = &getContext();
    m.walk([&](Operation *op) {
      if (!isa<nn::MatmulOp, nn::MatmulWGradOp>(op))
        return;
      Type a = exactIn(op->getOperand(0)), b = exactIn(op->getOperand(1));
      StringRef precision = "tf32";
      if (a && a == b && a.isBF16())
        precision = "bf16";
      else if (a && a == b && a.isF16())
        precision = "f16";
      op->setAttr(kGemmPrecisionAttr, StringAttr::get(ctx, precision));
    });
  }
};

/// The runtime kernels libplanrt_cuda implements on the device, by their CPU names
/// (planrt_kernels.h); each becomes planrt_cuda_<name without planrt_k_>. cblas_sgemm
/// becomes planrt_cuda_gemm (cuBLASLt): the same arguments and the precision its call
/// carries (kGemmPrecisionAttr) as planrt_gemm_compute.
constexpr const char *kDeviceKernels[] = {
    "planrt_k_layernorm", "planrt_k_layernorm_bwd", "planrt_k_rmsnorm",      "planrt_k_rmsnorm_bwd",
    "planrt_k_sdpa",      "planrt_k_sdpa_bwd",      "planrt_k_embedding",    "planrt_k_embedding_bwd",
    "planrt_k_cross_entropy", "planrt_k_cross_entropy_bwd"};

/// `plan-cuda-library-calls`: library calls to the CUDA runtime's versions. The
/// tensor-parallel kernels (collectives, sequence and vocabulary slices) stay the
/// host's: they act on managed memory, between synchronous launches.
struct PlanCudaLibraryCalls : PassWrapper<PlanCudaLibraryCalls, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanCudaLibraryCalls)
  StringRef getArgument() const override { return "plan-cuda-library-calls"; }
  StringRef getDescription() const override {
    return "Call the CUDA runtime's GEMM (cuBLASLt) and fused kernels instead of BLAS and the CPU kernels";
  }
  void getDependentDialects(DialectRegistry &registry) const override { registry.insert<arith::ArithDialect>(); }
  static std::string deviceName(StringRef callee) {
    for (const char *k : kDeviceKernels)
      if (callee == k)
        return "planrt_cuda_" + callee.drop_front(strlen("planrt_k_")).str();
    return "";
  }
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SymbolTable symbols(m);
    if (failed(gemmCalls(m, symbols)))
      return signalPassFailure();
    for (func::FuncOp f : llvm::make_early_inc_range(m.getOps<func::FuncOp>())) {
      if (!f.isDeclaration())
        continue;
      std::string to = deviceName(f.getSymName());
      if (to.empty())
        continue;
      if (symbols.lookup(to)) {
        f.emitOpError() << "'" << to << "' is already declared";
        return signalPassFailure();
      }
      if (failed(symbols.replaceAllSymbolUses(f.getSymNameAttr(), StringAttr::get(&getContext(), to), m)))
        return signalPassFailure();
      symbols.setSymbolName(f, to);
    }
    // A device kernel's operand must be device-visible memory; a constant global of the
    // executable is not (the cross-entropy backward's seed is read by the host).
    WalkResult r = m.walk([&](func::CallOp call) {
      if (!call.getCallee().starts_with("planrt_cuda_"))
        return WalkResult::advance();
      for (auto [i, arg] : llvm::enumerate(call.getOperands())) {
        if (call.getCallee() == "planrt_cuda_cross_entropy_bwd" && i == 0)
          continue;
        if (memref::GetGlobalOp g = globalBehind(arg)) {
          call.emitOpError() << "operand " << i << " of '" << call.getCallee() << "' is the constant global @"
                             << g.getName() << ", which a GPU kernel cannot read: not implemented by the CUDA target";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }

  /// Each call of cblas_sgemm becomes one of planrt_cuda_gemm with one more operand,
  /// the planrt_gemm_compute of the call's precision.
  static LogicalResult gemmCalls(ModuleOp m, SymbolTable &symbols) {
    auto sgemm = symbols.lookup<func::FuncOp>("cblas_sgemm");
    if (!sgemm)
      return success();
    constexpr StringLiteral kGemm = "planrt_cuda_gemm";
    if (symbols.lookup(kGemm))
      return sgemm.emitOpError() << "'" << kGemm << "' is already declared";
    OpBuilder b(sgemm);
    SmallVector<Type> inputs(sgemm.getFunctionType().getInputs());
    inputs.push_back(b.getI32Type());
    auto gemm = func::FuncOp::create(b, sgemm.getLoc(), kGemm, b.getFunctionType(inputs, {}));
    gemm.setPrivate();
    symbols.insert(gemm);
    SmallVector<func::CallOp> calls;
    m.walk([&](func::CallOp call) {
      if (call.getCallee() == "cblas_sgemm")
        calls.push_back(call);
    });
    for (func::CallOp call : calls) {
      int32_t compute = PLANRT_GEMM_F32;
      if (auto precision = call->getAttrOfType<StringAttr>(kGemmPrecisionAttr)) {
        std::optional<int32_t> c = llvm::StringSwitch<std::optional<int32_t>>(precision.getValue())
                                       .Case("bf16", PLANRT_GEMM_BF16)
                                       .Case("f16", PLANRT_GEMM_F16)
                                       .Case("tf32", PLANRT_GEMM_TF32)
                                       .Default(std::nullopt);
        if (!c)
          return call.emitOpError() << "has GEMM precision '" << precision.getValue()
                                    << "', which the CUDA target does not implement (bf16, f16 or tf32)";
        compute = *c;
      }
      b.setInsertionPoint(call);
      SmallVector<Value> args(call.getOperands());
      args.push_back(arith::ConstantOp::create(b, call.getLoc(), b.getI32IntegerAttr(compute)));
      func::CallOp::create(b, call.getLoc(), gemm, args);
      call.erase();
    }
    symbols.erase(sgemm);
    return success();
  }

  /// The memref.get_global whose buffer a library call's pointer operand points into
  /// (through the address arithmetic of LibraryCalls.cpp and views), or null.
  static memref::GetGlobalOp globalBehind(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (auto g = dyn_cast<memref::GetGlobalOp>(def))
        return g;
      if (isa<LLVM::IntToPtrOp, arith::IndexCastOp, memref::ExtractAlignedPointerAsIndexOp>(def))
        v = def->getOperand(0);
      else if (auto add = dyn_cast<arith::AddIOp>(def))
        v = add.getLhs();
      else if (auto view = dyn_cast<ViewLikeOpInterface>(def))
        v = view.getViewSource();
      else
        return nullptr;
    }
    return nullptr;
  }
};

/// `plan-gpu-map-loops`: every outermost scf.parallel, memref.copy and serial loop
/// nest of a host function becomes a gpu.launch.
struct PlanGpuMapLoops : PassWrapper<PlanGpuMapLoops, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanGpuMapLoops)
  StringRef getArgument() const override { return "plan-gpu-map-loops"; }
  StringRef getDescription() const override {
    return "Launch every outermost parallel loop (one thread per iteration), memref copy (one thread per "
           "element) and serial loop nest (one thread) of the host functions as a GPU kernel";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, scf::SCFDialect, arith::ArithDialect, memref::MemRefDialect>();
  }

  void runOnOperation() override {
    for (func::FuncOp f : getOperation().getOps<func::FuncOp>()) {
      if (f.isDeclaration())
        continue;
      fn = f.getSymName().str();
      counter = 0;
      if (failed(mapRegion(f.getBody())))
        return signalPassFailure();
    }
  }

private:
  std::string fn;
  int64_t counter = 0;

  LogicalResult mapRegion(Region &region) {
    for (Block &block : region)
      for (Operation &op : llvm::make_early_inc_range(block))
        if (failed(mapOp(&op)))
          return failure();
    return success();
  }

  LogicalResult mapOp(Operation *op) {
    if (isa<gpu::LaunchOp>(op))
      return success();
    if (auto p = dyn_cast<scf::ParallelOp>(op))
      return mapParallel(p);
    if (auto c = dyn_cast<memref::CopyOp>(op))
      return mapCopy(c);
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (scf::ParallelOp inner = parallelInside(loop))
        return mapAround(loop, inner);
      if (Reduction r = reductionOf(loop)) {
        mapReduction(loop, r);
        return success();
      }
      if (deviceOnly(loop)) {
        mapSerial(loop);
        return success();
      }
    }
    for (Region &r : op->getRegions())
      if (failed(mapRegion(r)))
        return failure();
    return success();
  }

  /// The scf.parallel that is all a perfect nest of serial loops holds (besides
  /// constants), or null. convert-linalg-to-parallel-loops gives such nests for a
  /// reduction whose reduced dimension comes first (a bias gradient: for each row, for
  /// all columns in parallel, out[c] += x[r, c]). When each parallel iteration owns
  /// what it writes (ownsWrites) the serial loops can run inside each of its threads.
  static scf::ParallelOp parallelInside(scf::ForOp outer) {
    scf::ParallelOp found;
    scf::ForOp loop = outer;
    while (!found) {
      if (!loop->use_empty() || loop.getNumRegionIterArgs() != 0)
        return nullptr;
      Operation *only = nullptr;
      for (Operation &op : loop.getBody()->without_terminator()) {
        if (op.hasTrait<OpTrait::ConstantLike>())
          continue;
        if (only)
          return nullptr;
        only = &op;
      }
      if (auto p = dyn_cast_or_null<scf::ParallelOp>(only))
        found = p;
      else if (auto f = dyn_cast_or_null<scf::ForOp>(only))
        loop = f;
      else
        return nullptr;
    }
    // The launch's size is computed before the serial loops: the parallel loop's
    // bounds must be defined outside them.
    for (Value v : llvm::concat<Value>(found.getLowerBound(), found.getUpperBound(), found.getStep())) {
      Operation *owner = v.getParentRegion()->getParentOp();
      if (owner == outer.getOperation() || outer->isProperAncestor(owner))
        return nullptr;
    }
    return found.getNumResults() == 0 && ownsWrites(found) ? found : nullptr;
  }

  /// Whether every store in p's body indexes with all of p's induction variables, and
  /// every load of a stored memref uses the same indices as its stores: no iteration
  /// reads or writes an element another iteration writes.
  static bool ownsWrites(scf::ParallelOp p) {
    DenseMap<Value, SmallVector<Value>> stored;
    bool ok = true;
    p.getBody()->walk([&](memref::StoreOp st) {
      for (Value iv : p.getInductionVars())
        if (!llvm::is_contained(st.getIndices(), iv))
          ok = false;
      auto [it, fresh] = stored.try_emplace(st.getMemRef(), st.getIndices().begin(), st.getIndices().end());
      if (!fresh && !llvm::equal(it->second, st.getIndices()))
        ok = false;
    });
    p.getBody()->walk([&](memref::LoadOp ld) {
      auto it = stored.find(ld.getMemRef());
      if (it != stored.end() && !llvm::equal(it->second, ld.getIndices()))
        ok = false;
    });
    p.getBody()->walk([&](Operation *op) {
      if (isa<memref::StoreOp, memref::LoadOp>(op))
        return;
      if (op->getNumRegions() == 0 && !isMemoryEffectFree(op))
        ok = false;  // other writes (atomics, calls): not analysed
    });
    return ok && !stored.empty();
  }

  /// A loop nest a single GPU thread can run: it stores to memory, calls nothing,
  /// allocates nothing and has no parallel loop inside (which gets its own kernel).
  static bool deviceOnly(scf::ForOp loop) {
    if (!loop->use_empty())
      return false;
    bool stores = false;
    WalkResult r = loop->walk([&](Operation *op) {
      if (isa<memref::StoreOp>(op))
        stores = true;
      if (isa<scf::ParallelOp, memref::AllocOp, memref::AllocaOp, memref::DeallocOp, memref::CopyOp,
              memref::ExtractAlignedPointerAsIndexOp, gpu::LaunchOp>(op) ||
          isa<func::FuncDialect, LLVM::LLVMDialect>(op->getDialect()))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return stores && !r.wasInterrupted();
  }

  /// gpu.launch of ⌈total / 256⌉ blocks of 256 threads named `<function>_<kind><n>`;
  /// `body` fills the part that runs when the thread's linear id is below `total`.
  void launch(OpBuilder &b, Location loc, Value total, StringRef kind,
              function_ref<void(OpBuilder &, Value)> body) {
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value threads = arith::ConstantIndexOp::create(b, loc, kThreads);
    Value blocks = arith::CeilDivSIOp::create(b, loc, total, threads);
    std::string name = fn + "_" + kind.str() + std::to_string(counter++);
    auto l = gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one, Value(), Type(), ValueRange(),
                                   TypeRange(), TypeRange(), Value(), Value(), Value(),
                                   FlatSymbolRefAttr::get(b.getContext(), kKernelModule),
                                   FlatSymbolRefAttr::get(b.getContext(), name));
    OpBuilder::InsertionGuard guard(b);
    Block &entry = l.getBody().front();
    b.setInsertionPointToStart(&entry);
    Value width = arith::ConstantIndexOp::create(b, loc, kThreads);
    Value id = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, l.getBlockIds().x, width),
                                     l.getThreadIds().x);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id, total);
    auto guardIf = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
    b.setInsertionPointToStart(&guardIf.getThenRegion().front());
    body(b, id);
    b.setInsertionPointToEnd(&entry);
    gpu::TerminatorOp::create(b, loc);
    sinkGlobals(l);
  }

  /// Every memref.get_global defined outside `l` and used inside gets a copy at the
  /// start of the kernel: gpu-kernel-outlining then copies the global into the GPU
  /// module, where the host's address would be a fault.
  static void sinkGlobals(gpu::LaunchOp l) {
    DenseMap<Operation *, Value> copies;
    OpBuilder b(&l.getBody().front(), l.getBody().front().begin());
    l.getBody().walk([&](Operation *op) {
      for (OpOperand &use : op->getOpOperands()) {
        auto g = use.get().getDefiningOp<memref::GetGlobalOp>();
        if (!g || l->isAncestor(g))
          continue;
        Value &copy = copies[g];
        if (!copy)
          copy = b.clone(*g)->getResult(0);
        use.set(copy);
      }
    });
  }

  /// The indices of linear id `id` in a row-major iteration space of `sizes`.
  static SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value id, ArrayRef<Value> sizes) {
    SmallVector<Value> idx(sizes.size());
    Value rest = id;
    for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
      if (i == 0) {
        idx[i] = rest;
        break;
      }
      idx[i] = arith::RemUIOp::create(b, loc, rest, sizes[i]);
      rest = arith::DivUIOp::create(b, loc, rest, sizes[i]);
    }
    return idx;
  }

  /// The values of p's induction variables at thread `id` of a launch over `sizes`.
  static SmallVector<Value> inductionValues(OpBuilder &b, Location loc, Value id, ArrayRef<Value> sizes,
                                            scf::ParallelOp p) {
    SmallVector<Value> ivs;
    for (auto [i, lb, step] : llvm::zip(delinearize(b, loc, id, sizes), p.getLowerBound(), p.getStep()))
      ivs.push_back(arith::AddIOp::create(b, loc, lb, arith::MulIOp::create(b, loc, i, step)));
    return ivs;
  }

  /// p's body cloned at b with its induction variables at `ivs`.
  static void inlineBody(OpBuilder &b, scf::ParallelOp p, ValueRange ivs) {
    IRMapping map;
    map.map(p.getInductionVars(), ivs);
    for (Operation &op : p.getBody()->without_terminator())
      b.clone(op, map);
  }

  static Value product(OpBuilder &b, Location loc, ArrayRef<Value> sizes) {
    Value total = arith::ConstantIndexOp::create(b, loc, 1);
    for (Value s : sizes)
      total = arith::MulIOp::create(b, loc, total, s);
    return total;
  }

  LogicalResult mapParallel(scf::ParallelOp p) {
    if (p.getNumResults() != 0)
      return p.emitOpError() << "with reductions: plan-gpu-map-loops launches parallel loops without results "
                                "(convert-linalg-to-parallel-loops keeps reductions as scf.for)";
    OpBuilder b(p);
    Location loc = p.getLoc();
    SmallVector<Value> sizes = tripCounts(b, loc, p);
    launch(b, loc, product(b, loc, sizes), "loop",
           [&](OpBuilder &b, Value id) { inlineBody(b, p, inductionValues(b, loc, id, sizes, p)); });
    p.erase();
    return success();
  }

  /// The trip counts of a parallel loop, max(0, ⌈(ub − lb) / step⌉) each, built at b.
  static SmallVector<Value> tripCounts(OpBuilder &b, Location loc, scf::ParallelOp p) {
    SmallVector<Value> sizes;
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    for (auto [lb, ub, step] : llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
      Value span = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, ub, lb), zero);
      sizes.push_back(arith::CeilDivSIOp::create(b, loc, span, step));
    }
    return sizes;
  }

  /// `outer` (serial loops around `inner`, a parallel loop) as one kernel: a thread
  /// per parallel iteration, which runs the serial loops around its iteration.
  LogicalResult mapAround(scf::ForOp outer, scf::ParallelOp inner) {
    OpBuilder b(outer);
    Location loc = outer.getLoc();
    SmallVector<Value> sizes = tripCounts(b, loc, inner);
    launch(b, loc, product(b, loc, sizes), "loop", [&](OpBuilder &b, Value id) {
      SmallVector<Value> ivs = inductionValues(b, loc, id, sizes, inner);
      // The serial nest cloned with the parallel loop replaced by its body at `ivs`.
      scf::ParallelOp clone;
      b.clone(*outer)->walk([&](scf::ParallelOp p) { clone = p; });
      OpBuilder in(clone);
      inlineBody(in, clone, ivs);
      clone.erase();
    });
    outer.erase();
    return success();
  }

  LogicalResult mapCopy(memref::CopyOp c) {
    OpBuilder b(c);
    Location loc = c.getLoc();
    auto type = cast<MemRefType>(c.getSource().getType());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      sizes.push_back(memref::DimOp::create(b, loc, c.getSource(), i));
    launch(b, loc, product(b, loc, sizes), "copy", [&](OpBuilder &b, Value id) {
      SmallVector<Value> idx = delinearize(b, loc, id, sizes);
      Value v = memref::LoadOp::create(b, loc, c.getSource(), idx);
      memref::StoreOp::create(b, loc, v, c.getTarget(), idx);
    });
    c.erase();
    return success();
  }

  /// A loop that sums into one element: `acc[c] = acc[c] + v(i)` with a reassociable
  /// addition, `v` pure but for loads from other buffers (a sum of squares, a mean).
  struct Reduction {
    memref::LoadOp load;    ///< acc[c]
    arith::AddFOp add;      ///< acc[c] + v(i)
    memref::StoreOp store;  ///< acc[c] = …
    explicit operator bool() const { return bool(add); }
  };

  static Reduction reductionOf(scf::ForOp loop) {
    if (!loop->use_empty() || loop.getNumRegionIterArgs() != 0)
      return {};
    Block *body = loop.getBody();
    auto store = dyn_cast<memref::StoreOp>(body->getTerminator()->getPrevNode());
    if (!store || !isa<FloatType>(store.getValueToStore().getType()))
      return {};
    auto add = store.getValueToStore().getDefiningOp<arith::AddFOp>();
    if (!add || add->getBlock() != body || !bitEnumContainsAll(add.getFastmath(), arith::FastMathFlags::reassoc))
      return {};
    memref::LoadOp load;
    for (Value operand : {add.getLhs(), add.getRhs()})
      if (auto l = operand.getDefiningOp<memref::LoadOp>())
        if (l.getMemRef() == store.getMemRef() && llvm::equal(l.getIndices(), store.getIndices()))
          load = l;
    if (!load || !load->hasOneUse())
      return {};
    for (Value index : store.getIndices())
      if (!index.getParentRegion()->isProperAncestor(&loop.getRegion()))
        return {};
    // Everything else computes v(i): pure ops and loads of other buffers.
    for (Operation &op : body->without_terminator()) {
      if (&op == load.getOperation() || &op == add.getOperation() || &op == store.getOperation())
        continue;
      if (auto l = dyn_cast<memref::LoadOp>(op)) {
        if (l.getMemRef() == store.getMemRef())
          return {};
        continue;
      }
      if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
        return {};
    }
    return {load, add, store};
  }

  /// Threads of the first stage of a reduction: each sums a strided share of the
  /// iterations; one thread then adds the partial sums to the element.
  static constexpr int64_t kPartials = 32768;

  /// A reduction loop as two kernels: kPartials threads each summing every
  /// kPartials-th iteration into a partial sum (from 0), then one thread adding the
  /// partial sums, in order, to the element. The addition is reassociable
  /// (`fastmath<reassoc>`), so the order may change.
  void mapReduction(scf::ForOp loop, Reduction r) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Type t = r.add.getType();
    Value zero = arith::ConstantIndexOp::create(b, loc, 0), one = arith::ConstantIndexOp::create(b, loc, 1);
    Value span = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, loop.getUpperBound(),
                                                                        loop.getLowerBound()), zero);
    Value n = arith::CeilDivSIOp::create(b, loc, span, loop.getStep());
    Value parts = arith::ConstantIndexOp::create(b, loc, kPartials);
    auto partials = memref::AllocOp::create(b, loc, MemRefType::get({kPartials}, t));
    launch(b, loc, parts, "partial", [&](OpBuilder &b, Value id) {
      Value init = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
      auto strided = scf::ForOp::create(
          b, loc, id, n, parts, ValueRange{init}, [&](OpBuilder &in, Location l, Value j, ValueRange sum) {
            IRMapping map;
            map.map(loop.getInductionVar(),
                    arith::AddIOp::create(in, l, loop.getLowerBound(), arith::MulIOp::create(in, l, j, loop.getStep())));
            for (Operation &op : loop.getBody()->without_terminator())
              if (&op != r.load.getOperation() && &op != r.add.getOperation() && &op != r.store.getOperation())
                in.clone(op, map);
            Value v = map.lookupOrDefault(r.add.getLhs() == r.load.getResult() ? r.add.getRhs() : r.add.getLhs());
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, sum[0], v, r.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, strided.getResult(0), partials, ValueRange{id});
    });
    launch(b, loc, one, "serial", [&](OpBuilder &b, Value) {
      Value acc0 = memref::LoadOp::create(b, loc, r.store.getMemRef(), r.store.getIndices());
      auto total = scf::ForOp::create(
          b, loc, zero, parts, one, ValueRange{acc0}, [&](OpBuilder &in, Location l, Value k, ValueRange acc) {
            Value p = memref::LoadOp::create(in, l, partials, ValueRange{k});
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, acc[0], p, r.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, total.getResult(0), r.store.getMemRef(), r.store.getIndices());
    });
    memref::DeallocOp::create(b, loc, partials);
    loop.erase();
  }

  void mapSerial(scf::ForOp loop) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    launch(b, loc, one, "serial", [&](OpBuilder &b, Value) { b.clone(*loop); });
    loop.erase();
  }
};

/// `plan-memory-plan`: the buffers a straight-line function allocates and frees itself
/// (plan-free-buffers' allocations and deallocations in its entry block) placed in one
/// arena at offsets fixed at compile time: two buffers share bytes only when one is
/// freed before the other is allocated. Each allocation becomes a memref.view of the
/// arena; the arena's size is the function's `plan.arena_bytes` attribute. Buffers that
/// outlive the function or are allocated inside loops stay as they are.
///
/// In a training executable (a module with `planc_manifest`) the whole executable's
/// memory is one arena: the step program's buffers (parameters, gradients, shards,
/// optimizer state, pipeline buffers) at fixed offsets in its state part, each
/// pipeline stage's from the same base (its ranks reserve only what their stage
/// needs: the manifest's `stage_state_bytes` and `stage_step_bytes`), and after them
/// one step region that every step function's arena is (`planrt_step_arena`: the
/// runtime calls one step function at a time). The manifest gets each buffer's `offset` and a `memory` object with the
/// sizes; the runtime reserves the arena once, before the first step. Elsewhere each
/// function allocates its arena on entry and frees it before it returns.
struct PlanMemoryPlan : PassWrapper<PlanMemoryPlan, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanMemoryPlan)
  StringRef getArgument() const override { return "plan-memory-plan"; }
  StringRef getDescription() const override {
    return "Place the executable's buffers in one arena at offsets computed at compile time";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<func::FuncDialect, memref::MemRefDialect, arith::ArithDialect>();
  }
  static constexpr int64_t kAlign = 256;
  static int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  struct Buffer {
    memref::AllocOp alloc;
    memref::DeallocOp dealloc;
    int64_t begin, end, bytes, offset = -1;
  };
  struct FunctionPlan {
    func::FuncOp f;
    SmallVector<Buffer> buffers;
    int64_t arena = 0;
  };

  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<FunctionPlan> plans;
    for (func::FuncOp f : m.getOps<func::FuncOp>())
      if (!f.isDeclaration() && f.getBody().hasOneBlock())
        if (std::optional<FunctionPlan> p = plan(f))
          plans.push_back(std::move(*p));
    auto manifest = m.lookupSymbol<LLVM::GlobalOp>("planc_manifest");
    if (!manifest) {
      for (FunctionPlan &p : plans)
        rewrite(p, [&](OpBuilder &b, Location loc) {
          return memref::AllocOp::create(b, loc, MemRefType::get({p.arena}, b.getI8Type()),
                                         b.getI64IntegerAttr(kAlign));
        });
      return;
    }
    FailureOr<llvm::json::Value> root = readJsonGlobal(manifest);
    if (failed(root))
      return signalPassFailure();
    llvm::json::Object *schedule = root->getAsObject() ? root->getAsObject()->getObject("schedule") : nullptr;
    llvm::json::Array *table = schedule ? schedule->getArray("buffers") : nullptr;
    if (!table) {
      manifest.emitOpError() << "plan-memory-plan needs the step program's buffers (schedule.buffers, "
                                "written by plan-schedule)";
      return signalPassFailure();
    }
    int64_t state = 0;
    SmallVector<int64_t> stageState;
    if (failed(placeState(manifest, *table, state, stageState)))
      return signalPassFailure();
    // The step region: as large as the largest step function's arena; under a pipeline
    // a stage's ranks call their stage's functions (named _s<k>) only.
    int64_t step = 0;
    llvm::json::Object arenas;
    SmallVector<int64_t> stageStep(stageState.size(), 0);
    for (FunctionPlan &p : plans) {
      step = std::max(step, p.arena);
      arenas[p.f.getName()] = p.arena;
      StringRef suffix = p.f.getName().rsplit("_s").second;
      unsigned k;
      bool staged = !suffix.empty() && !suffix.getAsInteger(10, k) && k < stageStep.size();
      for (auto [i, bytes] : llvm::enumerate(stageStep))
        if (!staged || i == k)
          bytes = std::max(bytes, p.arena);
    }
    if (!plans.empty()) {
      OpBuilder b(m.getBodyRegion());
      b.setInsertionPointToStart(m.getBody());
      auto region = MemRefType::get({step}, b.getI8Type());
      auto decl = func::FuncOp::create(b, m.getLoc(), "planrt_step_arena",
                                       b.getFunctionType({b.getI64Type()}, {region}));
      decl.setPrivate();
      for (FunctionPlan &p : plans)
        rewrite(p, [&](OpBuilder &b, Location loc) -> Value {
          Value bytes = arith::ConstantIntOp::create(b, loc, p.arena, 64);
          return func::CallOp::create(b, loc, decl, ValueRange{bytes}).getResult(0);
        }, /*own=*/false);
    }
    llvm::json::Object memory{
        {"alignment", kAlign}, {"state_bytes", state}, {"step_bytes", step}, {"arenas", std::move(arenas)}};
    if (!stageState.empty()) {
      memory["stage_state_bytes"] = llvm::json::Array(stageState);
      memory["stage_step_bytes"] = llvm::json::Array(stageStep);
    }
    (*root->getAsObject())["memory"] = std::move(memory);
    rewriteJsonGlobal(manifest, *root);
  }

  /// The state part: each buffer of the step program's table gets its `offset`, the
  /// buffers of every stage (no "stage") first, then each stage's from the same base,
  /// since a rank holds one stage's. `state` is the largest stage's bytes,
  /// `stageState` each stage's (none without a pipeline).
  LogicalResult placeState(LLVM::GlobalOp manifest, llvm::json::Array &table, int64_t &state,
                           SmallVector<int64_t> &stageState) {
    int64_t common = 0;
    std::map<int64_t, int64_t> stageEnd;
    for (bool staged : {false, true})
      for (llvm::json::Value &v : table) {
        llvm::json::Object *b = v.getAsObject();
        std::optional<int64_t> floats = b ? b->getInteger("floats") : std::nullopt;
        if (!floats || *floats < 0)
          return manifest.emitOpError() << "plan-memory-plan: a schedule buffer without its floats";
        std::optional<int64_t> stage = b->getInteger("stage");
        if (stage.has_value() != staged)
          continue;
        int64_t &at = stage ? stageEnd.try_emplace(*stage, common).first->second : common;
        (*b)["offset"] = at;
        at += aligned(*floats * int64_t(sizeof(float)));
      }
    state = common;
    for (auto [stage, end] : stageEnd) {
      if (stage != int64_t(stageState.size()))
        return manifest.emitOpError() << "plan-memory-plan: schedule buffers of stage " << stage
                                      << " but none of stage " << stageState.size();
      state = std::max(state, end);
      stageState.push_back(end);
    }
    return success();
  }

  /// The offsets of `f`'s own buffers, if it has any.
  std::optional<FunctionPlan> plan(func::FuncOp f) {
    Block &entry = f.getBody().front();
    if (!isa<func::ReturnOp>(entry.getTerminator()))
      return std::nullopt;
    DenseMap<Operation *, int64_t> order;
    int64_t i = 0;
    for (Operation &op : entry)
      order[&op] = i++;
    FunctionPlan p{f, {}, 0};
    for (Operation &op : entry) {
      auto alloc = dyn_cast<memref::AllocOp>(op);
      if (!alloc)
        continue;
      MemRefType t = alloc.getType();
      if (!t.hasStaticShape() || !t.getLayout().isIdentity() || t.getMemorySpace() ||
          !t.getElementType().isIntOrFloat())
        continue;
      // Exactly one deallocation, in the entry block.
      memref::DeallocOp dealloc;
      int deallocs = 0;
      for (Operation *user : alloc->getUsers())
        if (auto d = dyn_cast<memref::DeallocOp>(user)) {
          ++deallocs;
          dealloc = d;
        }
      if (deallocs != 1 || dealloc->getBlock() != &entry)
        continue;
      int64_t bytes = t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
      p.buffers.push_back({alloc, dealloc, order[alloc], order[dealloc], aligned(bytes)});
    }
    if (p.buffers.empty())
      return std::nullopt;
    // Largest first, each at the lowest offset clear of the placed buffers it is live with.
    SmallVector<Buffer *> bySize;
    for (Buffer &b : p.buffers)
      bySize.push_back(&b);
    llvm::stable_sort(bySize, [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    SmallVector<Buffer *> placed;
    for (Buffer *b : bySize) {
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (Buffer *q : placed)
        if (q->begin < b->end && b->begin < q->end)
          taken.push_back({q->offset, q->offset + q->bytes});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + b->bytes <= lo)
          break;
        offset = std::max(offset, hi);
      }
      b->offset = offset;
      p.arena = std::max(p.arena, offset + b->bytes);
      placed.push_back(b);
    }
    return p;
  }

  /// Each buffer of `p` a view of the arena `makeArena` makes on entry; an arena the
  /// function owns (`own`) is freed before it returns.
  void rewrite(FunctionPlan &p, llvm::function_ref<Value(OpBuilder &, Location)> makeArena, bool own = true) {
    Block &entry = p.f.getBody().front();
    OpBuilder builder(&entry, entry.begin());
    Location loc = p.f.getLoc();
    Value base = makeArena(builder, loc);
    for (Buffer &b : p.buffers) {
      builder.setInsertionPoint(b.alloc);
      Value offset = arith::ConstantIndexOp::create(builder, b.alloc.getLoc(), b.offset);
      Value view = memref::ViewOp::create(builder, b.alloc.getLoc(), b.alloc.getType(), base, offset, ValueRange{});
      b.alloc.replaceAllUsesWith(view);
      b.dealloc.erase();
      b.alloc.erase();
    }
    if (own) {
      builder.setInsertionPoint(entry.getTerminator());
      memref::DeallocOp::create(builder, loc, base);
    }
    p.f->setAttr("plan.arena_bytes", builder.getI64IntegerAttr(p.arena));
  }
};

/// `plan-gpu-launch-to-loops`: each gpu.launch (not outlined) becomes scf.for loops
/// over its blocks and threads on the host, the body inlined with the block and
/// thread ids bound to the loop variables (y and z to 0): the launch's semantics for
/// a kernel without barriers or shared memory, which plan-gpu-map-loops' kernels are.
struct PlanGpuLaunchToLoops : PassWrapper<PlanGpuLaunchToLoops, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanGpuLaunchToLoops)
  StringRef getArgument() const override { return "plan-gpu-launch-to-loops"; }
  StringRef getDescription() const override {
    return "Run each gpu.launch on the host: loops over its blocks and threads around its body";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<scf::SCFDialect, arith::ArithDialect>();
  }
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp l : launches) {
      Block &body = l.getBody().front();
      bool simple = l.getBody().hasOneBlock() && l.getAsyncDependencies().empty() && !l.getAsyncToken() &&
                    l.getWorkgroupAttributions().empty() && l.getPrivateAttributions().empty();
      WalkResult barriers = l.walk([](gpu::BarrierOp) { return WalkResult::interrupt(); });
      if (!simple || barriers.wasInterrupted()) {
        l.emitOpError() << "plan-gpu-launch-to-loops runs single-block launches without barriers, shared memory "
                           "or async tokens on the host";
        return signalPassFailure();
      }
      OpBuilder b(l);
      Location loc = l.getLoc();
      Value zero = arith::ConstantIndexOp::create(b, loc, 0), one = arith::ConstantIndexOp::create(b, loc, 1);
      auto blocks = scf::ForOp::create(b, loc, zero, l.getGridSizeX(), one);
      b.setInsertionPointToStart(blocks.getBody());
      auto threads = scf::ForOp::create(b, loc, zero, l.getBlockSizeX(), one);
      b.setInsertionPointToStart(threads.getBody());
      IRMapping map;
      gpu::KernelDim3 ids[] = {l.getBlockIds(), l.getThreadIds(), l.getGridSize(), l.getBlockSize()};
      Value sizes[2][3] = {{l.getGridSizeX(), l.getGridSizeY(), l.getGridSizeZ()},
                           {l.getBlockSizeX(), l.getBlockSizeY(), l.getBlockSizeZ()}};
      map.map(ids[0].x, blocks.getInductionVar());
      map.map(ids[0].y, zero);
      map.map(ids[0].z, zero);
      map.map(ids[1].x, threads.getInductionVar());
      map.map(ids[1].y, zero);
      map.map(ids[1].z, zero);
      for (int i = 0; i < 2; ++i) {
        map.map(ids[2 + i].x, sizes[i][0]);
        map.map(ids[2 + i].y, sizes[i][1]);
        map.map(ids[2 + i].z, sizes[i][2]);
      }
      for (Operation &op : body.without_terminator())
        b.clone(op, map);
      l.erase();
    }
  }
};

/// `plan-cuda-fatbin`: a gpu.binary holding one cubin per architecture (`--cuda-arch
/// sm_80,sm_90`: gpu-module-to-binary with format=bin and one target each) becomes one
/// holding a single fat binary of them all, made by the toolkit's fatbinary, which the
/// runtime loads as it loads a one-architecture binary; the driver picks the cubin of
/// the device it runs on.
struct PlanCudaFatbin : PassWrapper<PlanCudaFatbin, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanCudaFatbin)
  PlanCudaFatbin() = default;
  PlanCudaFatbin(const PlanCudaFatbin &other) : PassWrapper(other) {}
  StringRef getArgument() const override { return "plan-cuda-fatbin"; }
  StringRef getDescription() const override {
    return "Combine a gpu.binary's cubins, one per architecture, into one fat binary";
  }
  Option<std::string> toolkit{*this, "toolkit", llvm::cl::desc("the CUDA toolkit whose bin/fatbinary runs"),
                              llvm::cl::init(toolkitDir())};

  void runOnOperation() override {
    for (gpu::BinaryOp bin : getOperation().getOps<gpu::BinaryOp>())
      if (bin.getObjects().size() > 1 && failed(combine(bin)))
        return signalPassFailure();
  }

  LogicalResult combine(gpu::BinaryOp bin) {
    SmallString<128> dir;
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("planc-fatbin", dir))
      return bin.emitError() << "cannot make a temporary directory for the fat binary: " << ec.message();
    auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
    std::string tool = toolkit + "/bin/fatbinary";
    SmallString<128> out(dir);
    llvm::sys::path::append(out, "kernels.fatbin");
    SmallVector<std::string> args = {tool, "--64", "--create=" + out.str().str()};
    for (auto [i, a] : llvm::enumerate(bin.getObjects())) {
      auto object = cast<gpu::ObjectAttr>(a);
      auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
      if (!target || object.getFormat() != gpu::CompilationTarget::Binary)
        return bin.emitError() << "object " << i << " is not an NVVM cubin (" << object.getTarget()
                               << "): plan-cuda-fatbin combines the cubins of gpu-module-to-binary{format=bin}";
      StringRef chip = target.getChip();
      if (!chip.consume_front("sm_"))
        return bin.emitError() << "object " << i << " is for '" << target.getChip() << "', not an sm_NN";
      SmallString<128> file(dir);
      llvm::sys::path::append(file, "sm_" + chip + ".cubin");
      std::error_code ec;
      llvm::raw_fd_ostream os(file, ec);
      if (ec)
        return bin.emitError() << "cannot write " << file << ": " << ec.message();
      os << object.getObject().getValue();
      os.close();
      args.push_back(("--image3=kind=elf,sm=" + chip + ",file=" + file).str());
    }
    SmallVector<StringRef> argv(args.begin(), args.end());
    std::string message;
    int rc = llvm::sys::ExecuteAndWait(tool, argv, std::nullopt, {}, 0, 0, &message);
    if (rc != 0)
      return bin.emitError() << "fatbinary failed (exit " << rc << (message.empty() ? "" : ": ") << message
                             << "): " << llvm::join(argv, " ");
    auto buffer = llvm::MemoryBuffer::getFile(out);
    if (!buffer)
      return bin.emitError() << "fatbinary wrote no " << out << ": " << buffer.getError().message();
    auto first = cast<gpu::ObjectAttr>(bin.getObjects()[0]);
    auto fat = gpu::ObjectAttr::get(&getContext(), first.getTarget(), gpu::CompilationTarget::Fatbin,
                                    StringAttr::get(&getContext(), (*buffer)->getBuffer()), first.getProperties(),
                                    first.getKernels());
    bin.setObjectsAttr(ArrayAttr::get(&getContext(), {fat}));
    return success();
  }
};

} // namespace

bool available() {
#ifdef PLANC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

static void registerPipelinePasses() {
  static bool done = [] {
    registerGPUPasses();
    PassRegistration<PlanGemmPrecision>();
    PassRegistration<PlanCudaLibraryCalls>();
    PassRegistration<PlanGpuMapLoops>();
    PassRegistration<PlanGpuLaunchToLoops>();
    PassRegistration<PlanMemoryPlan>();
    PassRegistration<PlanCudaFatbin>();
    return true;
  }();
  (void)done;
}

/// The CUDA toolkit planc was built with (ptxas, fatbinary).
static std::string toolkitDir() {
#ifdef PLANC_CUDA_TOOLKIT
  return PLANC_CUDA_TOOLKIT;
#else
  return "/usr/local/cuda";
#endif
}

void buildLoweringPipeline(OpPassManager &pm, const TargetOptions &options) {
  registerPipelinePasses();
  // One target per architecture; several architectures' cubins become one fat binary.
  SmallVector<StringRef> chips;
  StringRef(options.chip).split(chips, ',');
  std::string attach;
  for (StringRef chip : chips)
    attach += ("nvvm-attach-target{chip=" + chip + " features=+ptx80 O=3},").str();
  bool fat = chips.size() > 1 && options.format == "fatbin";
  std::string binary = "format=" + (fat ? std::string("bin") : options.format) +
                       (options.format == "isa" ? "" : " toolkit=" + toolkitDir());
  std::string pipeline =
      "plan-gemm-precision,convert-sched-to-runtime,convert-nn-to-linalg,linalg-fuse-elementwise-ops,"
      "eliminate-empty-tensors,canonicalize,cse,one-shot-bufferize,cse,canonicalize,func.func(plan-free-buffers),"
      "plan-cuda-library-calls,"
      "func.func(convert-linalg-to-parallel-loops),canonicalize,plan-gpu-map-loops,plan-memory-plan,"
      "gpu-kernel-outlining," + attach +
      "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,cse,reconcile-unrealized-casts),"
      "gpu-module-to-binary{" + binary + "}," + (fat ? "plan-cuda-fatbin," : "") +
      "arith-expand{include-bf16=true},convert-math-to-llvm,convert-math-to-libm,expand-strided-metadata,lower-affine,"
      "convert-scf-to-cf,convert-cf-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
      "finalize-memref-to-llvm{use-generic-functions=1},convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
      "gpu-to-llvm{use-bare-pointers-for-host=1},reconcile-unrealized-casts,plan-emit-main{backend=cuda}";
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("planc: the CUDA lowering pipeline does not parse");
}

void buildHostEmulationPipeline(OpPassManager &pm) {
  registerPipelinePasses();
  cpu::buildLoweringPipeline(pm, "func.func(plan-free-buffers),func.func(convert-linalg-to-parallel-loops),"
                                 "canonicalize,plan-gpu-map-loops,plan-memory-plan,plan-gpu-launch-to-loops");
}

LogicalResult printPTX(ModuleOp module, llvm::raw_ostream &os, std::string &error) {
  int64_t found = 0;
  for (auto bin : module.getOps<gpu::BinaryOp>())
    for (Attribute a : bin.getObjects()) {
      auto object = dyn_cast<gpu::ObjectAttr>(a);
      if (!object || object.getFormat() != gpu::CompilationTarget::Assembly)
        continue;
      os << "// gpu.binary @" << bin.getSymName() << " for " << object.getTarget() << "\n"
         << object.getObject().getValue() << "\n";
      ++found;
    }
  if (found == 0) {
    error = "the module has no PTX (no gpu.binary lowered to assembly)";
    return failure();
  }
  return success();
}

LogicalResult link(const std::string &object, const std::string &exe, const std::string &plancPath,
                   std::string &error) {
  if (!available()) {
    error = "this planc was built without the CUDA toolkit, so it has no libplanrt_cuda to link; rebuild it "
            "where /usr/local/cuda exists (or set CUDAToolkit_ROOT), or build with --target cpu";
    return failure();
  }
  return cpu::link(object, exe, plancPath, error, /*retrieval=*/false, /*extraLibraries=*/{"planrt_cuda"});
}

void registerTarget(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, index::IndexDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  gpu::registerConvertGpuToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerNVVMDialectTranslation(registry);
  registerPipelinePasses();
}

} // namespace plan::cuda
