// Calls that take their precision as one more argument (PrecisionCalls.h).
#include "plan/Target/CUDA/PrecisionCalls.h"

#include "plan/Conversion/LibraryCalls.h"
#include "planrt_cuda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace plan {

LogicalResult rewriteWithPrecision(ModuleOp m, SymbolTable &symbols, StringRef from, rt::Fn to,
                                   PrecisionCalls which) {
  auto decl = symbols.lookup<func::FuncOp>(from);
  if (!decl)
    return success();
  SmallVector<std::pair<func::CallOp, int32_t>> calls;
  WalkResult r = m.walk([&](func::CallOp call) {
    if (call.getCallee() != from)
      return WalkResult::advance();
    int32_t compute = PLANRT_GEMM_F32;
    if (auto precision = call->getAttrOfType<StringAttr>(kGemmPrecisionAttr)) {
      std::optional<int32_t> c = llvm::StringSwitch<std::optional<int32_t>>(precision.getValue())
                                     .Case("bf16", PLANRT_GEMM_BF16)
                                     .Case("f16", PLANRT_GEMM_F16)
                                     .Case("tf32", PLANRT_GEMM_TF32)
                                     .Default(std::nullopt);
      if (!c) {
        call.emitOpError() << "has GEMM precision '" << precision.getValue()
                           << "', which the CUDA target does not implement (bf16, f16 or tf32)";
        return WalkResult::interrupt();
      }
      compute = *c;
    }
    if (which == PrecisionCalls::All || compute == PLANRT_GEMM_BF16 || compute == PLANRT_GEMM_F16) {
      auto half = call->getAttrOfType<IntegerAttr>(kHalfStorageAttr);
      calls.emplace_back(call, compute | (call->hasAttr(kRoundResultAttr) ? PLANRT_GEMM_ROUND_RESULT : 0) |
                                   (half ? int32_t(half.getInt()) : 0));
    } else if (call->hasAttr(kHalfStorageAttr)) {
      call.emitOpError() << "has 16-bit operands (plan.half_storage) but computes in fp32 or tf32";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (calls.empty() && which == PrecisionCalls::LowPrecision)
    return success();
  StringRef toName = rt::name(to);
  if (symbols.lookup(toName))
    return decl.emitOpError() << "'" << toName << "' is already declared";
  OpBuilder b(decl);
  auto toDecl = func::FuncOp::create(b, decl.getLoc(), toName, rt::funcType(b.getContext(), to));
  toDecl.setPrivate();
  symbols.insert(toDecl);
  for (auto [call, compute] : calls) {
    b.setInsertionPoint(call);
    SmallVector<Value> args(call.getOperands());
    args.push_back(arith::ConstantOp::create(b, call.getLoc(), b.getI32IntegerAttr(compute)));
    rt::callFunc(b, call.getLoc(), m, to, args);
    call.erase();
  }
  if (which == PrecisionCalls::All)
    symbols.erase(decl);
  return success();
}

} // namespace plan
