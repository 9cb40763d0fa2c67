// A model over images at the train plan's image size: its forward function has open
// height and width (and channels where the first layer does not fix them); the plan's
// data gives them, and every image value's shape follows from the input's, layer by
// layer, as the nn verifiers state it.
#include "plan/Training/Training.h"

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "planrt_manifest.h"

#include "mlir/IR/Verifier.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace plan::training {

SmallVector<int64_t> imageShapeOf(pl::TrainOp train) {
  namespace key = planrt::manifest::key;
  auto images = train->getAttrOfType<DictionaryAttr>(key::images);
  if (!images)
    return {};
  SmallVector<int64_t> chw;
  for (const char *k : {key::channels, key::height, key::width})
    if (auto i = images.getAs<IntegerAttr>(k))
      chw.push_back(i.getInt());
  return chw;
}

namespace {

RankedTensorType imageType(RankedTensorType like, int64_t n, int64_t c, int64_t h, int64_t w) {
  return RankedTensorType::get({n, c, h, w}, like.getElementType());
}

/// [N, C, P, Q] of a window of `k` at `stride` with `pad` over x [N, C, H, W] (C given).
RankedTensorType windowed(Value x, int64_t c, int64_t k, int64_t stride, int64_t pad) {
  auto t = cast<RankedTensorType>(x.getType());
  return imageType(t, t.getDimSize(0), c, nn::windowedExtent(t.getDimSize(2), k, stride, pad),
                   nn::windowedExtent(t.getDimSize(3), k, stride, pad));
}

/// The type of `op`'s result `r` once its operands have their static types; null where
/// it does not depend on them.
Type refined(Operation *op, OpResult r) {
  auto operand = [&](unsigned i) { return cast<RankedTensorType>(op->getOperand(i).getType()); };
  return llvm::TypeSwitch<Operation *, Type>(op)
      .Case([&](nn::Conv2dOp o) -> Type {
        auto w = cast<RankedTensorType>(o.getW().getType());
        return windowed(o.getX(), w.getDimSize(0), w.getDimSize(2), o.getStride(), o.getPad());
      })
      .Case([&](nn::MaxPool2dOp o) -> Type {
        return windowed(o.getX(), operand(0).getDimSize(1), o.getKernel(), o.getStride(), o.getPad());
      })
      .Case([&](nn::AvgPoolOp) -> Type {
        RankedTensorType x = operand(0);
        return imageType(x, x.getDimSize(0), x.getDimSize(1), 1, 1);
      })
      .Case([&](nn::BatchNormOp o) -> Type { return r.getResultNumber() == 0 ? Type(o.getX().getType()) : Type(); })
      .Case([&](nn::FlattenOp) -> Type {
        RankedTensorType x = operand(0);
        return RankedTensorType::get({x.getDimSize(0), 1, x.getDimSize(1) * x.getDimSize(2) * x.getDimSize(3)},
                                     x.getElementType());
      })
      .Case<nn::ReluOp, nn::GeluOp, nn::SiluOp, nn::DropoutOp, nn::AddOp, nn::SubOp, nn::MulOp>(
          [&](Operation *) -> Type { return operand(0); })
      .Default([](Operation *) { return Type(); });
}

} // namespace

/// `batchnorm = sync` over a data axis of more than one rank: every nn.batchnorm of f
/// normalises by the group's statistics (SyncBatchNorm), its gradient likewise.
static void synchroniseBatchNorm(func::FuncOp f, pl::TrainOp train) {
  namespace key = planrt::manifest::key;
  auto images = train->getAttrOfType<DictionaryAttr>(key::images);
  auto mode = images ? images.getAs<StringAttr>(key::batchnorm) : StringAttr();
  ArrayRef<Attribute> data = train.getParallel().getData().getValue();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  if (!mode || mode.getValue() != "sync" || data.size() != 1 || !mesh) // sema refuses several data axes
    return;
  for (auto [i, a] : llvm::enumerate(mesh.getAxes().getAsRange<pl::AxisAttr>()))
    if (a.getName() == cast<StringAttr>(data.front()) && a.getSize() > 1) {
      Builder b(f.getContext());
      f.walk([&](nn::BatchNormOp bn) {
        bn.setAxisAttr(b.getI64IntegerAttr(int64_t(i)));
        bn.setRanksAttr(b.getI64IntegerAttr(a.getSize()));
      });
    }
}

