// `plan-memory-plan`: the executable's buffers in one arena at offsets fixed at compile time.
#include "plan/Target/CUDA/Passes.h"

#include "plan/Dialect/Sched/IR/Sched.h"
#include "plan/Target/RuntimeABI.h"
#include "plan/Training/Manifest.h"
#include "planrt_manifest.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include "llvm/Support/JSON.h"
#include <map>
#include <optional>

namespace plan {
#define GEN_PASS_DEF_PLANMEMORYPLAN
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
namespace key = planrt::manifest::key;
using namespace plan;

namespace {

struct PlanMemoryPlan : plan::impl::PlanMemoryPlanBase<PlanMemoryPlan> {
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
    auto manifest = m.lookupSymbol<sched::ManifestOp>("planc_manifest");
    if (!manifest) {
      for (FunctionPlan &p : plans)
        rewrite(p, [&](OpBuilder &b, Location loc) {
          return memref::AllocOp::create(b, loc, MemRefType::get({p.arena}, b.getI8Type()),
                                         b.getI64IntegerAttr(kAlign));
        });
      return;
    }
    FailureOr<llvm::json::Value> root = manifestJson(manifest);
    if (failed(root))
      return signalPassFailure();
    llvm::json::Object *schedule = root->getAsObject() ? root->getAsObject()->getObject(key::schedule) : nullptr;
    llvm::json::Array *table = schedule ? schedule->getArray(key::buffers) : nullptr;
    if (!table) {
      manifest.emitOpError() << "plan-memory-plan needs the step program's buffers (schedule.buffers, "
                                "written by plan-schedule)";
      return signalPassFailure();
    }
    int64_t state = 0;
    SmallVector<int64_t> stageState;
    const llvm::json::Object *offload = root->getAsObject()->getObject(key::offload);
    bool momentsOffloaded = offload && offload->getObject(key::optimizer);
    if (failed(placeState(manifest, *table, momentsOffloaded, state, stageState)))
      return signalPassFailure();
    // The step region: as large as the largest step function's arena; under a pipeline
    // a rank calls its stages' functions (named _s<k>; under the interleaved schedule
    // rank r of p holds stages r, r + p, …) only.
    int64_t step = 0;
    llvm::json::Object arenas;
    SmallVector<int64_t> stageStep(stageState.size(), 0);
    for (FunctionPlan &p : plans) {
      step = std::max(step, p.arena);
      arenas[p.f.getName()] = p.arena;
      auto [entry, suffix] = p.f.getName().rsplit("_s");
      unsigned k;
      bool staged = !stageStep.empty() && !suffix.empty() && !suffix.getAsInteger(10, k) &&
                    llvm::is_contained({"planc_fwd", "planc_bwd", "planc_wgrad", "planc_update", "planc_update_chunk_g0",
                                        "planc_update_chunk_g1"},
                                       entry);
      for (auto [i, bytes] : llvm::enumerate(stageStep))
        if (!staged || i == k % stageStep.size())
          bytes = std::max(bytes, p.arena);
    }
    if (!plans.empty()) {
      OpBuilder b(m.getBodyRegion());
      b.setInsertionPointToStart(m.getBody());
      auto region = MemRefType::get({step}, b.getI8Type());
      // planrt_step_arena's void * result as the step region's memref: the bare-pointer
      // calling convention passes it as that pointer.
      auto decl = func::FuncOp::create(b, m.getLoc(), rt::name(rt::Fn::planrt_step_arena),
                                       b.getFunctionType({b.getI64Type()}, {region}));
      decl.setPrivate();
      for (FunctionPlan &p : plans)
        rewrite(
            p,
            [&](OpBuilder &b, Location loc) -> Value {
              Value bytes = arith::ConstantIntOp::create(b, loc, p.arena, 64);
              return func::CallOp::create(b, loc, decl, ValueRange{bytes}).getResult(0);
            },
            /*own=*/false);
    }
    llvm::json::Object memory{
        {key::alignment, kAlign}, {key::state_bytes, state}, {key::step_bytes, step}, {key::arenas, std::move(arenas)}};
    if (!stageState.empty()) {
      memory[key::stage_state_bytes] = llvm::json::Array(stageState);
      memory[key::stage_step_bytes] = llvm::json::Array(stageStep);
    }
    (*root->getAsObject())[key::memory] = std::move(memory);
    setManifestJson(manifest, *root);
  }

  /// Whether schedule buffer `name` is Adam's moments (exp_avg, exp_avg_sq; a pipeline
  /// stage's with its _s<k> suffix).
  static bool isMoment(StringRef name) {
    auto [base, suffix] = name.rsplit("_s");
    unsigned k;
    if (!suffix.empty() && !suffix.getAsInteger(10, k))
      name = base;
    return name == "exp_avg" || name == "exp_avg_sq";
  }

  /// The state part: each buffer of the step program's table gets its `offset`, the
  /// buffers of every rank (no "stage") first, then each pipeline rank's (its "stage":
  /// the coordinate on the pipeline axis whose ranks hold it) from the same base, since a
  /// rank holds its own only. `state` is the largest rank's bytes, `stageState` each
  /// pipeline rank's (none without a pipeline). Offloaded moments (`offload { optimizer =
  /// nvme(…) }`) get none: they live in files, held only while a checkpoint reads them.
  LogicalResult placeState(sched::ManifestOp manifest, llvm::json::Array &table, bool momentsOffloaded, int64_t &state,
                           SmallVector<int64_t> &stageState) {
    int64_t common = 0;
    std::map<int64_t, int64_t> stageEnd;
    for (bool staged : {false, true})
      for (llvm::json::Value &v : table) {
        llvm::json::Object *b = v.getAsObject();
        std::optional<int64_t> floats = b ? b->getInteger(key::floats) : std::nullopt;
        if (!floats || *floats < 0)
          return manifest.emitOpError() << "plan-memory-plan: a schedule buffer without its floats";
        std::optional<int64_t> stage = b->getInteger(key::stage);
        std::optional<StringRef> name = b->getString(key::name);
        if (stage.has_value() != staged || (momentsOffloaded && name && isMoment(*name)))
          continue;
        int64_t &at = stage ? stageEnd.try_emplace(*stage, common).first->second : common;
        (*b)[key::offset] = at;
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

} // namespace
