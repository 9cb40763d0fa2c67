// `plan-gpu-map-loops`: the host functions' loop nests and copies launched as GPU kernels.
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace plan {
#define GEN_PASS_DEF_PLANGPUMAPLOOPS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// Threads per block of a generated kernel.
constexpr int64_t kThreads = 256;
/// The gpu.module every kernel is outlined into.
constexpr const char *kKernelModule = "planc_kernels";

struct PlanGpuMapLoops : plan::impl::PlanGpuMapLoopsBase<PlanGpuMapLoops> {
  using PlanGpuMapLoopsBase::PlanGpuMapLoopsBase;

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
      if (scf::ParallelOp inner = parallelInside(loop)) {
        if (chunkSums)
          if (Accumulation acc = accumulationAround(loop, inner))
            return mapChunked(loop, inner, acc);
        return mapAround(loop, inner);
      }
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
        ok = false; // other writes (atomics, calls): not analysed
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
  void launch(OpBuilder &b, Location loc, Value total, StringRef kind, function_ref<void(OpBuilder &, Value)> body) {
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
    Value id =
        arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, l.getBlockIds().x, width), l.getThreadIds().x);
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
    if (int64_t n = coarsening(p); n > 1) {
      Value total = product(b, loc, sizes);
      Value group = arith::DivUIOp::create(b, loc, total, arith::ConstantIndexOp::create(b, loc, n));
      launch(b, loc, group, "loop", [&](OpBuilder &b, Value id) { inlineBodies(b, p, id, group, sizes, n); });
    } else {
      launch(b, loc, product(b, loc, sizes), "loop",
             [&](OpBuilder &b, Value id) { inlineBody(b, p, inductionValues(b, loc, id, sizes, p)); });
    }
    p.erase();
    return success();
  }

  /// How many iterations of p each thread runs: elementsPerThread where p's body is
  /// straight-line (no op with regions) and its trip counts constants whose product is a
  /// multiple of it, else 1.
  int64_t coarsening(scf::ParallelOp p) const {
    int64_t n = elementsPerThread, total = 1;
    if (n <= 1)
      return 1;
    for (auto [lb, ub, step] : llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
      std::optional<int64_t> trips = constantTrips(lb, ub, step);
      if (!trips)
        return 1;
      total *= *trips;
    }
    if (total <= 0 || total % n != 0)
      return 1;
    for (Operation &op : p.getBody()->without_terminator())
      if (op.getNumRegions() != 0)
        return 1;
    return n;
  }

  /// p's body cloned n times at b for thread `id` of a launch of `group` threads (p's
  /// iterations over n): copy i at p's linear iteration id + i·group (row-major over
  /// `sizes`), so that each copy's accesses are a warp's consecutive elements. First each
  /// copy's ops up to the body's first op that writes memory (its loads and what they
  /// compute), then each copy's rest: legal because p's iterations are independent
  /// (scf.parallel), so no copy reads what another writes.
  static void inlineBodies(OpBuilder &b, scf::ParallelOp p, Value id, Value group, ArrayRef<Value> sizes,
                           int64_t n) {
    Location loc = p.getLoc();
    Block *body = p.getBody();
    auto split = llvm::find_if(body->without_terminator(),
                               [](Operation &op) { return !isMemoryEffectFree(&op) && !isa<memref::LoadOp>(op); });
    SmallVector<IRMapping> maps(n);
    for (int64_t i = 0; i < n; ++i) {
      Value linear = i == 0 ? id
                            : arith::AddIOp::create(
                                  b, loc, id,
                                  arith::MulIOp::create(b, loc, group, arith::ConstantIndexOp::create(b, loc, i)));
      maps[i].map(p.getInductionVars(), inductionValues(b, loc, linear, sizes, p));
      for (Operation &op : llvm::make_range(body->begin(), split))
        b.clone(op, maps[i]);
    }
    for (int64_t i = 0; i < n; ++i)
      for (Operation &op : llvm::make_range(split, body->without_terminator().end()))
        b.clone(op, maps[i]);
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

  /// An addition into one element: `acc[c] = acc[c] + v`.
  struct Reduction {
    memref::LoadOp load;   ///< acc[c]
    arith::AddFOp add;     ///< acc[c] + v
    memref::StoreOp store; ///< acc[c] = …
    explicit operator bool() const { return bool(add); }
  };

  /// The addition `body` ends with — its last store before the terminator is a float
  /// `acc[c] = acc[c] + v`, the load of acc[c] used once — when everything else in it
  /// computes v: pure ops and loads of other buffers. Null members otherwise.
  static Reduction accumulationIn(Block *body) {
    auto store = dyn_cast_or_null<memref::StoreOp>(body->getTerminator()->getPrevNode());
    if (!store || !isa<FloatType>(store.getValueToStore().getType()))
      return {};
    auto add = store.getValueToStore().getDefiningOp<arith::AddFOp>();
    if (!add || add->getBlock() != body)
      return {};
    memref::LoadOp load;
    for (Value operand : {add.getLhs(), add.getRhs()})
      if (auto l = operand.getDefiningOp<memref::LoadOp>())
        if (l.getMemRef() == store.getMemRef() && llvm::equal(l.getIndices(), store.getIndices()))
          load = l;
    if (!load || !load->hasOneUse())
      return {};
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

  /// Serial iterations per partial sum of a chunked accumulation.
  static constexpr int64_t kChunk = 64;

  /// Serial loops (outermost first, constant bounds) around a parallel loop (constant
  /// bounds) whose body adds into an element its iteration owns: the element's indices
  /// are the parallel loop's induction variables or values from outside the nest.
  struct Accumulation {
    SmallVector<scf::ForOp> serial;
    SmallVector<int64_t> serialSizes, parallelSizes;
    memref::LoadOp load;   ///< acc[c]
    arith::AddFOp add;     ///< acc[c] + v(r, c)
    memref::StoreOp store; ///< acc[c] = …
    explicit operator bool() const { return bool(add); }
  };

  static std::optional<int64_t> constantTrips(Value lb, Value ub, Value step) {
    std::optional<int64_t> l = getConstantIntValue(lb), u = getConstantIntValue(ub), s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return std::nullopt;
    return *u > *l ? (*u - *l + *s - 1) / *s : 0;
  }

  static Accumulation accumulationAround(scf::ForOp outer, scf::ParallelOp inner) {
    Accumulation a;
    for (Operation *op = inner->getParentOp(); op != outer->getParentOp(); op = op->getParentOp()) {
      auto f = cast<scf::ForOp>(op);
      std::optional<int64_t> n = constantTrips(f.getLowerBound(), f.getUpperBound(), f.getStep());
      if (!n)
        return {};
      a.serial.insert(a.serial.begin(), f);
      a.serialSizes.insert(a.serialSizes.begin(), *n);
    }
    for (auto [lb, ub, step] : llvm::zip(inner.getLowerBound(), inner.getUpperBound(), inner.getStep())) {
      std::optional<int64_t> n = constantTrips(lb, ub, step);
      if (!n)
        return {};
      a.parallelSizes.push_back(*n);
    }
    int64_t serialTotal = 1;
    for (int64_t n : a.serialSizes)
      serialTotal *= n;
    if (serialTotal <= kChunk)
      return {}; // one chunk: nothing to gain
    Reduction r = accumulationIn(inner.getBody());
    if (!r)
      return {};
    for (Value index : r.store.getIndices())
      if (!llvm::is_contained(inner.getInductionVars(), index) &&
          !index.getParentRegion()->isProperAncestor(&outer.getRegion()))
        return {};
    a.load = r.load;
    a.add = r.add;
    a.store = r.store;
    return a;
  }

  /// The constants of the serial loops' bodies cloned at b (the parallel body uses them).
  static void cloneConstants(OpBuilder &b, Accumulation &a, IRMapping &map) {
    for (scf::ForOp f : a.serial)
      for (Operation &op : f.getBody()->without_terminator())
        if (op.hasTrait<OpTrait::ConstantLike>())
          b.clone(op, map);
  }

  static Value indexConstant(OpBuilder &b, Location loc, int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// An accumulation as two launches: P · N threads (N parallel iterations, P chunks of
  /// kChunk serial iterations in the nest's order) each summing its chunk from zero into
  /// partials[p N + j]; then N threads each adding its P partials, in order, to its element.
  LogicalResult mapChunked(scf::ForOp outer, scf::ParallelOp inner, Accumulation a) {
    OpBuilder b(outer);
    Location loc = outer.getLoc();
    Type t = a.add.getType();
    int64_t n = 1, m = 1;
    for (int64_t s : a.parallelSizes)
      n *= s;
    for (int64_t s : a.serialSizes)
      m *= s;
    int64_t chunks = (m + kChunk - 1) / kChunk;
    SmallVector<Value> parallelSizes, serialSizes;
    for (int64_t s : a.parallelSizes)
      parallelSizes.push_back(indexConstant(b, loc, s));
    for (int64_t s : a.serialSizes)
      serialSizes.push_back(indexConstant(b, loc, s));
    Value nV = indexConstant(b, loc, n), mV = indexConstant(b, loc, m), kV = indexConstant(b, loc, kChunk);
    Value chunksV = indexConstant(b, loc, chunks), zero = indexConstant(b, loc, 0), one = indexConstant(b, loc, 1);
    auto partials = memref::AllocOp::create(b, loc, MemRefType::get({chunks * n}, t));
    Value other = a.add.getLhs() == a.load.getResult() ? a.add.getRhs() : a.add.getLhs();
    launch(b, loc, indexConstant(b, loc, chunks * n), "partial", [&](OpBuilder &b, Value id) {
      Value j = arith::RemUIOp::create(b, loc, id, nV), p = arith::DivUIOp::create(b, loc, id, nV);
      IRMapping outerMap;
      cloneConstants(b, a, outerMap);
      SmallVector<Value> pivs = inductionValues(b, loc, j, parallelSizes, inner);
      Value begin = arith::MulIOp::create(b, loc, p, kV);
      Value end = arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, begin, kV), mV);
      Value init = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
      auto sum = scf::ForOp::create(
          b, loc, begin, end, one, ValueRange{init}, [&](OpBuilder &in, Location l, Value q, ValueRange s) {
            IRMapping map = outerMap;
            map.map(inner.getInductionVars(), pivs);
            for (auto [f, i] : llvm::zip(a.serial, delinearize(in, l, q, serialSizes)))
              map.map(f.getInductionVar(),
                      arith::AddIOp::create(in, l, f.getLowerBound(), arith::MulIOp::create(in, l, i, f.getStep())));
            for (Operation &op : inner.getBody()->without_terminator())
              if (&op != a.load.getOperation() && &op != a.add.getOperation() && &op != a.store.getOperation())
                in.clone(op, map);
            Value v = map.lookupOrDefault(other);
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, s[0], v, a.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, sum.getResult(0), partials, ValueRange{id});
    });
    launch(b, loc, nV, "loop", [&](OpBuilder &b, Value j) {
      IRMapping map;
      cloneConstants(b, a, map);
      map.map(inner.getInductionVars(), inductionValues(b, loc, j, parallelSizes, inner));
      SmallVector<Value> idx;
      for (Value i : a.store.getIndices())
        idx.push_back(map.lookupOrDefault(i));
      Value acc0 = memref::LoadOp::create(b, loc, a.store.getMemRef(), idx);
      auto total = scf::ForOp::create(
          b, loc, zero, chunksV, one, ValueRange{acc0}, [&](OpBuilder &in, Location l, Value p, ValueRange acc) {
            Value at = arith::AddIOp::create(in, l, arith::MulIOp::create(in, l, p, nV), j);
            Value part = memref::LoadOp::create(in, l, partials, ValueRange{at});
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, acc[0], part, a.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, total.getResult(0), a.store.getMemRef(), idx);
    });
    memref::DeallocOp::create(b, loc, partials);
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

  /// A loop that sums into one element (`acc[c] = acc[c] + v(i)`, c defined outside it)
  /// with a reassociable addition: a sum of squares, a mean.
  static Reduction reductionOf(scf::ForOp loop) {
    if (!loop->use_empty() || loop.getNumRegionIterArgs() != 0)
      return {};
    Reduction r = accumulationIn(loop.getBody());
    if (!r || !bitEnumContainsAll(r.add.getFastmath(), arith::FastMathFlags::reassoc))
      return {};
    for (Value index : r.store.getIndices())
      if (!index.getParentRegion()->isProperAncestor(&loop.getRegion()))
        return {};
    return r;
  }

  /// Threads of the first stage of a reduction, each summing a strided share of the
  /// iterations; of the second, each summing kPartials / kCombined of the first's sums;
  /// one thread then adds the second's to the element.
  static constexpr int64_t kPartials = 32768, kCombined = 128;

  /// A reduction loop as three kernels: kPartials threads each summing every
  /// kPartials-th iteration into a partial sum (from 0), kCombined threads each summing
  /// 256 of those in order, then one thread adding the kCombined sums, in order, to the
  /// element. The addition is reassociable (`fastmath<reassoc>`), so the order may change;
  /// it is the same on every run.
  void mapReduction(scf::ForOp loop, Reduction r) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Type t = r.add.getType();
    Value zero = arith::ConstantIndexOp::create(b, loc, 0), one = arith::ConstantIndexOp::create(b, loc, 1);
    Value span =
        arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, loop.getUpperBound(), loop.getLowerBound()), zero);
    Value n = arith::CeilDivSIOp::create(b, loc, span, loop.getStep());
    Value parts = arith::ConstantIndexOp::create(b, loc, kPartials);
    auto partials = memref::AllocOp::create(b, loc, MemRefType::get({kPartials}, t));
    launch(b, loc, parts, "partial", [&](OpBuilder &b, Value id) {
      Value init = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
      auto strided = scf::ForOp::create(
          b, loc, id, n, parts, ValueRange{init}, [&](OpBuilder &in, Location l, Value j, ValueRange sum) {
            IRMapping map;
            map.map(loop.getInductionVar(), arith::AddIOp::create(in, l, loop.getLowerBound(),
                                                                  arith::MulIOp::create(in, l, j, loop.getStep())));
            for (Operation &op : loop.getBody()->without_terminator())
              if (&op != r.load.getOperation() && &op != r.add.getOperation() && &op != r.store.getOperation())
                in.clone(op, map);
            Value v = map.lookupOrDefault(r.add.getLhs() == r.load.getResult() ? r.add.getRhs() : r.add.getLhs());
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, sum[0], v, r.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, strided.getResult(0), partials, ValueRange{id});
    });
    // Stage two: kCombined threads, each summing its kPartials / kCombined partial sums in order.
    auto combined = memref::AllocOp::create(b, loc, MemRefType::get({kCombined}, t));
    Value per = arith::ConstantIndexOp::create(b, loc, kPartials / kCombined);
    launch(b, loc, arith::ConstantIndexOp::create(b, loc, kCombined), "combine", [&](OpBuilder &b, Value id) {
      Value begin = arith::MulIOp::create(b, loc, id, per), end = arith::AddIOp::create(b, loc, begin, per);
      Value init = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
      auto sum = scf::ForOp::create(b, loc, begin, end, one, ValueRange{init},
                                    [&](OpBuilder &in, Location l, Value k, ValueRange acc) {
                                      Value p = memref::LoadOp::create(in, l, partials, ValueRange{k});
                                      scf::YieldOp::create(
                                          in, l, Value(arith::AddFOp::create(in, l, acc[0], p, r.add.getFastmath())));
                                    });
      memref::StoreOp::create(b, loc, sum.getResult(0), combined, ValueRange{id});
    });
    // Stage three: one thread adding the kCombined sums, in order, to the element.
    launch(b, loc, one, "serial", [&](OpBuilder &b, Value) {
      Value acc0 = memref::LoadOp::create(b, loc, r.store.getMemRef(), r.store.getIndices());
      Value count = arith::ConstantIndexOp::create(b, loc, kCombined);
      auto total = scf::ForOp::create(
          b, loc, zero, count, one, ValueRange{acc0}, [&](OpBuilder &in, Location l, Value k, ValueRange acc) {
            Value p = memref::LoadOp::create(in, l, combined, ValueRange{k});
            scf::YieldOp::create(in, l, Value(arith::AddFOp::create(in, l, acc[0], p, r.add.getFastmath())));
          });
      memref::StoreOp::create(b, loc, total.getResult(0), r.store.getMemRef(), r.store.getIndices());
    });
    memref::DeallocOp::create(b, loc, combined);
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

} // namespace
