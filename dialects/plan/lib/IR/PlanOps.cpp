// Operations of the `plan` dialect: verifiers and custom syntax.
#include "plan/Dialect/Plan/IR/Plan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <set>

using namespace mlir;
using namespace plan::pl;

//===----------------------------------------------------------------------===//
// Custom directives: enums printed as bare keywords.
//===----------------------------------------------------------------------===//

/// An enum attribute as a bare keyword (`layernorm`, `normal`).
template <typename EnumAttrT, typename Enum>
static ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr, std::optional<Enum> (*symbolize)(StringRef),
                                    StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<Enum> value = symbolize(keyword);
  if (!value)
    return parser.emitError(loc) << "unknown " << what << " '" << keyword << "'";
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

static ParseResult parseLayerKind(OpAsmParser &parser, LayerKindAttr &attr) {
  return parseEnumKeyword(parser, attr, symbolizeLayerKind, "layer kind");
}

static void printLayerKind(OpAsmPrinter &printer, Operation *, LayerKindAttr attr) {
  printer << stringifyLayerKind(attr.getValue());
}

static ParseResult parseInitKind(OpAsmParser &parser, InitAttr &attr) {
  return parseEnumKeyword(parser, attr, symbolizeInit, "initialisation");
}

static void printInitKind(OpAsmPrinter &printer, Operation *, InitAttr attr) {
  printer << stringifyInit(attr.getValue());
}

#define GET_OP_CLASSES
#include "plan/Dialect/Plan/IR/PlanOps.cpp.inc"

//===----------------------------------------------------------------------===//
// plan.mesh
//===----------------------------------------------------------------------===//

int64_t MeshOp::getAxisSize(StringRef name) {
  for (Attribute a : getAxes())
    if (auto axis = cast<AxisAttr>(a); axis.getName().getValue() == name)
      return axis.getSize();
  return 0;
}

LogicalResult MeshOp::verify() {
  if (getDevicesPerNodeAttr().getInt() < 1 || getNodesAttr().getInt() < 1)
    return emitOpError() << "needs at least one device per node and one node";
  if (getAxes().empty())
    return emitOpError() << "needs at least one axis";
  std::set<std::string> names;
  int64_t product = 1;
  for (Attribute a : getAxes()) {
    auto axis = cast<AxisAttr>(a);
    if (!names.insert(axis.getName().str()).second)
      return emitOpError() << "has two axes named '" << axis.getName().getValue() << "'";
    if (__builtin_mul_overflow(product, axis.getSize(), &product))
      return emitOpError() << "axis sizes overflow";
  }
  if (product != getNumDevices())
    return emitOpError() << "axes multiply to " << product << " but the mesh has " << getNumDevices() << " devices";
  if (getMemory() && *getMemory() <= 0)
    return emitOpError() << "memory must be positive";
  if ((getPeak() && !(getPeak()->convertToDouble() > 0)) || (getHbm() && !(getHbm()->convertToDouble() > 0)))
    return emitOpError() << "hardware figures must be positive";
  if (auto links = getLinks())
    for (NamedAttribute l : *links)
      if (!isa<FloatAttr>(l.getValue()))
        return emitOpError() << "link '" << l.getName().getValue() << "' must be a bandwidth in bytes/s (f64)";
  return success();
}

//===----------------------------------------------------------------------===//
// plan.model, plan.param, plan.apply
//===----------------------------------------------------------------------===//

void ModelOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (region.empty() || region.front().getNumArguments() != 2)
    return;
  setNameFn(region.front().getArgument(0), "tokens");
  setNameFn(region.front().getArgument(1), "targets");
}

void ApplyOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  // Values read as the layer that made them: %h.0.attn, %ln_f.
  if (auto layer = (*this)->getAttrOfType<StringAttr>("layer"))
    setNameFn(getResult(), layer.getValue());
}

