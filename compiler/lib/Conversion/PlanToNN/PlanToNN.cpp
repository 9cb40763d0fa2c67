// convert-plan-to-nn: plan.model → func.func of nn ops.
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/Plan/IR/Plan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace plan {
#define GEN_PASS_DEF_CONVERTPLANTONN
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct ConvertPlanToNN : plan::impl::ConvertPlanToNNBase<ConvertPlanToNN> {
  void runOnOperation() override {
    for (pl::ModelOp model : llvm::make_early_inc_range(getOperation().getOps<pl::ModelOp>()))
      if (failed(convert(model)))
        return signalPassFailure();
  }

  LogicalResult convert(pl::ModelOp model) {
    MLIRContext *ctx = model.getContext();
    OpBuilder b(model);
    Block &body = model.getBodyBlock();
    SmallVector<pl::ParamOp> params(body.getOps<pl::ParamOp>());
    SmallVector<Type> inputs = {body.getArgument(0).getType(), body.getArgument(1).getType()};
    for (pl::ParamOp p : params)
      inputs.push_back(p.getType());
    auto ret = cast<pl::ReturnOp>(body.getTerminator());
    auto func = func::FuncOp::create(b, model.getLoc(), model.getSymName(),
                                     FunctionType::get(ctx, inputs, {ret.getLoss().getType()}));
    func->setAttr("nn.model", UnitAttr::get(ctx));
    for (StringRef name : {"layers", "vocab", "max_seq", "num_params"})
      func->setAttr(("nn." + name).str(), model->getAttr(name));
    bool images = cast<RankedTensorType>(inputs[0]).getRank() == 4;
    func.setArgAttr(0, "nn.input", b.getStringAttr(images ? "images" : "tokens"));
    func.setArgAttr(1, "nn.input", b.getStringAttr(images ? "labels" : "targets"));
    llvm::StringMap<Value> byPath;
    Block *entry = func.addEntryBlock();
    for (auto [i, p] : llvm::enumerate(params)) {
      unsigned arg = unsigned(i) + 2;
      func.setArgAttr(arg, "nn.param", p.getSymNameAttr());
      func.setArgAttr(arg, "nn.dims", p.getDims());
      func.setArgAttr(arg, "nn.init", b.getStringAttr(pl::stringifyInit(p.getInit())));
      func.setArgAttr(arg, "nn.std", p.getStdAttr());
      if (p.getResidual())
        func.setArgAttr(arg, "nn.residual", UnitAttr::get(ctx));
      byPath[p.getSymName()] = entry->getArgument(arg);
    }
    IRMapping map;
    map.map(body.getArgument(0), entry->getArgument(0));
    map.map(body.getArgument(1), entry->getArgument(1));
    b.setInsertionPointToEnd(entry);
    for (Operation &op : body) {
      if (auto apply = dyn_cast<pl::ApplyOp>(op)) {
        SmallVector<Value> ps;
        for (Attribute a : apply.getParams())
          ps.push_back(byPath.lookup(cast<SymbolRefAttr>(a).getRootReference()));
        SmallVector<Value> in;
        for (Value v : apply.getInputs())
          in.push_back(map.lookup(v));
        Value out = expand(b, apply, ps, in);
        if (!out)
          return apply.emitOpError() << "has no nn expansion";
        map.map(apply.getResult(), out);
      } else if (auto r = dyn_cast<pl::ReturnOp>(op)) {
        func::ReturnOp::create(b, r.getLoc(), map.lookup(r.getLoss()));
      }
    }
    model.erase();
    return success();
  }

  /// The nn ops of one plan.apply; returns the value that replaces its result.
  Value expand(OpBuilder &b, pl::ApplyOp apply, ArrayRef<Value> ps, ArrayRef<Value> in) {
    Location loc = apply.getLoc();
    auto type = cast<RankedTensorType>(apply.getType());
    auto f64 = [&](StringRef name, double dflt) {
      auto a = apply->getAttrOfType<FloatAttr>(name);
      return b.getF64FloatAttr(a ? a.getValueAsDouble() : dflt);
    };
    auto i64 = [&](StringRef name) { return apply->getAttrOfType<IntegerAttr>(name); };
    // [batch, seq, out] (seq 1 in a model over images) of a matmul of x by w.
    auto hidden = [&](Value x, Value w, bool transposed) {
      auto wt = cast<RankedTensorType>(w.getType());
      return RankedTensorType::get({ShapedType::kDynamic, cast<RankedTensorType>(x.getType()).getDimSize(1),
                                    wt.getDimSize(transposed ? 0 : 1)},
                                   wt.getElementType());
    };
    auto linear = [&](Value x, Value w, Value bias) -> Value {
      Value y = nn::MatmulOp::create(b, loc, hidden(x, w, false), x, w, /*transpose_w=*/false);
      return bias ? nn::BiasAddOp::create(b, loc, y.getType(), y, bias).getResult() : y;
    };
    switch (apply.getKind()) {
    case pl::LayerKind::embedding:
      return nn::EmbeddingOp::create(b, loc, type, ps[0], in[0], Value());
    case pl::LayerKind::attend:
      return nn::MatmulOp::create(b, loc, type, in[0], ps[0], /*transpose_w=*/true);
    case pl::LayerKind::linear:
      return linear(in[0], ps[0], ps.size() > 1 ? ps[1] : Value());
    case pl::LayerKind::layernorm:
      return nn::LayerNormOp::create(b, loc, type, in[0], ps[0], ps.size() > 1 ? ps[1] : Value(), f64("eps", 1e-5));
    case pl::LayerKind::rmsnorm:
      return nn::RMSNormOp::create(b, loc, type, in[0], ps[0], f64("eps", 1e-6));
    case pl::LayerKind::attention: {
      bool bias = ps.size() == 4;
      Value cAttnW = ps[0], cAttnB = bias ? ps[1] : Value();
      Value cProjW = bias ? ps[2] : ps[1], cProjB = bias ? ps[3] : Value();
      Value qkv = linear(in[0], cAttnW, cAttnB);
      auto heads = apply->getAttrOfType<IntegerAttr>("heads");
      auto kv = apply->getAttrOfType<IntegerAttr>("kv_heads");
      auto causal = apply->getAttrOfType<BoolAttr>("causal");
      auto rope = apply->getAttrOfType<BoolAttr>("rope");
      Value o =
          nn::SDPAOp::create(b, loc, type, qkv, heads, kv, causal && causal.getValue() ? b.getUnitAttr() : UnitAttr(),
                             rope && rope.getValue() ? b.getUnitAttr() : UnitAttr(), f64("rope_theta", 10000.0));
      return linear(o, cProjW, cProjB);
    }
    case pl::LayerKind::gelu:
      return nn::GeluOp::create(b, loc, type, in[0]);
    case pl::LayerKind::silu:
      return nn::SiluOp::create(b, loc, type, in[0]);
    case pl::LayerKind::relu:
      return nn::ReluOp::create(b, loc, type, in[0]);
    case pl::LayerKind::dropout:
      return nn::DropoutOp::create(b, loc, type, in[0], f64("p", 0));
    case pl::LayerKind::add:
      return nn::AddOp::create(b, loc, type, in[0], in[1]);
    case pl::LayerKind::sub:
      return nn::SubOp::create(b, loc, type, in[0], in[1]);
    case pl::LayerKind::mul:
      return nn::MulOp::create(b, loc, type, in[0], in[1]);
    case pl::LayerKind::positions:
      return nn::PositionsOp::create(b, loc, in[0].getType(), in[0], Value());
    case pl::LayerKind::cross_entropy:
      return nn::CrossEntropyOp::create(b, loc, type, in[0], in[1]);
    case pl::LayerKind::conv2d:
      return nn::Conv2dOp::create(b, loc, type, in[0], ps[0], ps.size() > 1 ? ps[1] : Value(), i64("stride"),
                                  i64("pad"));
    case pl::LayerKind::batchnorm: // its running statistics are numbered by plan-train-step
      return nn::BatchNormOp::create(b, loc, type, nn::BatchNormOp::statsType(cast<RankedTensorType>(ps[0].getType())),
                                     in[0], ps[0], ps[1], f64("eps", 1e-5), IntegerAttr(), IntegerAttr(),
                                     IntegerAttr(), f64("momentum", 0.1), UnitAttr())
          .getResult();
    case pl::LayerKind::maxpool:
      return nn::MaxPool2dOp::create(b, loc, type, in[0], i64("kernel"), i64("stride"), i64("pad"));
    case pl::LayerKind::avgpool:
      return nn::AvgPoolOp::create(b, loc, type, in[0]);
    case pl::LayerKind::flatten:
      return nn::FlattenOp::create(b, loc, type, in[0]);
    }
    return Value();
  }
};

} // namespace
