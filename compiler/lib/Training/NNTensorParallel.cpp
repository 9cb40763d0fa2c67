// `nn-tensor-parallel`: a forward function as one rank of a tensor-parallel group
// runs it (Training.h, partitionTensorParallel). Each value is replicated over the
// group or split along its features; ops are rewritten in place in program order,
// their result types narrowed, and the collectives of Megatron's layout inserted
// where a split meets a replicated value.
#include "plan/Training/Training.h"

#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/TypeSwitch.h"

namespace plan {
#define GEN_PASS_DEF_NNTENSORPARALLEL
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// How a value lies over the group: whole on every rank, split along its features, or
/// (sequence parallelism) split along the sequence.
enum class Lay { Replicated, Split, Sequence };

class Partitioner {
public:
  Partitioner(func::FuncOp f, int64_t axis, int64_t size, ArrayRef<std::string> dims, bool sequence)
      : f(f), b(f.getContext()), axis(axis), t(size), sequence(sequence), dims(dims.begin(), dims.end()) {}

  LogicalResult run() {
    Block &body = f.getBody().front();
    if (failed(splitParameters()))
      return failure();
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
      if (failed(rewrite(&op)))
        return failure();
    SmallVector<Type> inputs(body.getArgumentTypes());
    f.setFunctionType(FunctionType::get(f.getContext(), inputs, f.getResultTypes()));
    // Blocks of the split dims (q, k, v of a packed projection are split one by one).
    for (auto &[arg, dim] : splitDim) {
      SmallVector<int64_t> blocks = blockSizes.lookup(arg);
      if (blocks.empty())
        blocks.push_back(fullSize[arg]);
      f.setArgAttr(arg, "nn.split",
                   b.getDictionaryAttr({b.getNamedAttr("dim", b.getI64IntegerAttr(dim)),
                                        b.getNamedAttr("parts", b.getI64IntegerAttr(t)),
                                        b.getNamedAttr("blocks", b.getDenseI64ArrayAttr(blocks))}));
    }
    return success();
  }

private:
  StringRef paramName(unsigned arg) {
    auto name = training::parameterPath(f, arg);
    return name ? name.getValue() : StringRef("?");
  }

  /// Narrows every parameter with a split logical dim.
  LogicalResult splitParameters() {
    Block &body = f.getBody().front();
    for (BlockArgument a : body.getArguments()) {
      auto names = f.getArgAttrOfType<ArrayAttr>(a.getArgNumber(), "nn.dims");
      if (!training::parameterPath(f, a.getArgNumber()) || !names)
        continue;
      auto type = cast<RankedTensorType>(a.getType());
      int64_t split = -1;
      for (auto [i, n] : llvm::enumerate(names.getAsValueRange<StringAttr>()))
        if (llvm::is_contained(dims, n.str())) {
          if (split >= 0)
            return f.emitOpError() << "parameter '" << paramName(a.getArgNumber()) << "' has two dims split over "
                                   << "the tensor axis ('" << cast<StringAttr>(names[split]).getValue() << "' and '"
                                   << n << "'); tensor parallelism splits one dim of a parameter";
          split = int64_t(i);
        }
      if (split < 0)
        continue;
      int64_t extent = type.getDimSize(split);
      if (ShapedType::isDynamic(extent) || extent % t != 0)
        return emitError(a.getLoc()) << "parameter '" << paramName(a.getArgNumber()) << "': its dim '"
                                     << cast<StringAttr>(names[split]).getValue() << "' of " << extent
                                     << " does not divide over the " << t << " ranks of the tensor axis";
      SmallVector<int64_t> shape(type.getShape());
      shape[split] /= t;
      a.setType(RankedTensorType::get(shape, type.getElementType()));
      splitDim[a.getArgNumber()] = split;
      fullSize[a.getArgNumber()] = extent;
    }
    return success();
  }

  /// The split dim of a weight operand, or -1.
  int64_t splitOf(Value w) {
    auto a = dyn_cast<BlockArgument>(w);
    if (!a)
      return -1;
    auto it = splitDim.find(a.getArgNumber());
    return it == splitDim.end() ? -1 : it->second;
  }
  StringRef dimName(Value w, int64_t i) {
    auto a = cast<BlockArgument>(w);
    auto names = f.getArgAttrOfType<ArrayAttr>(a.getArgNumber(), "nn.dims");
    return names && i < int64_t(names.size()) ? cast<StringAttr>(names[i]).getValue() : StringRef();
  }
  Lay lay(Value v) { return layout.lookup(v); }

