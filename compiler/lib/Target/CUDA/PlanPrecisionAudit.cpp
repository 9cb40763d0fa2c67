// `plan-precision-audit`: on the cuda-host target, the calls the CUDA target runs on bf16
// (fp16) tensor cores check that their operands are bf16 (fp16) values.
#include "plan/Target/CUDA/Passes.h"
#include "plan/Target/CUDA/PrecisionCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace plan {
#define GEN_PASS_DEF_PLANPRECISIONAUDIT
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanPrecisionAudit : plan::impl::PlanPrecisionAuditBase<PlanPrecisionAudit> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    SymbolTable symbols(m);
    const std::pair<StringRef, rt::Fn> audited[] = {
        {"cblas_sgemm", rt::Fn::planrt_audit_gemm},
        {rt::name(rt::Fn::planrt_k_sdpa), rt::Fn::planrt_audit_sdpa},
        {rt::name(rt::Fn::planrt_k_sdpa_bwd), rt::Fn::planrt_audit_sdpa_bwd}};
    for (auto [from, to] : audited)
      if (failed(rewriteWithPrecision(m, symbols, from, to, PrecisionCalls::LowPrecision)))
        return signalPassFailure();
  }
};

} // namespace
