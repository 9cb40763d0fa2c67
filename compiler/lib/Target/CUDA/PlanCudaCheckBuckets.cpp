// `plan-cuda-check-buckets`: no bucketed collective beside tensor parallelism on the CUDA target.
#include "plan/Target/CUDA/Passes.h"

#include "planrt_manifest.h"
#include "plan/Dialect/Sched/IR/Sched.h"
#include "plan/Training/Manifest.h"

namespace plan {
#define GEN_PASS_DEF_PLANCUDACHECKBUCKETS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;
namespace key = planrt::manifest::key;

namespace {

struct PlanCudaCheckBuckets : plan::impl::PlanCudaCheckBucketsBase<PlanCudaCheckBuckets> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    Operation *first = nullptr;
    m.walk([&](Operation *op) {
      if (!first && isa<sched::AllReduceStartOp, sched::AllGatherStartOp, sched::ReduceScatterStartOp>(op))
        first = op;
    });
    if (!first)
      return;
    int64_t tensor = 1;
    for (auto manifest : m.getOps<sched::ManifestOp>()) {
      FailureOr<llvm::json::Value> root = manifestJson(manifest);
      if (failed(root))
        return signalPassFailure();
      if (const llvm::json::Object *train = root->getAsObject()->getObject(key::train))
        tensor = train->getInteger(key::tensor_parallel).value_or(1);
    }
    if (tensor <= 1)
      return;
    InFlightDiagnostic d = first->emitError()
                           << "on --target cuda, the gradient (or parameter) buckets' NCCL collectives would run "
                              "beside the tensor-parallel ones (tensor "
                           << tensor
                           << ") on a second communicator, which NCCL does not promise to complete (not "
                              "implemented in this version of planc)";
    d.attachNote() << "write 'bucket = none' in the plan's parallel block, or build it with --target cpu, where MPI "
                      "runs both";
    signalPassFailure();
  }
};

} // namespace
