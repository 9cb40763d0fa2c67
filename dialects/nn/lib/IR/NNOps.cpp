// The `nn` dialect: registration and shape verifiers.
#include "plan/Dialect/NN/IR/NN.h"
#include "planrt_nf4.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace plan::nn;

#include "plan/Dialect/NN/IR/NNDialect.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "plan/Dialect/NN/IR/NNOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "plan/Dialect/NN/IR/NNOps.cpp.inc"

/// Two extents agree when equal or when either is dynamic.
static bool agree(int64_t a, int64_t b) { return a == b || ShapedType::isDynamic(a) || ShapedType::isDynamic(b); }

static RankedTensorType ranked(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The leading [batch, seq] extents of two tensors agree.
static bool sameRows(RankedTensorType a, RankedTensorType b) {
  return agree(a.getDimSize(0), b.getDimSize(0)) && agree(a.getDimSize(1), b.getDimSize(1));
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = ranked(getTable()), ids = ranked(getIds()), out = ranked(getResult());
  if (!sameRows(ids, out) || !agree(out.getDimSize(2), table.getDimSize(1)))
    return emitOpError() << "gathers rows of " << table << " by " << ids << ", which gives [batch, seq, "
                         << table.getDimSize(1) << "], not " << out;
  if (out.getElementType() != table.getElementType())
    return emitOpError() << "result element type must be the table's";
  return success();
}

LogicalResult DequantizeNF4Op::verify() {
  RankedTensorType q = ranked(getQ()), w = ranked(getResult());
  if (!w.hasStaticShape() || !w.getElementType().isF32())
    return emitOpError() << "result must be a static f32 matrix, not " << w;
  if (getBlock() < 1)
    return emitOpError() << "block must be at least 1, not " << getBlock();
  int64_t bytes = planrt_nf4_bytes(w.getNumElements(), getBlock(), getDoubleQuant());
  if (!q.hasStaticShape() || q.getNumElements() * 4 != bytes)
    return emitOpError() << "stores " << w << " in blocks of " << getBlock()
                         << (getDoubleQuant() ? " with double quantization" : "") << " in " << bytes / 4
                         << " words (planrt_nf4.h), not " << q;
  return success();
}

LogicalResult PositionsOp::verify() {
  if (getTokens().getType() != getResult().getType())
    return emitOpError() << "result must have the type of the tokens";
  return success();
}

LogicalResult MatmulOp::verify() {
  RankedTensorType x = ranked(getX()), w = ranked(getW()), out = ranked(getResult());
  int64_t k = getTransposeW() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t n = getTransposeW() ? w.getDimSize(0) : w.getDimSize(1);
  if (!agree(x.getDimSize(2), k))
    return emitOpError() << "contracts " << x.getDimSize(2) << " input features with a weight of " << k
                         << (getTransposeW() ? " columns" : " rows");
  if (!sameRows(x, out) || !agree(out.getDimSize(2), n))
    return emitOpError() << "result must be [batch, seq, " << n << "], not " << out;
  return success();
}

LogicalResult BiasAddOp::verify() {
  if (!agree(ranked(getBias()).getDimSize(0), ranked(getX()).getDimSize(2)))
    return emitOpError() << "bias of " << ranked(getBias()).getDimSize(0) << " elements for activations of "
                         << ranked(getX()).getDimSize(2) << " features";
  return success();
}

static LogicalResult verifyNorm(Operation *op, Value x, Value weight, Value bias, double eps) {
  int64_t d = ranked(x).getDimSize(2);
  if (!agree(ranked(weight).getDimSize(0), d) || (bias && !agree(ranked(bias).getDimSize(0), d)))
    return op->emitOpError() << "scale and bias must have the " << d << " features of the input";
  if (!(eps > 0))
    return op->emitOpError() << "eps must be positive";
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getX(), getWeight(), getBias(), getEps().convertToDouble());
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getX(), getWeight(), Value(), getEps().convertToDouble());
}

