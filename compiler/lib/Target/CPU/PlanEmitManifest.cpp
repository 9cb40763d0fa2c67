// `plan-emit-manifest`: each sched.manifest written, once, as the JSON string constant the runtime reads.
#include "plan/Target/CPU/Passes.h"

#include "plan/Training/Manifest.h"

namespace plan {
#define GEN_PASS_DEF_PLANEMITMANIFEST
#include "plan/Target/CPU/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanEmitManifest : plan::impl::PlanEmitManifestBase<PlanEmitManifest> {
  void runOnOperation() override {
    for (sched::ManifestOp op : llvm::make_early_inc_range(getOperation().getOps<sched::ManifestOp>())) {
      FailureOr<llvm::json::Value> root = manifestJson(op);
      if (failed(root))
        return signalPassFailure();
      std::string text;
      llvm::raw_string_ostream os(text);
      os << *root;
      OpBuilder b(op);
      emitStringGlobal(b, op.getLoc(), op.getSymName(), std::move(text));
      op.erase();
    }
  }
};

} // namespace
