// `plan-train-abi`: the C entry points of a training executable. The tensor
// functions of `plan-train-step` are inlined into three functions on flat
// buffers — every parameter (gradient, Adam moment) at its offset in one f32
// array — and the manifest the runtime reads (parameter table, data, batch,
// schedule, checkpoints) becomes a constant string in the module.
#include "plan/Compiler/PlanGen.h"
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Training/Flat.h"
#include "plan/Training/Training.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace plan {
#define GEN_PASS_DEF_PLANTRAINABI
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

using Param = training::FlatTensor;
using training::Flat;
using training::inlineBody;

llvm::json::Array strings(ArrayAttr a, StringRef base) {
  llvm::json::Array out;
  for (Attribute s : a)
    out.push_back(resolvePlanPath(base, cast<StringAttr>(s).getValue()));
  return out;
}

/// The loss scaling of an fp16 plan: its kind and the scale of step 0.
llvm::json::Object lossScale(pl::TrainOp train) {
  if (train.getPrecision() != pl::Precision::fp16)
    return llvm::json::Object{{"kind", "none"}, {"init", 1.0}};
  if (train.getLossScale() == pl::LossScale::dynamic)
    return llvm::json::Object{{"kind", "dynamic"}, {"init", 65536.0}};  // torch.cuda.amp.GradScaler's default
  return llvm::json::Object{{"kind", "static"}, {"init", train.getFixedLossScale() ? train.getFixedLossScale()->convertToDouble() : 1.0}};
}

std::string manifest(pl::TrainOp train, func::FuncOp fwd, ArrayRef<Param> params,
                     const training::BufferLayout &layout, int64_t vocab) {
  StringRef base = train.getBaseDir();
  llvm::json::Array ps;
  for (const Param &p : params) {
    unsigned arg = p.arg;
    llvm::json::Array shape;
    for (int64_t d : p.type.getShape())
      shape.push_back(d);
    llvm::json::Object entry{
        {"name", p.name},
        {"shape", std::move(shape)},
        {"offset", p.offset},
        {"count", p.count},
        {"init", fwd.getArgAttrOfType<StringAttr>(arg, "nn.init").getValue()},
        {"std", fwd.getArgAttrOfType<FloatAttr>(arg, "nn.std").getValueAsDouble()}};
    // A tensor-parallel piece: `shape` is this rank's; dim `dim` of the full tensor is
    // cut in `parts`, block by block (q, k, v), and rank c holds piece c of each block.
    if (auto split = fwd.getArgAttrOfType<DictionaryAttr>(arg, "nn.split")) {
      llvm::json::Array blocks;
      for (int64_t n : cast<DenseI64ArrayAttr>(split.get("blocks")).asArrayRef())
        blocks.push_back(n);
      entry["split"] = llvm::json::Object{{"dim", cast<IntegerAttr>(split.get("dim")).getInt()},
                                          {"parts", cast<IntegerAttr>(split.get("parts")).getInt()},
                                          {"blocks", std::move(blocks)}};
    }
    ps.push_back(std::move(entry));
  }
  auto i64 = [](IntegerAttr a) { return int64_t(a.getInt()); };
  training::TensorParallel tp = training::tensorParallelOf(train);
  llvm::json::Object t{
      {"batch", i64(train.getBatchAttr())},
      {"micro", i64(train.getMicroAttr())},
      {"seq", i64(train.getSeqAttr())},
      {"accumulation", i64(train.getAccumulationAttr())},
      {"data_parallel", training::dataParallelSize(train)},
      {"tensor_parallel", tp.size},
      {"sequence_parallel", tp.size > 1 && tp.sequence},
      {"zero", train.getParallel().getZero()},
      {"steps", i64(train.getStepsAttr())},
      {"seed", i64(train.getSeedAttr())},
      {"vocab", vocab},
      {"data", strings(train.getData(), base)},
      {"val", strings(train.getVal(), base)},
      {"eval_every", i64(train.getEvalEveryAttr())},
      {"eval_batches", i64(train.getEvalBatchesAttr())},
      {"checkpoint", llvm::json::Object{{"dir", resolvePlanPath(base, train.getCheckpointDir())},
                                        {"every", i64(train.getCheckpointEveryAttr())},
                                        {"keep", i64(train.getCheckpointKeepAttr())}}},
      {"lr", train.getLr().convertToDouble()},
      {"schedule", pl::stringifyLRSchedule(train.getLrSchedule())},
      {"warmup", i64(train.getWarmupAttr())},
      {"min_lr", train.getMinLr().convertToDouble()},
      {"clip", train.getClip().convertToDouble()},
      {"weight_decay", train.getWeightDecay().convertToDouble()},
      {"beta1", train.getBeta1().convertToDouble()},
      {"beta2", train.getBeta2().convertToDouble()},
      {"eps", train.getEps().convertToDouble()},
      {"precision", pl::stringifyPrecision(train.getPrecision())},
      {"loss_scale", lossScale(train)}};
  llvm::json::Array axes, sizes, data;
  if (auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr()))
    for (auto axis : mesh.getAxes().getAsRange<pl::AxisAttr>()) {
      axes.push_back(axis.getName().getValue());
      sizes.push_back(axis.getSize());
    }
  for (Attribute a : train.getParallel().getData())
    data.push_back(cast<StringAttr>(a).getValue());
  llvm::json::Object root{{"format", "planc-train-1"},
                          {"mesh", llvm::json::Object{{"name", train.getMesh()},
                                                      {"axes", std::move(axes)},
                                                      {"sizes", std::move(sizes)},
                                                      {"data", std::move(data)},
                                                      {"tensor", train.getParallel().getTensor().getValue()}}},
                          {"plan", train.getSymName()},
                          {"model", train.getModel()},
                          {"num_floats", layout.total},
                          {"groups", llvm::json::Array{llvm::json::Array{layout.groupBegin[0], layout.groupEnd[0]},
                                                       llvm::json::Array{layout.groupBegin[1], layout.groupEnd[1]}}},
                          {"params", std::move(ps)},
                          {"train", std::move(t)}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(root));
  return out;
}

