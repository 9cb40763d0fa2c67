// `plan-train-abi`: the C entry points of a training executable. The tensor
// functions of `plan-train-step` are inlined into three functions on flat
// buffers — every parameter (gradient, Adam moment) at its offset in one f32
// array — and the manifest the runtime reads (parameter table, data, batch,
// schedule, checkpoints) becomes a constant string in the module.
#include "plan/Compiler/PlanGen.h"
#include "plan/Conversion/LibraryCalls.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Dialect/Sched/IR/Sched.h"
#include "plan/Target/RuntimeABI.h"
#include "plan/Training/DataParallel.h"
#include "plan/Training/Flat.h"
#include "plan/Training/Manifest.h"
#include "plan/Training/Passes.h"
#include "plan/Training/StageSplit.h"
#include "plan/Training/Training.h"
#include "planrt_manifest.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace plan {
#define GEN_PASS_DEF_PLANTRAINABI
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
namespace key = planrt::manifest::key;
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
    return llvm::json::Object{{key::kind, "none"}, {key::init, 1.0}};
  if (train.getLossScale() == pl::LossScale::dynamic)
    return llvm::json::Object{{key::kind, "dynamic"}, {key::init, 65536.0}}; // torch.cuda.amp.GradScaler's default
  return llvm::json::Object{
      {key::kind, "static"},
      {key::init, train.getFixedLossScale() ? train.getFixedLossScale()->convertToDouble() : 1.0}};
}

/// A pipeline stage's piece of the manifest (or the whole model's without one).
struct StageTable {
  func::FuncOp fwd; ///< holds the parameters' attributes
  SmallVector<Param> params;
  training::BufferLayout layout;
  SmallVector<func::FuncOp> from; ///< the function whose argument each parameter is
  SmallVector<int64_t> index;     ///< each parameter's position in the whole model
  SmallVector<bool> replica;      ///< a copy of a parameter an earlier pipeline rank owns
  int64_t saved = 0;              ///< `keep: activations`: floats a micro-batch's forward pass keeps
  int64_t wsaved = 0;             ///< zero-bubble: floats a micro-batch's input pass keeps for its weight pass
  /// Under a pipeline, a rank's table: each stage it holds (one but under the
  /// interleaved schedule), with the floats of the activation it hands on and those of
  /// `saved` and `wsaved`.
  struct Chunk {
    int64_t stage = 0, activation = 0, saved = 0, wsaved = 0;
  };
  SmallVector<Chunk> chunks;
  /// A fine-tuning plan's frozen base (nn.frozen): read from P after the trained
  /// parameters' layout (offsets from layout.total), never written, no gradient.
  SmallVector<Param> frozen;
  SmallVector<func::FuncOp> frozenFrom;
  int64_t frozenFloats = 0;
  /// Under a pipeline, each frozen parameter's position in the whole base (its random
  /// stream) and whether an earlier rank holds it too (a tied embedding).
  SmallVector<int64_t> frozenIndex;
  SmallVector<bool> frozenReplica;
};

llvm::json::Array paramTable(const StageTable &st, bool frozen = false) {
  llvm::json::Array ps;
  const SmallVector<func::FuncOp> &from = frozen ? st.frozenFrom : st.from;
  for (auto [i, p] : llvm::enumerate(frozen ? st.frozen : st.params)) {
    func::FuncOp fwd = from.empty() ? st.fwd : from[i];
    unsigned arg = p.arg;
    // A QLoRA base matrix (plan-quantize): its shape, and the floats of its NF4 storage.
    auto quant = fwd.getArgAttrOfType<DictionaryAttr>(arg, "nn.quant");
    ArrayRef<int64_t> dims = quant ? quant.getAs<DenseI64ArrayAttr>("shape").asArrayRef() : p.type.getShape();
    llvm::json::Array shape;
    int64_t count = 1;
    for (int64_t d : dims) {
      shape.push_back(d);
      count *= d;
    }
    llvm::json::Object entry{{key::name, p.name},
                             {key::shape, std::move(shape)},
                             {key::offset, p.offset},
                             {key::count, count},
                             {key::init, fwd.getArgAttrOfType<StringAttr>(arg, "nn.init").getValue()},
                             {key::std, fwd.getArgAttrOfType<FloatAttr>(arg, "nn.std").getValueAsDouble()}};
    // A tensor-parallel piece: `shape` is this rank's; dim `dim` of the full tensor is
    // cut in `parts`, block by block (q, k, v), and rank c holds piece c of each block.
    if (auto split = fwd.getArgAttrOfType<DictionaryAttr>(arg, "nn.split")) {
      llvm::json::Array blocks;
      for (int64_t n : cast<DenseI64ArrayAttr>(split.get(key::blocks)).asArrayRef())
        blocks.push_back(n);
      entry[key::split] = llvm::json::Object{{key::dim, cast<IntegerAttr>(split.get(key::dim)).getInt()},
                                             {key::parts, cast<IntegerAttr>(split.get(key::parts)).getInt()},
                                             {key::blocks, std::move(blocks)}};
    }
    if (auto base = fwd.getArgAttrOfType<StringAttr>(arg, "nn.adapter"))
      entry[key::adapts] = base.getValue();
    if (auto qkv = fwd.getArgAttrOfType<DenseI64ArrayAttr>(arg, "nn.qkv")) {
      llvm::json::Array widths;
      for (int64_t w : qkv.asArrayRef())
        widths.push_back(w);
      entry[key::qkv] = std::move(widths);
    }
    if (quant)
      entry[key::nf4] = llvm::json::Object{{key::block, quant.getAs<IntegerAttr>("block").getInt()},
                                           {key::double_quant, quant.getAs<BoolAttr>("double").getValue()},
                                           {key::floats, p.count}};
    const SmallVector<int64_t> &index = frozen ? st.frozenIndex : st.index;
    const SmallVector<bool> &replica = frozen ? st.frozenReplica : st.replica;
    if (!index.empty())
      entry[key::index] = index[i];
    if (!replica.empty() && replica[i])
      entry[key::replica] = true;
    ps.push_back(std::move(entry));
  }
  return ps;
}

llvm::json::Array groupsOf(const training::BufferLayout &layout) {
  return llvm::json::Array{llvm::json::Array{layout.groupBegin[0], layout.groupEnd[0]},
                           llvm::json::Array{layout.groupBegin[1], layout.groupEnd[1]}};
}

/// A dictionary of scalars, arrays and dictionaries (plan.train's federated and images)
/// as JSON.
llvm::json::Value jsonOf(Attribute a) {
  if (auto d = dyn_cast<DictionaryAttr>(a)) {
    llvm::json::Object o;
    for (NamedAttribute e : d)
      o[e.getName().getValue()] = jsonOf(e.getValue());
    return o;
  }
  if (auto l = dyn_cast<ArrayAttr>(a)) {
    llvm::json::Array out;
    for (Attribute e : l)
      out.push_back(jsonOf(e));
    return out;
  }
  if (auto s = dyn_cast<StringAttr>(a))
    return s.getValue();
  if (auto b = dyn_cast<BoolAttr>(a))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(a))
    return int64_t(i.getInt());
  if (auto f = dyn_cast<FloatAttr>(a))
    return f.getValueAsDouble();
  return nullptr;
}

