// `plan-cuda-round-results`: a bf16 (fp16) GEMM, or the cross-entropy's backward, whose
// result is only read to be rounded to bf16 (fp16) writes the rounded values itself.
#include "plan/Target/CUDA/CallOperands.h"
#include "plan/Target/CUDA/Passes.h"

#include "plan/Conversion/LibraryCalls.h"
#include "plan/Target/RuntimeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace plan {
#define GEN_PASS_DEF_PLANCUDAROUNDRESULTS
#include "plan/Target/CUDA/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;
using namespace plan::calls;

namespace {

constexpr int64_t kRowMajor = 101; // CblasRowMajor

/// The 16-bit type a linalg.generic rounds its one input to when that is all it does
/// (arith.truncf, to nearest even, then arith.extf, element by element); null otherwise.
Type roundingType(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 || g.getNumParallelLoops() != g.getNumLoops() ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block &body = g.getRegion().front();
  auto yield = dyn_cast<linalg::YieldOp>(body.back());
  if (body.getOperations().size() != 3 || !yield || yield.getNumOperands() != 1)
    return {};
  // The body is the rounding of its input and nothing else: truncf(input), extf, yield.
  Type t = roundedTo(yield.getOperand(0));
  if (!t || body.front().getOperand(0) != body.getArgument(0))
    return {};
  return t;
}

/// Whether `op`, between a GEMM and the rounding of its result, neither reads nor writes
/// the rounding's output (whose buffer is `out`), so that the GEMM may write it before
/// `op` runs: an op without memory effects, a new buffer, the release of another buffer,
/// or a library kernel (a GEMM, `planrt_k_*`) or element-wise op none of whose buffers is
/// `out`. (The GEMM's own result buffer nothing but the rounding reads: candidate checks
/// that.) Anything else — a runtime call that may reach buffers it is not passed, a
/// loop — keeps the rounding where it is.
bool independent(Operation *op, Value out) {
  if (isMemoryEffectFree(op) && op->getNumRegions() == 0)
    return true;
  if (isa<memref::AllocOp>(op))
    return true;
  if (auto release = dyn_cast<memref::DeallocOp>(op))
    return rootBuffer(release.getMemref()) != out;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    if (call.getCallee() != "cblas_sgemm" && !call.getCallee().starts_with("planrt_k_"))
      return false;
    for (Value arg : call.getArgOperands()) {
      if (!isa<LLVM::LLVMPointerType>(arg.getType()))
        continue;
      Value buffer = bufferOfPointer(arg);
      if (!buffer || rootBuffer(buffer) == out)
        return false;
    }
    return true;
  }
  if (isa<linalg::GenericOp, linalg::FillOp, memref::CopyOp>(op))
    return llvm::none_of(op->getOperands(),
                         [&](Value v) { return isa<MemRefType>(v.getType()) && rootBuffer(v) == out; });
  return false;
}

/// A library call that can round its own result: which operand points to its result,
/// how many elements it writes there, and the roundings it can make (a GEMM: to the type
/// of its precision; the cross-entropy's backward: to bf16 or fp16).
struct Writer {
  unsigned resultOperand;
  int64_t elements;
  bool gemm;
  StringRef precision; // a GEMM's: "bf16" or "f16"
  int inPlace = -1; // an operand that may point to the output itself (the call reads each element before it writes it)
};

/// A bf16 (f16) row-major GEMM with beta 0 writing C whole (ldc = n).
std::optional<Writer> gemmWriter(func::CallOp gemm) {
  auto precision = gemm->getAttrOfType<StringAttr>(kGemmPrecisionAttr);
  if (gemm.getNumOperands() != kGemmOperands || !precision ||
      (precision.getValue() != "bf16" && precision.getValue() != "f16") ||
      constantInt(gemm.getOperand(kGemmOrder)) != kRowMajor ||
      !matchPattern(gemm.getOperand(kGemmBeta), m_AnyZeroFloat()))
    return std::nullopt;
  int64_t m = constantInt(gemm.getOperand(kGemmM)), n = constantInt(gemm.getOperand(kGemmN));
  if (m < 0 || n <= 0 || constantInt(gemm.getOperand(kGemmLdc)) != n)
    return std::nullopt;
  return Writer{kGemmC, m * n, true, precision.getValue()};
}

/// planrt_k_cross_entropy_bwd that does not round yet: its rows x V gradient, which it
/// may write over the logits.
std::optional<Writer> crossEntropyWriter(func::CallOp call) {
  if (call.getNumOperands() != kCeBwdOperands || constantInt(call.getOperand(kCeBwdRoundTo)) != 0)
    return std::nullopt;
  int64_t rows = constantInt(call.getOperand(kCeBwdRows)), V = constantInt(call.getOperand(kCeBwdV));
  if (rows < 0 || V <= 0)
    return std::nullopt;
  return Writer{kCeBwdDlogits, rows * V, false, {}, kCeBwdLogits};
}

/// One library call whose result a later rounding reads, and nothing else does.
struct Candidate {
  func::CallOp call;
  Writer writer;
  linalg::GenericOp rounding;
  memref::AllocOp result;         // the call's result buffer, which goes
  SmallVector<Operation *> chain; // its pointer's ops, last first
  bool hoist = false;             // the output allocated after the call, to move before it
  Type to;                        // the rounding's type
};