  RankedTensorType narrowed(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() /= t;
    return RankedTensorType::get(shape, type.getElementType());
  }
  /// `type` with dim 1 (the sequence) multiplied by `times` (or divided, times < 0).
  static RankedTensorType resequenced(Type type, int64_t times) {
    auto rt = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(rt.getShape());
    shape[1] = times > 0 ? shape[1] * times : shape[1] / -times;
    return RankedTensorType::get(shape, rt.getElementType());
  }
  LogicalResult checkSequence(Operation *op, Value v) {
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(1);
    if (ShapedType::isDynamic(n) || n % t != 0)
      return unsupported(op, "sequence parallelism needs the sequence (" + Twine(n) + " positions) to divide over " +
                                 Twine(t) + " ranks");
    return success();
  }
  /// Sequence parallelism: this rank's slice of a value every rank holds whole.
  LogicalResult toSequence(Operation *after, Value v) {
    if (failed(checkSequence(after, v)))
      return failure();
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(1) / t;
    Value first = firstRow(after, n); // computed before `after`
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfter(after);
    auto slice = nn::SequenceSliceOp::create(b, after->getLoc(), resequenced(v.getType(), -t), v, first);
    v.replaceAllUsesExcept(slice, slice);
    layout[slice] = Lay::Sequence;
    return success();
  }
  /// Sequence parallelism after a partial sum: this rank's slice of the group's sum.
  LogicalResult scatterSequence(Operation *after, Value v, StringRef purpose) {
    if (failed(checkSequence(after, v)))
      return failure();
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfter(after);
    auto r = nn::ReduceScatterOp::create(b, after->getLoc(), resequenced(v.getType(), -t), v, b.getI64IntegerAttr(axis),
                                         b.getStringAttr(purpose));
    v.replaceAllUsesExcept(r, r);
    layout[r] = Lay::Sequence;
    return success();
  }

  /// This rank's first row of a table split in slices of `rows` (i64).
  Value firstRow(Operation *at, int64_t rows) {
    OpBuilder::InsertionGuard g(b);
    Block &body = f.getBody().front();
    if (!coord) {
      b.setInsertionPointToStart(&body);
      coord = nn::AxisIndexOp::create(b, f.getLoc(), b.getI64Type(), b.getI64IntegerAttr(axis));
    }
    b.setInsertionPoint(at);
    Value n = arith::ConstantOp::create(b, at->getLoc(), b.getI64IntegerAttr(rows));
    return arith::MulIOp::create(b, at->getLoc(), coord, n);
  }

  /// The input of a column-parallel matmul, through Megatron's `f` (one per value), or
  /// under sequence parallelism gathered whole (one gather per value).
  Value columnInput(Operation *user, Value x, StringRef purpose) {
    auto [it, inserted] = fOf.try_emplace(x, Value());
    if (inserted) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(user);
      if (lay(x) == Lay::Sequence)
        it->second = nn::AllGatherOp::create(b, user->getLoc(), resequenced(x.getType(), t), x,
                                             b.getI64IntegerAttr(axis), b.getStringAttr(purpose));
      else
        it->second = nn::AllReduceBackwardOp::create(b, user->getLoc(), x.getType(), x, b.getI64IntegerAttr(axis),
                                                     b.getStringAttr(purpose));
    }
    return it->second;
  }

