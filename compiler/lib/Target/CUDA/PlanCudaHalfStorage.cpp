// `plan-cuda-half-storage`: a buffer that only ever holds bf16 (fp16) values is stored in
// 16 bits.
//
// A mixed-precision step keeps its activations as float32 buffers whose every element is
// a bf16 (fp16) value: each is written by a rounding (an element-wise op that yields
// arith.extf(arith.truncf(x)), or a GEMM that rounds its own result) and read by
// element-wise ops, GEMMs and the cross-entropy, which could as well read the 16-bit
// value. Such a buffer — an allocation of the function, all of whose users (through
// views) are those readers and writers, its release, and nothing else — becomes a buffer
// of the 16-bit type: its writers yield the truncated value, its readers widen what they
// load (arith.extf), and the library calls that read or write it are told so (a GEMM's
// plan.half_storage, PLANRT_GEMM_HALF_*; the cross-entropy's storage operand). Every
// value stored and read is the same; half the bytes move.
#include "plan/Target/CUDA/Passes.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Target/CUDA/CallOperands.h"
#include "plan/Target/RuntimeABI.h"
#include "planrt_cuda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

#include <vector>

namespace plan {
#define GEN_PASS_DEF_PLANCUDAHALFSTORAGE
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;
using namespace plan::calls;

namespace {

/// The 16-bit type a GEMM call computes in (plan.gemm_precision bf16 or f16), or null.
Type gemmType(func::CallOp call) {
  auto precision = call->getAttrOfType<StringAttr>(kGemmPrecisionAttr);
  if (!precision)
    return {};
  Builder b(call.getContext());
  if (precision.getValue() == "bf16")
    return b.getBF16Type();
  if (precision.getValue() == "f16")
    return b.getF16Type();
  return {};
}

/// A library call's use of a buffer it is passed as `operand`, where it can take a
/// 16-bit one: read (`type` null: of either type), or written rounded to `type`.
struct CallUse {
  bool writes;
  Type type;
};
std::optional<CallUse> callUse(func::CallOp call, unsigned operand) {
  StringRef callee = call.getCallee();
  Builder b(call.getContext());
  if (callee == "cblas_sgemm") {
    Type t = gemmType(call);
    if (!t)
      return std::nullopt;
    if (operand == kGemmA || operand == kGemmB)
      return CallUse{false, t};
    if (operand == kGemmC && call->hasAttr(kRoundResultAttr))
      return CallUse{true, t};
  } else if (callee == rt::name(rt::Fn::planrt_k_cross_entropy)) {
    if (operand == kCeLogits && constantInt(call.getOperand(kCeStorage)) == 0)
      return CallUse{false, {}};
  } else if (callee == rt::name(rt::Fn::planrt_k_cross_entropy_bwd)) {
    if (constantInt(call.getOperand(kCeBwdStorage)) != 0)
      return std::nullopt;
    if (operand == kCeBwdLogits)
      return CallUse{false, {}};
    int64_t to = constantInt(call.getOperand(kCeBwdRoundTo));
    if (operand == kCeBwdDlogits && (to == 1 || to == 2))
      return CallUse{true, to == 1 ? Type(b.getBF16Type()) : Type(b.getF16Type())};
  }
  return std::nullopt;
}

/// Tells `call` that its `operand` is a buffer of 16-bit `type`: a GEMM by
/// plan.half_storage, the cross-entropy by its storage operand.
void markHalf(func::CallOp call, unsigned operand, Type type) {
  OpBuilder b(call);
  int32_t code = type.isBF16() ? 1 : 2;
  if (call.getCallee() == "cblas_sgemm") {
    int32_t flag = operand == kGemmA ? PLANRT_GEMM_HALF_A : operand == kGemmB ? PLANRT_GEMM_HALF_B : PLANRT_GEMM_HALF_C;
    auto old = call->getAttrOfType<IntegerAttr>(kHalfStorageAttr);
    call->setAttr(kHalfStorageAttr, b.getI32IntegerAttr((old ? int32_t(old.getInt()) : 0) | flag));
    return;
  }
  unsigned storage = call.getCallee() == rt::name(rt::Fn::planrt_k_cross_entropy) ? kCeStorage : kCeBwdStorage;
  int64_t bits =
      constantInt(call.getOperand(storage)) | (operand == kCeBwdDlogits && storage == kCeBwdStorage ? code << 2 : code);
  call->setOperand(storage, arith::ConstantIntOp::create(b, call.getLoc(), bits, 32));
}

/// One buffer's uses, once they are all known to allow 16-bit storage.
struct Storage {
  Type half;
  SmallVector<Value> views; // the allocation, then its views, each after its source (and unused base buffers)
  SmallVector<std::pair<linalg::GenericOp, unsigned>> reads;  // an element-wise op and the input's operand number
  SmallVector<std::pair<linalg::GenericOp, unsigned>> writes; // and an output's
  SmallVector<std::pair<func::CallOp, unsigned>> calls;       // a GEMM and its operand number (A, B or C)
};

/// The calls an aligned pointer of the buffer reaches (through firstElementPointer's
/// address arithmetic), added to `calls`; false if it goes anywhere else.
/// Whether `bytes` is firstElementPointer's byte offset of its first element into `view`:
/// 4 times the view's offset from its strided metadata, or that offset folded to a
/// constant — what the pass rebuilds for 2-byte elements (anything else it would drop).
bool firstElementOffset(Value bytes, Value view) {
  APInt c;
  if (matchPattern(bytes, m_ConstantInt(&c))) {
    SmallVector<int64_t> strides;
    int64_t offset;
    return succeeded(cast<MemRefType>(view.getType()).getStridesAndOffset(strides, offset)) &&
           !ShapedType::isDynamic(offset) && c.getSExtValue() == 4 * offset;
  }
  auto mul = bytes.getDefiningOp<arith::MulIOp>();
  if (!mul)
    return false;
  for (auto [x, four] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
    auto meta = x.getDefiningOp<memref::ExtractStridedMetadataOp>();
    if (meta && x == meta.getOffset() && meta.getSource() == view && matchPattern(four, m_ConstantInt(&c)) && c == 4)
      return true;
  }
  return false;
}

bool pointerReachesCalls(memref::ExtractAlignedPointerAsIndexOp extract,
                         SmallVectorImpl<std::pair<func::CallOp, unsigned>> &calls) {
  SmallVector<Value> work{extract.getResult()};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto call = dyn_cast<func::CallOp>(user))
        calls.push_back({call, use.getOperandNumber()});
      else if (isa<arith::IndexCastOp, LLVM::IntToPtrOp>(user) ||
               (isa<arith::AddIOp>(user) && use.getOperandNumber() == 0 &&
                firstElementOffset(user->getOperand(1), extract.getSource())))
        work.push_back(user->getResult(0));
      else
        return false;
    }
  }
  return true;
}