LogicalResult ModelOp::verify() {
  // I64Attr getters are unsigned: read the attributes signed to see negatives.
  if (getLayersAttr().getInt() < 0 || getVocabAttr().getInt() < 0 || getMaxSeqAttr().getInt() < 0 ||
      getNumParamsAttr().getInt() < 0)
    return emitOpError() << "sizes must not be negative";
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBodyBlock();
  int64_t dyn = ShapedType::kDynamic;
  auto tokens = RankedTensorType::get({dyn, dyn}, IntegerType::get(getContext(), 32));
  // A model over images: [batch, channels, height, width] floats (the channels may be
  // open), and their class labels.
  auto images = body.getNumArguments() > 0 ? dyn_cast<RankedTensorType>(body.getArgument(0).getType()) : nullptr;
  bool isImages = images && images.getRank() == 4 && isa<FloatType>(images.getElementType()) &&
                  images.isDynamicDim(0) && images.isDynamicDim(2) && images.isDynamicDim(3);
  auto labels = RankedTensorType::get({dyn, 1}, IntegerType::get(getContext(), 32));
  if (body.getNumArguments() != 2 || (!isImages && body.getArgument(0).getType() != tokens) ||
      body.getArgument(1).getType() != (isImages ? labels : tokens))
    return emitOpError() << "takes two arguments, tokens and targets of type " << tokens
                         << ", or images [?, C, ?, ?] and labels " << labels;
  int64_t total = 0;
  for (ParamOp p : body.getOps<ParamOp>()) {
    int64_t n = p.getTensorType().getNumElements();
    if (__builtin_add_overflow(total, n, &total))
      return emitOpError() << "parameter count overflows";
  }
  if (total != getNumParamsAttr().getInt())
    return emitOpError() << "num_params is " << getNumParams() << " but its parameters hold " << total << " elements";
  return success();
}

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (static_cast<int64_t>(getDims().size()) != type.getRank())
    return emitOpError() << "names " << getDims().size() << " logical dims for a rank-" << type.getRank() << " tensor";
  for (int64_t d : type.getShape())
    if (d < 1)
      return emitOpError() << "has an empty dimension";
  if (!isa<FloatType>(type.getElementType()))
    return emitOpError() << "must hold floating-point values";
  if (getStd().convertToDouble() < 0)
    return emitOpError() << "has a negative init std";
  return success();
}

namespace {
struct Arity {
  unsigned inputs, minParams, maxParams;
};
} // namespace

static Arity arityOf(LayerKind kind) {
  switch (kind) {
  case LayerKind::embedding:
  case LayerKind::attend:
    return {1, 1, 1};
  case LayerKind::linear:
  case LayerKind::layernorm:
    return {1, 1, 2};
  case LayerKind::rmsnorm:
    return {1, 1, 1};
  case LayerKind::attention:
    return {1, 2, 4};
  case LayerKind::conv2d:
    return {1, 1, 2};
  case LayerKind::batchnorm:
    return {1, 2, 2};
  case LayerKind::cross_entropy:
  case LayerKind::add:
  case LayerKind::sub:
  case LayerKind::mul:
    return {2, 0, 0};
  default:
    return {1, 0, 0};
  }
}

LogicalResult ApplyOp::verify() {
  Arity a = arityOf(getKind());
  StringRef name = stringifyLayerKind(getKind());
  if (getInputs().size() != a.inputs)
    return emitOpError() << "'" << name << "' takes " << a.inputs << " input(s), not " << getInputs().size();
  if (getParams().size() < a.minParams || getParams().size() > a.maxParams)
    return emitOpError() << "'" << name << "' reads " << a.minParams << " to " << a.maxParams << " parameters, not "
                         << getParams().size();
  if (getKind() == LayerKind::attention && getParams().size() != 2 && getParams().size() != 4)
    return emitOpError() << "attention reads its c_attn and c_proj weights, with or without both biases "
                            "(2 or 4 parameters), not "
                         << getParams().size();
  if (getKind() == LayerKind::attention) {
    auto heads = (*this)->getAttrOfType<IntegerAttr>("heads");
    auto kv = (*this)->getAttrOfType<IntegerAttr>("kv_heads");
    if (!heads || !kv || heads.getInt() < 1 || kv.getInt() < 1 || heads.getInt() % kv.getInt() != 0)
      return emitOpError() << "attention needs 'heads' and 'kv_heads', with kv_heads dividing heads";
  }
  if (getKind() == LayerKind::cross_entropy &&
      !(isa<RankedTensorType>(getType()) && cast<RankedTensorType>(getType()).getRank() == 0))
    return emitOpError() << "cross_entropy returns a scalar loss";
  return success();
}

