// The nn ops lowered to calls (BLAS, planrt kernels) at bufferization.
#ifndef PLAN_CONVERSION_LIBRARYCALLS_H
#define PLAN_CONVERSION_LIBRARYCALLS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace plan {
/// On an nn.matmul or nn.matmul_wgrad, and copied onto the GEMM call it becomes: the
/// precision the GEMM may compute in — "bf16" or "f16" where both operands are exact
/// in that type (each the result of an nn.round to it), "tf32" for the other GEMMs of
/// a mixed-precision program; absent, fp32. The CUDA target's plan-gemm-precision sets
/// it and its cuBLASLt call reads it; the CPU's BLAS computes in fp32 whatever it says.
inline constexpr llvm::StringLiteral kGemmPrecisionAttr = "plan.gemm_precision";

/// On a GEMM call marked bf16 or f16 (kGemmPrecisionAttr), set by the CUDA targets'
/// plan-cuda-round-results: its result is to be rounded to that type, as the rounding
/// it replaced did (PLANRT_GEMM_ROUND_RESULT).
inline constexpr llvm::StringLiteral kRoundResultAttr = "plan.round_result";

/// On a GEMM call marked bf16 or f16, set by the CUDA targets' plan-cuda-half-storage:
/// which of its operands are buffers of that 16-bit type rather than float32, as the
/// PLANRT_GEMM_HALF_A / _B / _C bits (planrt_cuda.h) its call passes with its precision.
inline constexpr llvm::StringLiteral kHalfStorageAttr = "plan.half_storage";

/// Attaches the BufferizableOpInterface models that turn GEMMs, attention,
/// normalisations, embeddings and cross-entropy into calls.
void registerLibraryCallModels(mlir::DialectRegistry &registry);

/// Whether `op` is one of those ops: computed by a call, never fused with another op.
bool isLibraryCall(mlir::Operation *op);

/// The address of a static, contiguous row-major buffer's first element, as a library
/// call's pointer argument (!llvm.ptr).
mlir::Value firstElementPointer(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buffer);

/// The buffer a library call's pointer argument points into, through the address
/// arithmetic of firstElementPointer (null if it is not such a pointer); `chain`
/// collects those ops, last first.
mlir::Value bufferOfPointer(mlir::Value ptr, llvm::SmallVectorImpl<mlir::Operation *> *chain = nullptr);

/// The buffer a view is of (through subviews, reshapes and casts), or the value itself.
mlir::Value rootBuffer(mlir::Value v);
} // namespace plan

#endif // PLAN_CONVERSION_LIBRARYCALLS_H