/// `stages` holds the whole model's table, or one per pipeline rank: then the top-level
/// table is the first rank's and `stages` lists them all, each with its stages (chunks).
llvm::json::Value manifest(pl::TrainOp train, ArrayRef<StageTable> stages, int64_t vocab) {
  StringRef base = train.getBaseDir();
  const StageTable &first = stages.front();
  const training::BufferLayout &layout = first.layout;
  llvm::json::Array ps = paramTable(first);
  auto i64 = [](IntegerAttr a) { return int64_t(a.getInt()); };
  training::TensorParallel tp = training::tensorParallelOf(train);
  llvm::json::Object t{{key::batch, i64(train.getBatchAttr())},
                       {key::micro, i64(train.getMicroAttr())},
                       {key::seq, i64(train.getSeqAttr())},
                       {key::accumulation, i64(train.getAccumulationAttr())},
                       {key::data_parallel, training::dataParallelSize(train)},
                       {key::tensor_parallel, tp.size},
                       {key::sequence_parallel, tp.size > 1 && tp.sequence},
                       {key::zero, train.getParallel().getZero()},
                       {key::steps, i64(train.getStepsAttr())},
                       {key::seed, i64(train.getSeedAttr())},
                       {key::vocab, vocab},
                       {key::data, strings(train.getData(), base)},
                       {key::val, strings(train.getVal(), base)},
                       {key::eval_every, i64(train.getEvalEveryAttr())},
                       {key::eval_batches, i64(train.getEvalBatchesAttr())},
                       {key::checkpoint, llvm::json::Object{{key::dir, resolvePlanPath(base, train.getCheckpointDir())},
                                                            {key::every, i64(train.getCheckpointEveryAttr())},
                                                            {key::keep, i64(train.getCheckpointKeepAttr())}}},
                       {key::lr, train.getLr().convertToDouble()},
                       {key::schedule, pl::stringifyLRSchedule(train.getLrSchedule())},
                       {key::warmup, i64(train.getWarmupAttr())},
                       {key::min_lr, train.getMinLr().convertToDouble()},
                       {key::clip, train.getClip().convertToDouble()},
                       {key::weight_decay, train.getWeightDecay().convertToDouble()},
                       {key::beta1, train.getBeta1().convertToDouble()},
                       {key::beta2, train.getBeta2().convertToDouble()},
                       {key::eps, train.getEps().convertToDouble()},
                       {key::optimizer, train.getOptimizer()},
                       {key::momentum, train.getMomentum().convertToDouble()},
                       {key::precision, pl::stringifyPrecision(train.getPrecision())},
                       {key::loss_scale, lossScale(train)}};
  if (std::optional<StringRef> tokenizer = train.getTokenizer()) {
    t[key::tokenizer] = resolvePlanPath(base, *tokenizer);
    t[key::data_text] = train.getDataText();
    t[key::val_text] = train.getValText();
  }
  if (Attribute images = train->getAttr(key::images)) {
    llvm::json::Value im = jsonOf(images);
    // Its batchnorms' running statistics ([{name, channels}] by index: plan-train-step).
    if (Attribute running = first.fwd->getAttr("nn.running"))
      im.getAsObject()->insert({key::running, jsonOf(running)});
    t[key::images] = std::move(im);
  }
  if (std::optional<StringRef> init = train.getInitPath())
    t[key::init] = llvm::json::Object{{key::path, resolvePlanPath(base, *init)},
                                      {key::format, train.getInitFormat().value_or("planc")}};
  llvm::json::Array axes, sizes, data;
  int64_t perNode = 0;
  if (auto mesh = SymbolTable::lookupNearestSymbolFrom<pl::MeshOp>(train, train.getMeshAttr())) {
    for (auto axis : mesh.getAxes().getAsRange<pl::AxisAttr>()) {
      axes.push_back(axis.getName().getValue());
      sizes.push_back(axis.getSize());
    }
    perNode = mesh.getDevicesPerNode();
  }
  for (Attribute a : train.getParallel().getData())
    data.push_back(cast<StringAttr>(a).getValue());
  llvm::json::Object root{{key::format, planrt::manifest::format::kTrain},
                          {key::mesh, llvm::json::Object{{key::name, train.getMesh()},
                                                         {key::axes, std::move(axes)},
                                                         {key::sizes, std::move(sizes)},
                                                         {key::data, std::move(data)},
                                                         {key::tensor, train.getParallel().getTensor().getValue()},
                                                         {key::per_node, perNode}}},
                          {key::plan, train.getSymName()},
                          {key::model, train.getModel()},
                          {key::num_floats, layout.total},
                          {key::groups, groupsOf(layout)},
                          {key::params, std::move(ps)},
                          {key::train, std::move(t)}};
  if (!first.frozen.empty() && stages.size() == 1) {
    root[key::frozen] = paramTable(first, /*frozen=*/true);
    root[key::frozen_floats] = first.frozenFloats;
  }
  if (DictionaryAttr adapt = train.getAdaptAttr()) {
    llvm::json::Array targets;
    for (Attribute a : cast<ArrayAttr>(adapt.get("targets")))
      targets.push_back(cast<StringAttr>(a).getValue());
    root[key::adapt] = llvm::json::Object{{key::kind, "lora"},
                                          {key::rank, cast<IntegerAttr>(adapt.get("rank")).getInt()},
                                          {key::alpha, cast<FloatAttr>(adapt.get("alpha")).getValueAsDouble()},
                                          {key::targets, std::move(targets)}};
  }
  if (DictionaryAttr federated = train.getFederatedAttr())
    root[key::federated] = jsonOf(federated);
  // Offloaded state: where it lives and the chunk it streams through.
  if (DictionaryAttr offload = train.getParallel().getOffload()) {
    llvm::json::Object places;
    for (NamedAttribute place : offload) {
      auto d = cast<DictionaryAttr>(place.getValue());
      llvm::json::Object o{{key::target, d.getAs<StringAttr>("target").getValue()}};
      if (auto dir = d.getAs<StringAttr>("dir"))
        o[key::dir] = resolvePlanPath(base, dir.getValue());
      if (auto buffer = d.getAs<IntegerAttr>("buffer"))
        o[key::buffer] = buffer.getInt();
      places[place.getName().getValue()] = std::move(o);
    }
    root[key::offload] = std::move(places);
  }
  if (training::Pipeline pp = training::pipelineOf(train); pp.size > 1) {
    root[key::pipeline] = llvm::json::Object{
        {key::axis, pp.axis}, {key::size, pp.size}, {key::schedule, pl::stringifyPipelineSchedule(pp.schedule)}};
    llvm::json::Array tables;
    for (const StageTable &st : stages) {
      llvm::json::Array chunks;
      for (const StageTable::Chunk &c : st.chunks) {
        llvm::json::Object chunk{{key::stage, c.stage}, {key::activation, c.activation}, {key::saved, c.saved}};
        if (c.wsaved > 0)
          chunk[key::wsaved] = c.wsaved;
        chunks.push_back(std::move(chunk));
      }
      llvm::json::Object table{{key::num_floats, st.layout.total},
                               {key::groups, groupsOf(st.layout)},
                               {key::chunks, std::move(chunks)},
                               {key::params, paramTable(st)}};
      // A fine-tuning plan's frozen base: each rank's own, after its trained layout.
      if (!st.frozen.empty()) {
        table[key::frozen] = paramTable(st, /*frozen=*/true);
        table[key::frozen_floats] = st.frozenFloats;
      }
      tables.push_back(std::move(table));
    }
    root[key::stages] = std::move(tables);
  }
  return llvm::json::Value(std::move(root));
}

