// `plan-quantize`: QLoRA's NF4 storage of a fine-tuning plan's frozen base (Dettmers
// et al. 2023; EXTENSIONS.md §1), dequantized where each matrix is used.
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Passes.h"
#include "planrt_nf4.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringSet.h"

namespace plan {
#define GEN_PASS_DEF_PLANQUANTIZE
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanQuantize : plan::impl::PlanQuantizeBase<PlanQuantize> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto train : module.getOps<pl::TrainOp>()) {
      DictionaryAttr adapt = train.getAdaptAttr();
      auto quantize = adapt ? adapt.getAs<DictionaryAttr>("quantize") : DictionaryAttr();
      if (!quantize)
        continue;
      auto model = symbols.lookup<func::FuncOp>(train.getModel());
      if (!model || !model->hasAttr("nn.model")) {
        train.emitOpError() << "needs its model expanded to nn and adapted first (convert-plan-to-nn, plan-lora)";
        return signalPassFailure();
      }
      if (failed(quantizeModel(model, quantize)))
        return signalPassFailure();
    }
  }

  LogicalResult quantizeModel(func::FuncOp f, DictionaryAttr quantize) {
    auto format = quantize.getAs<StringAttr>("format");
    auto block = quantize.getAs<IntegerAttr>("block");
    auto dbl = quantize.getAs<BoolAttr>("double");
    auto matrices = quantize.getAs<ArrayAttr>("matrices");
    if (!format || format.getValue() != "nf4" || !block || block.getInt() < 1 || !dbl || !matrices)
      return f.emitOpError() << "has a quantize dictionary without format \"nf4\", a positive block, double and "
                                "matrices: "
                             << quantize;
    llvm::StringSet<> wanted, done;
    for (Attribute a : matrices)
      wanted.insert(cast<StringAttr>(a).getValue());
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto path = f.getArgAttrOfType<StringAttr>(i, "nn.frozen");
      if (!path || !wanted.contains(path.getValue()))
        continue;
      auto type = cast<RankedTensorType>(f.getArgument(i).getType());
      if (type.getRank() != 2 || !type.hasStaticShape() || !type.getElementType().isF32())
        return f.emitOpError() << "quantizes '" << path.getValue() << "', which is " << type
                               << ", not a static f32 matrix";
      quantizeArg(f, i, block.getInt(), dbl.getValue());
      done.insert(path.getValue());
    }
    for (const auto &w : wanted)
      if (!done.contains(w.getKey()))
        return f.emitOpError() << "has no frozen argument '" << w.getKey()
                               << "', which 'quantize' names; run plan-lora first";
    return success();
  }

  /// Argument i becomes the NF4 storage of its matrix, dequantized before its first use.
  void quantizeArg(func::FuncOp f, unsigned i, int64_t block, bool dbl) {
    OpBuilder b(f.getContext());
    BlockArgument arg = f.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t words = planrt_nf4_bytes(type.getNumElements(), block, dbl) / 4;
    auto storage = RankedTensorType::get({words}, b.getF32Type());
    f.setArgAttr(i, "nn.quant",
                 b.getDictionaryAttr({b.getNamedAttr("format", b.getStringAttr("nf4")),
                                      b.getNamedAttr("block", b.getI64IntegerAttr(block)),
                                      b.getNamedAttr("double", b.getBoolAttr(dbl)),
                                      b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape()))}));
    Block &body = f.getBody().front();
    Operation *first = nullptr;
    for (Operation *user : arg.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!first || top->isBeforeInBlock(first))
        first = top;
    }
    arg.setType(storage);
    SmallVector<Type> inputs(f.getArgumentTypes());
    inputs[i] = storage;
    f.setFunctionType(b.getFunctionType(inputs, f.getResultTypes()));
    if (!first)
      return; // never used: nothing to dequantize
    b.setInsertionPoint(first);
    auto w = nn::DequantizeNF4Op::create(b, first->getLoc(), type, arg, b.getI64IntegerAttr(block),
                                         dbl ? b.getUnitAttr() : UnitAttr());
    arg.replaceAllUsesExcept(w, w);
  }
};

} // namespace