/// Whether the element-wise op's output `use` is written with a rounding to one 16-bit
/// type, which it returns, and never read.
Type roundedOutput(linalg::GenericOp g, OpOperand &use) {
  if (!g.getMatchingBlockArgument(&use).use_empty())
    return {};
  auto yield = cast<linalg::YieldOp>(g.getBody()->getTerminator());
  return roundedTo(yield.getOperand(use.getOperandNumber() - g.getNumDpsInputs()));
}

/// The uses of `alloc` when each allows 16-bit storage, all of one type, and one at
/// least writes it; otherwise none.
std::optional<Storage> storageOf(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() || !type.getElementType().isF32() ||
      type.getMemorySpace())
    return std::nullopt;
  Storage s;
  bool written = false;
  auto agree = [&](Type t) {
    if (!t || (s.half && s.half != t))
      return false;
    s.half = t;
    return true;
  };
  SmallVector<Value> work{alloc.getResult()};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    s.views.push_back(v);
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp>(user) &&
          use.getOperandNumber() == 0 && isa<MemRefType>(user->getResult(0).getType())) {
        work.push_back(user->getResult(0));
      } else if (isa<memref::DeallocOp>(user)) {
      } else if (auto meta = dyn_cast<memref::ExtractStridedMetadataOp>(user)) {
        // The offset and strides (no access to the elements); its base buffer changes type.
        if (!meta.getBaseBuffer().use_empty())
          return std::nullopt;
        s.views.push_back(meta.getBaseBuffer());
      } else if (auto extract = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(user)) {
        if (!pointerReachesCalls(extract, s.calls))
          return std::nullopt;
      } else if (auto g = dyn_cast<linalg::GenericOp>(user)) {
        if (g.isDpsInput(&use)) {
          s.reads.push_back({g, use.getOperandNumber()});
        } else {
          if (!agree(roundedOutput(g, use)))
            return std::nullopt;
          s.writes.push_back({g, use.getOperandNumber()});
          written = true;
        }
      } else {
        return std::nullopt;
      }
    }
  }
  for (auto [call, operand] : s.calls) {
    std::optional<CallUse> use = callUse(call, operand);
    if (!use || (use->type && !agree(use->type)))
      return std::nullopt;
    written |= use->writes;
  }
  if (!written)
    return std::nullopt;
  return s;
}

/// The buffer and its views in 16 bits; its readers widen, its writers no longer do, and
/// its GEMMs are told which of their operands are 16-bit.
void store(Storage &s) {
  for (Value v : s.views)
    v.setType(MemRefType::Builder(cast<MemRefType>(v.getType())).setElementType(s.half));
  for (auto [g, operand] : s.reads) {
    BlockArgument arg = g.getMatchingBlockArgument(&g->getOpOperand(operand));
    arg.setType(s.half);
    OpBuilder b = OpBuilder::atBlockBegin(g.getBody());
    auto wide = arith::ExtFOp::create(b, g.getLoc(), b.getF32Type(), arg);
    arg.replaceAllUsesExcept(wide, wide);
  }
  for (auto [g, operand] : s.writes) {
    g.getMatchingBlockArgument(&g->getOpOperand(operand)).setType(s.half);
    auto yield = cast<linalg::YieldOp>(g.getBody()->getTerminator());
    unsigned result = operand - g.getNumDpsInputs();
    auto ext = yield.getOperand(result).getDefiningOp<arith::ExtFOp>();
    yield->setOperand(result, ext.getIn());
    if (ext->use_empty())
      ext.erase();
  }
  for (auto [call, operand] : s.calls) {
    OpBuilder b(call);
    // The pointer again, from the 16-bit view: its offset counts 2-byte elements now.
    call->setOperand(operand, firstElementPointer(b, call.getLoc(), bufferOfPointer(call.getOperand(operand))));
    markHalf(call, operand, s.half);
  }
}

struct PlanCudaHalfStorage : plan::impl::PlanCudaHalfStorageBase<PlanCudaHalfStorage> {
  void runOnOperation() override {
    // Every buffer is judged on the program as it was; then the chosen ones change.
    std::vector<Storage> chosen;
    getOperation().walk([&](memref::AllocOp alloc) {
      if (std::optional<Storage> s = storageOf(alloc))
        chosen.push_back(std::move(*s));
    });
    for (Storage &s : chosen)
      store(s);
  }
};

} // namespace
