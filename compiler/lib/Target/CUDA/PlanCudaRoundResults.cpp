// `plan-cuda-round-results`: a bf16 (fp16) GEMM whose result is only read to be rounded to
// bf16 (fp16) writes the rounded values itself.
#include "plan/Target/CUDA/Passes.h"

#include "plan/Conversion/LibraryCalls.h"

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

namespace {

// cblas_sgemm's operands (CblasRowMajor, transA, transB, m, n, k, alpha, A, lda, B, ldb,
// beta, C, ldc).
enum GemmOperand { kOrder = 0, kM = 3, kN = 4, kA = 7, kB = 9, kBeta = 11, kC = 12, kLdc = 13, kGemmOperands = 14 };
constexpr int64_t kRowMajor = 101; // CblasRowMajor

/// The buffer a library call's pointer argument points into, through the address
/// arithmetic of firstElementPointer; `chain` collects those ops, last first.
Value bufferOf(Value ptr, SmallVectorImpl<Operation *> *chain = nullptr) {
  Value v = ptr;
  while (Operation *def = v.getDefiningOp()) {
    if (chain)
      chain->push_back(def);
    if (auto extract = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(def))
      return extract.getSource();
    if (isa<LLVM::IntToPtrOp, arith::IndexCastOp>(def))
      v = def->getOperand(0);
    else if (auto add = dyn_cast<arith::AddIOp>(def))
      v = add.getLhs();
    else
      return {};
  }
  return {};
}

/// The buffer a view is of (through subviews, reshapes and casts), or the value itself.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// The 16-bit type a linalg.generic rounds its one input to when that is all it does
/// (arith.truncf, to nearest even, then arith.extf, element by element); null otherwise.
Type roundingType(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 || g.getNumParallelLoops() != g.getNumLoops() ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 3)
    return {};
  auto trunc = dyn_cast<arith::TruncFOp>(body.front());
  auto ext = dyn_cast<arith::ExtFOp>(*std::next(body.begin()));
  auto yield = dyn_cast<linalg::YieldOp>(body.back());
  if (!trunc || !ext || !yield || trunc.getIn() != body.getArgument(0) || ext.getIn() != trunc.getResult() ||
      yield.getNumOperands() != 1 || yield.getOperand(0) != ext.getResult() || trunc.getRoundingmodeAttr() ||
      !trunc.getIn().getType().isF32() || !ext.getType().isF32())
    return {};
  return trunc.getType();
}

int64_t constantInt(Value v) {
  APInt value;
  return matchPattern(v, m_ConstantInt(&value)) ? value.getSExtValue() : -1;
}

/// One GEMM whose result the next rounding reads, and nothing else does.
struct Candidate {
  func::CallOp gemm;
  linalg::GenericOp rounding;
  memref::AllocOp result;        // the GEMM's result buffer, which goes
  SmallVector<Operation *> chain; // its pointer's ops, last first
  bool hoist = false;             // the output allocated after the GEMM, to move before it
};