LogicalResult ApplyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto model = (*this)->getParentOfType<ModelOp>();
  SmallVector<ParamOp> params;
  for (Attribute a : getParams()) {
    auto ref = cast<SymbolRefAttr>(a);
    auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(model, ref);
    if (!param)
      return emitOpError() << "reads " << ref << ", which is not a plan.param of this model";
    params.push_back(param);
  }
  auto lastDim = [](Type t) -> int64_t {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.getRank() > 0 ? r.getShape().back() : ShapedType::kDynamic;
  };
  if (params.empty() || getInputs().empty())
    return success();
  ArrayRef<int64_t> w = params[0].getTensorType().getShape();
  int64_t in = lastDim(getInputs()[0].getType()), out = lastDim(getType());
  switch (getKind()) {
  case LayerKind::linear:
    if (w.size() != 2 || (in != ShapedType::kDynamic && in != w[0]) || (out != ShapedType::kDynamic && out != w[1]))
      return emitOpError() << "linear weight " << params[0].getTensorType() << " does not map "
                           << getInputs()[0].getType() << " to " << getType();
    break;
  case LayerKind::embedding:
    if (w.size() != 2 || (out != ShapedType::kDynamic && out != w[1]))
      return emitOpError() << "embedding weight " << params[0].getTensorType() << " does not produce " << getType();
    break;
  case LayerKind::layernorm:
  case LayerKind::rmsnorm:
    if (w.size() != 1 || (in != ShapedType::kDynamic && in != w[0]))
      return emitOpError() << "norm weight " << params[0].getTensorType() << " does not match "
                           << getInputs()[0].getType();
    break;
  default:
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// plan.train, plan.retrieval, plan.generate
//===----------------------------------------------------------------------===//

LogicalResult TrainOp::verify() {
  for (auto [name, v] : {std::pair<StringRef, int64_t>{"batch", getBatch()},
                         {"micro", getMicro()},
                         {"seq", getSeq()},
                         {"accumulation", getAccumulation()},
                         {"steps", getSteps()}})
    if (v < 1)
      return emitOpError() << "'" << name << "' must be at least 1, not " << v;
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "learning rate must be positive";
  if (getLossScale() == LossScale::fixed && !getFixedLossScale())
    return emitOpError() << "a fixed loss scale needs 'fixed_loss_scale'";
  if (getLossScale() != LossScale::none && getPrecision() != Precision::fp16)
    return emitOpError() << "loss scaling applies only to fp16";
  for (NamedAttribute s : getShard())
    if (!isa<StringAttr>(s.getValue()))
      return emitOpError() << "'shard' maps logical dims to axis names";
  return success();
}

/// A model reference: a plan.model, or the forward function it expanded into
/// (marked `nn.model`) in later stages.
static Operation *lookupModel(SymbolTableCollection &symbolTable, Operation *from, SymbolRefAttr ref) {
  Operation *op = symbolTable.lookupNearestSymbolFrom(from, ref);
  return op && (isa<ModelOp>(op) || op->hasAttr("nn.model")) ? op : nullptr;
}

LogicalResult TrainOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *model = lookupModel(symbolTable, *this, getModelAttr());
  if (!model)
    return emitOpError() << "model " << getModelAttr() << " is not a plan.model";
  auto maxSeqAttr = model->getAttrOfType<IntegerAttr>(isa<ModelOp>(model) ? "max_seq" : "nn.max_seq");
  int64_t maxSeq = maxSeqAttr ? maxSeqAttr.getInt() : 0;
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
  if (!mesh)
    return emitOpError() << "mesh " << getMeshAttr() << " is not a plan.mesh";
  ParallelAttr par = getParallel();
  std::set<std::string> used;
  int64_t dp = 1;
  auto use = [&](StringRef axis, StringRef role) -> LogicalResult {
    if (axis.empty())
      return success();
    if (!mesh.getAxisSize(axis))
      return emitOpError() << role << " axis '" << axis << "' is not an axis of " << getMeshAttr();
    if (!used.insert(axis.str()).second)
      return emitOpError() << "mesh axis '" << axis << "' has two roles";
    return success();
  };
  for (Attribute a : par.getData()) {
    if (failed(use(cast<StringAttr>(a).getValue(), "data")))
      return failure();
    dp *= mesh.getAxisSize(cast<StringAttr>(a).getValue());
  }
  for (Attribute a : par.getReplicate())
    if (failed(use(cast<StringAttr>(a).getValue(), "replicate")))
      return failure();
  if (failed(use(par.getTensor().getValue(), "tensor")) || failed(use(par.getPipeline().getValue(), "pipeline")))
    return failure();
  if (getBatch() != getMicro() * dp * getAccumulation())
    return emitOpError() << "batch " << getBatch() << " != micro " << getMicro() << " × data-parallel size " << dp
                         << " × accumulation " << getAccumulation();
  if (!par.getPipeline().getValue().empty() && par.getStages() % mesh.getAxisSize(par.getPipeline().getValue()) != 0)
    return emitOpError() << "pipeline stages do not divide over the pipeline axis";
  if (maxSeq > 0 && getSeqAttr().getInt() > maxSeq)
    return emitOpError() << "seq " << getSeq() << " exceeds the model's " << maxSeq << " positions";
  return success();
}

