// `plan-cuda-host-sync`: the host waits for the device only where host code runs next.
#include "plan/Target/CUDA/Passes.h"

#include "plan/Target/RuntimeABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"

namespace plan {
#define GEN_PASS_DEF_PLANCUDAHOSTSYNC
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// What an op of a host function is to the stream: device work queued on it, host code
/// that may touch device memory, or neither.
enum class Kind { Device, Host, Neither };

bool isDeviceCall(StringRef callee) {
  return callee.starts_with("planrt_cuda_") && callee != rt::name(rt::Fn::planrt_cuda_start) &&
         callee != rt::name(rt::Fn::planrt_cuda_sync);
}

Kind kindOf(Operation *op) {
  if (isa<gpu::LaunchFuncOp>(op))
    return Kind::Device;
  // Any call (func.call, and llvm.call, which the sched program's runtime calls are):
  // by its callee; an indirect one is host code.
  if (auto call = dyn_cast<CallOpInterface>(op)) {
    auto symbol = dyn_cast<SymbolRefAttr>(call.getCallableForCallee());
    if (!symbol)
      return Kind::Host;
    StringRef callee = symbol.getLeafReference().getValue();
    if (isDeviceCall(callee))
      return Kind::Device;
    if (callee == rt::name(rt::Fn::planrt_step_arena) || callee == rt::name(rt::Fn::planrt_cuda_sync))
      return Kind::Neither;
    return Kind::Host;
  }
  // Host code reading or writing a buffer itself, and the return to a host caller.
  if (isa<memref::LoadOp, memref::StoreOp, memref::CopyOp, memref::AtomicRMWOp, memref::GenericAtomicRMWOp,
          func::ReturnOp>(op))
    return Kind::Host;
  return Kind::Neither;
}

/// Whether op holds device work in its regions.
bool holdsDeviceWork(Operation *op) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (inner != op && kindOf(inner) == Kind::Device)
      found = true;
  });
  return found;
}

struct PlanCudaHostSync : plan::impl::PlanCudaHostSyncBase<PlanCudaHostSync> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<func::FuncOp> work;
    for (func::FuncOp f : m.getOps<func::FuncOp>())
      if (!f.isDeclaration() && holdsDeviceWork(f))
        work.push_back(f);
    if (work.empty())
      return;
    for (func::FuncOp f : work)
      f.walk([&](Block *block) { syncBlock(m, *block); });
  }

  /// Inserts a wait before each host op of the block that device work may precede: since
  /// the last wait, or before the block (what ran before is not tracked across blocks),
  /// except at a function's entry: its caller, host code, had the device idle.
  static void syncBlock(ModuleOp m, Block &block) {
    bool pending = !(block.isEntryBlock() && isa<func::FuncOp>(block.getParentOp()));
    for (Operation &op : llvm::make_early_inc_range(block)) {
      switch (kindOf(&op)) {
      case Kind::Device:
        pending = true;
        break;
      case Kind::Host:
        if (pending) {
          OpBuilder b(&op);
          rt::callFunc(b, op.getLoc(), m, rt::Fn::planrt_cuda_sync, {});
          pending = false;
        }
        break;
      case Kind::Neither:
        // A loop or branch: device work inside leaves some pending after it.
        if (op.getNumRegions() > 0)
          pending = pending || holdsDeviceWork(&op);
        break;
      }
    }
  }
};

} // namespace