/// The shape rules of attention, shared by nn.sdpa and nn.sdpa_grad (`out` is
/// the forward result or its gradient).
static LogicalResult verifyAttention(Operation *op, int64_t heads, int64_t kv, RankedTensorType qkv,
                                     RankedTensorType out, bool rope, double theta) {
  if (heads < 1 || kv < 1 || heads % kv != 0)
    return op->emitOpError() << "needs heads ≥ 1 and kv_heads ≥ 1 dividing them, not " << heads << " and " << kv;
  int64_t d = out.getDimSize(2);
  if (ShapedType::isDynamic(d))
    return op->emitOpError() << "result width must be static (a multiple of the " << heads << " heads)";
  if (d % heads != 0)
    return op->emitOpError() << "result width " << d << " must be a static multiple of the " << heads << " heads";
  int64_t hd = d / heads;
  if (!agree(qkv.getDimSize(2), (heads + 2 * kv) * hd))
    return op->emitOpError() << "packed q, k, v must be (heads + 2·kv_heads)·head_dim = " << (heads + 2 * kv) * hd
                             << " wide, not " << qkv.getDimSize(2);
  if (!sameRows(qkv, out))
    return op->emitOpError() << "result rows must match the input's";
  if (rope && hd % 2 != 0)
    return op->emitOpError() << "rotary embeddings need an even head_dim, not " << hd;
  if (!(theta > 0))
    return op->emitOpError() << "rope_theta must be positive";
  return success();
}

LogicalResult SDPAOp::verify() {
  return verifyAttention(*this, getHeads(), getKvHeads(), ranked(getQkv()), ranked(getResult()), getRope(),
                         getRopeTheta().convertToDouble());
}

LogicalResult SDPACachedOp::verify() {
  RankedTensorType qkv = ranked(getQkv()), cache = ranked(getCache()), out = ranked(getResult());
  if (failed(verifyAttention(*this, getHeads(), getKvHeads(), qkv, out, getRope(), getRopeTheta().convertToDouble())))
    return failure();
  int64_t hd = out.getDimSize(2) / getHeads();
  if (!agree(cache.getDimSize(0), qkv.getDimSize(0)))
    return emitOpError() << "cache batch " << cache.getDimSize(0) << " differs from the chunk's " << qkv.getDimSize(0);
  if (!agree(cache.getDimSize(2), 2 * getKvHeads() * hd))
    return emitOpError() << "cache rows must be 2·kv_heads·head_dim = " << 2 * getKvHeads() * hd
                         << " wide (keys then values), not " << cache.getDimSize(2);
  int64_t n = qkv.getDimSize(1), window = cache.getDimSize(1);
  if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(window) && n > window)
    return emitOpError() << "a chunk of " << qkv.getDimSize(1) << " positions does not fit a window of "
                         << cache.getDimSize(1);
  return success();
}

LogicalResult SDPAGradOp::verify() {
  return verifyAttention(*this, getHeads(), getKvHeads(), ranked(getQkv()), ranked(getDy()), getRope(),
                         getRopeTheta().convertToDouble());
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNorm(*this, getX(), getWeight(), Value(), getEps().convertToDouble());
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNorm(*this, getX(), getWeight(), Value(), getEps().convertToDouble());
}

LogicalResult CrossEntropyGradOp::verify() {
  if (!sameRows(ranked(getLogits()), ranked(getTargets())))
    return emitOpError() << "targets " << getTargets().getType() << " do not match the rows of the logits "
                         << getLogits().getType();
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError() << "probability must lie in [0, 1), not " << p;
  return success();
}

#include "plan/Dialect/NN/IR/NNInterfaces.cpp.inc"