  Value allReduce(Operation *after, Value v, StringRef purpose) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfter(after);
    auto r = nn::AllReduceOp::create(b, after->getLoc(), v.getType(), v, b.getI64IntegerAttr(axis),
                                     b.getStringAttr("sum"), b.getStringAttr(purpose));
    v.replaceAllUsesExcept(r, r);
    return r;
  }

  LogicalResult unsupported(Operation *op, const Twine &why) {
    return op->emitOpError() << "cannot be split over the tensor axis: " << why;
  }

  /// Records the q/k/v blocks of the parameters that produce a split attention's input.
  LogicalResult packedBlocks(nn::SDPAOp op, int64_t hd) {
    SmallVector<int64_t> blocks{int64_t(op.getHeads()) * hd, int64_t(op.getKvHeads()) * hd,
                                int64_t(op.getKvHeads()) * hd};
    Value v = op.getQkv();
    if (auto bias = v.getDefiningOp<nn::BiasAddOp>()) {
      if (auto a = dyn_cast<BlockArgument>(bias.getBias()))
        blockSizes[a.getArgNumber()] = blocks;
      v = bias.getX();
    }
    // LoRA (plan-lora): x·W + (s·(x·a))·b; b's columns are packed as W's.
    if (auto add = v.getDefiningOp<nn::AddOp>()) {
      auto up = add.getRhs().getDefiningOp<nn::MatmulOp>();
      auto b = up ? dyn_cast<BlockArgument>(up.getW()) : BlockArgument();
      if (!b)
        return unsupported(op, "its packed q, k, v are a sum that is not a low-rank update of a matmul");
      blockSizes[b.getArgNumber()] = blocks;
      v = add.getLhs();
    }
    auto mm = v.getDefiningOp<nn::MatmulOp>();
    auto w = mm ? dyn_cast<BlockArgument>(mm.getW()) : BlockArgument();
    if (!w)
      return unsupported(op, "its packed q, k, v do not come from a column-parallel matmul of a parameter");
    blockSizes[w.getArgNumber()] = blocks;
    return success();
  }

  LogicalResult rewrite(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](nn::EmbeddingOp o) {
          int64_t s = splitOf(o.getTable());
          if (s == 1)
            return unsupported(op, "its table is split along the embedding dim; split the vocabulary");
          if (s == 0) {
            int64_t rows = cast<RankedTensorType>(o.getTable().getType()).getDimSize(0);
            Value first = firstRow(op, rows);
            b.setInsertionPoint(op);
            auto slice = nn::EmbeddingOp::create(b, o.getLoc(), o.getType(), o.getTable(), o.getIds(), first);
            o.getResult().replaceAllUsesWith(slice.getResult());
            op->erase();
            if (sequence)
              return scatterSequence(slice, slice, "embedding output");
            layout[allReduce(slice, slice, "embedding output")] = Lay::Replicated;
            return success();
          }
          if (sequence) // a position embedding: every rank looks up all, keeps its slice
            return toSequence(op, o.getResult());
          return success();
        })
        .Case([&](nn::MatmulOp o) {
          int64_t s = splitOf(o.getW());
          bool tr = o.getTransposeW();
          if (s < 0) {
            if (lay(o.getX()) == Lay::Split)
              return unsupported(op, "a split input meets a replicated weight");
            if (lay(o.getX()) == Lay::Sequence) { // token by token: on this rank's positions
              o.getResult().setType(resequenced(o.getResult().getType(), -t));
              layout[o.getResult()] = Lay::Sequence;
            }
            return success();
          }
          if (s == (tr ? 0 : 1)) { // column-parallel: this rank's output features
            if (lay(o.getX()) == Lay::Split)
              return unsupported(op, "a column-parallel matmul needs a replicated input");
            StringRef dim = dimName(o.getW(), s);
            StringRef purpose = dim == "vocab"                   ? "head input"
                                : dim == "qkv" || dim == "heads" ? "attention input"
                                                                 : "column-parallel input";
            o.getXMutable().set(columnInput(op, o.getX(), purpose));
            o.getResult().setType(narrowed(o.getResult()));
            layout[o.getResult()] = Lay::Split;
            return success();
          }
          if (tr)
            return unsupported(op, "a transposed weight split along its input dim");
          // Row-parallel: a partial sum of every output feature.
          if (lay(o.getX()) != Lay::Split)
            return unsupported(op, "a row-parallel matmul needs an input split along its features");
          StringRef purpose = dimName(o.getW(), 0) == "heads" ? "attention output" : "row-parallel output";
          if (sequence)
            return scatterSequence(op, o.getResult(), purpose);
          layout[allReduce(op, o.getResult(), purpose)] = Lay::Replicated;
          return success();
        })
        .Case([&](nn::BiasAddOp o) {
          bool split = lay(o.getX()) == Lay::Split;
          if (split != (splitOf(o.getBias()) == 0))
            return unsupported(op, split ? "a split input needs a split bias" : "a split bias on a replicated input");
          o.getResult().setType(o.getX().getType());
          layout[o.getResult()] = lay(o.getX());
          return success();
        })
        .Case([&](nn::SDPAOp o) {
          if (lay(o.getQkv()) != Lay::Split)
            return success();
          int64_t h = o.getHeads(), kv = o.getKvHeads();
          int64_t hd = cast<RankedTensorType>(o.getType()).getDimSize(2) / h;
          if (h % t != 0 || kv % t != 0)
            return unsupported(op, Twine(h) + " query and " + Twine(kv) + " key/value heads do not divide over " +
                                       Twine(t) + " ranks");
          if (failed(packedBlocks(o, hd)))
            return failure();
          o.setHeads(h / t);
          o.setKvHeads(kv / t);
          o.getResult().setType(narrowed(o.getResult()));
          layout[o.getResult()] = Lay::Split;
          return success();
        })
        .Case<nn::LayerNormOp, nn::RMSNormOp>([&](Operation *) {
          // Per token: replicated or on this rank's positions, never over split features.
          if (lay(op->getOperand(0)) == Lay::Split)
            return unsupported(op, "a norm over features split across the ranks");
          for (Value w : op->getOperands().drop_front())
            if (splitOf(w) >= 0)
              return unsupported(op, "a norm with a split weight");
          op->getResult(0).setType(op->getOperand(0).getType());
          layout[op->getResult(0)] = lay(op->getOperand(0));
          return success();
        })
        .Case<nn::GeluOp, nn::SiluOp, nn::ReluOp, nn::ScaleOp>([&](Operation *) {
          op->getResult(0).setType(op->getOperand(0).getType());
          layout[op->getResult(0)] = lay(op->getOperand(0));
          return success();
        })
        .Case([&](nn::DropoutOp o) {
          if (o.getP().convertToDouble() != 0.0)
            return unsupported(op, "dropout's mask would differ from one device's (p > 0 is not implemented with "
                                   "tensor parallelism in this version)");
          o.getResult().setType(o.getX().getType());
          layout[o.getResult()] = lay(o.getX());
          return success();
        })
        .Case<nn::AddOp, nn::SubOp, nn::MulOp>([&](Operation *) {
          if (lay(op->getOperand(0)) != lay(op->getOperand(1)))
            return unsupported(op, "one operand is split and the other replicated");
          op->getResult(0).setType(op->getOperand(0).getType());
          layout[op->getResult(0)] = lay(op->getOperand(0));
          return success();
        })
        .Case([&](nn::CrossEntropyOp o) {
          if (lay(o.getLogits()) == Lay::Sequence)
            return unsupported(op, "sequence parallelism needs the vocabulary split over the tensor axis, so that "
                                   "the head gathers the whole sequence");
          if (lay(o.getLogits()) != Lay::Split)
            return success();
          int64_t vocab = cast<RankedTensorType>(o.getLogits().getType()).getDimSize(2);
          Value first = firstRow(op, vocab);
          b.setInsertionPoint(op);
          auto lse = RankedTensorType::get(cast<RankedTensorType>(o.getTargets().getType()).getShape(), b.getF32Type());
          auto ce = nn::VocabParallelCrossEntropyOp::create(b, o.getLoc(), o.getType(), lse, o.getLogits(),
                                                            o.getTargets(), first, b.getI64IntegerAttr(axis));
          o.getResult().replaceAllUsesWith(ce.getLoss());
          op->erase();
          return success();
        })
        .Default([&](Operation *) {
          for (Value v : op->getOperands())
            if (lay(v) != Lay::Replicated)
              return (unsupported(op, "this op has no tensor-parallel form in this version"));
          for (Value v : op->getOperands())
            if (auto a = dyn_cast<BlockArgument>(v); a && splitOf(a) >= 0)
              return (unsupported(op, "it reads the split parameter '" + paramName(a.getArgNumber()) +
                                          "' and has no tensor-parallel form in this version"));
          return success();
        });
  }

  func::FuncOp f;
  OpBuilder b;
  int64_t axis, t;
  bool sequence;
  SmallVector<std::string> dims;
  DenseMap<unsigned, int64_t> splitDim, fullSize;
  DenseMap<unsigned, SmallVector<int64_t>> blockSizes;
  DenseMap<Value, Lay> layout;
  DenseMap<Value, Value> fOf;
  Value coord;
};