LogicalResult RetrievalOp::verify() {
  int64_t size = getChunkSizeAttr().getInt(), overlap = getChunkOverlapAttr().getInt();
  if (size < 1 || overlap < 0 || overlap >= size)
    return emitOpError() << "chunk overlap must lie in [0, chunk_size)";
  if (getEmbedDimAttr().getInt() < 1 || getTopAttr().getInt() < 1 || getNprobeAttr().getInt() < 1 ||
      getRrfKAttr().getInt() < 1)
    return emitOpError() << "embed_dim, top, nprobe and rrf_k must be at least 1";
  double threshold = getChunkThresholdAttr().getValueAsDouble();
  if (!(threshold >= 0 && threshold <= 1))
    return emitOpError() << "chunk_threshold must lie in [0, 1]";
  if (getEfSearchAttr().getInt() < 0 || getEfConstructionAttr().getInt() < 0)
    return emitOpError() << "ef_search and ef_construction must not be negative";
  if (getVectorWeight().convertToDouble() < 0 || getKeywordWeight().convertToDouble() < 0)
    return emitOpError() << "search weights must not be negative";
  if (getIndex().empty())
    return emitOpError() << "needs a FAISS index factory string";
  if ((getEmbed() == EmbedKind::model) != bool(getEmbedModel()))
    return emitOpError() << "embed = model needs embed_model, and only it";
  if ((getEmbed() == EmbedKind::fasttext) != bool(getFasttextAttr()))
    return emitOpError() << "embed = fasttext needs the fasttext options, and only it";
  if (DictionaryAttr ft = getFasttextAttr()) {
    auto model = ft.getAs<StringAttr>("model");
    if (!model || (model.getValue() != "skipgram" && model.getValue() != "cbow"))
      return emitOpError() << "fasttext model must be skipgram or cbow";
    for (StringRef key : {"epoch", "min_count", "minn", "maxn", "bucket", "threads"}) {
      auto v = ft.getAs<IntegerAttr>(key);
      if (!v || v.getInt() < (key == "minn" || key == "maxn" || key == "bucket" ? 0 : 1))
        return emitOpError() << "fasttext option '" << key << "' must be an integer of at least "
                             << (key == "minn" || key == "maxn" || key == "bucket" ? 0 : 1);
    }
    if (ft.getAs<IntegerAttr>("minn").getInt() > ft.getAs<IntegerAttr>("maxn").getInt())
      return emitOpError() << "fasttext minn must not exceed maxn";
  }
  if (getStore().empty())
    return emitOpError() << "needs a store directory";
  return success();
}

LogicalResult RetrievalOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (auto ref : {getEmbedModelAttr(), getRerankModelAttr()})
    if (ref && !lookupModel(symbolTable, *this, ref))
      return emitOpError() << ref << " is not a plan.model";
  return success();
}

LogicalResult GenerateOp::verify() {
  if (getMaxTokensAttr().getInt() < 1)
    return emitOpError() << "max_tokens must be at least 1";
  if (getTemperature().convertToDouble() < 0)
    return emitOpError() << "temperature must not be negative";
  if (getTopKAttr().getInt() < 0 || getSeedAttr().getInt() < 0)
    return emitOpError() << "top_k and seed must not be negative";
  if (getWindowAttr().getInt() < 1)
    return emitOpError() << "window must be at least 1";
  return success();
}

LogicalResult GenerateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!lookupModel(symbolTable, *this, getModelAttr()))
    return emitOpError() << "model " << getModelAttr() << " is not a plan.model";
  if (auto ctx = getContextAttr())
    if (!symbolTable.lookupNearestSymbolFrom<RetrievalOp>(*this, ctx))
      return emitOpError() << "context " << ctx << " is not a plan.retrieval";
  return success();
}
