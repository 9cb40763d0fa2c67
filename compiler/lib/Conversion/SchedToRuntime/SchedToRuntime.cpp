// `convert-sched-to-runtime`: sched ops become calls into libplanrt's
// planrt_sched_* functions (planrt.h), loops and rank conditions become scf.
#include "plan/Conversion/Passes.h"
#include "plan/Target/RuntimeABI.h"

#include "mlir/IR/Builders.h"

namespace plan {
#define GEN_PASS_DEF_CONVERTSCHEDTORUNTIME
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

class Lowering {
public:
  Lowering(ModuleOp module, sched::MeshOp mesh) : module(module), mesh(mesh), b(module.getContext()) {
    int id = 0;
    for (auto buf : module.getOps<sched::BufferOp>())
      ids[buf.getSymName()] = id++;
  }

  LogicalResult lower(func::FuncOp fn) {
    ctx = fn.getArgument(0);
    return lowerBlock(fn.getBody().front());
  }

private:
  Value i32(Location loc, int64_t v) { return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v))); }
  Value i64(Location loc, int64_t v) { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); }
  Value buf(Location loc, FlatSymbolRefAttr name) { return i32(loc, ids.lookup(name.getValue())); }
  /// An optional buffer's id, or -1.
  Value optional(Location loc, FlatSymbolRefAttr name) { return name ? buf(loc, name) : i32(loc, -1); }

  /// A call to `fn(ctx, args…)` (planrt_abi.def), declaring the function on first use.
  Operation *call(Location loc, rt::Fn fn, ArrayRef<Value> args) {
    SmallVector<Value> all{ctx};
    all.append(args.begin(), args.end());
    return rt::callLLVMFunc(b, loc, module, fn, all);
  }

  LogicalResult mask(Operation *op, ArrayAttr axes, Value &out) {
    FailureOr<unsigned> m = mesh.maskOf(axes, op);
    if (failed(m))
      return failure();
    out = i32(op->getLoc(), int64_t(*m));
    return success();
  }

  int axisIndex(StringRef name) const { return mesh.axisIndex(name); }

  LogicalResult lowerBlock(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      Location loc = op.getLoc();
      b.setInsertionPoint(&op);
      if (isa<sched::MicroLoopOp, sched::FedLocalOp>(op)) {
        // The micro-batch loop; a round's local steps, which the runtime says how many
        // of this client runs (none when the round did not sample it).
        Value lo = arith::ConstantIndexOp::create(b, loc, 0), hi;
        if (auto loop = dyn_cast<sched::MicroLoopOp>(op))
          hi = arith::ConstantIndexOp::create(b, loc, loop.getCount());
        else
          hi = arith::IndexCastOp::create(
              b, loc, b.getIndexType(),
              call(loc, rt::Fn::planrt_sched_fed_local, {i64(loc, cast<sched::FedLocalOp>(op).getCount())})
                  ->getResult(0));
        Value one = arith::ConstantIndexOp::create(b, loc, 1);
        auto forOp = scf::ForOp::create(b, loc, lo, hi, one);
        Block &body = op.getRegion(0).front();
        Block *target = forOp.getBody();
        b.setInsertionPointToStart(target);
        Value index = arith::IndexCastOp::create(b, loc, b.getI64Type(), forOp.getInductionVar());
        body.getArgument(0).replaceAllUsesWith(index);
        target->getOperations().splice(std::prev(target->end()), body.getOperations());
        op.erase();
        if (failed(lowerBlock(*target)))
          return failure();
        continue;
      }
      if (auto on = dyn_cast<sched::OnOp>(op)) {
        int a = axisIndex(on.getAxis());
        if (a < 0)
          return on.emitOpError() << "names axis '" << on.getAxis() << "', which the mesh lacks";
        Value coord = call(loc, rt::Fn::planrt_sched_coord, {i32(loc, a)})->getResult(0);
        Value cond = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, coord, i64(loc, on.getCoord()));
        auto ifOp = scf::IfOp::create(b, loc, cond, /*withElse=*/false);
        Block *target = ifOp.thenBlock();
        target->getOperations().splice(std::prev(target->end()), on.getBody().front().getOperations());
        op.erase();
        if (failed(lowerBlock(*target)))
          return failure();
        continue;
      }
      Value m;
      bool handled = false;
      if (auto x = dyn_cast<sched::FillOp>(op)) {
        Value v = arith::ConstantOp::create(b, loc, x.getValueAttr());
        call(loc, rt::Fn::planrt_sched_fill,
             {buf(loc, x.getBufferAttr()), i64(loc, x.getOffset()), i64(loc, x.getCount()), v});
      } else if (auto x = dyn_cast<sched::AllocOp>(op)) {
        call(loc, rt::Fn::planrt_sched_alloc, {buf(loc, x.getBufferAttr()), i32(loc, x.getParts() ? 1 : 0)});
      } else if (auto x = dyn_cast<sched::FreeOp>(op)) {
        call(loc, rt::Fn::planrt_sched_free, {buf(loc, x.getBufferAttr())});
      } else if (auto x = dyn_cast<sched::GradOp>(op)) {
        // The collectives that start on its buckets are handed to the runtime first;
        // planrt_grad_ready(k), called by the entry point, starts bucket k's.
        for (Operation &user : llvm::make_range(std::next(op.getIterator()), block.end()))
          if (auto start = dyn_cast<sched::AllReduceStartOp>(user); start && start.getAfter().getDefiningOp() == &op) {
            if (failed(mask(start, start.getAxes(), m)))
              return failure();
            call(loc, rt::Fn::planrt_sched_bucket_all_reduce,
                 {i64(loc, cast<OpResult>(start.getAfter()).getResultNumber()), m, buf(loc, start.getBufferAttr()),
                  i64(loc, start.getOffset()), i64(loc, start.getCount()), i32(loc, start.getReduce() == "max")});
          } else if (auto start = dyn_cast<sched::ReduceScatterStartOp>(user);
                     start && start.getAfter().getDefiningOp() == &op) {
            if (failed(mask(start, start.getAxes(), m)))
              return failure();
            call(loc, rt::Fn::planrt_sched_bucket_reduce_scatter,
                 {i64(loc, cast<OpResult>(start.getAfter()).getResultNumber()), m, buf(loc, start.getSourceAttr()),
                  i64(loc, start.getSourceOffset()), i64(loc, start.getCount()), buf(loc, start.getDestAttr()),
                  i64(loc, start.getDestOffset()), i64(loc, start.getBegin()), i64(loc, start.getSize()),
                  i32(loc, start.getAccumulate() ? 1 : 0)});
          }
        call(loc, rt::Fn::planrt_sched_grad,
             {x.getStep(), x.getMicro(), buf(loc, x.getParamsAttr()), buf(loc, x.getGradsAttr()),
              buf(loc, x.getStateAttr())});
      } else if (auto x = dyn_cast<sched::ForwardOp>(op)) {
        call(loc, rt::Fn::planrt_sched_forward,
             {x.getStep(), x.getMicro(), i64(loc, x.getStage()), buf(loc, x.getParamsAttr()),
              optional(loc, x.getInputAttr()), i64(loc, int64_t(x.getInputOffset().value_or(0))),
              buf(loc, x.getOutputAttr()), i64(loc, x.getOutputOffset()), optional(loc, x.getSavedAttr()),
              i64(loc, int64_t(x.getSavedOffset().value_or(0)))});
      } else if (auto x = dyn_cast<sched::BackwardOp>(op)) {
        call(loc, rt::Fn::planrt_sched_backward,
             {x.getStep(), x.getMicro(), i64(loc, x.getStage()), buf(loc, x.getParamsAttr()),
              buf(loc, x.getGradsAttr()), buf(loc, x.getStateAttr()), optional(loc, x.getInputAttr()),
              i64(loc, int64_t(x.getInputOffset().value_or(0))), optional(loc, x.getCotangentAttr()),
              i64(loc, int64_t(x.getCotangentOffset().value_or(0))), optional(loc, x.getDinputAttr()),
              i64(loc, int64_t(x.getDinputOffset().value_or(0))), optional(loc, x.getSavedAttr()),
              i64(loc, int64_t(x.getSavedOffset().value_or(0))), optional(loc, x.getWsavedAttr()),
              i64(loc, int64_t(x.getWsavedOffset().value_or(0)))});
      } else if (auto x = dyn_cast<sched::WGradOp>(op)) {
        call(loc, rt::Fn::planrt_sched_wgrad,
             {x.getStep(), x.getMicro(), i64(loc, x.getStage()), buf(loc, x.getParamsAttr()),
              buf(loc, x.getGradsAttr()), buf(loc, x.getStateAttr()), buf(loc, x.getWsavedAttr()),
              i64(loc, x.getWsavedOffset())});
      } else if (auto x = dyn_cast<sched::SendRecvOp>(op)) {
        call(loc, rt::Fn::planrt_sched_send_recv,
             {i32(loc, axisIndex(x.getAxis())), i64(loc, x.getTo()), buf(loc, x.getBufferAttr()),
              i64(loc, x.getOffset()), i64(loc, x.getCount()), i64(loc, x.getFrom()), buf(loc, x.getRecvBufferAttr()),
              i64(loc, x.getRecvOffset()), i64(loc, x.getRecvCount())});
      } else if (auto x = dyn_cast<sched::SumSquaresOp>(op)) {
        SmallVector<Value> args;
        for (auto [bf, off] : llvm::zip(x.getBuffers(), x.getOffsets()))
          args.append({buf(loc, cast<FlatSymbolRefAttr>(bf)), i64(loc, off)});
        args.push_back(buf(loc, x.getStateAttr()));
        call(loc, rt::Fn::planrt_sched_sumsq, args);
      } else if (auto x = dyn_cast<sched::UpdateOp>(op)) {
        SmallVector<Value> args{x.getStep()};
        for (auto [bf, off] : llvm::zip(x.getBuffers(), x.getOffsets()))
          args.append({buf(loc, cast<FlatSymbolRefAttr>(bf)), i64(loc, off)});
        args.push_back(buf(loc, x.getStateAttr()));
        call(loc, rt::Fn::planrt_sched_update, args);
      } else if (auto x = dyn_cast<sched::AllReduceOp>(op)) {
        if (failed(mask(&op, x.getAxes(), m)))
          return failure();
        int reduce = x.getReduce() == "sum"   ? 0
                     : x.getReduce() == "max" ? 1
                     : x.getReduce() == "sum_u64" ? 3
                                                  : 2;
        call(loc, rt::Fn::planrt_sched_all_reduce,
             {m, buf(loc, x.getBufferAttr()), i64(loc, x.getOffset()), i64(loc, x.getCount()), i32(loc, reduce)});
      } else if (isa<sched::AllReduceStartOp, sched::ReduceScatterStartOp>(op)) {
        // Handed to the runtime with its sched.grad.
      } else if (isa<sched::WaitOp>(op)) {
        call(loc, rt::Fn::planrt_sched_wait, {});
      } else if (auto x = dyn_cast<sched::AllGatherOp>(op)) {
        if (failed(mask(&op, x.getAxes(), m)))
          return failure();
        call(loc, rt::Fn::planrt_sched_all_gather,
             {m, buf(loc, x.getSourceAttr()), i64(loc, x.getSourceOffset()), i64(loc, x.getCount()),
              buf(loc, x.getDestAttr()), i64(loc, x.getDestOffset())});
      } else if (auto x = dyn_cast<sched::AllGatherStartOp>(op)) {
        // Handed over; the next planrt_sched_grad starts them one bucket ahead of its
        // entry point's planrt_params_ready, and waits for any left.
        if (failed(mask(&op, x.getAxes(), m)))
          return failure();
        call(loc, rt::Fn::planrt_sched_bucket_all_gather,
             {i64(loc, x.getBucket()), m, buf(loc, x.getSourceAttr()), i64(loc, x.getSourceOffset()),
              i64(loc, x.getCount()), buf(loc, x.getDestAttr()), i64(loc, x.getDestOffset()), i64(loc, x.getBegin()),
              i64(loc, x.getSize())});
      } else if (auto x = dyn_cast<sched::ReduceScatterOp>(op)) {
        if (failed(mask(&op, x.getAxes(), m)))
          return failure();
        call(loc, rt::Fn::planrt_sched_reduce_scatter,
             {m, buf(loc, x.getSourceAttr()), i64(loc, x.getSourceOffset()), i64(loc, x.getCount()),
              buf(loc, x.getDestAttr()), i64(loc, x.getDestOffset()), i32(loc, x.getAccumulate() ? 1 : 0)});
      } else if (auto x = dyn_cast<sched::SendOp>(op)) {
        call(loc, rt::Fn::planrt_sched_send,
             {i32(loc, axisIndex(x.getAxis())), i64(loc, x.getPeer()), buf(loc, x.getBufferAttr()),
              i64(loc, x.getOffset()), i64(loc, x.getCount())});
      } else if (auto x = dyn_cast<sched::RecvOp>(op)) {
        call(loc, rt::Fn::planrt_sched_recv,
             {i32(loc, axisIndex(x.getAxis())), i64(loc, x.getPeer()), buf(loc, x.getBufferAttr()),
              i64(loc, x.getOffset()), i64(loc, x.getCount())});
      } else if (failed(lowerFederated(op, handled))) {
        return failure();
      } else if (!handled) {
        continue;
      }
      op.dropAllUses();
      op.erase();
    }
    return success();
  }

  /// A federated round's ops (sched.fed_*); `handled` says whether `op` was one.
  LogicalResult lowerFederated(Operation &op, bool &handled) {
    Location loc = op.getLoc();
    auto f64 = [&](APFloat v) { return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v.convertToDouble())); };
    auto axis = [&](StringRef name) -> FailureOr<Value> {
      int a = axisIndex(name);
      if (a < 0)
        return op.emitOpError() << "names axis '" << name << "', which the mesh lacks";
      return i32(loc, a);
    };
    handled = true;
    if (auto x = dyn_cast<sched::FedBeginOp>(op)) {
      FailureOr<Value> a = axis(x.getAxis());
      if (failed(a))
        return failure();
      ArrayAttr moments = x.getMoments();
      call(loc, rt::Fn::planrt_sched_fed_begin,
           {x.getRound(), *a, i64(loc, x.getSampled()), buf(loc, x.getGlobalAttr()), buf(loc, x.getParamsAttr()),
            moments.size() > 0 ? buf(loc, cast<FlatSymbolRefAttr>(moments[0])) : i32(loc, -1),
            moments.size() > 1 ? buf(loc, cast<FlatSymbolRefAttr>(moments[1])) : i32(loc, -1)});
    } else if (auto x = dyn_cast<sched::FedLossOp>(op)) {
      call(loc, rt::Fn::planrt_sched_fed_loss, {buf(loc, x.getStateAttr())});
    } else if (auto x = dyn_cast<sched::FedProxOp>(op)) {
      call(loc, rt::Fn::planrt_sched_fed_prox,
           {buf(loc, x.getGradsAttr()), i64(loc, x.getCount()), f64(x.getMu()), buf(loc, x.getParamsAttr()),
            buf(loc, x.getGlobalAttr())});
    } else if (auto x = dyn_cast<sched::FedEncodeOp>(op)) {
      call(loc, rt::Fn::planrt_sched_fed_encode,
           {buf(loc, x.getUpdateAttr()), buf(loc, x.getParamsAttr()), buf(loc, x.getGlobalAttr()),
            i64(loc, x.getCount()), i32(loc, x.getWeighting() == "uniform" ? 1 : 0), f64(x.getClip()),
            i64(loc, x.getFractionBits())});
    } else if (auto x = dyn_cast<sched::FedMaskOp>(op)) {
      FailureOr<Value> a = axis(x.getAxis());
      if (failed(a))
        return failure();
      call(loc, rt::Fn::planrt_sched_fed_mask, {x.getRound(), buf(loc, x.getUpdateAttr()), i64(loc, x.getCount()), *a});
    } else if (auto x = dyn_cast<sched::FedServerOp>(op)) {
      std::optional<ArrayAttr> moments = x.getMoments();
      auto moment = [&](size_t i) {
        return moments && moments->size() > i ? buf(loc, cast<FlatSymbolRefAttr>((*moments)[i])) : i32(loc, -1);
      };
      call(loc, rt::Fn::planrt_sched_fed_server,
           {x.getRound(), buf(loc, x.getGlobalAttr()), buf(loc, x.getUpdateAttr()), buf(loc, x.getParamsAttr()),
            moment(0), moment(1), i32(loc, x.getOptimizer() == "adam" ? 1 : 0), f64(x.getLr()), f64(x.getBeta1()),
            f64(x.getBeta2()), f64(x.getEps()), f64(x.getNoise()), i64(loc, x.getFractionBits()),
            buf(loc, x.getStateAttr())});
    } else {
      handled = false;
    }
    return success();
  }

  ModuleOp module;
  mutable sched::MeshOp mesh;
  OpBuilder b;
  Value ctx;
  llvm::StringMap<int> ids;
};

struct ConvertSchedToRuntime : plan::impl::ConvertSchedToRuntimeBase<ConvertSchedToRuntime> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    sched::MeshOp mesh = sched::getMesh(module);
    SmallVector<func::FuncOp> programs;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && fn.getNumArguments() > 0 && fn.getArgAttr(0, "sched.context"))
        programs.push_back(fn);
    if (programs.empty())
      return;
    if (!mesh) {
      programs.front().emitOpError() << "is a sched program but the module has no sched.mesh";
      return signalPassFailure();
    }
    Lowering lowering(module, mesh);
    for (func::FuncOp fn : programs) {
      if (failed(lowering.lower(fn)))
        return signalPassFailure();
      fn.removeArgAttr(0, "sched.context");
    }
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<sched::BufferOp, sched::MeshOp>(op))
        op.erase();
  }
};

} // namespace