LogicalResult MatmulWGradOp::verify() {
  RankedTensorType x = ranked(getX()), dy = ranked(getDy()), w = ranked(getResult());
  int64_t k = getTransposeW() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t n = getTransposeW() ? w.getDimSize(0) : w.getDimSize(1);
  if (!sameRows(x, dy) || !agree(x.getDimSize(2), k) || !agree(dy.getDimSize(2), n))
    return emitOpError() << "the gradient of a weight " << w << " needs x [batch, seq, " << k
                         << "] and dy [batch, seq, " << n << "], not " << x << " and " << dy;
  return success();
}

LogicalResult SumRowsOp::verify() {
  if (!agree(ranked(getX()).getDimSize(2), ranked(getResult()).getDimSize(0)))
    return emitOpError() << "sums rows of " << ranked(getX()).getDimSize(2) << " features into "
                         << getResult().getType();
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType dy = ranked(getDy()), ids = ranked(getIds()), t = ranked(getResult());
  if (!sameRows(dy, ids) || !agree(dy.getDimSize(2), t.getDimSize(1)))
    return emitOpError() << "scatters " << dy << " by " << ids << " into " << t;
  return success();
}

LogicalResult RoundOp::verify() {
  Type to = getTo();
  if (!to.isBF16() && !to.isF16())
    return emitOpError() << "rounds to bf16 or f16, not " << to;
  if (!ranked(getX()).getElementType().isF32())
    return emitOpError() << "rounds f32 values, not " << ranked(getX()).getElementType();
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getReduce() != "sum" && getReduce() != "max")
    return emitOpError() << "reduces by \"sum\" or \"max\", not \"" << getReduce() << "\"";
  if (getAxisAttr().getInt() < 0)
    return emitOpError() << "axis must be a mesh axis number (0 or more), not " << getAxisAttr().getInt();
  return success();
}