struct NNTensorParallel : plan::impl::NNTensorParallelBase<NNTensorParallel> {
  using Base::Base;
  void runOnOperation() override {
    if (size < 2)
      return;
    SmallVector<std::string> split(dims.begin(), dims.end());
    for (auto f : llvm::to_vector(getOperation().getOps<func::FuncOp>()))
      if ((f->hasAttr("nn.forward") || f->hasAttr("nn.model")) &&
          failed(training::partitionTensorParallel(f, axis, size, split, sequence)))
        return signalPassFailure();
  }
};

} // namespace

LogicalResult training::partitionTensorParallel(func::FuncOp forward, int64_t axis, int64_t size,
                                                ArrayRef<std::string> dims, bool sequence) {
  if (size < 2)
    return success();
  return Partitioner(forward, axis, size, dims, sequence).run();
}

training::TensorParallel training::tensorParallelOf(pl::TrainOp train) {
  TensorParallel tp;
  StringRef name = train.getParallel().getTensor().getValue();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  if (name.empty() || !mesh)
    return tp;
  for (auto [i, a] : llvm::enumerate(mesh.getAxes().getAsRange<pl::AxisAttr>()))
    if (a.getName().getValue() == name) {
      tp.axis = int64_t(i);
      tp.size = a.getSize();
    }
  tp.sequence = train.getParallel().getSequence().getValue();
  for (NamedAttribute d : train.getShard())
    if (auto axis = dyn_cast<StringAttr>(d.getValue()); axis && axis.getValue() == name)
      tp.dims.push_back(d.getName().str());
  return tp;
}
