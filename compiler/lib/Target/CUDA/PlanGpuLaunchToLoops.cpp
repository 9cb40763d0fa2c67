// `plan-gpu-launch-to-loops`: each gpu.launch run as host loops (`--target cuda-host`).
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace plan {
#define GEN_PASS_DEF_PLANGPULAUNCHTOLOOPS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanGpuLaunchToLoops : plan::impl::PlanGpuLaunchToLoopsBase<PlanGpuLaunchToLoops> {
  using PlanGpuLaunchToLoopsBase::PlanGpuLaunchToLoopsBase;

  void runOnOperation() override {
    if (order != "forward" && order != "reverse") {
      getOperation().emitError() << "plan-gpu-launch-to-loops: order '" << order << "' is neither forward nor reverse";
      return signalPassFailure();
    }
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
      // In reverse, iteration i runs block (thread) n - 1 - i.
      auto id = [&](scf::ForOp loop) -> Value {
        if (order == "forward")
          return loop.getInductionVar();
        Value last = arith::SubIOp::create(b, loc, loop.getUpperBound(), one);
        return arith::SubIOp::create(b, loc, last, loop.getInductionVar());
      };
      Value blockId = id(blocks);
      map.map(ids[0].x, blockId);
      map.map(ids[0].y, zero);
      map.map(ids[0].z, zero);
      map.map(ids[1].x, id(threads));
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

} // namespace