LogicalResult VocabParallelCrossEntropyOp::verify() {
  RankedTensorType logits = ranked(getLogits()), targets = ranked(getTargets()), lse = ranked(getLse());
  if (!sameRows(logits, targets) || !sameRows(logits, lse))
    return emitOpError() << "targets " << targets << " and log-sum-exp " << lse << " must match the rows of the logits "
                         << logits;
  // Its VJP gives the log-sum-exp no gradient: only the gradient op may read it.
  for (Operation *user : getLse().getUsers())
    if (!isa<VocabParallelCrossEntropyGradOp>(user))
      return emitOpError() << "its log-sum-exp is for nn.vocab_parallel_cross_entropy_grad only, not '"
                           << user->getName() << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// Vision
//===----------------------------------------------------------------------===//

/// An extent as a diagnostic shows it: `?` when dynamic.
static std::string extent(int64_t n) { return ShapedType::isDynamic(n) ? "?" : std::to_string(n); }

/// Checks a window's attributes and that `out` is [N, C, P, Q] of `in` pooled or
/// convolved by it (C given: the filter count of a convolution).
static LogicalResult verifyWindow(Operation *op, RankedTensorType in, RankedTensorType out, int64_t channels,
                                  int64_t k, int64_t stride, int64_t pad) {
  if (k < 1 || stride < 1 || pad < 0)
    return op->emitOpError() << "needs a window of at least 1, a stride of at least 1 and padding of at least 0, not "
                             << k << ", " << stride << " and " << pad;
  if (2 * pad > k)
    return op->emitOpError() << "pads by " << pad << ", more than half its window of " << k;
  int64_t p = windowedExtent(in.getDimSize(2), k, stride, pad), q = windowedExtent(in.getDimSize(3), k, stride, pad);
  if ((!ShapedType::isDynamic(p) && p < 1) || (!ShapedType::isDynamic(q) && q < 1))
    return op->emitOpError() << "has a window of " << k << " larger than its padded input " << in;
  if (!agree(out.getDimSize(0), in.getDimSize(0)) || !agree(out.getDimSize(1), channels) ||
      !agree(out.getDimSize(2), p) || !agree(out.getDimSize(3), q))
    return op->emitOpError() << "of " << in << " gives [" << extent(in.getDimSize(0)) << ", " << extent(channels)
                             << ", " << extent(p) << ", " << extent(q) << "], not " << out;
  return success();
}

LogicalResult Conv2dOp::verify() {
  RankedTensorType x = ranked(getX()), w = ranked(getW());
  if (w.isDynamicDim(0) || w.isDynamicDim(2) || w.getDimSize(2) != w.getDimSize(3))
    return emitOpError() << "needs a static square filter [out, in, k, k], not " << w;
  if (!agree(x.getDimSize(1), w.getDimSize(1)))
    return emitOpError() << "convolves " << x.getDimSize(1) << " channels with a filter of " << w.getDimSize(1)
                         << " input channels";
  if (getBias() && !agree(ranked(getBias()).getDimSize(0), w.getDimSize(0)))
    return emitOpError() << "needs a bias of " << w.getDimSize(0) << " channels, not " << getBias().getType();
  return verifyWindow(*this, x, ranked(getResult()), w.getDimSize(0), w.getDimSize(2), getStride(), getPad());
}

LogicalResult MaxPool2dOp::verify() {
  RankedTensorType x = ranked(getX());
  return verifyWindow(*this, x, ranked(getResult()), x.getDimSize(1), getKernel(), getStride(), getPad());
}

LogicalResult AvgPoolOp::verify() {
  RankedTensorType x = ranked(getX()), y = ranked(getResult());
  if (!agree(y.getDimSize(0), x.getDimSize(0)) || !agree(y.getDimSize(1), x.getDimSize(1)) || y.getDimSize(2) != 1 ||
      y.getDimSize(3) != 1)
    return emitOpError() << "of " << x << " gives [N, C, 1, 1], not " << y;
  return success();
}

LogicalResult FlattenOp::verify() {
  RankedTensorType x = ranked(getX()), y = ranked(getResult());
  int64_t features = 1;
  for (int i = 1; i < 4; ++i)
    features = ShapedType::isDynamic(features) || x.isDynamicDim(i) ? ShapedType::kDynamic : features * x.getDimSize(i);
  if (!agree(y.getDimSize(0), x.getDimSize(0)) || y.getDimSize(1) != 1 || !agree(y.getDimSize(2), features))
    return emitOpError() << "of " << x << " gives [N, 1, C·H·W], not " << y;
  return success();
}

LogicalResult BatchNormOp::verify() {
  RankedTensorType x = ranked(getX()), w = ranked(getWeight());
  if (!agree(x.getDimSize(1), w.getDimSize(0)) || getBias().getType() != w)
    return emitOpError() << "normalises " << x.getDimSize(1) << " channels with a weight " << w << " and a bias "
                         << getBias().getType();
  if (getResult().getType() != x || getStats().getType() != statsType(w))
    return emitOpError() << "gives the input's type and statistics " << statsType(w);
  if (bool(getAxis()) != bool(getRanks()) || (getRanks() && (*getRanks() < 2 || *getAxis() > 63)))
    return emitOpError() << "synchronises over a mesh axis and a group of at least 2 ranks: both or neither";
  double momentum = getMomentum() ? getMomentum()->convertToDouble() : -1.0;
  if (getRunning() && (int64_t(*getRunning()) < 0 || !(momentum >= 0 && momentum <= 1)))
    return emitOpError() << "keeps running statistics at a layer index >= 0 with a momentum in [0, 1]";
  if (getInference() && !getRunning())
    return emitOpError() << "in inference normalises by running statistics, which it has none of ('running')";
  // Batch statistics of one value per channel (as PyTorch, which refuses them in training).
  if (!getInference() && x.hasStaticShape() &&
      x.getDimSize(0) * x.getDimSize(2) * x.getDimSize(3) * int64_t(getRanks().value_or(1)) < 2)
    return emitOpError() << "normalises a batch of one value per channel (" << x
                         << "): batch statistics need at least 2 (a larger micro-batch, or image)";
  return success();
}
