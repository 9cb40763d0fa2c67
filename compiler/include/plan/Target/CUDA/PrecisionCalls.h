// Calls that take their precision as one more argument: the CUDA target's GEMM and
// attention (plan-cuda-library-calls), and the cuda-host target's precision audit
// (plan-precision-audit).
#ifndef PLAN_TARGET_CUDA_PRECISIONCALLS_H
#define PLAN_TARGET_CUDA_PRECISIONCALLS_H

#include "plan/Target/RuntimeABI.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace plan {

/// Each call of `from` that `which` selects becomes one of `to` with one more operand,
/// the planrt_gemm_compute of its plan.gemm_precision (PLANRT_GEMM_F32 without one),
/// with PLANRT_GEMM_ROUND_RESULT where it has plan.round_result and the
/// PLANRT_GEMM_HALF_* bits of its plan.half_storage (an error on an fp32 or tf32 call).
/// Every call (All), with `from`'s declaration erased after; or only those marked bf16
/// or f16 (LowPrecision), `from` kept for the others. A precision the runtime does not
/// have, or `to` already declared, is an error.
enum class PrecisionCalls { All, LowPrecision };
mlir::LogicalResult rewriteWithPrecision(mlir::ModuleOp m, mlir::SymbolTable &symbols, llvm::StringRef from,
                                         rt::Fn to, PrecisionCalls which);

} // namespace plan

#endif // PLAN_TARGET_CUDA_PRECISIONCALLS_H