/// Numbers f's batchnorm layers in the step's table of running statistics (`running`:
/// one index per layer, a layer applied twice updates its statistics twice, as PyTorch's
/// module does) and lists them on f as `nn.running`, [{name, channels}] by index, the
/// name the weight's without `.weight`.
static void numberBatchNorms(func::FuncOp f) {
  Builder b(f.getContext());
  llvm::DenseMap<Value, int64_t> index;
  SmallVector<Attribute> layers;
  f.walk([&](nn::BatchNormOp bn) {
    if (!bn.getMomentum())
      return; // not a layer of the language (a test's op): no running statistics
    auto [it, fresh] = index.try_emplace(bn.getWeight(), int64_t(layers.size()));
    bn.setRunningAttr(b.getI64IntegerAttr(it->second));
    if (!fresh)
      return;
    std::string name = "batchnorm" + std::to_string(it->second);
    if (auto arg = dyn_cast<BlockArgument>(bn.getWeight()))
      if (auto param = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "nn.param"))
        name = param.getValue().ends_with(".weight") ? param.getValue().drop_back(7).str() : param.getValue().str();
    int64_t channels = cast<RankedTensorType>(bn.getWeight().getType()).getDimSize(0);
    layers.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(name)), b.getNamedAttr("channels", b.getI64IntegerAttr(channels))}));
  });
  if (!layers.empty())
    f->setAttr("nn.running", b.getArrayAttr(layers));
}

LogicalResult specializeImages(func::FuncOp f, pl::TrainOp train) {
  SmallVector<int64_t> chw = imageShapeOf(train);
  if (chw.size() != 3)
    return success(); // a model over tokens
  Block &body = f.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto input = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "nn.input");
    if (!input || input.getValue() != "images")
      continue;
    auto t = cast<RankedTensorType>(arg.getType());
    if (!t.isDynamicDim(1) && t.getDimSize(1) != chw[0])
      return train.emitError() << "the model's first layer takes " << t.getDimSize(1) << " channels, but the images "
                               << "of train '" << train.getSymName() << "' have " << chw[0];
    arg.setType(imageType(t, t.getDimSize(0), chw[0], chw[1], chw[2]));
  }
  f.setFunctionType(FunctionType::get(f.getContext(), body.getArgumentTypes(), f.getResultTypes()));
  for (Operation &op : body.without_terminator()) {
    for (OpResult r : op.getResults())
      if (Type t = refined(&op, r))
        r.setType(t);
    // A window larger than the image (it has shrunk too far) is the verifier's error,
    // at the layer, with the sizes; a flatten of the wrong width meets the linear here.
    if (auto conv = dyn_cast<nn::Conv2dOp>(op); conv || isa<nn::MaxPool2dOp>(op))
      if (failed(verify(&op)))
        return failure();
    if (auto mm = dyn_cast<nn::MatmulOp>(op); mm && mm.getX().getDefiningOp<nn::FlattenOp>()) {
      int64_t features = cast<RankedTensorType>(mm.getX().getType()).getDimSize(2);
      int64_t in = cast<RankedTensorType>(mm.getW().getType()).getDimSize(0);
      if (features != in) {
        auto layer = dyn_cast<NameLoc>(mm.getLoc());
        std::string who = layer ? "'" + layer.getName().str() + "' takes " : "the linear takes ";
        return mm.emitError() << who << in << " features, but the flattened " << chw[0] << "×" << chw[1] << "×"
                              << chw[2] << " images give " << features << " here";
      }
    }
  }
  synchroniseBatchNorm(f, train);
  numberBatchNorms(f);
  return verify(f);
}

} // namespace plan::training