/// What this version compiles: data-parallel layouts (DDP, ZeRO 1–3) of any size,
/// times a tensor-parallel axis (plan-train-step partitioned the model), fp32, bf16
/// or fp16, any recompute mode. Anything else is an error naming the feature,
/// never a silently different program.
LogicalResult checkSupported(pl::TrainOp train) {
  pl::ParallelAttr par = train.getParallel();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr());
  if (!mesh)
    return train.emitOpError() << "mesh " << train.getMeshAttr() << " is not a plan.mesh";
  auto notYet = [&](StringRef what, StringRef axis) {
    return train.emitError() << what << " (axis '" << axis << "' of mesh '" << train.getMesh()
                             << "') is not implemented by the code generator in this version of planc; "
                                "data-parallel layouts (DDP, ZeRO 1-3) and tensor parallelism are";
  };
  if (!par.getPipeline().getValue().empty() && mesh.getAxisSize(par.getPipeline().getValue()) > 1)
    return notYet("pipeline parallelism", par.getPipeline().getValue());
  for (Attribute a : par.getReplicate())
    if (mesh.getAxisSize(cast<StringAttr>(a).getValue()) > 1)
      return notYet("replication outside the data axes", cast<StringAttr>(a).getValue());
  if (training::deviceCount(train) != training::dataParallelSize(train) * training::tensorParallelOf(train).size)
    return train.emitError() << "every axis of mesh '" << train.getMesh()
                             << "' larger than 1 needs a role; this version runs data-parallel layouts";
  if (auto fixed = train.getFixedLossScale(); fixed && !(fixed->convertToDouble() <= 3.4028234663852886e38))
    return train.emitError() << "the static loss scale " << fixed->convertToDouble()
                             << " does not fit in f32 (at most 3.4e38), where the step keeps it";
  return success();
}

