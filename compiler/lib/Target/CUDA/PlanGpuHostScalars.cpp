// `plan-gpu-host-scalars`: the host functions' scalar loads and stores of device memory
// run as one-thread kernels, so that no host code touches device memory in a step.
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace plan {
#define GEN_PASS_DEF_PLANGPUHOSTSCALARS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// A scalar op the host may compute anywhere: a value without memory effects or regions
/// (not a terminator, which computes nothing).
bool isScalarPure(Operation *op) {
  return op->getNumResults() > 0 && op->getNumRegions() == 0 && !op->hasTrait<OpTrait::IsTerminator>() &&
         isMemoryEffectFree(op);
}

/// One function's rewrite: `moved` holds the host loads and the pure ops computed from
/// them that go to the device, `stores` the host stores that do.
struct Rewrite {
  Rewrite(func::FuncOp f, std::string kernelModule) : f(f), kernelModule(std::move(kernelModule)) {}

  func::FuncOp f;
  std::string kernelModule;
  int64_t counter = 0;
  SetVector<Operation *> moved;
  SmallVector<memref::StoreOp> stores;
  /// The one-element device buffer each moved load's value is kept in.
  DenseMap<Operation *, Value> scratch;

  /// The loads, their pure users (transitively) and the stores of the function's body
  /// that can all run on the device: every use of a moved value is inside a launch, in a
  /// moved op or in a moved store; a store moves when none of its operands is a host
  /// value computed from a load that stays.
  void select(Block &body) {
    SetVector<Operation *> cone;
    for (Operation &op : body)
      if (isa<memref::LoadOp>(op) || (isScalarPure(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
                                        return v.getDefiningOp() && cone.contains(v.getDefiningOp());
                                      })))
        cone.insert(&op);
    moved = cone;
    for (bool changed = true; changed;) {
      changed = false;
      stores.clear();
      for (auto s : body.getOps<memref::StoreOp>())
        if (llvm::all_of(s->getOperands(), [&](Value v) {
              Operation *d = v.getDefiningOp();
              return !d || !cone.contains(d) || moved.contains(d);
            }))
          stores.push_back(s);
      for (Operation *op : llvm::to_vector(moved)) {
        bool ok = llvm::all_of(op->getUsers(), [&](Operation *user) {
          return user->getParentOfType<gpu::LaunchOp>() || moved.contains(user) ||
                 llvm::is_contained(stores, dyn_cast<memref::StoreOp>(user));
        });
        if (!ok) {
          moved.remove(op);
          changed = true;
        }
      }
    }
  }

  /// A launch of one block of one thread before `at`; the builder is left in its body.
  gpu::LaunchOp launch(OpBuilder &b, Operation *at) {
    Location loc = at->getLoc();
    b.setInsertionPoint(at);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    std::string name = f.getSymName().str() + "_scalar" + std::to_string(counter++);
    auto l = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one, Value(), Type(), ValueRange(), TypeRange(),
                                   TypeRange(), Value(), Value(), Value(),
                                   FlatSymbolRefAttr::get(b.getContext(), kernelModule),
                                   FlatSymbolRefAttr::get(b.getContext(), name));
    Block &entry = l.getBody().front();
    b.setInsertionPointToEnd(&entry);
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&entry);
    return l;
  }

  /// `v` inside a kernel (at b's insertion point): a moved load's value read from its
  /// buffer, a moved pure op computed again, anything else as it is (a kernel argument).
  Value materialize(OpBuilder &b, Value v, IRMapping &map) {
    if (Value done = map.lookupOrNull(v))
      return done;
    Operation *d = v.getDefiningOp();
    // A global (or a view of one) is fetched inside the kernel: the host's address is no
    // kernel's (as plan-gpu-map-loops' kernels do).
    if (auto global = dyn_cast_or_null<memref::GetGlobalOp>(d)) {
      Value copy = b.clone(*global)->getResult(0);
      map.map(v, copy);
      return copy;
    }
    if (auto view = dyn_cast_or_null<ViewLikeOpInterface>(d); view && !moved.contains(d)) {
      Value source = view.getViewSource();
      if (materialize(b, source, map) == source)
        return v;
      for (Value operand : d->getOperands())
        map.map(operand, materialize(b, operand, map));
      Value copy = b.clone(*d, map)->getResult(cast<OpResult>(v).getResultNumber());
      map.map(v, copy);
      return copy;
    }
    if (!d || !moved.contains(d))
      return v;
    Value result;
    if (auto it = scratch.find(d); it != scratch.end()) {
      result = memref::LoadOp::create(b, d->getLoc(), it->second, ValueRange{});
    } else {
      for (Value operand : d->getOperands())
        map.map(operand, materialize(b, operand, map));
      result = b.clone(*d, map)->getResult(cast<OpResult>(v).getResultNumber());
    }
    map.map(v, result);
    return result;
  }

  void apply(Block &body) {
    OpBuilder b(f.getContext());
    Operation *terminator = body.getTerminator();
    for (Operation *op : moved) {
      auto load = dyn_cast<memref::LoadOp>(op);
      if (!load)
        continue;
      // Its value kept on the device when the host would have read it.
      b.setInsertionPointToStart(&body);
      auto type = MemRefType::get({}, load.getType());
      Value buffer = memref::AllocOp::create(b, load.getLoc(), type);
      b.setInsertionPoint(terminator);
      memref::DeallocOp::create(b, load.getLoc(), buffer);
      launch(b, load);
      IRMapping map;
      SmallVector<Value> indices;
      for (Value i : load.getIndices())
        indices.push_back(materialize(b, i, map));
      Value value = memref::LoadOp::create(b, load.getLoc(), materialize(b, load.getMemRef(), map), indices);
      memref::StoreOp::create(b, load.getLoc(), value, buffer, ValueRange{});
      scratch[load] = buffer;
    }
    for (memref::StoreOp store : stores) {
      launch(b, store);
      IRMapping map;
      for (Value operand : store->getOperands())
        map.map(operand, materialize(b, operand, map));
      b.clone(*store, map);
      store.erase();
    }
    // The kernels that read a moved value compute it themselves.
    body.walk([&](gpu::LaunchOp l) {
      IRMapping map;
      b.setInsertionPointToStart(&l.getBody().front());
      for (Operation *op : moved)
        for (OpResult r : op->getResults())
          if (llvm::any_of(r.getUses(), [&](OpOperand &u) { return l->isProperAncestor(u.getOwner()); }))
            r.replaceUsesWithIf(materialize(b, r, map),
                                [&](OpOperand &u) { return l->isProperAncestor(u.getOwner()); });
    });
    for (Operation *op : llvm::reverse(moved))
      op->erase();
  }
};

struct PlanGpuHostScalars : plan::impl::PlanGpuHostScalarsBase<PlanGpuHostScalars> {
  void runOnOperation() override {
    for (func::FuncOp f : getOperation().getOps<func::FuncOp>()) {
      if (f.isDeclaration() || !f.getBody().hasOneBlock())
        continue;
      // Only functions that already run kernels: the others are host code throughout.
      StringRef module;
      f.walk([&](gpu::LaunchOp l) {
        if (auto m = l.getModuleAttr())
          module = m.getValue();
      });
      if (module.empty())
        continue;
      Rewrite r(f, module.str());
      Block &body = f.getBody().front();
      r.select(body);
      if (r.moved.empty() && r.stores.empty())
        continue;
      r.apply(body);
    }
  }
};

} // namespace
