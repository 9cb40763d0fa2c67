// `nn-pipeline-split`: a forward function cut into pipeline stages, each a
// function of its own (nn.stage) that a stage's ranks run: the first reads the
// tokens, every stage but the last returns the activation it hands on (the residual
// stream), the last returns the loss. nn-autodiff then gives each stage its
// vector-Jacobian product.
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Training/Passes.h"
#include "plan/Training/Training.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace plan {
#define GEN_PASS_DEF_NNPIPELINESPLIT
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

FailureOr<SmallVector<func::FuncOp>> training::splitPipeline(func::FuncOp f, int64_t stages) {
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  int64_t layers = 0;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (auto name = training::parameterPath(f, i))
      layers = std::max(layers, training::layerOf(name.getValue()) + 1);
  if (layers < stages)
    return f.emitOpError() << "has " << layers << (layers == 1 ? " layer" : " layers") << ", fewer than the " << stages
                           << " pipeline stages";
  // Balanced contiguous stages (the cost model places layers by the same rule).
  auto stageOfLayer = [&](int64_t k) { return pipelineStageOfLayer(k, layers, stages); };

  // Each op runs on the latest stage among its layer parameters and its operands.
  DenseMap<Value, int64_t> stageOf;
  for (BlockArgument a : body.getArguments()) {
    auto name = training::parameterPath(f, a.getArgNumber());
    int64_t layer = name ? training::layerOf(name.getValue()) : -1;
    stageOf[a] = layer >= 0 ? stageOfLayer(layer) : -1; // -1: usable anywhere
  }
  // An op that reads no layer's parameters, directly or through its operands (a
  // constant, the tensor-axis index and what is computed from it, the embedding of the
  // tokens), is cloned into each stage that reads it: stage -1.
  DenseMap<Operation *, int64_t> opStage;
  for (Operation &op : body.without_terminator()) {
    int64_t s = -1;
    for (Value v : op.getOperands())
      s = std::max(s, stageOf.lookup(v));
    opStage[&op] = s;
    for (Value r : op.getResults())
      stageOf[r] = s;
  }
  int64_t last = opStage.empty() ? 0 : stageOf.lookup(ret.getOperand(0));
  if (last != stages - 1)
    return f.emitOpError() << "computes its loss on stage " << last << " of " << stages;

  // The one value each boundary carries: defined before it, used after it.
  SmallVector<Value> boundary(stages, Value());
  for (int64_t s = 0; s + 1 < stages; ++s) {
    llvm::SetVector<Value> crossing;
    for (Operation &op : body.without_terminator())
      if (opStage[&op] > s)
        for (Value v : op.getOperands())
          if (!isa<BlockArgument>(v) && stageOf.lookup(v) >= 0 && stageOf.lookup(v) <= s)
            crossing.insert(v);
    if (crossing.size() != 1) {
      InFlightDiagnostic d = f.emitOpError()
                             << "cannot be cut between stages " << s << " and " << s + 1 << ": " << crossing.size()
                             << " values cross the cut, and a pipeline stage hands on one "
                                "(the residual stream)";
      for (Value v : crossing)
        d.attachNote(v.getLoc()) << "crossing here";
      return failure();
    }
    boundary[s] = crossing.front();
  }

  // One function per stage.
  OpBuilder b(f);
  b.setInsertionPointAfter(f);
  SmallVector<func::FuncOp> out;
  for (int64_t s = 0; s < stages; ++s) {
    llvm::SmallPtrSet<Operation *, 8> freeUsed;
    if (s + 1 == stages)
      if (Operation *def = ret.getOperand(0).getDefiningOp(); def && opStage[def] == -1)
        freeUsed.insert(def);
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (opStage[&op] == s || freeUsed.contains(&op))
        for (Value v : op.getOperands())
          if (Operation *def = v.getDefiningOp(); def && opStage[def] == -1)
            freeUsed.insert(def);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      if (opStage[&op] == s || freeUsed.contains(&op))
        ops.push_back(&op);
    // Arguments: the function's own that the stage reads (tokens, targets, parameters,
    // in their order), then the activation from the previous stage.
    llvm::SetVector<unsigned> used;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (auto a = dyn_cast<BlockArgument>(v))
          used.insert(a.getArgNumber());
    SmallVector<unsigned> args(used.begin(), used.end());
    llvm::sort(args);
    SmallVector<Type> types;
    for (unsigned i : args)
      types.push_back(f.getArgument(i).getType());
    if (s > 0)
      types.push_back(boundary[s - 1].getType());
    Value result = s + 1 < stages ? boundary[s] : ret.getOperand(0);
    std::string name = (f.getName() + "_stage" + Twine(s)).str();
    auto g = func::FuncOp::create(b, f.getLoc(), name, b.getFunctionType(types, {result.getType()}));
    g.setPrivate();
    g->setAttr("nn.stage", b.getI64IntegerAttr(s));
    for (auto [k, i] : llvm::enumerate(args))
      if (DictionaryAttr attrs = f.getArgAttrDict(i))
        g.setArgAttrs(k, attrs);
    if (s > 0)
      g.setArgAttr(args.size(), "nn.activation", b.getStringAttr("stage" + Twine(s - 1)));
    Block *e = g.addEntryBlock();
    IRMapping map;
    for (auto [k, i] : llvm::enumerate(args))
      map.map(f.getArgument(i), e->getArgument(k));
    if (s > 0)
      map.map(boundary[s - 1], e->getArgument(args.size()));
    OpBuilder inner = OpBuilder::atBlockEnd(e);
    for (Operation *op : ops)
      inner.clone(*op, map);
    func::ReturnOp::create(inner, ret.getLoc(), map.lookup(result));
    b.setInsertionPointAfter(g);
    out.push_back(g);
  }
  return out;
}

namespace {

struct NNPipelineSplit : plan::impl::NNPipelineSplitBase<NNPipelineSplit> {
  using Base::Base;
  void runOnOperation() override {
    if (stages < 2)
      return;
    SmallVector<func::FuncOp> forwards;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr("nn.forward"))
        forwards.push_back(f);
    for (func::FuncOp f : forwards)
      if (failed(training::splitPipeline(f, stages)))
        return signalPassFailure();
  }
};

} // namespace