/// What this version builds of `offload`: the optimizer's moments on nvme, and on a
/// cpu mesh with them the ZeRO-3 parameter shard (the update streams each parameter
/// chunk with its moments, so the two share the chunk). On a cuda mesh the moments
/// stream through the device, whose kernels update each chunk (docs/EXECUTABLES.md).
LogicalResult checkOffload(pl::TrainOp train, DictionaryAttr offload, pl::MeshOp mesh) {
  auto opt = offload.getAs<DictionaryAttr>("optimizer"), params = offload.getAs<DictionaryAttr>("params");
  auto target = [](DictionaryAttr place) {
    auto t = place ? place.getAs<StringAttr>("target") : StringAttr();
    return t ? t.getValue() : StringRef();
  };
  if (mesh.getKind() != pl::DeviceKind::cpu) {
    if (target(opt) == "cpu")
      return train.emitError() << "the optimizer in host memory on a cuda mesh ('optimizer = cpu', ZeRO-Offload's "
                                  "update on the host's cores) is not implemented by the code generator in this "
                                  "version of planc; planc explain estimates it, and 'optimizer = nvme(DIR)' builds "
                                  "(the moments streamed from files through the device's update)";
    if (params)
      return train.emitError() << "offloading the parameters on a cuda mesh is not implemented by the code "
                                  "generator in this version of planc; planc explain estimates it, and "
                                  "'optimizer = nvme(DIR)' alone builds on a cuda mesh ('params = nvme(DIR)' "
                                  "with it on a cpu mesh)";
  }
  if (!params)
    return success();
  if (!opt)
    return train.emitError() << "offloading the parameters without the optimizer is not implemented by the code "
                                "generator in this version of planc: the update streams each parameter chunk with "
                                "its Adam moments; add 'optimizer = nvme(DIR)' to the offload section";
  auto bytes = [](DictionaryAttr place) {
    auto b = place.getAs<IntegerAttr>("buffer");
    return b ? b.getInt() : int64_t(0);
  };
  if (bytes(opt) != bytes(params))
    return train.emitError() << "the offloaded parameters' buffer (" << bytes(params)
                             << " bytes) differs from the optimizer's (" << bytes(opt)
                             << " bytes): the update streams each parameter chunk with its moments, in chunks of one "
                                "size; give both the same buffer";
  if (training::dataParallelSize(train) < 2)
    return train.emitError() << "offloading the parameters of a single data-parallel rank is not implemented by the "
                                "code generator in this version of planc: the parameters are offloaded as ZeRO-3 "
                                "shards, gathered over a data axis of more than one rank";
  return success();
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
                                "data-parallel layouts (DDP, ZeRO 1-3), tensor parallelism and GPipe, 1F1B, "
                                "interleaved and zero-bubble (zb) pipelines are";
  };
  training::Pipeline pp = training::pipelineOf(train);
  if (pp.size > 1 && pp.stages != pp.size && pp.schedule != pl::PipelineSchedule::interleaved)
    return train.emitError() << "pipeline '" << pp.axis << "' declares " << pp.stages << " stages over " << pp.size
                             << " ranks; several stages a rank need the interleaved schedule";
  for (Attribute a : par.getReplicate())
    if (mesh.getAxisSize(cast<StringAttr>(a).getValue()) > 1)
      return notYet("replication outside the data axes", cast<StringAttr>(a).getValue());
  // A federated plan's client axis: one client per coordinate.
  int64_t clients = 1;
  if (DictionaryAttr fed = train.getFederatedAttr())
    if (auto axis = fed.getAs<StringAttr>(planrt::manifest::key::axis))
      clients = mesh.getAxisSize(axis.getValue());
  if (training::deviceCount(train) !=
      training::dataParallelSize(train) * training::tensorParallelOf(train).size * pp.size * clients)
    return train.emitError() << "every axis of mesh '" << train.getMesh()
                             << "' larger than 1 needs a role; this version runs data-parallel layouts";
  if (DictionaryAttr offload = par.getOffload())
    if (failed(checkOffload(train, offload, mesh)))
      return failure();
  if (auto fixed = train.getFixedLossScale(); fixed && !(fixed->convertToDouble() <= 3.4028234663852886e38))
    return train.emitError() << "the static loss scale " << fixed->convertToDouble()
                             << " does not fit in f32 (at most 3.4e38), where the step keeps it";
  return success();
}

/// Builds the entry points on flat buffers.
class Entries {
public:
  Entries(ModuleOp module, pl::TrainOp train) : b(module.getContext()), loc(train.getLoc()), train(train) {
    b.setInsertionPointToEnd(module.getBody());
    d = training::dataParallelSize(train);
    sharded = d > 1 && train.getParallel().getZero() >= 1;
    accumulation = int64_t(train.getAccumulationAttr().getInt());
    scaled = train.getPrecision() == pl::Precision::fp16;
    bucketBytes = train.getParallel().getBucket();
  }

  /// The parameters of the forward functions `fns` (one, or the stages a pipeline rank
  /// holds: training::rankParameters) and their flat layout; fails on a parameter
  /// without its initialisation attributes.
  FailureOr<StageTable> table(ArrayRef<func::FuncOp> fns) {
    StageTable st;
    st.fwd = fns.front();
    SmallVector<RankedTensorType> types;
    auto initialised = [&](func::FuncOp f, unsigned i, StringAttr name) -> LogicalResult {
      if (f.getArgAttrOfType<StringAttr>(i, "nn.init") && f.getArgAttrOfType<FloatAttr>(i, "nn.std"))
        return success();
      return f.emitOpError() << "parameter '" << name.getValue() << "' needs nn.init and nn.std attributes";
    };
    for (auto [f, i] : training::rankParameters(fns, "nn.param")) {
      auto name = f.getArgAttrOfType<StringAttr>(i, "nn.param");
      auto type = cast<RankedTensorType>(f.getArgument(i).getType());
      if (failed(initialised(f, i, name)))
        return failure();
      st.params.push_back({name.str(), type, 0, type.getNumElements(), i});
      st.from.push_back(f);
      types.push_back(type);
    }
    st.layout = training::layoutOf(types, d);
    for (auto [p, offset] : llvm::zip(st.params, st.layout.offset))
      p.offset = offset;
    // The frozen base after the trained parameters, each at a multiple of 16 floats.
    for (auto [f, i] : training::rankParameters(fns, "nn.frozen")) {
      auto name = f.getArgAttrOfType<StringAttr>(i, "nn.frozen");
      auto type = cast<RankedTensorType>(f.getArgument(i).getType());
      if (failed(initialised(f, i, name)))
        return failure();
      st.frozen.push_back({name.str(), type, st.layout.total + st.frozenFloats, type.getNumElements(), i});
      st.frozenFrom.push_back(f);
      st.frozenFloats += (type.getNumElements() + 15) / 16 * 16;
    }
    // ZeRO-3 shards the frozen base too (plan-schedule's frozen_shard): in equal pieces.
    if (sharded && train.getParallel().getZero() >= 3)
      st.frozenFloats = (st.frozenFloats + 16 * d - 1) / (16 * d) * (16 * d);
    return st;
  }

