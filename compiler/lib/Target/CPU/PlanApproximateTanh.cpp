// `plan-approximate-tanh`: math.tanh as MLIR's polynomial approximation, which LLVM vectorises.
#include "plan/Target/CPU/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace plan {
#define GEN_PASS_DEF_PLANAPPROXIMATETANH
#include "plan/Target/CPU/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanApproximateTanh : plan::impl::PlanApproximateTanhBase<PlanApproximateTanh> {
  void runOnOperation() override {
    // Scalars and vectors only: the approximation builds arith on the operand type.
    WalkResult tensors = getOperation()->walk([&](math::TanhOp op) {
      if (!isa<TensorType>(op.getType()))
        return WalkResult::advance();
      op.emitOpError() << "on a tensor: plan-approximate-tanh runs after bufferization, on scalars and vectors";
      return WalkResult::interrupt();
    });
    if (tensors.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populatePolynomialApproximateTanhPattern(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
