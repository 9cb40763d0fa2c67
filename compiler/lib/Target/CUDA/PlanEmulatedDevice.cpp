// `plan-emulated-device`: on cuda-host, the device work bracketed for the runtime's audit.
#include "plan/Target/CUDA/DeviceCalls.h"
#include "plan/Target/CUDA/Passes.h"

#include "plan/Target/RuntimeABI.h"
#include "plan/Training/Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace plan {
#define GEN_PASS_DEF_PLANEMULATEDDEVICE
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// "file:line" of a location, or "" where it has none.
std::string where(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine())).str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string s = where(inner); !s.empty())
        return s;
  if (auto named = dyn_cast<NameLoc>(loc))
    return where(named.getChildLoc());
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return where(site.getCallee());
  return "";
}

struct PlanEmulatedDevice : plan::impl::PlanEmulatedDeviceBase<PlanEmulatedDevice> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SmallVector<Operation *> work;
    for (func::FuncOp f : m.getOps<func::FuncOp>())
      f.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (isa<gpu::LaunchOp>(op)) {
          work.push_back(op);
          return WalkResult::skip(); // a launch's body is the device's
        }
        if (auto call = dyn_cast<func::CallOp>(op); call && cuda::becomesDeviceCall(call.getCallee()))
          work.push_back(op);
        return WalkResult::advance();
      });
    int64_t kernels = 0;
    for (auto [i, op] : llvm::enumerate(work)) {
      std::string what = isa<gpu::LaunchOp>(op) ? "generated kernel " + std::to_string(kernels++)
                                                : cast<func::CallOp>(op).getCallee().str();
      if (std::string at = where(op->getLoc()); !at.empty())
        what += " at " + at;
      std::string name = "planrt_emu_what_" + std::to_string(i);
      OpBuilder b(m.getBodyRegion());
      b.setInsertionPointToEnd(m.getBody());
      emitStringGlobal(b, op->getLoc(), name, what);
      b.setInsertionPoint(op);
      Value text = LLVM::AddressOfOp::create(b, op->getLoc(), LLVM::LLVMPointerType::get(&getContext()), name);
      rt::callFunc(b, op->getLoc(), m, rt::Fn::planrt_emu_begin, {text});
      b.setInsertionPointAfter(op);
      rt::callFunc(b, op->getLoc(), m, rt::Fn::planrt_emu_end, {});
    }
  }
};

} // namespace
