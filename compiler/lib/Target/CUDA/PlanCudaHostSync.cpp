// `plan-cuda-host-sync`: the host waits for the device only where host code runs next.
#include "plan/Target/CUDA/Passes.h"
#include "plan/Target/CUDA/DeviceCalls.h"

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

/// Calls that are neither device work nor host code touching memory: the step region's
/// address, the waits, and the emulated device's brackets.
bool isNeitherCall(StringRef callee) {
  for (rt::Fn fn : {rt::Fn::planrt_step_arena, rt::Fn::planrt_cuda_sync, rt::Fn::planrt_emu_sync,
                    rt::Fn::planrt_emu_begin, rt::Fn::planrt_emu_end})
    if (callee == rt::name(fn))
      return true;
  return false;
}

/// On the CUDA target (after outlining): launch_func and libplanrt_cuda's calls are
/// device work. On cuda-host (`emulated`, launches not outlined): gpu.launch and the
/// CPU calls the CUDA target would make device calls.
Kind kindOf(Operation *op, bool emulated) {
  if (isa<gpu::LaunchFuncOp, gpu::LaunchOp>(op))
    return Kind::Device;
  // Any call (func.call, and llvm.call, which the sched program's runtime calls are):
  // by its callee; an indirect one is host code.
  if (auto call = dyn_cast<CallOpInterface>(op)) {
    auto symbol = dyn_cast<SymbolRefAttr>(call.getCallableForCallee());
    if (!symbol)
      return Kind::Host;
    StringRef callee = symbol.getLeafReference().getValue();
    if (emulated ? cuda::becomesDeviceCall(callee) : isDeviceCall(callee))
      return Kind::Device;
    if (isNeitherCall(callee))
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
bool holdsDeviceWork(Operation *op, bool emulated) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (inner != op && kindOf(inner, emulated) == Kind::Device)
      found = true;
  });
  return found;
}

struct PlanCudaHostSync : plan::impl::PlanCudaHostSyncBase<PlanCudaHostSync> {
  using PlanCudaHostSyncBase::PlanCudaHostSyncBase;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<func::FuncOp> work;
    for (func::FuncOp f : m.getOps<func::FuncOp>())
      if (!f.isDeclaration() && holdsDeviceWork(f, emulated))
        work.push_back(f);
    if (work.empty())
      return;
    rt::Fn wait = emulated ? rt::Fn::planrt_emu_sync : rt::Fn::planrt_cuda_sync;
    for (func::FuncOp f : work)
      f.walk([&](Block *block) {
        // A launch's body is the device's code, not the host's.
        if (!block->getParentOp()->getParentOfType<gpu::LaunchOp>() && !isa<gpu::LaunchOp>(block->getParentOp()))
          syncBlock(m, *block, wait);
      });
  }

  /// Inserts a wait before each host op of the block that device work may precede: since
  /// the last wait, or before the block (what ran before is not tracked across blocks;
  /// before a function, its caller may have queued work: the runtime's fills and copies).
  void syncBlock(ModuleOp m, Block &block, rt::Fn wait) {
    bool pending = true;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      switch (kindOf(&op, emulated)) {
      case Kind::Device:
        pending = true;
        break;
      case Kind::Host:
        if (pending) {
          OpBuilder b(&op);
          rt::callFunc(b, op.getLoc(), m, wait, {});
          pending = false;
        }
        break;
      case Kind::Neither:
        // A loop or branch: device work inside leaves some pending after it.
        if (op.getNumRegions() > 0)
          pending = pending || holdsDeviceWork(&op, emulated);
        break;
      }
    }
  }
};

} // namespace
