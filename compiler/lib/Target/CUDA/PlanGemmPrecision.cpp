// `plan-gemm-precision`: each GEMM marked with the precision its cuBLASLt call may compute in,
// and each attention with the precision of its products (bf16 where its operands are bf16).
#include "plan/Target/CUDA/Passes.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Dialect/NN/IR/NN.h"

namespace plan {
#define GEN_PASS_DEF_PLANGEMMPRECISION
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanGemmPrecision : plan::impl::PlanGemmPrecisionBase<PlanGemmPrecision> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    bool mixed = false;
    m.walk([&](nn::RoundOp) { mixed = true; });
    if (!mixed)
      return;
    auto exactIn = [](Value v) -> Type {
      auto round = v.getDefiningOp<nn::RoundOp>();
      return round ? round.getTo() : Type();
    };
    MLIRContext *ctx = &getContext();
    m.walk([&](Operation *op) {
      // Attention on bf16 operands (q, k, v, and the output's gradient) runs its products
      // on bf16 tensor cores, rounding the probabilities and their gradients to bf16
      // (docs/CUDA.md); any other attention keeps fp32's products.
      if (isa<nn::SDPAOp, nn::SDPAGradOp>(op)) {
        if (llvm::all_of(op->getOperands(), [&](Value v) {
              Type t = exactIn(v);
              return t && t.isBF16();
            }))
          op->setAttr(kGemmPrecisionAttr, StringAttr::get(ctx, "bf16"));
        return;
      }
      if (!isa<nn::MatmulOp, nn::MatmulWGradOp>(op))
        return;
      Type a = exactIn(op->getOperand(0)), b = exactIn(op->getOperand(1));
      StringRef precision = "tf32";
      if (a && a == b && a.isBF16())
        precision = "bf16";
      else if (a && a == b && a.isF16())
        precision = "f16";
      op->setAttr(kGemmPrecisionAttr, StringAttr::get(ctx, precision));
    });
  }
};

} // namespace