/// The rounding after `call` (past ops that do not touch its output: independent) that
/// reads its result, when the call can write the rounded values in its place: the result
/// a fresh buffer of the elements the call writes that nothing else reads, and the
/// rounding's output a contiguous buffer that none of the call's other pointers points
/// into and that is there before the call (or a new one, allocated there).
std::optional<Candidate> candidate(func::CallOp call, Writer writer, DominanceInfo &dom) {
  Candidate c{call, writer, {}, {}, {}, false, {}};
  Value result = bufferOfPointer(call.getOperand(writer.resultOperand), &c.chain);
  c.result = result ? result.getDefiningOp<memref::AllocOp>() : nullptr;
  if (!c.result)
    return std::nullopt;
  MemRefType type = c.result.getType();
  if (!type.getLayout().isIdentity() || !type.hasStaticShape() || !type.getElementType().isF32() ||
      type.getNumElements() != writer.elements)
    return std::nullopt;
  for (Operation *user : result.getUsers())
    if (auto g = dyn_cast<linalg::GenericOp>(user); g && g->getBlock() == call->getBlock() && call->isBeforeInBlock(g))
      c.rounding = g;
  if (!c.rounding || c.rounding.getDpsInputs().size() != 1 || c.rounding.getDpsInputs()[0] != result)
    return std::nullopt;
  c.to = roundingType(c.rounding);
  if (!c.to || (writer.gemm && (writer.precision == "bf16" ? !c.to.isBF16() : !c.to.isF16())))
    return std::nullopt;
  // Nothing but the call (through its pointer), the rounding and a release uses the result.
  for (Operation *user : result.getUsers())
    if (user != c.rounding && !isa<memref::DeallocOp>(user) && (c.chain.empty() || user != c.chain.back()))
      return std::nullopt;
  for (Operation *op : c.chain)
    if (!op->hasOneUse())
      return std::nullopt;
  Value out = c.rounding.getDpsInits()[0];
  auto outType = dyn_cast<MemRefType>(out.getType());
  if (!outType || !outType.getElementType().isF32() || !memref::isStaticShapeAndContiguousRowMajor(outType) ||
      outType.getNumElements() != writer.elements)
    return std::nullopt;
  // An output allocated between the call and the rounding is allocated before the call.
  auto outAlloc = out.getDefiningOp<memref::AllocOp>();
  c.hoist = outAlloc && outAlloc->getBlock() == call->getBlock() && call->isBeforeInBlock(outAlloc) &&
            outAlloc->getNumOperands() == 0;
  if (!c.hoist && !dom.properlyDominates(out, call))
    return std::nullopt;
  // The call now writes the output while it reads its operands: they must be other
  // buffers, and no op between the call and the rounding may touch the output's. A
  // rounding in place (the result its own output) has nothing to gain.
  Value root = rootBuffer(out);
  if (root == result)
    return std::nullopt;
  for (auto [i, operand] : llvm::enumerate(call.getOperands())) {
    if (i == writer.resultOperand || !isa<LLVM::LLVMPointerType>(operand.getType()))
      continue;
    SmallVector<Operation *> chain;
    Value buffer = bufferOfPointer(operand, &chain);
    if (!buffer)
      return std::nullopt;
    // The output itself, from its first element (no offset added), where the call
    // allows it: the logits the cross-entropy's backward overwrites with their gradient.
    bool whole = buffer == out && cast<MemRefType>(out.getType()).getLayout().isIdentity() &&
                 llvm::none_of(chain, [](Operation *op) { return isa<arith::AddIOp>(op); });
    if (rootBuffer(buffer) == root && !(whole && int(i) == writer.inPlace))
      return std::nullopt;
  }
  for (Operation *op = call->getNextNode(); op != c.rounding; op = op->getNextNode())
    if (!independent(op, root))
      return std::nullopt;
  return c;
}

/// The call writes the rounding's output, asked to round it (a GEMM marked
/// plan.round_result, the cross-entropy's backward by its round_to); the rounding, the
/// result buffer and its pointer go.
void fuse(Candidate &c) {
  if (c.hoist)
    c.rounding.getDpsInits()[0].getDefiningOp()->moveBefore(c.call);
  OpBuilder b(c.call);
  Location loc = c.call.getLoc();
  c.call->setOperand(c.writer.resultOperand, firstElementPointer(b, loc, c.rounding.getDpsInits()[0]));
  if (c.writer.gemm)
    c.call->setAttr(kRoundResultAttr, b.getUnitAttr());
  else
    c.call->setOperand(kCeBwdRoundTo, arith::ConstantIntOp::create(b, loc, c.to.isBF16() ? 1 : 2, 32));
  c.rounding.erase();
  for (Operation *op : c.chain)
    op->erase();
  for (Operation *user : llvm::make_early_inc_range(c.result->getUsers()))
    if (isa<memref::DeallocOp>(user))
      user->erase();
  assert(c.result->use_empty() && "plan-cuda-round-results: the result buffer is still used");
  c.result.erase();
}

struct PlanCudaRoundResults : plan::impl::PlanCudaRoundResultsBase<PlanCudaRoundResults> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    DominanceInfo dom(m);
    SmallVector<Candidate> found;
    m.walk([&](func::CallOp call) {
      std::optional<Writer> writer;
      if (call.getCallee() == "cblas_sgemm")
        writer = gemmWriter(call);
      else if (call.getCallee() == rt::name(rt::Fn::planrt_k_cross_entropy_bwd))
        writer = crossEntropyWriter(call);
      if (writer)
        if (std::optional<Candidate> c = candidate(call, *writer, dom))
          found.push_back(std::move(*c));
    });
    for (Candidate &c : found)
      fuse(c);
  }
};

} // namespace