  /// What the entry points of stage function `fwd` read of its rank's table `rank`: its
  /// own parameters, in its argument order, at their places in the rank's layout.
  static StageTable stageView(const StageTable &rank, func::FuncOp fwd) {
    StageTable st;
    st.fwd = fwd;
    st.layout = rank.layout;
    st.frozenFloats = rank.frozenFloats;
    auto place = [&](ArrayRef<Param> in, StringRef name) {
      return llvm::find_if(in, [&](const Param &p) { return p.name == name; });
    };
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i) {
      if (auto name = fwd.getArgAttrOfType<StringAttr>(i, "nn.param")) {
        st.params.push_back(*place(rank.params, name.getValue()));
        st.params.back().arg = i;
      } else if (auto name = fwd.getArgAttrOfType<StringAttr>(i, "nn.frozen")) {
        st.frozen.push_back(*place(rank.frozen, name.getValue()));
        st.frozen.back().arg = i;
      }
    }
    return st;
  }

  void grad(const StageTable &st, func::FuncOp grad) {
    OpBuilder::InsertionGuard g(b);
    auto f = entry("planc_grad", {paramsTy(st), flatTy(st), tokTy(st), targetTy(st), scalarTy(), statsTy()});
    Block &e = f.getBody().front();
    SmallVector<Value> args = forwardArgs(st, e.getArgument(0), e.getArgument(2), e.getArgument(3), Value());
    if (scaled)
      args.push_back(lossScale(e.getArgument(5)));
    SmallVector<Value> outs = inlineBody(b, grad, args);
    if (bucketBytes > 0 && d > 1 && train.getParallel().getZero() == 3)
      prefetchInBuckets(f, st, args, outs[0]);
    training::TensorParallel tp = training::tensorParallelOf(train);
    if (bucketBytes > 0 && d > 1 && training::gradientsInBuckets(train.getParallel().getZero(), tp.size > 1 && tp.sequence))
      accumulateInBuckets(f, st, e.getArgument(1), outs);
    else
      accumulateGrads(st, e.getArgument(1), outs);
    addLoss(outs[0], e.getArgument(4));
    func::ReturnOp::create(b, loc);
  }

  /// DDP gradient buckets (the plan's `bucket`): each parameter's gradient is added to
  /// G right after the op that computes it, and once every gradient of a bucket is in,
  /// `planrt_grad_ready(k)` tells the runtime that bucket k may be all-reduced while
  /// the backward pass goes on. Buckets take parameters in the order the backward
  /// pass finishes them, each closing at `bucket` bytes or more (PyTorch DDP's rule);
  /// a parameter's range runs to the next parameter's offset (alignment padding, zero,
  /// included), so the buckets cover G exactly. Their ranges are recorded on `f` as
  /// `plan.grad_buckets` ([offset, count, offset, count, …] per bucket, in order),
  /// which `plan-schedule` turns into one `sched.all_reduce_start` per range.
  void accumulateInBuckets(func::FuncOp f, const StageTable &st, Value grads, ArrayRef<Value> outs) {
    OpBuilder::InsertionGuard g(b);
    Block &body = f.getBody().front();
    size_t n = st.params.size();
    // Where each gradient is final: its producer's ancestor in the entry block.
    SmallVector<Operation *> producer(n, nullptr);
    for (size_t i = 0; i < n; ++i)
      if (Operation *def = outs[1 + i].getDefiningOp())
        producer[i] = body.findAncestorOpInBlock(*def);
    SmallVector<size_t> order = byPosition(producer, /*absentFirst=*/true);
    SmallVector<int64_t> end = ownedEnds(st);
    double gradScale = 1.0 / double(accumulation) / double(d);
    func::FuncOp readyFn = runtimeHook(f, rt::Fn::planrt_grad_ready);
    std::vector<std::vector<size_t>> members = training::gradientBuckets(ownedFloats(st, end, order), bucketBytes);
    SmallVector<Attribute> buckets;
    Operation *cursor = nullptr; // the last op this function inserted
    for (auto [k, bucket] : llvm::enumerate(members)) {
      SmallVector<size_t> params;
      for (size_t pos : bucket) {
        size_t i = order[pos];
        params.push_back(i);
        Operation *at = producer[i];
        if (cursor && (!at || !cursor->isBeforeInBlock(at)))
          at = cursor;
        if (at)
          b.setInsertionPointAfter(at);
        else
          b.setInsertionPointToStart(&body);
        const Param &p = st.params[i];
        Flat G(b, loc, grads);
        G.addInPlace(G.flatten(outs[1 + i], p), p, gradScale);
        cursor = &*std::prev(b.getInsertionPoint());
      }
      Value id = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(k)));
      cursor = func::CallOp::create(b, loc, readyFn, ValueRange{id});
      buckets.push_back(bucketRanges(st, end, params));
    }
    f->setAttr("plan.grad_buckets", b.getArrayAttr(buckets));
  }

  /// ZeRO-3's parameter buckets (the plan's `bucket`), FSDP's units: the forward pass
  /// waits for the all-gather of bucket k (`planrt_params_ready(k)`) right before the
  /// first op that reads one of its parameters, and each parameter is read from P only
  /// there, so that the gathers of later buckets go on while the earlier layers
  /// compute. Buckets take parameters in the order the pass first reads them and close
  /// at `bucket` bytes or more (training::gradientBuckets, as DDP's); a parameter owns
  /// its range up to the next parameter's offset, so the buckets cover P exactly.
  /// After the forward pass's last read of bucket k, `planrt_params_release(k)` frees
  /// its gathered floats; the backward pass gathers them again (regatherForBackward).
  /// The ranges are recorded on `f` as `plan.param_buckets`, which `plan-schedule`
  /// turns into `sched.all_gather_start`s.
  void prefetchInBuckets(func::FuncOp f, const StageTable &st, ArrayRef<Value> args, Value loss) {
    OpBuilder::InsertionGuard g(b);
    Block &body = f.getBody().front();
    size_t n = st.params.size();
    SmallVector<Value> read; // each parameter as the passes read it
    for (const Param &p : st.params)
      read.push_back(readValue(args[p.arg]));
    // Each parameter's first reader in the entry block (null: never read).
    SmallVector<Operation *> reader(n, nullptr);
    for (size_t i = 0; i < n; ++i)
      for (Operation *user : read[i].getUsers())
        if (Operation *at = body.findAncestorOpInBlock(*user); at && (!reader[i] || at->isBeforeInBlock(reader[i])))
          reader[i] = at;
    SmallVector<size_t> order = byPosition(reader, /*absentFirst=*/false);
    SmallVector<int64_t> end = ownedEnds(st);
    func::FuncOp readyFn = runtimeHook(f, rt::Fn::planrt_params_ready);
    SmallVector<Attribute> buckets;
    std::vector<SmallVector<size_t>> units;
    for (auto [k, bucket] : llvm::enumerate(training::gradientBuckets(ownedFloats(st, end, order), bucketBytes))) {
      SmallVector<size_t> params;
      for (size_t pos : bucket) {
        size_t i = order[pos];
        params.push_back(i);
        if (!reader[i])
          continue;
        if (pos == bucket.front()) { // the bucket's first read: wait for its gathers there
          b.setInsertionPoint(reader[i]);
          Value id = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(k)));
          func::CallOp::create(b, loc, readyFn, ValueRange{id});
        }
        // The read (subview, to_tensor, expand_shape, round) moves right before its reader.
        for (Operation *op : llvm::reverse(readChain(read[i])))
          op->moveBefore(reader[i]);
      }
      buckets.push_back(bucketRanges(st, end, params));
      units.push_back(std::move(params));
    }
    f->setAttr("plan.param_buckets", b.getArrayAttr(buckets));
    if (Operation *def = loss.getDefiningOp())
      regatherForBackward(f, read, units, body.findAncestorOpInBlock(*def));
  }

  /// A parameter as the passes read it: `v` read from P, or under emulated bf16/fp16 its
  /// rounded copy (emulatePrecision rounds each parameter once, its only use).
  static Value readValue(Value v) {
    if (v.hasOneUse())
      if (auto round = dyn_cast<nn::RoundOp>(*v.getUsers().begin()))
        return round.getResult();
    return v;
  }

  /// Where an op of `body` that reads a parameter may read it once elementwise fusion
  /// (linalg-fuse-elementwise-ops, after this pass) has merged it into the op that uses
  /// its result, when that result has one use, and so on: the last op of that chain (of
  /// every such chain, for several results). Ops computed by a call (isLibraryCall: a
  /// GEMM, a normalisation, attention) neither fuse nor are fused. A release goes after it.
  static Operation *fusedEnd(Block &body, Operation *at) {
    Operation *end = at;
    SmallVector<Operation *> work{at};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (isLibraryCall(op))
        continue;
      for (Value r : op->getResults())
        if (r.hasOneUse())
          if (Operation *next = body.findAncestorOpInBlock(**r.getUsers().begin());
              next && next != op && !isLibraryCall(next)) {
            if (end->isBeforeInBlock(next))
              end = next;
            work.push_back(next);
          }
    }
    return end;
  }

  /// The ops that read parameter value `v` from P: subview, to_tensor, expand_shape
  /// (and round), last first.
  static SmallVector<Operation *> readChain(Value v) {
    SmallVector<Operation *> chain;
    for (Operation *op = v.getDefiningOp(); op; op = op->getNumOperands() ? op->getOperand(0).getDefiningOp() : nullptr)
      chain.push_back(op);
    return chain;
  }

  /// ZeRO-3's free after the forward pass and gather again for the backward pass
  /// (FSDP's reshard after forward; the ZeRO paper's 1.5× communication). Ops up to
  /// `lossOp` are the forward pass. Each bucket k is released after the last forward
  /// op that reads it (`planrt_params_release(k)`); the backward pass then takes the
  /// buckets in the order it first reads them, as buckets K + j (K forward buckets):
  /// `planrt_params_ready(K + j)` before that read, every parameter of the bucket read
  /// from P again there (the forward pass's reads of the freed floats end with it), and
  /// `planrt_params_release(K + j)` after its last read. A bucket the backward pass does
  /// not read (biases alone) comes last and is released as it arrives, so that every
  /// parameter is gathered twice, as in DeepSpeed. `plan.param_regather` lists the
  /// forward bucket of each backward one, in order. `read`: each parameter as the
  /// passes read it (readValue).
  void regatherForBackward(func::FuncOp f, ArrayRef<Value> read, ArrayRef<SmallVector<size_t>> units,
                           Operation *lossOp) {
    Block &body = f.getBody().front();
    auto inBackward = [&](Operation *user) {
      Operation *at = body.findAncestorOpInBlock(*user);
      return at && lossOp->isBeforeInBlock(at);
    };
    // Per bucket: its last forward reader and its first backward one.
    size_t K = units.size();
    SmallVector<Operation *> fwdLast(K, nullptr), bwdFirst(K, nullptr);
    for (auto [k, unit] : llvm::enumerate(units))
      for (size_t i : unit)
        for (Operation *user : read[i].getUsers()) {
          Operation *at = body.findAncestorOpInBlock(*user);
          if (!at)
            continue;
          if (inBackward(user)) {
            if (!bwdFirst[k] || at->isBeforeInBlock(bwdFirst[k]))
              bwdFirst[k] = at;
          } else if (Operation *end = fusedEnd(body, at); !fwdLast[k] || fwdLast[k]->isBeforeInBlock(end)) {
            fwdLast[k] = end;
          }
        }
    if (llvm::all_of(bwdFirst, [](Operation *op) { return !op; }))
      return;
    func::FuncOp readyFn = runtimeHook(f, rt::Fn::planrt_params_ready);
    func::FuncOp releaseFn = runtimeHook(f, rt::Fn::planrt_params_release);
    OpBuilder::InsertionGuard g(b);
    auto call = [&](func::FuncOp fn, int64_t id) {
      func::CallOp::create(b, loc, fn, ValueRange{arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(id))});
    };
    for (size_t k = 0; k < K; ++k) { // a bucket the forward pass does not read: released after it
      b.setInsertionPointAfter(fwdLast[k] ? fwdLast[k] : lossOp);
      call(releaseFn, int64_t(k));
    }
    SmallVector<size_t> order = byPosition(bwdFirst, /*absentFirst=*/false);
    SmallVector<Attribute> regather;
    for (auto [j, k] : llvm::enumerate(order)) {
      int64_t id = int64_t(K + j);
      regather.push_back(b.getI64IntegerAttr(int64_t(k)));
      if (!bwdFirst[k]) { // nothing reads it: released as it arrives (planrt_params_ready)
        b.setInsertionPointToEnd(&body); // the entry point's return comes after
        call(readyFn, id);
        call(releaseFn, id);
        continue;
      }
      b.setInsertionPoint(bwdFirst[k]);
      call(readyFn, id);
      Operation *last = bwdFirst[k];
      for (size_t i : units[k]) {
        Value v = read[i];
        if (llvm::none_of(v.getUsers(), inBackward))
          continue;
        IRMapping map;
        Operation *copy = nullptr;
        for (Operation *op : llvm::reverse(readChain(v)))
          copy = b.clone(*op, map);
        v.replaceUsesWithIf(copy->getResult(0), [&](OpOperand &u) { return inBackward(u.getOwner()); });
        for (Operation *user : copy->getResult(0).getUsers())
          if (Operation *at = body.findAncestorOpInBlock(*user)) {
            if (Operation *end = fusedEnd(body, at); last->isBeforeInBlock(end))
              last = end;
          }
      }
      b.setInsertionPointAfter(last);
      call(releaseFn, id);
    }
    f->setAttr("plan.param_regather", b.getArrayAttr(regather));
  }

  /// The parameters' indices in the order of their ops `at` in one block (stable; a
  /// parameter without one first or last).
  static SmallVector<size_t> byPosition(ArrayRef<Operation *> at, bool absentFirst) {
    SmallVector<size_t> order;
    for (size_t i = 0; i < at.size(); ++i)
      order.push_back(i);
    llvm::stable_sort(order, [&](size_t x, size_t y) {
      Operation *a = at[x], *c = at[y];
      if (a == c)
        return false;
      if (!a || !c)
        return absentFirst ? !a : !c;
      return a->isBeforeInBlock(c);
    });
    return order;
  }

  /// The floats each parameter owns (ownedEnds), in `order`.
  static std::vector<int64_t> ownedFloats(const StageTable &st, ArrayRef<int64_t> end, ArrayRef<size_t> order) {
    std::vector<int64_t> owned;
    for (size_t i : order)
      owned.push_back(end[i] - st.params[i].offset);
    return owned;
  }

  /// The range each parameter owns in the flat buffer: from its offset to the next
  /// parameter's (the last one's: to the end), alignment padding included.
  SmallVector<int64_t> ownedEnds(const StageTable &st) {
    SmallVector<size_t> byOffset;
    for (size_t i = 0; i < st.params.size(); ++i)
      byOffset.push_back(i);
    llvm::sort(byOffset, [&](size_t x, size_t y) { return st.params[x].offset < st.params[y].offset; });
    SmallVector<int64_t> end(st.params.size(), st.layout.total);
    for (size_t k = 0; k + 1 < byOffset.size(); ++k)
      end[byOffset[k]] = st.params[byOffset[k + 1]].offset;
    return end;
  }

  /// A bucket's ranges, [offset, count, offset, count, …] in offset order, adjacent
  /// ones merged.
  Attribute bucketRanges(const StageTable &st, ArrayRef<int64_t> end, SmallVector<size_t> members) {
    llvm::sort(members, [&](size_t x, size_t y) { return st.params[x].offset < st.params[y].offset; });
    SmallVector<int64_t> ranges;
    for (size_t i : members) {
      int64_t off = st.params[i].offset;
      if (!ranges.empty() && ranges[ranges.size() - 2] + ranges.back() == off)
        ranges.back() += end[i] - off;
      else
        ranges.append({off, end[i] - off});
    }
    return b.getDenseI64ArrayAttr(ranges);
  }

  /// The runtime's hook `hook` (planrt_abi.def), declared once in the module, before `f`.
  func::FuncOp runtimeHook(func::FuncOp f, rt::Fn hook) {
    if (auto fn = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(f, b.getStringAttr(rt::name(hook))))
      return fn;
    OpBuilder::InsertionGuard top(b);
    b.setInsertionPoint(f);
    auto fn = func::FuncOp::create(b, loc, rt::name(hook), rt::funcType(b.getContext(), hook));
    fn.setPrivate();
    return fn;
  }

  /// planc_sumsq(G0, G1, stats): stats[6] = the sum of the squared gradients of this
  /// rank's pieces (the padding is zero).
  void sumsq(const StageTable &st) {
    OpBuilder::InsertionGuard g(b);
    auto f = entry("planc_sumsq", {spanTy(st, 0), spanTy(st, 1), statsTy()});
    Block &e = f.getBody().front();
    Value sum = f32(0);
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    for (int grp : groups(st)) {
      Flat G(b, loc, e.getArgument(grp));
      Value s = nn::SumSquaresOp::create(b, loc, scalar, G.readFlat(wholeSpan(st, grp)));
      sum = arith::AddFOp::create(b, loc, sum, tensor::ExtractOp::create(b, loc, s, ValueRange{}));
    }
    memref::StoreOp::create(b, loc, sum, e.getArgument(2), ValueRange{at(6)});
    func::ReturnOp::create(b, loc);
  }

  /// `name`(P0, P1, G0, G1, M0, M1, V0, V1, step, stats): AdamW in place on this rank's
  /// pieces; stats[6] is the global sum of squared gradients; stats[0..1] = grad norm,
  /// lr; with fp16, stats[2], [3] and [5] (loss scale, good steps, applied updates) are
  /// read and updated, and stats[4] is 1 when the step was skipped.
  void update(StringRef name, const StageTable &st, func::FuncOp update) {
    OpBuilder::InsertionGuard g(b);
    SmallVector<Type> argTys;
    for (int k = 0; k < 4; ++k)
      for (int grp = 0; grp < 2; ++grp)
        argTys.push_back(spanTy(st, grp));
    argTys.append({b.getI64Type(), statsTy()});
    auto f = entry(name, argTys);
    Block &e = f.getBody().front();
    applyUpdate(update, groups(st), e.getArgument(8), e.getArgument(9), e.getArgument(9),
                [&](int k, int grp) { return std::pair{e.getArgument(2 * k + grp), wholeSpan(st, grp)}; });
  }

  /// Offloaded optimizer state: `name`(P, G, M, V, step, stats, next), AdamW in place
  /// on one chunk of `chunk` floats of optimizer group `grp` (the runtime streams the
  /// moments through such chunks, zero-padding the last). stats is read as by `update`;
  /// what `update` writes to it goes to `next` instead, so that every chunk of a step
  /// reads the same loss scale; the runtime copies it over once the last chunk is done.
  void updateChunk(StringRef name, int grp, int64_t chunk, func::FuncOp update) {
    OpBuilder::InsertionGuard g(b);
    auto chunkTy = MemRefType::get({chunk}, b.getF32Type());
    auto f = entry(name, {chunkTy, chunkTy, chunkTy, chunkTy, b.getI64Type(), statsTy(), statsTy()});
    Block &e = f.getBody().front();
    Param whole{"", RankedTensorType::get({chunk}, b.getF32Type()), 0, chunk};
    applyUpdate(update, {grp}, e.getArgument(4), e.getArgument(5), e.getArgument(6),
                [&](int k, int) { return std::pair{e.getArgument(k), whole}; });
  }

  /// The body of an update entry: `update` inlined on the spans span(k, grp) (k: P, G,
  /// M, V) of the groups `gs`, reading the step state from `stats` and writing the
  /// grad norm, lr and (fp16) the loss scale's next values to `out`.
  void applyUpdate(func::FuncOp update, ArrayRef<int> gs, Value step, Value stats, Value out,
                   llvm::function_ref<std::pair<Value, Param>(int, int)> span) {
    SmallVector<Value> args{step, memref::LoadOp::create(b, loc, stats, ValueRange{at(6)})};
    for (int k = 0; k < 4; ++k)
      for (int grp : gs) {
        auto [buffer, whole] = span(k, grp);
        args.push_back(Flat(b, loc, buffer).readFlat(whole));
      }
    if (scaled)
      for (int64_t i : {2, 3, 5})
        args.push_back(memref::LoadOp::create(b, loc, stats, ValueRange{at(i)}));
    SmallVector<Value> outs = inlineBody(b, update, args);
    size_t n = gs.size();
    static const int64_t slots[] = {2, 3, 4, 5}; // scale, good steps, skipped, applied
    if (scaled)
      for (auto [i, slot] : llvm::enumerate(slots))
        memref::StoreOp::create(b, loc, outs[2 + 3 * n + i], out, ValueRange{at(slot)});
    static const int written[] = {0, 2, 3}; // P, M, V
    for (int k = 0; k < 3; ++k)
      for (auto [i, grp] : llvm::enumerate(gs)) {
        auto [buffer, whole] = span(written[k], grp);
        Flat(b, loc, buffer).writeFlat(outs[2 + k * n + i], whole);
      }
    memref::StoreOp::create(b, loc, outs[0], out, ValueRange{index0()});
    Value lr = arith::TruncFOp::create(b, loc, b.getF32Type(), outs[1]);
    memref::StoreOp::create(b, loc, lr, out, ValueRange{at(1)});
    func::ReturnOp::create(b, loc);
  }

  /// planc_eval(P, tokens, targets, loss): the forward loss of one micro-batch. A model
  /// over images evaluates with its batchnorms' running statistics, and `loss` holds the
  /// loss then the classifier's logits, micro × classes (the driver counts the correct
  /// predictions).
  void eval(const StageTable &st) {
    OpBuilder::InsertionGuard g(b);
    nn::CrossEntropyOp head = imageClassifier(st.fwd);
    Type out = scalarTy();
    Param logits;
    if (head) {
      logits.type = cast<RankedTensorType>(head.getLogits().getType());
      logits.offset = 1;
      logits.count = logits.type.getNumElements();
      out = MemRefType::get({1 + logits.count}, b.getF32Type());
    }
    auto f = entry("planc_eval", {paramsTy(st), tokTy(st), targetTy(st), out});
    Block &e = f.getBody().front();
    SmallVector<Value> outs =
        inlineBody(b, st.fwd, forwardArgs(st, e.getArgument(0), e.getArgument(1), e.getArgument(2), Value()));
    memref::StoreOp::create(b, loc, tensor::ExtractOp::create(b, loc, outs[0], ValueRange{}), e.getArgument(3),
                            ValueRange{index0()});
    f.walk([](nn::BatchNormOp bn) { // no batch statistics, so nothing to synchronise
      if (bn.getRunning()) {
        bn.setInference(true);
        bn.removeAxisAttr();
        bn.removeRanksAttr();
      }
    });
    if (head) {
      nn::CrossEntropyOp copy = *f.getOps<nn::CrossEntropyOp>().begin();
      Flat(b, loc, e.getArgument(3)).write(copy.getLogits(), logits);
    }
    func::ReturnOp::create(b, loc);
  }

  /// A model over images: the cross-entropy of its classifier, whose logits evaluation
  /// reports; null otherwise.
  nn::CrossEntropyOp imageClassifier(func::FuncOp fwd) {
    if (!train->getAttr(key::images))
      return nn::CrossEntropyOp();
    auto heads = fwd.getOps<nn::CrossEntropyOp>();
    return heads.empty() ? nn::CrossEntropyOp() : *heads.begin();
  }

  /// Pipeline stage k: `planc_fwd_s<k>(P, tokens, targets, in, out, saved)` runs the
  /// stage's forward function (`in`: the previous stage's activation; `out`: the
  /// activation it hands on, or on the last stage the loss), and `planc_bwd_s<k>(P, G,
  /// tokens, targets, in, cotangent, dinput, loss, state, saved, wsaved)` its gradient:
  /// G += ∇ / (accumulation × data parallel) from the cotangent of its output (the last
  /// stage: from its loss, scaled by state[2] with fp16, adding loss / accumulation to
  /// *loss), and dinput = the gradient of `in`. Under `keep: activations` (every stage
  /// but the last, whose backward pass follows its forward pass at once) the forward
  /// entry point runs the forward part of the gradient function and writes the values
  /// its backward part reads to `saved` (st.saved floats), from which the backward entry
  /// point starts; otherwise the backward entry point computes the forward pass again
  /// from `in`. Under the zero-bubble schedule every stage but the first (which has no
  /// input gradient to hurry) splits its backward entry point in two
  /// (training::splitWeightGradients): `planc_bwd_s<k>` makes dinput, the loss and the
  /// gradients made beside them, and writes what the weight pass reads to `wsaved`
  /// (st.wsaved floats); `planc_wgrad_s<k>(P, G, tokens, targets, state, wsaved)` adds
  /// the rest of G from it. Unused pointers may be anything.
  LogicalResult stage(int64_t k, StageTable &st, func::FuncOp grad, bool last, const training::Pipeline &pp) {
    std::optional<training::StageSplit> split;
    if (pp.keepActivations && !last) {
      split = training::splitStage(grad);
      st.saved = split->floats;
    }
    std::optional<training::WeightSplit> weights;
    if (pp.schedule == pl::PipelineSchedule::zb && k > 0) {
      weights = training::splitWeightGradients(grad);
      st.wsaved = weights->floats;
    }
    StageTypes types = stageTypes(st, last);
    stageForward(k, st, grad, last, types, split);
    if (!stageBackward(k, st, grad, last, types, split, weights))
      return train.emitError() << "the zero-bubble schedule's weight pass of pipeline stage " << k
                               << " reads a forward value that 'keep: activations' does not save (only weight "
                                  "gradients read it): not implemented for this model in this version of planc; "
                                  "write 'keep: inputs'";
    if (weights)
      stageWeights(k, st, *weights, types);
    return success();
  }

