// `plan-lora`: low-rank adapters (Hu et al. 2021) on a fine-tuning plan's model, its
// base frozen (EXTENSIONS.md §1).
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace plan {
#define GEN_PASS_DEF_PLANLORA
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// The widths of q, k and v in the columns of a matmul that feeds an attention's packed
/// input (directly or through its bias), or none.
SmallVector<int64_t> packedQkv(nn::MatmulOp m) {
  Value v = m.getResult();
  if (v.hasOneUse())
    if (auto bias = dyn_cast<nn::BiasAddOp>(*v.getUsers().begin()))
      v = bias.getResult();
  if (!v.hasOneUse())
    return {};
  auto sdpa = dyn_cast<nn::SDPAOp>(*v.getUsers().begin());
  if (!sdpa)
    return {};
  int64_t heads = int64_t(sdpa.getHeads()), kv = int64_t(sdpa.getKvHeads());
  int64_t width = cast<RankedTensorType>(m.getType()).getShape().back(), hd = width / (heads + 2 * kv);
  return {heads * hd, kv * hd, kv * hd};
}

/// The adapter's path for a weight: `h.0.attn.c_attn.weight` → `h.0.attn.c_attn.lora_a`.
std::string adapterPath(StringRef weight, StringRef which) {
  StringRef base = weight.ends_with(".weight") ? weight.drop_back(7) : weight;
  return (base + "." + which).str();
}

struct PlanLoRA : plan::impl::PlanLoRABase<PlanLoRA> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto train : llvm::to_vector(module.getOps<pl::TrainOp>())) {
      DictionaryAttr adapt = train.getAdaptAttr();
      if (!adapt)
        continue;
      auto model = symbols.lookup<func::FuncOp>(train.getModel());
      if (!model || !model->hasAttr("nn.model")) {
        train.emitOpError() << "needs its model expanded to nn first (convert-plan-to-nn)";
        return signalPassFailure();
      }
      std::string name = (train.getSymName() + "_lora").str();
      if (Operation *clash = symbols.lookup(name)) {
        InFlightDiagnostic d = train.emitError()
                               << "train '" << train.getSymName() << "' needs the name '" << name
                               << "' for its adapted model, but it is taken; rename one of them";
        d.attachNote(clash->getLoc()) << "'" << name << "' is declared here";
        return signalPassFailure();
      }
      auto copy = cast<func::FuncOp>(model->clone());
      copy.setName(name);
      copy.setPrivate();
      symbols.insert(copy, std::next(Block::iterator(model)));
      train.setModelAttr(FlatSymbolRefAttr::get(copy.getNameAttr()));
      if (failed(adaptModel(copy, adapt)))
        return signalPassFailure();
    }
  }

  /// Freezes every parameter of `f` and adds the adapters of adapt.matrices.
  LogicalResult adaptModel(func::FuncOp f, DictionaryAttr adapt) {
    OpBuilder b(f.getContext());
    int64_t rank = cast<IntegerAttr>(adapt.get("rank")).getInt();
    double scale = cast<FloatAttr>(adapt.get("alpha")).getValueAsDouble() / double(rank);
    llvm::StringSet<> wanted;
    for (Attribute a : cast<ArrayAttr>(adapt.get("matrices")))
      wanted.insert(cast<StringAttr>(a).getValue());
    llvm::StringMap<BlockArgument> byPath;
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto path = f.getArgAttrOfType<StringAttr>(i, "nn.param")) {
        f.removeArgAttr(i, "nn.param");
        f.setArgAttr(i, "nn.frozen", path);
        byPath[path.getValue()] = f.getArgument(i);
      }
    llvm::StringSet<> done;
    SmallVector<nn::MatmulOp> matmuls;
    f.walk([&](nn::MatmulOp m) { matmuls.push_back(m); });
    for (nn::MatmulOp m : matmuls) {
      auto w = dyn_cast<BlockArgument>(m.getW());
      StringAttr path = w ? f.getArgAttrOfType<StringAttr>(w.getArgNumber(), "nn.frozen") : StringAttr();
      if (!path || !wanted.contains(path.getValue()) || m.getTransposeW())
        continue;
      if (!done.insert(path.getValue()).second)
        return m.emitOpError() << "multiplies by '" << path.getValue()
                               << "' a second time; LoRA adapts a matrix used once";
      addAdapter(b, f, m, w, path.getValue(), rank, scale);
    }
    for (const auto &w : wanted)
      if (!done.contains(w.getKey()))
        return f.emitOpError() << "has no untransposed nn.matmul by '" << w.getKey()
                               << "', which 'adapt' targets; LoRA adapts the weights of linear and attention layers";
    return success();
  }

  /// y = x·W becomes y + (scale·(x·a))·b, with a and b new trainable arguments: scaled
  /// at rank width, so that neither pass makes a scaled copy of an output-wide value.
  void addAdapter(OpBuilder &b, func::FuncOp f, nn::MatmulOp m, BlockArgument w, StringRef path, int64_t rank,
                  double scale) {
    auto wt = cast<RankedTensorType>(w.getType());
    int64_t in = wt.getDimSize(0), out = wt.getDimSize(1);
    auto dims = f.getArgAttrOfType<ArrayAttr>(w.getArgNumber(), "nn.dims");
    auto dim = [&](unsigned i) {
      return dims && dims.size() == 2 ? cast<StringAttr>(dims[i]) : b.getStringAttr("");
    };
    auto addArg = [&](RankedTensorType t, StringRef which, Attribute d0, Attribute d1, StringRef init, double std) {
      unsigned i = f.getNumArguments();
      (void)f.insertArgument(i, t, {}, f.getLoc());
      f.setArgAttr(i, "nn.param", b.getStringAttr(adapterPath(path, which)));
      f.setArgAttr(i, "nn.dims", b.getArrayAttr({d0, d1}));
      f.setArgAttr(i, "nn.init", b.getStringAttr(init));
      f.setArgAttr(i, "nn.std", b.getF64FloatAttr(std));
      f.setArgAttr(i, "nn.adapter", b.getStringAttr(path));
      return f.getArgument(i);
    };
    StringAttr lora = b.getStringAttr("lora");
    Value a = addArg(RankedTensorType::get({in, rank}, wt.getElementType()), "lora_a", dim(0), lora, "uniform",
                     1.0 / std::sqrt(double(in)));
    Value bm = addArg(RankedTensorType::get({rank, out}, wt.getElementType()), "lora_b", lora, dim(1), "zeros", 0.0);
    // A fused q, k, v projection: its exports name the three (Hugging Face's q_proj, …).
    if (SmallVector<int64_t> qkv = packedQkv(m); !qkv.empty())
      f.setArgAttr(cast<BlockArgument>(bm).getArgNumber(), "nn.qkv", b.getDenseI64ArrayAttr(qkv));
    b.setInsertionPointAfter(m);
    Location loc = m.getLoc();
    auto yt = cast<RankedTensorType>(m.getType());
    SmallVector<int64_t> shape(yt.getShape());
    shape.back() = rank;
    auto xat = RankedTensorType::get(shape, yt.getElementType());
    Value xa = nn::MatmulOp::create(b, loc, xat, m.getX(), a, /*transpose_w=*/false);
    Value scaled = nn::ScaleOp::create(b, loc, xat, xa, b.getF64FloatAttr(scale));
    Value update = nn::MatmulOp::create(b, loc, yt, scaled, bm, /*transpose_w=*/false);
    Value sum = nn::AddOp::create(b, loc, yt, m.getResult(), update);
    m.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  }
};

} // namespace
