// `plan-gpu-launch-to-loops`: each gpu.launch run as host loops (`--target cuda-host`).
#include "plan/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <iterator>

namespace plan {
#define GEN_PASS_DEF_PLANGPULAUNCHTOLOOPS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// A prime above 2^30, chosen by the seed: coprime with every grid and block size below it
/// (so i -> (a i + seed) mod n is a permutation), and a i + seed fits in 64 bits for i < 2^31.
int64_t shuffleMultiplier(int64_t seed) {
  static const int64_t primes[] = {1073741827, 1073741831, 1073741833, 1073741839, 1073741843, 1073741857};
  return primes[seed % int64_t(std::size(primes))];
}

struct PlanGpuLaunchToLoops : plan::impl::PlanGpuLaunchToLoopsBase<PlanGpuLaunchToLoops> {
  using PlanGpuLaunchToLoopsBase::PlanGpuLaunchToLoopsBase;

  void runOnOperation() override {
    if (order != "forward" && order != "reverse" && order != "shuffle") {
      getOperation().emitError() << "plan-gpu-launch-to-loops: order '" << order
                                 << "' is neither forward, reverse nor shuffle";
      return signalPassFailure();
    }
    if (seed < 0) {
      getOperation().emitError() << "plan-gpu-launch-to-loops: seed " << int64_t(seed) << " is negative";
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
      // In reverse, iteration i runs block (thread) n - 1 - i; shuffled, (a i + seed) mod n.
      auto id = [&](scf::ForOp loop) -> Value {
        Value i = loop.getInductionVar(), n = loop.getUpperBound();
        if (order == "forward")
          return i;
        if (order == "reverse")
          return arith::SubIOp::create(b, loc, arith::SubIOp::create(b, loc, n, one), i);
        Value a = arith::ConstantIndexOp::create(b, loc, shuffleMultiplier(seed));
        Value c = arith::ConstantIndexOp::create(b, loc, seed);
        Value ai = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, a, i), c);
        return arith::RemUIOp::create(b, loc, ai, n);
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
