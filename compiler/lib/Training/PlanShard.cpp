// `plan-shard`: a train plan's global program (the model at the step's global
// micro-batch) annotated with the executable's layout in the upstream shard dialect,
// for `planc emit --stage sharded`: the batch over the data axes, each parameter's
// split over the tensor axis (as nn-tensor-parallel splits it), and each parameter's
// pipeline stages (as nn-pipeline-split places it). Upstream sharding-propagation
// then carries the layout through the ops that implement ShardingInterface.
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Passes.h"
#include "plan/Training/Training.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace plan {
#define GEN_PASS_DEF_PLANSHARD
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct PlanShard : plan::impl::PlanShardBase<PlanShard> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto train : llvm::to_vector(module.getOps<pl::TrainOp>()))
      if (failed(annotate(train, symbols)))
        return signalPassFailure();
  }

  LogicalResult annotate(pl::TrainOp train, SymbolTable &symbols) {
    auto model = symbols.lookup<func::FuncOp>(train.getModel());
    auto mesh = symbols.lookup<pl::MeshOp>(train.getMesh());
    if (!model || !model->hasAttr("nn.model") || !mesh)
      return train.emitOpError() << "needs its model expanded to nn first (convert-plan-to-nn) and a plan.mesh";
    if (!training::imageShapeOf(train).empty())
      return train.emitError() << "train '" << train.getSymName() << "' trains a model over images, whose "
                               << "convolutions the sharded stage does not state in this version (its layout is "
                               << "data parallel: see the grad and sched stages)";
    std::string name = (train.getSymName() + "_sharded").str();
    if (Operation *clash = symbols.lookup(name)) {
      InFlightDiagnostic d = train.emitError() << "train '" << train.getSymName() << "' needs the name '" << name
                                               << "' for its sharded program, but it is taken; rename one of them";
      d.attachNote(clash->getLoc()) << "'" << name << "' is declared here";
      return failure();
    }
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // The grid: the plan's mesh, axis by axis.
    SmallVector<int64_t> sizes;
    SmallVector<std::string> axes;
    for (auto axis : mesh.getAxes().getAsRange<pl::AxisAttr>()) {
      sizes.push_back(axis.getSize());
      axes.push_back(axis.getName().getValue().str());
    }
    std::string gridName = mesh.getSymName().str();
    if (!symbols.lookup(gridName + "_grid")) {
      b.setInsertionPointToStart(getOperation().getBody());
      auto grid = shard::GridOp::create(b, mesh.getLoc(), gridName + "_grid", sizes);
      symbols.insert(grid);
    }
    auto axisIndex = [&](StringRef axis) -> int16_t {
      for (auto [i, a] : llvm::enumerate(axes))
        if (a == axis)
          return int16_t(i);
      return -1;
    };

    // The program at the step's global micro-batch: micro per data rank × data ranks.
    int64_t d = training::dataParallelSize(train);
    func::FuncOp f = training::specialize(model, name, int64_t(train.getMicroAttr().getInt()) * d,
                                          int64_t(train.getSeqAttr().getInt()));
    f->removeAttr("nn.model");
    f->setAttr("nn.sharded", UnitAttr::get(ctx));
    f.setPrivate();
    if (failed(training::specializeImages(f, train)))
      return failure();

    // The tensor-parallel split of each parameter, as nn-tensor-parallel makes it (on a
    // copy at one data rank's micro-batch, then dropped).
    llvm::StringMap<DictionaryAttr> splits;
    training::TensorParallel tp = training::tensorParallelOf(train);
    if (tp.size > 1) {
      b.setInsertionPointAfter(f);
      func::FuncOp copy = training::specialize(model, name + "_partitioned", int64_t(train.getMicroAttr().getInt()),
                                               int64_t(train.getSeqAttr().getInt()));
      LogicalResult partitioned = training::partitionTensorParallel(copy, tp.axis, tp.size, tp.dims, tp.sequence);
      for (unsigned i = 0; i < copy.getNumArguments(); ++i)
        if (auto param = training::parameterPath(copy, i))
          if (auto split = copy.getArgAttrOfType<DictionaryAttr>(i, "nn.split"))
            splits[param.getValue()] = split;
      copy.erase();
      if (failed(partitioned))
        return failure();
    }
    // The pipeline stages that hold each parameter, as nn-pipeline-split cuts the program
    // (on a copy, then dropped): a tied embedding is held by the first and the last.
    llvm::StringMap<SmallVector<int64_t>> stagesOf;
    training::Pipeline pp = training::pipelineOf(train);
    if (pp.size > 1) {
      b.setInsertionPointAfter(f);
      func::FuncOp copy = training::specialize(model, name + "_cut", int64_t(train.getMicroAttr().getInt()),
                                               int64_t(train.getSeqAttr().getInt()));
      FailureOr<SmallVector<func::FuncOp>> stages = training::splitPipeline(copy, pp.stages);
      if (succeeded(stages))
        for (auto [k, stage] : llvm::enumerate(*stages)) {
          for (unsigned i = 0; i < stage.getNumArguments(); ++i)
            if (auto param = training::parameterPath(stage, i))
              stagesOf[param.getValue()].push_back(int64_t(k));
          stage.erase();
        }
      copy.erase();
      if (failed(stages))
        return failure();
    }

    SmallVector<int16_t> dataAxes;
    for (Attribute a : train.getParallel().getData())
      if (int16_t i = axisIndex(cast<StringAttr>(a).getValue()); i >= 0)
        dataAxes.push_back(i);
    int16_t tensorAxis = tp.size > 1 ? axisIndex(train.getParallel().getTensor().getValue()) : -1;

    Block &entry = f.getBody().front();
    b.setInsertionPointToStart(&entry);
    auto grid = FlatSymbolRefAttr::get(ctx, gridName + "_grid");
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        continue;
      SmallVector<shard::GridAxesAttr> split(type.getRank(), shard::GridAxesAttr::get(ctx, ArrayRef<int16_t>{}));
      auto param = training::parameterPath(f, arg.getArgNumber());
      if (!param) { // tokens or targets: the batch over the data axes
        if (!dataAxes.empty())
          split[0] = shard::GridAxesAttr::get(ctx, dataAxes);
      } else {
        if (auto it = splits.find(param.getValue()); it != splits.end() && tensorAxis >= 0) {
          int64_t dim = cast<IntegerAttr>(it->second.get("dim")).getInt();
          split[size_t(dim)] = shard::GridAxesAttr::get(ctx, ArrayRef<int16_t>{tensorAxis});
          f.setArgAttr(arg.getArgNumber(), "nn.split", it->second);
        }
        if (auto it = stagesOf.find(param.getValue()); it != stagesOf.end())
          f.setArgAttr(arg.getArgNumber(), "nn.pipeline_stages", b.getDenseI64ArrayAttr(it->second));
      }
      // Trailing replicated dims are implied.
      while (!split.empty() && split.back().empty())
        split.pop_back();
      auto sharding = shard::ShardingOp::create(b, arg.getLoc(), grid, split);
      auto annotated = shard::ShardOp::create(b, arg.getLoc(), arg, sharding, /*annotate_for_users=*/true);
      arg.replaceAllUsesExcept(annotated, annotated);
    }
    return success();
  }
};

} // namespace