struct PlanTrainABI : plan::impl::PlanTrainABIBase<PlanTrainABI> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto trains = llvm::to_vector(module.getOps<pl::TrainOp>());
    if (trains.empty() && (!module.getOps<pl::RetrievalOp>().empty() || !module.getOps<pl::GenerateOp>().empty()))
      return;  // a retrieval or generation executable (plan-retrieval-abi, plan-generate-abi)
    if (trains.size() != 1) {
      module.emitError() << "an executable trains one plan; this module has " << trains.size()
                         << " (select one with --entry)";
      return signalPassFailure();
    }
    pl::TrainOp train = trains.front();
    if (failed(checkSupported(train)))
      return signalPassFailure();
    std::string base = train.getSymName().str();
    auto fwd = module.lookupSymbol<func::FuncOp>(base + "_forward");
    auto grad = module.lookupSymbol<func::FuncOp>(base + "_grad");
    auto update = module.lookupSymbol<func::FuncOp>(base + "_update");
    if (!fwd || !grad || !update) {
      train.emitOpError() << "needs its step functions first (plan-train-step)";
      return signalPassFailure();
    }

    SmallVector<Param> params;
    SmallVector<RankedTensorType> types;
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      if (auto name = fwd.getArgAttrOfType<StringAttr>(i, "nn.param")) {
        auto type = cast<RankedTensorType>(fwd.getArgument(i).getType());
        params.push_back({name.str(), type, 0, type.getNumElements(), i});
        if (!fwd.getArgAttrOfType<StringAttr>(i, "nn.init") || !fwd.getArgAttrOfType<FloatAttr>(i, "nn.std")) {
          fwd.emitOpError() << "parameter '" << name.getValue() << "' needs nn.init and nn.std attributes";
          return signalPassFailure();
        }
        types.push_back(type);
      }
    int64_t d = training::dataParallelSize(train);
    bool sharded = d > 1 && train.getParallel().getZero() >= 1;
    training::BufferLayout layout = training::layoutOf(types, d);
    for (auto [p, offset] : llvm::zip(params, layout.offset))
      p.offset = offset;
    int64_t total = layout.total;
    auto tokens = cast<RankedTensorType>(fwd.getArgument(0).getType());
    int64_t accumulation = int64_t(train.getAccumulationAttr().getInt());

    OpBuilder b(&getContext());
    Location loc = train.getLoc();
    b.setInsertionPointToEnd(module.getBody());
    auto flatTy = MemRefType::get({total}, b.getF32Type());
    auto tokTy = MemRefType::get(tokens.getShape(), b.getI32Type());
    auto scalarTy = MemRefType::get({1}, b.getF32Type());
    // The step state the driver keeps between steps (planrt.h): [grad norm, lr,
    // loss scale, good steps, skipped, …].
    auto statsTy = MemRefType::get({8}, b.getF32Type());
    bool scaled = train.getPrecision() == pl::Precision::fp16;
    auto at = [&](int64_t i) { return arith::ConstantIndexOp::create(b, loc, i); };
    auto entry = [&](StringRef name, ArrayRef<Type> args) {
      auto f = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
      b.setInsertionPointToStart(f.addEntryBlock());
      return f;
    };
    auto readTokens = [&](Value m) {
      return bufferization::ToTensorOp::create(b, loc, tokens, m, /*restrict=*/true, /*writable=*/false);
    };
    auto index0 = [&]() { return arith::ConstantIndexOp::create(b, loc, 0); };
    auto f32 = [&](double v) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v))); };

    // planc_grad(P, G, tokens, targets, loss, state): G += ∇ / (accumulation × data
    // parallel), so that the data-parallel sum is the mean over the global batch;
    // loss += loss / accumulation; with fp16, ∇ is scaled by state[2], the loss scale.
    {
      OpBuilder::InsertionGuard g(b);
      auto f = entry("planc_grad", {flatTy, flatTy, tokTy, tokTy, scalarTy, statsTy});
      Block &e = f.getBody().front();
      Flat P(b, loc, e.getArgument(0));
      SmallVector<Value> args{readTokens(e.getArgument(2)), readTokens(e.getArgument(3))};
      for (const Param &p : params)
        args.push_back(P.read(p));
      if (scaled) {
        Value s = memref::LoadOp::create(b, loc, e.getArgument(5), ValueRange{at(2)});
        args.push_back(tensor::FromElementsOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()), ValueRange{s}));
      }
      SmallVector<Value> outs = inlineBody(b, grad, args);
      double inv = 1.0 / double(accumulation), gradScale = inv / double(d);
      Flat G(b, loc, e.getArgument(1));
      for (auto [i, p] : llvm::enumerate(params)) {
        Value g = G.flatten(outs[1 + i], p);
        if (gradScale != 1)
          g = nn::ScaleOp::create(b, loc, g.getType(), g, b.getF64FloatAttr(gradScale));
        G.writeFlat(nn::AddOp::create(b, loc, g.getType(), G.readFlat(p), g), p);
      }
      Value loss = tensor::ExtractOp::create(b, loc, outs[0], ValueRange{});
      Value old = memref::LoadOp::create(b, loc, e.getArgument(4), ValueRange{index0()});
      Value sum = arith::AddFOp::create(b, loc, old, arith::MulFOp::create(b, loc, loss, f32(inv)));
      memref::StoreOp::create(b, loc, sum, e.getArgument(4), ValueRange{index0()});
      func::ReturnOp::create(b, loc);
    }
    // This rank's piece of each optimizer group (training::layoutOf): the whole group
    // without ZeRO. Arguments come per group: (group 0, group 1).
    auto spanTy = [&](int g) {
      return MemRefType::get({sharded ? layout.shardFloats(g) : layout.groupFloats(g)}, b.getF32Type());
    };
    SmallVector<int> groups;
    for (int g = 0; g < 2; ++g)
      if (layout.groupFloats(g) > 0)
        groups.push_back(g);
    auto wholeSpan = [&](int g) {
      int64_t count = spanTy(g).getNumElements();
      return Param{"", RankedTensorType::get({count}, b.getF32Type()), 0, count};
    };
    // planc_sumsq(G0, G1, stats): stats[6] = the sum of the squared gradients of this
    // rank's pieces (the padding is zero).
    {
      OpBuilder::InsertionGuard g(b);
      auto f = entry("planc_sumsq", {spanTy(0), spanTy(1), statsTy});
      Block &e = f.getBody().front();
      Value sumsq = f32(0);
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      for (int grp : groups) {
        Flat G(b, loc, e.getArgument(grp));
        Value s = nn::SumSquaresOp::create(b, loc, scalar, G.readFlat(wholeSpan(grp)));
        sumsq = arith::AddFOp::create(b, loc, sumsq, tensor::ExtractOp::create(b, loc, s, ValueRange{}));
      }
      memref::StoreOp::create(b, loc, sumsq, e.getArgument(2), ValueRange{at(6)});
      func::ReturnOp::create(b, loc);
    }
    // planc_update(P0, P1, G0, G1, M0, M1, V0, V1, step, stats): AdamW in place on this
    // rank's pieces; stats[6] is the global sum of squared gradients; stats[0..1] =
    // grad norm, lr; with fp16, stats[2], [3] and [5] (loss scale, good steps, applied
    // updates) are read and updated, and stats[4] is 1 when the step was skipped.
    {
      OpBuilder::InsertionGuard g(b);
      SmallVector<Type> argTys;
      for (int k = 0; k < 4; ++k)
        for (int grp = 0; grp < 2; ++grp)
          argTys.push_back(spanTy(grp));
      argTys.append({b.getI64Type(), statsTy});
      auto f = entry("planc_update", argTys);
      Block &e = f.getBody().front();
      Value stats = e.getArgument(9);
      auto buf = [&](int k, int grp) { return Flat(b, loc, e.getArgument(2 * k + grp)); };
      SmallVector<Value> args{e.getArgument(8), memref::LoadOp::create(b, loc, stats, ValueRange{at(6)})};
      for (int k = 0; k < 4; ++k)
        for (int grp : groups)
          args.push_back(buf(k, grp).readFlat(wholeSpan(grp)));
      if (scaled)
        for (int64_t i : {2, 3, 5})
          args.push_back(memref::LoadOp::create(b, loc, stats, ValueRange{at(i)}));
      SmallVector<Value> outs = inlineBody(b, update, args);
      size_t n = groups.size();
      static const int64_t slots[] = {2, 3, 4, 5};  // scale, good steps, skipped, applied
      if (scaled)
        for (auto [i, slot] : llvm::enumerate(slots))
          memref::StoreOp::create(b, loc, outs[2 + 3 * n + i], stats, ValueRange{at(slot)});
      static const int written[] = {0, 2, 3};  // P, M, V
      for (int k = 0; k < 3; ++k)
        for (auto [i, grp] : llvm::enumerate(groups))
          buf(written[k], grp).writeFlat(outs[2 + k * n + i], wholeSpan(grp));
      memref::StoreOp::create(b, loc, outs[0], stats, ValueRange{index0()});
      Value lr = arith::TruncFOp::create(b, loc, b.getF32Type(), outs[1]);
      memref::StoreOp::create(b, loc, lr, stats, ValueRange{at(1)});
      func::ReturnOp::create(b, loc);
    }
    // planc_eval(P, tokens, targets, loss): the forward loss of one micro-batch.
    {
      OpBuilder::InsertionGuard g(b);
      auto f = entry("planc_eval", {flatTy, tokTy, tokTy, scalarTy});
      Block &e = f.getBody().front();
      Flat P(b, loc, e.getArgument(0));
      SmallVector<Value> args{readTokens(e.getArgument(1)), readTokens(e.getArgument(2))};
      for (const Param &p : params)
        args.push_back(P.read(p));
      SmallVector<Value> outs = inlineBody(b, fwd, args);
      memref::StoreOp::create(b, loc, tensor::ExtractOp::create(b, loc, outs[0], ValueRange{}),
                              e.getArgument(3), ValueRange{index0()});
      func::ReturnOp::create(b, loc);
    }
    // The manifest, NUL-terminated.
    auto model = module.lookupSymbol<func::FuncOp>(train.getModel());
    auto vocab = model ? model->getAttrOfType<IntegerAttr>("nn.vocab") : IntegerAttr();
    if (!vocab) {
      train.emitOpError() << "needs its model's nn.vocab attribute (set by convert-plan-to-nn)";
      return signalPassFailure();
    }
    std::string text = manifest(train, fwd, params, layout, vocab.getInt());
    text.push_back('\0');
    auto arrayTy = LLVM::LLVMArrayType::get(IntegerType::get(&getContext(), 8), text.size());
    LLVM::GlobalOp::create(b, loc, arrayTy, /*isConstant=*/true, LLVM::Linkage::Internal, "planc_manifest",
                           b.getStringAttr(text));

    // What is left of the plan has been consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) ||
          (isa<func::FuncOp>(op) && !cast<func::FuncOp>(op).getName().starts_with("planc_")))
        op.erase();
  }
};

} // namespace