/// The rounding right after `gemm` (past ops without memory effects, new buffers and the
/// release of other buffers) that reads its result, when the GEMM can write the rounded values in
/// its place: the result a fresh buffer nothing else reads, C row-major and whole
/// (ldc = n, m x n elements), beta 0, and the rounding's output a contiguous buffer that
/// is neither operand's and is there before the GEMM (or a new one, allocated there).
std::optional<Candidate> candidate(func::CallOp gemm, DominanceInfo &dom) {
  auto precision = gemm->getAttrOfType<StringAttr>(kGemmPrecisionAttr);
  if (gemm.getNumOperands() != kGemmOperands || !precision ||
      (precision.getValue() != "bf16" && precision.getValue() != "f16") ||
      constantInt(gemm.getOperand(kOrder)) != kRowMajor || !matchPattern(gemm.getOperand(kBeta), m_AnyZeroFloat()))
    return std::nullopt;
  Candidate c{gemm, {}, {}, {}, false};
  Value result = bufferOf(gemm.getOperand(kC), &c.chain);
  c.result = result ? result.getDefiningOp<memref::AllocOp>() : nullptr;
  if (!c.result)
    return std::nullopt;
  MemRefType type = c.result.getType();
  int64_t m = constantInt(gemm.getOperand(kM)), n = constantInt(gemm.getOperand(kN));
  if (!type.getLayout().isIdentity() || !type.hasStaticShape() || !type.getElementType().isF32() || m < 0 ||
      n <= 0 || constantInt(gemm.getOperand(kLdc)) != n || type.getNumElements() != m * n)
    return std::nullopt;
  Operation *next = gemm->getNextNode();
  for (; next && !isa<linalg::GenericOp>(next); next = next->getNextNode())
    if (!isMemoryEffectFree(next) && !isa<memref::AllocOp, memref::DeallocOp>(next))
      return std::nullopt;
  c.rounding = dyn_cast_or_null<linalg::GenericOp>(next);
  if (!c.rounding || c.rounding.getDpsInputs().size() != 1 || c.rounding.getDpsInputs()[0] != result)
    return std::nullopt;
  Type to = roundingType(c.rounding);
  if (!to || (precision.getValue() == "bf16" ? !to.isBF16() : !to.isF16()))
    return std::nullopt;
  // Nothing but the GEMM (through its pointer), the rounding and a release uses the result.
  for (Operation *user : result.getUsers())
    if (user != c.rounding && !isa<memref::DeallocOp>(user) && (c.chain.empty() || user != c.chain.back()))
      return std::nullopt;
  for (Operation *op : c.chain)
    if (!op->hasOneUse())
      return std::nullopt;
  Value out = c.rounding.getDpsInits()[0];
  auto outType = dyn_cast<MemRefType>(out.getType());
  if (!outType || !outType.getElementType().isF32() || !memref::isStaticShapeAndContiguousRowMajor(outType) ||
      outType.getNumElements() != m * n)
    return std::nullopt;
  // An output allocated between the GEMM and the rounding is allocated before the GEMM.
  auto outAlloc = out.getDefiningOp<memref::AllocOp>();
  c.hoist = outAlloc && outAlloc->getBlock() == gemm->getBlock() && gemm->isBeforeInBlock(outAlloc) &&
            outAlloc->getNumOperands() == 0;
  if (!c.hoist && !dom.properlyDominates(out, gemm))
    return std::nullopt;
  // The GEMM now writes the output while it reads A and B: they must be other buffers,
  // and no buffer released between the GEMM and the rounding may be the output's. A
  // rounding in place (the result its own output) has nothing to gain.
  Value root = rootOf(out);
  if (root == result)
    return std::nullopt;
  for (unsigned i : {kA, kB}) {
    Value operand = bufferOf(gemm.getOperand(i));
    if (!operand || rootOf(operand) == root)
      return std::nullopt;
  }
  for (Operation *op = gemm->getNextNode(); op != c.rounding; op = op->getNextNode())
    if (auto release = dyn_cast<memref::DeallocOp>(op); release && rootOf(release.getMemref()) == root)
      return std::nullopt;
  return c;
}

/// The GEMM writes the rounding's output, marked to round it; the rounding, the result
/// buffer and its pointer go.
void fuse(Candidate &c) {
  if (c.hoist)
    c.rounding.getDpsInits()[0].getDefiningOp()->moveBefore(c.gemm);
  OpBuilder b(c.gemm);
  c.gemm->setOperand(kC, firstElementPointer(b, c.gemm.getLoc(), c.rounding.getDpsInits()[0]));
  c.gemm->setAttr(kRoundResultAttr, b.getUnitAttr());
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
      if (call.getCallee() == "cblas_sgemm")
        if (std::optional<Candidate> c = candidate(call, dom))
          found.push_back(std::move(*c));
    });
    for (Candidate &c : found)
      fuse(c);
  }
};

} // namespace
