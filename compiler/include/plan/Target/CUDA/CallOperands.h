// What the CUDA targets' passes over bufferized library calls share: the operand
// positions of the calls they rewrite (LibraryCalls.cpp emits them; planrt_abi.def and
// cblas.h define them), integer constants, and nn.round's lowering to a 16-bit type.
#ifndef PLAN_TARGET_CUDA_CALLOPERANDS_H
#define PLAN_TARGET_CUDA_CALLOPERANDS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

namespace plan::calls {

/// cblas_sgemm (CblasRowMajor, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc).
enum Gemm {
  kGemmOrder = 0,
  kGemmM = 3,
  kGemmN = 4,
  kGemmA = 7,
  kGemmB = 9,
  kGemmBeta = 11,
  kGemmC = 12,
  kGemmLdc = 13,
  kGemmOperands = 14
};
/// planrt_k_cross_entropy (logits, targets, loss, rows, V, storage).
enum CrossEntropy { kCeLogits = 0, kCeStorage = 5 };
/// planrt_k_cross_entropy_bwd (dloss, logits, targets, dlogits, rows, V, round_to, storage).
enum CrossEntropyBwd {
  kCeBwdLogits = 1,
  kCeBwdDlogits = 3,
  kCeBwdRows = 4,
  kCeBwdV = 5,
  kCeBwdRoundTo = 6,
  kCeBwdStorage = 7,
  kCeBwdOperands = 8
};

/// The value of an integer constant, or -1.
inline int64_t constantInt(mlir::Value v) {
  llvm::APInt value;
  return mlir::matchPattern(v, mlir::m_ConstantInt(&value)) ? value.getSExtValue() : -1;
}

/// The 16-bit type `v` is rounded to when it is arith.extf(arith.truncf(x)) of a float32
/// x, to nearest even (nn.round's lowering); null otherwise.
inline mlir::Type roundedTo(mlir::Value v) {
  auto ext = v.getDefiningOp<mlir::arith::ExtFOp>();
  if (!ext || !ext.getType().isF32())
    return {};
  auto trunc = ext.getIn().getDefiningOp<mlir::arith::TruncFOp>();
  if (!trunc || trunc.getRoundingmodeAttr() || !trunc.getIn().getType().isF32())
    return {};
  mlir::Type t = trunc.getType();
  return t.isBF16() || t.isF16() ? t : mlir::Type();
}

} // namespace plan::calls

#endif // PLAN_TARGET_CUDA_CALLOPERANDS_H