private:
  /// The memref types of a stage's entry points' buffers.
  struct StageTypes {
    Type in, out, saved, wsaved;
  };
  StageTypes stageTypes(const StageTable &st, bool last) {
    func::FuncOp fwd = st.fwd;
    StageTypes t;
    t.in = scalarTy();
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      if (fwd.getArgAttr(i, "nn.activation"))
        t.in = activationBufferTy(fwd.getArgument(i).getType());
    t.out = last ? scalarTy() : activationBufferTy(fwd.getResultTypes()[0]);
    t.saved = MemRefType::get({std::max<int64_t>(st.saved, 1)}, b.getF32Type());
    t.wsaved = MemRefType::get({std::max<int64_t>(st.wsaved, 1)}, b.getF32Type());
    return t;
  }
  Type activationBufferTy(Type t) {
    return MemRefType::get({cast<ShapedType>(t).getNumElements()}, b.getF32Type());
  }
  /// Where value v of `residuals[i]` lies in a slot buffer named `name`.
  static Param slotParam(StringRef name, ArrayRef<Value> residuals, ArrayRef<int64_t> offsets, size_t i) {
    auto type = cast<RankedTensorType>(residuals[i].getType());
    return Param{name.str(), type, offsets[i], type.getNumElements()};
  }

  void stageForward(int64_t k, StageTable &st, func::FuncOp grad, bool last, const StageTypes &types,
                    const std::optional<training::StageSplit> &split) {
    OpBuilder::InsertionGuard g(b);
    func::FuncOp fwd = st.fwd;
    auto f = entry("planc_fwd_s" + std::to_string(k),
                   {paramsTy(st), tokTy(st), targetTy(st), types.in, types.out, types.saved});
    Block &e = f.getBody().front();
    SmallVector<Value> args = forwardArgs(st, e.getArgument(0), e.getArgument(1), e.getArgument(2), e.getArgument(3));
    if (split) {
      args.push_back(Value()); // the cotangent: the backward part is not cloned
      IRMapping map;
      Flat saved(b, loc, e.getArgument(5));
      training::cloneForward(b, *split, args, map, [&](size_t i, Value v) {
        saved.write(v, slotParam("saved", split->residuals, split->offsets, i));
      });
      Value out = map.lookup(grad.getBody().front().getTerminator()->getOperand(0));
      Flat(b, loc, e.getArgument(4)).write(out, activation(out.getType()));
    } else {
      SmallVector<Value> outs = inlineBody(b, fwd, args);
      if (last)
        memref::StoreOp::create(b, loc, tensor::ExtractOp::create(b, loc, outs[0], ValueRange{}), e.getArgument(4),
                                ValueRange{index0()});
      else
        Flat(b, loc, e.getArgument(4)).write(outs[0], activation(outs[0].getType()));
    }
    func::ReturnOp::create(b, loc);
  }

  /// False when the weight pass would read a value the input pass does not write.
  bool stageBackward(int64_t k, StageTable &st, func::FuncOp grad, bool last, const StageTypes &types,
                     const std::optional<training::StageSplit> &split,
                     const std::optional<training::WeightSplit> &weights) {
    OpBuilder::InsertionGuard g(b);
    func::FuncOp fwd = st.fwd;
    auto f = entry("planc_bwd_s" + std::to_string(k), {paramsTy(st), flatTy(st), tokTy(st), targetTy(st), types.in,
                                                       types.out, types.in, scalarTy(), statsTy(), types.saved,
                                                       types.wsaved});
    Block &e = f.getBody().front();
    SmallVector<Value> args = forwardArgs(st, e.getArgument(0), e.getArgument(2), e.getArgument(3), e.getArgument(4));
    if (last && scaled)
      args.push_back(lossScale(e.getArgument(8)));
    if (!last)
      args.push_back(Flat(b, loc, e.getArgument(5)).read(activation(fwd.getResultTypes()[0])));
    Flat wsaved(b, loc, e.getArgument(10));
    auto keepForWeights = [&](size_t i, Value v) {
      wsaved.write(v, slotParam("wsaved", weights->residuals, weights->offsets, i));
    };
    SmallVector<Value> outs;
    bool allKept = true;
    if (split) {
      SmallVector<Value> residuals;
      Flat saved(b, loc, e.getArgument(9));
      for (size_t i = 0; i < split->residuals.size(); ++i)
        residuals.push_back(saved.read(slotParam("saved", split->residuals, split->offsets, i)));
      outs = training::cloneBackward(b, *split, args, residuals, weights ? &*weights : nullptr, keepForWeights,
                                     &allKept);
    } else {
      outs = weights ? training::cloneInputPass(b, *weights, args, keepForWeights) : inlineBody(b, grad, args);
    }
    accumulateGrads(st, e.getArgument(1), outs);
    if (k > 0)
      Flat(b, loc, e.getArgument(6)).write(outs.back(), activation(outs.back().getType()));
    if (last)
      addLoss(outs[0], e.getArgument(7));
    func::ReturnOp::create(b, loc);
    return allKept;
  }

  /// The zero-bubble schedule's weight pass of stage k: G += the gradients only W makes,
  /// from what the stage's input pass kept in `wsaved`.
  void stageWeights(int64_t k, StageTable &st, const training::WeightSplit &weights, const StageTypes &types) {
    OpBuilder::InsertionGuard g(b);
    auto f = entry("planc_wgrad_s" + std::to_string(k),
                   {paramsTy(st), flatTy(st), tokTy(st), targetTy(st), statsTy(), types.wsaved});
    Block &e = f.getBody().front();
    SmallVector<Value> args = forwardArgs(st, e.getArgument(0), e.getArgument(2), e.getArgument(3), Value());
    func::FuncOp grad = weights.grad;
    if (grad.getNumArguments() > args.size() && grad.getArgAttr(args.size(), "nn.cotangent") == nullptr)
      args.push_back(lossScale(e.getArgument(4))); // the last stage's fp16 loss scale
    while (args.size() < grad.getNumArguments())
      args.push_back(Value()); // the cotangent: kept in wsaved where W reads it
    Flat wsaved(b, loc, e.getArgument(5));
    SmallVector<Value> residuals;
    for (size_t i = 0; i < weights.residuals.size(); ++i)
      residuals.push_back(wsaved.read(slotParam("wsaved", weights.residuals, weights.offsets, i)));
    accumulateGrads(st, e.getArgument(1), training::cloneWeightPass(b, weights, args, residuals));
    func::ReturnOp::create(b, loc);
  }

  using Groups = SmallVector<int>;
  MemRefType flatTy(const StageTable &st) { return MemRefType::get({st.layout.total}, b.getF32Type()); }
  /// P: the trained parameters' layout, then the frozen base.
  MemRefType paramsTy(const StageTable &st) {
    return MemRefType::get({st.layout.total + st.frozenFloats}, b.getF32Type());
  }
  /// The model's input (token ids, or images) as `planc_grad` and the others take it.
  MemRefType tokTy(const StageTable &st) { return inputTy(st, false); }
  /// Its targets (token ids, or class labels).
  MemRefType targetTy(const StageTable &st) { return inputTy(st, true); }
  MemRefType inputTy(const StageTable &st, bool targets) {
    func::FuncOp fwd = st.fwd;
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      if (auto input = fwd.getArgAttrOfType<StringAttr>(i, "nn.input"); input && isTargets(input) == targets) {
        auto t = cast<ShapedType>(fwd.getArgument(i).getType());
        return MemRefType::get(t.getShape(), t.getElementType());
      }
    return MemRefType::get({int64_t(train.getMicroAttr().getInt()), int64_t(train.getSeqAttr().getInt())},
                           b.getI32Type());
  }
  static bool isTargets(StringAttr input) { return input.getValue() == "targets" || input.getValue() == "labels"; }
  MemRefType scalarTy() { return MemRefType::get({1}, b.getF32Type()); }
  /// The step state the driver keeps between steps (planrt.h): [grad norm, lr, loss
  /// scale, good steps, skipped, …].
  MemRefType statsTy() { return MemRefType::get({8}, b.getF32Type()); }
  /// This rank's piece of each optimizer group (training::layoutOf): the whole group
  /// without ZeRO. Arguments come per group: (group 0, group 1).
  MemRefType spanTy(const StageTable &st, int g) {
    return MemRefType::get({sharded ? st.layout.shardFloats(g) : st.layout.groupFloats(g)}, b.getF32Type());
  }
  Groups groups(const StageTable &st) {
    Groups out;
    for (int g = 0; g < 2; ++g)
      if (st.layout.groupFloats(g) > 0)
        out.push_back(g);
    return out;
  }
  Param wholeSpan(const StageTable &st, int g) {
    int64_t count = spanTy(st, g).getNumElements();
    return Param{"", RankedTensorType::get({count}, b.getF32Type()), 0, count};
  }
  Param activation(Type t) {
    auto type = cast<RankedTensorType>(t);
    return Param{key::activation, type, 0, type.getNumElements()};
  }
  Value at(int64_t i) { return arith::ConstantIndexOp::create(b, loc, i); }
  Value index0() { return at(0); }
  Value f32(double v) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v))); }
  func::FuncOp entry(StringRef name, ArrayRef<Type> args) {
    auto f = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
    b.setInsertionPointToStart(f.addEntryBlock());
    return f;
  }
  Value readTokens(Value m, RankedTensorType type) {
    return bufferization::ToTensorOp::create(b, loc, type, m, /*restrict=*/true, /*writable=*/false);
  }
  /// The arguments of `st.fwd`: tokens and targets, parameters from P, the activation
  /// from `in`.
  SmallVector<Value> forwardArgs(const StageTable &st, Value P, Value tokens, Value targets, Value in) {
    func::FuncOp fwd = st.fwd;
    Flat params(b, loc, P);
    SmallVector<Value> args;
    auto param = st.params.begin();
    auto frozen = st.frozen.begin();
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i) {
      Type t = fwd.getArgument(i).getType();
      if (fwd.getArgAttr(i, "nn.param")) {
        args.push_back(params.read(*param++));
      } else if (fwd.getArgAttr(i, "nn.frozen")) {
        args.push_back(params.read(*frozen++));
      } else if (fwd.getArgAttr(i, "nn.activation")) {
        args.push_back(in ? Flat(b, loc, in).read(activation(t)) : Value());
      } else {
        auto input = fwd.getArgAttrOfType<StringAttr>(i, "nn.input");
        bool target = input ? isTargets(input) : i == 1;
        args.push_back(readTokens(target ? targets : tokens, cast<RankedTensorType>(t)));
      }
    }
    return args;
  }
  Value lossScale(Value stats) {
    Value s = memref::LoadOp::create(b, loc, stats, ValueRange{at(2)});
    return tensor::FromElementsOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()), ValueRange{s});
  }
  /// G += outs[1 + i] / (accumulation × data parallel) for each parameter i, in place.
  void accumulateGrads(const StageTable &st, Value grads, ArrayRef<Value> outs) {
    double gradScale = 1.0 / double(accumulation) / double(d);
    Flat G(b, loc, grads);
    for (auto [i, p] : llvm::enumerate(st.params))
      if (outs[1 + i]) // null: the other pass of the zero-bubble schedule makes it
        G.addInPlace(G.flatten(outs[1 + i], p), p, gradScale);
  }
  /// *slot += loss / accumulation.
  void addLoss(Value lossTensor, Value slot) {
    Value loss = tensor::ExtractOp::create(b, loc, lossTensor, ValueRange{});
    Value old = memref::LoadOp::create(b, loc, slot, ValueRange{index0()});
    Value sum =
        arith::AddFOp::create(b, loc, old, arith::MulFOp::create(b, loc, loss, f32(1.0 / double(accumulation))));
    memref::StoreOp::create(b, loc, sum, slot, ValueRange{index0()});
  }

  OpBuilder b;
  Location loc;
  pl::TrainOp train;
  int64_t d = 1, accumulation = 1, bucketBytes = 0;
  bool sharded = false, scaled = false;
};

struct PlanTrainABI : plan::impl::PlanTrainABIBase<PlanTrainABI> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto trains = llvm::to_vector(module.getOps<pl::TrainOp>());
    if (trains.empty() && (!module.getOps<pl::RetrievalOp>().empty() || !module.getOps<pl::GenerateOp>().empty()))
      return; // a retrieval or generation executable (plan-retrieval-abi, plan-generate-abi)
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
    training::Pipeline pp = training::pipelineOf(train);
    auto stepFunction = [&](std::string name, bool optional = false) -> func::FuncOp {
      auto f = module.lookupSymbol<func::FuncOp>(name);
      if (!f && !optional)
        train.emitOpError() << "needs its step functions first (plan-train-step): '" << name << "' is missing";
      return f;
    };
    if (!fwd) {
      train.emitOpError() << "needs its step functions first (plan-train-step)";
      return signalPassFailure();
    }
    Entries entries(module, train);
    std::vector<StageTable> tables;
    if (pp.size <= 1) {
      func::FuncOp grad = stepFunction(base + "_grad"), update = stepFunction(base + "_update");
      FailureOr<StageTable> st = entries.table({fwd});
      if (!grad || !update || failed(st))
        return signalPassFailure();
      entries.grad(*st, grad);
      entries.sumsq(*st);
      entries.update("planc_update", *st, update);
      for (int grp = 0; grp < 2; ++grp)
        if (auto chunk = stepFunction(base + "_update_chunk_g" + std::to_string(grp), /*optional=*/true))
          entries.updateChunk("planc_update_chunk_g" + std::to_string(grp), grp,
                              cast<ShapedType>(chunk.getArgumentTypes()[2]).getNumElements(), chunk);
      entries.eval(*st);
      tables.push_back(std::move(*st));
    } else {
      // Each rank's parameters, numbered in the whole model's order; a parameter that
      // an earlier rank holds too (a tied embedding) is that rank's replica.
      // A fine-tuning plan's adapters draw from the streams after its frozen base's, as
      // without a pipeline (train_main.cpp).
      llvm::StringMap<int64_t> index, frozenIndex;
      for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
        if (auto name = fwd.getArgAttrOfType<StringAttr>(i, "nn.frozen"))
          frozenIndex.insert({name.getValue(), int64_t(frozenIndex.size())});
      for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
        if (auto name = fwd.getArgAttrOfType<StringAttr>(i, "nn.param"))
          index.insert({name.getValue(), int64_t(frozenIndex.size() + index.size())});
      // One table per pipeline rank, over the parameters of the stages it holds; each
      // stage's entry points read their parameters at the rank's places.
      SmallVector<func::FuncOp> forwards, grads;
      for (int64_t k = 0; k < pp.stages; ++k) {
        std::string stage = base + "_stage" + std::to_string(k);
        forwards.push_back(stepFunction(base + "_forward_stage" + std::to_string(k)));
        grads.push_back(stepFunction(stage + "_grad"));
        if (!forwards.back() || !grads.back())
          return signalPassFailure();
      }
      llvm::StringSet<> seen, seenFrozen;
      for (int64_t r = 0; r < pp.size; ++r) {
        std::string rank = base + "_stage" + std::to_string(r);
        func::FuncOp update = stepFunction(rank + "_update");
        SmallVector<int64_t> mine = training::stagesOfRank(r, pp.size, pp.stages);
        SmallVector<func::FuncOp> fns;
        for (int64_t k : mine)
          fns.push_back(forwards[size_t(k)]);
        FailureOr<StageTable> st = entries.table(fns);
        if (!update || failed(st))
          return signalPassFailure();
        for (const Param &p : st->params) {
          st->index.push_back(index.lookup(p.name));
          st->replica.push_back(!seen.insert(p.name).second);
        }
        for (const Param &p : st->frozen) {
          st->frozenIndex.push_back(frozenIndex.lookup(p.name));
          st->frozenReplica.push_back(!seenFrozen.insert(p.name).second);
        }
        for (int64_t k : mine) {
          StageTable view = Entries::stageView(*st, forwards[size_t(k)]);
          bool last = k + 1 == pp.stages;
          if (failed(entries.stage(k, view, grads[size_t(k)], last, pp)))
            return signalPassFailure();
          int64_t activation = last ? 0 : cast<ShapedType>(forwards[size_t(k)].getResultTypes()[0]).getNumElements();
          st->chunks.push_back({k, activation, view.saved, view.wsaved});
        }
        entries.update("planc_update_s" + std::to_string(r), *st, update);
        for (int grp = 0; grp < 2; ++grp)
          if (auto chunk = stepFunction(rank + "_update_chunk_g" + std::to_string(grp), /*optional=*/true))
            entries.updateChunk("planc_update_chunk_g" + std::to_string(grp) + "_s" + std::to_string(r), grp,
                                cast<ShapedType>(chunk.getArgumentTypes()[2]).getNumElements(), chunk);
        tables.push_back(std::move(*st));
      }
    }
    // The manifest (written as JSON by plan-emit-manifest, once the passes after this one
    // have added to it).
    auto model = module.lookupSymbol<func::FuncOp>(train.getModel());
    auto vocab = model ? model->getAttrOfType<IntegerAttr>("nn.vocab") : IntegerAttr();
    if (!vocab) {
      train.emitOpError() << "needs its model's nn.vocab attribute (set by convert-plan-to-nn)";
      return signalPassFailure();
    }
    // A plan over text: its tokenizer must load and fit the model's vocabulary.
    if (std::optional<StringRef> tokenizer = train.getTokenizer())
      if (failed(checkTokenizer(train, train.getBaseDir(), *tokenizer, vocab.getInt(), train.getModel())))
        return signalPassFailure();
    Location trainLoc = train.getLoc();
    // A model over images: its targets are class labels, below the class count.
    int64_t targets = vocab.getInt();
    if (auto images = train->getAttrOfType<DictionaryAttr>(key::images))
      targets = images.getAs<IntegerAttr>(key::classes).getInt();
    auto root = cast<DictionaryAttr>(jsonToAttr(&getContext(), manifest(train, tables, targets)));

    // What is left of the plan has been consumed.
    for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
      if (isa<pl::PlanDialect>(op.getDialect()) ||
          (isa<func::FuncOp>(op) && !cast<func::FuncOp>(op).getName().starts_with("planc_") &&
           !cast<func::FuncOp>(op).getName().starts_with("planrt_")))
        op.erase();
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    sched::ManifestOp::create(b, trainLoc, "planc_manifest", root);
  }
};

} // namespace
