// `plan-schedule`: the per-rank step program of a training executable in the
// sched dialect, built from the manifest of `plan-train-abi`.
#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Training/DataParallel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/JSON.h"

namespace plan {
#define GEN_PASS_DEF_PLANSCHEDULE
#include "plan/Conversion/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

/// What the schedule needs from the manifest.
struct StepShape {
  SmallVector<std::string> axes, dataAxes;
  SmallVector<int64_t> sizes;
  int64_t d = 1, zero = 0, accumulation = 1;
  std::string tensorAxis;  ///< "" without tensor parallelism
  int64_t t = 1;
  /// Sequence parallelism: the flat ranges of the parameters the tensor axis does not
  /// split, whose gradients are partial sums over it.
  bool sequence = false;
  SmallVector<std::pair<int64_t, int64_t>> replicated;
  training::FlatLayout layout;
};

LogicalResult readManifest(LLVM::GlobalOp global, llvm::json::Value &root, StepShape &s) {
  auto text = dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  if (!text)
    return global.emitOpError() << "planc_manifest holds no string";
  StringRef json = text.getValue();
  if (json.ends_with(StringRef("\0", 1)))
    json = json.drop_back();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed) {
    std::string msg = llvm::toString(parsed.takeError());
    return global.emitOpError() << "planc_manifest is not JSON: " << msg;
  }
  root = std::move(*parsed);
  auto bad = [&](const Twine &what) {
    return global.emitOpError() << "planc_manifest " << what << " (plan-train-abi writes it)";
  };
  const llvm::json::Object *o = root.getAsObject();
  const llvm::json::Object *mesh = o ? o->getObject("mesh") : nullptr;
  const llvm::json::Object *train = o ? o->getObject("train") : nullptr;
  const llvm::json::Array *groups = o ? o->getArray("groups") : nullptr;
  if (!mesh || !train || !groups || groups->size() != 2 || !o->getInteger("num_floats"))
    return bad("lacks mesh, train, groups or num_floats");
  const llvm::json::Array *axes = mesh->getArray("axes"), *sizes = mesh->getArray("sizes"),
                          *data = mesh->getArray("data");
  if (!axes || !sizes || !data || axes->size() != sizes->size() || axes->empty() || axes->size() > 16)
    return bad("has no mesh axes, sizes and data axes of matching lengths");
  for (const llvm::json::Value &a : *axes) {
    if (!a.getAsString())
      return bad("has a mesh axis that is not a name");
    s.axes.push_back(a.getAsString()->str());
  }
  for (const llvm::json::Value &a : *sizes) {
    if (!a.getAsInteger() || *a.getAsInteger() < 1 || *a.getAsInteger() > 65536)
      return bad("has a mesh size that is not an integer in [1, 65536]");
    s.sizes.push_back(*a.getAsInteger());
  }
  for (const llvm::json::Value &a : *data) {
    if (!a.getAsString() || !llvm::is_contained(s.axes, a.getAsString()->str()))
      return bad("has a data axis that is not a mesh axis");
    s.dataAxes.push_back(a.getAsString()->str());
  }
  s.d = train->getInteger("data_parallel").value_or(1);
  s.t = train->getInteger("tensor_parallel").value_or(1);
  if (std::optional<StringRef> tensor = mesh->getString("tensor"); tensor && !tensor->empty()) {
    if (!llvm::is_contained(s.axes, tensor->str()))
      return bad("has a tensor axis that is not a mesh axis");
    s.tensorAxis = tensor->str();
  }
  if (s.t < 1 || (s.t > 1 && s.tensorAxis.empty()))
    return bad("has a tensor_parallel size without a tensor axis");
  s.sequence = train->getBoolean("sequence_parallel").value_or(false) && s.t > 1;
  if (s.sequence) {
    const llvm::json::Array *params = o->getArray("params");
    if (!params)
      return bad("has no params");
    for (const llvm::json::Value &p : *params) {
      const llvm::json::Object *po = p.getAsObject();
      std::optional<int64_t> offset = po ? po->getInteger("offset") : std::nullopt,
                             count = po ? po->getInteger("count") : std::nullopt;
      if (!offset || !count)
        return bad("has a parameter without offset and count");
      if (!po->get("split"))
        s.replicated.push_back({*offset, *count});
    }
    // In flat-layout order, adjacent ranges merged: one collective each.
    llvm::sort(s.replicated);
    SmallVector<std::pair<int64_t, int64_t>> merged;
    for (auto [offset, count] : s.replicated)
      if (!merged.empty() && merged.back().first + merged.back().second == offset)
        merged.back().second += count;
      else
        merged.push_back({offset, count});
    s.replicated = std::move(merged);
  }
  s.zero = train->getInteger("zero").value_or(0);
  s.accumulation = train->getInteger("accumulation").value_or(1);
  if (s.d < 1 || s.zero < 0 || s.zero > 3 || s.accumulation < 1)
    return bad("has a data_parallel, zero or accumulation out of range");
  s.layout.total = *o->getInteger("num_floats");
  s.layout.shards = s.d;
  for (int g = 0; g < 2; ++g) {
    const llvm::json::Array *span = (*groups)[g].getAsArray();
    if (!span || span->size() != 2 || !(*span)[0].getAsInteger() || !(*span)[1].getAsInteger())
      return bad("has a group that is not a [begin, end] pair");
    s.layout.groupBegin[g] = *(*span)[0].getAsInteger();
    s.layout.groupEnd[g] = *(*span)[1].getAsInteger();
    if (s.layout.groupBegin[g] < 0 || s.layout.groupEnd[g] < s.layout.groupBegin[g] ||
        s.layout.groupEnd[g] > s.layout.total || s.layout.groupFloats(g) % s.d != 0)
      return bad("has a group outside num_floats or not divisible over the data axes");
  }
  if (s.layout.groupEnd[0] > s.layout.groupBegin[1] || s.layout.total % s.d != 0)
    return bad("has overlapping groups or num_floats not divisible over the data axes");
  // MPI counts are int: one collective moves fewer than 2^31 floats.
  if (s.d > 1 && s.layout.total >= (int64_t(1) << 31))
    return global.emitOpError() << "a data-parallel collective of " << s.layout.total
                                << " floats exceeds MPI's 2^31 - 1 element count; models of more than 2.1B "
                                   "parameters are not supported by the CPU target's collectives in this version";
  return success();
}

class Builder {
public:
  Builder(ModuleOp module, Location loc, const StepShape &s) : b(module.getContext()), module(module), loc(loc), s(s) {
    b.setInsertionPointToEnd(module.getBody());
  }

  /// Declares the buffers and builds planc_step, planc_gather and planc_release;
  /// returns the buffer table for the manifest.
  llvm::json::Object build() {
    SmallVector<Attribute> axes, data;
    for (const std::string &a : s.axes)
      axes.push_back(b.getStringAttr(a));
    for (const std::string &a : s.dataAxes)
      data.push_back(b.getStringAttr(a));
    sched::MeshOp::create(b, loc, b.getStringAttr("mesh"), b.getArrayAttr(axes), b.getDenseI64ArrayAttr(s.sizes));
    dataAxes = b.getArrayAttr(data);

    const training::FlatLayout &l = s.layout;
    sharded = s.d > 1 && s.zero >= 1;
    bool zero3 = sharded && s.zero >= 3, zero2 = sharded && s.zero >= 2;
    int64_t pieces = sharded ? l.shardTotal() : l.total;
    params = buffer("params", l.total, zero3 ? "transient" : "persistent");
    grads = buffer("grads", l.total, zero2 ? "transient" : "step");
    if (sharded) {
      paramShard = buffer("param_shard", pieces, "persistent");
      gradShard = buffer("grad_shard", pieces, "step");
    }
    expAvg = buffer("exp_avg", pieces, "persistent");
    expAvgSq = buffer("exp_avg_sq", pieces, "persistent");
    state = buffer("state", 8, "persistent");

    buildStep(zero2, zero3);
    buildGather(zero3);

    llvm::json::Array table;
    for (auto &[name, floats, lifetime] : declared)
      table.push_back(llvm::json::Object{{"name", name}, {"floats", floats}, {"lifetime", lifetime}});
    return llvm::json::Object{
        {"buffers", std::move(table)},
        {"master", sharded ? "param_shard" : "params"},
        {"sharded", sharded},
        {"grad_params", "params"},
        {"grad_grads", "grads"}};
  }

private:
  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }

  /// The location of a collective: the train declaration, named by the layout rule
  /// that causes it ("ZeRO-1 over [dp]: gradients"), so that `--mlir-print-debuginfo`
  /// and diagnostics say where and why.
  Location cause(StringRef purpose) {
    std::string axes;
    for (const std::string &a : s.dataAxes)
      axes += (axes.empty() ? "" : ", ") + a;
    std::string stage = s.zero == 0 ? "DDP" : "ZeRO-" + std::to_string(s.zero);
    return NameLoc::get(b.getStringAttr(stage + " over [" + axes + "]: " + purpose.str()), loc);
  }

  FlatSymbolRefAttr buffer(StringRef name, int64_t floats, StringRef lifetime) {
    sched::BufferOp::create(b, loc, b.getStringAttr(name), b.getI64IntegerAttr(floats), b.getStringAttr(lifetime));
    declared.push_back({name.str(), floats, lifetime.str()});
    return FlatSymbolRefAttr::get(b.getContext(), name);
  }

  /// Where group g's piece of this rank lies: in a shard buffer (offset 0, then
  /// after group 0's piece), or in a full buffer at the group's span.
  int64_t pieceOffset(int g, bool inShard) const {
    const training::FlatLayout &l = s.layout;
    return inShard ? (g == 0 ? 0 : l.shardFloats(0)) : l.groupBegin[g];
  }

  func::FuncOp function(StringRef name, bool withStep) {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    SmallVector<Type> args{ptr};
    if (withStep)
      args.push_back(b.getI64Type());
    auto f = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
    f.setArgAttr(0, "sched.context", b.getUnitAttr());
    return f;
  }

  /// One collective per non-empty optimizer group: reduce-scatter of the full
  /// gradients into this rank's shard, or all-gather of the shard into the full
  /// parameters.
  void perGroup(bool scatter, bool accumulate, StringRef purpose) {
    const training::FlatLayout &l = s.layout;
    for (int g = 0; g < 2; ++g) {
      int64_t count = l.shardFloats(g);
      if (count == 0)
        continue;
      if (scatter) {
        auto op = sched::ReduceScatterOp::create(b, cause(purpose), grads, i64(l.groupBegin[g]), i64(count), gradShard,
                                                 i64(pieceOffset(g, true)), dataAxes, b.getStringAttr(purpose),
                                                 UnitAttr());
        op.setAccumulate(accumulate);
      } else {
        sched::AllGatherOp::create(b, cause(purpose), paramShard, i64(pieceOffset(g, true)), i64(count), params,
                                   i64(l.groupBegin[g]), dataAxes, b.getStringAttr(purpose));
      }
    }
  }

  void buildStep(bool zero2, bool zero3) {
    OpBuilder::InsertionGuard guard(b);
    const training::FlatLayout &l = s.layout;
    func::FuncOp f = function("planc_step", true);
    Block *entry = f.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value step = entry->getArgument(1);
    bool collectives = s.d > 1;
    // The loss of the step accumulates in state[7].
    sched::FillOp::create(b, loc, state, i64(7), i64(1), b.getF32FloatAttr(0));
    if (sharded)
      sched::FillOp::create(b, loc, gradShard, i64(0), i64(l.shardTotal()), b.getF32FloatAttr(0));
    if (!zero2)
      sched::FillOp::create(b, loc, grads, i64(0), i64(l.total), b.getF32FloatAttr(0));
    auto loop = sched::MicroLoopOp::create(b, loc, b.getI64IntegerAttr(s.accumulation));
    Block *body = b.createBlock(&loop.getBody(), {}, {b.getI64Type()}, {loc});
    b.setInsertionPointToStart(body);
    if (zero3) {
      sched::AllocOp::create(b, loc, params);
      perGroup(false, false, "parameters");
    }
    if (zero2) {
      sched::AllocOp::create(b, loc, grads);
      sched::FillOp::create(b, loc, grads, i64(0), i64(l.total), b.getF32FloatAttr(0));
    }
    sched::GradOp::create(b, loc, step, body->getArgument(0), params, grads, state, insideGrad());
    if (zero3)
      sched::FreeOp::create(b, loc, params);
    if (zero2) {
      replicatedGradients();  // per micro-batch: ZeRO-2 and 3 keep the whole gradient no longer
      perGroup(true, true, "gradients");
      sched::FreeOp::create(b, loc, grads);
    }
    b.setInsertionPointAfter(loop);
    if (!zero2)
      replicatedGradients();  // once per step, on the whole gradient
    if (collectives && !sharded)
      sched::AllReduceOp::create(b, cause("gradients"), grads, i64(0), i64(l.total), dataAxes, b.getStringAttr("sum"),
                                 b.getStringAttr("gradients"));
    if (sharded && !zero2)
      perGroup(true, false, "gradients");
    if (collectives)
      sched::AllReduceOp::create(b, cause("loss"), state, i64(7), i64(1), dataAxes, b.getStringAttr("mean"),
                                 b.getStringAttr("loss"));
    FlatSymbolRefAttr g = sharded ? gradShard : grads;
    SmallVector<Attribute> sumsqBufs{g, g};
    SmallVector<int64_t> sumsqOffs{pieceOffset(0, sharded), pieceOffset(1, sharded)};
    sched::SumSquaresOp::create(b, loc, b.getArrayAttr(sumsqBufs), b.getDenseI64ArrayAttr(sumsqOffs), state);
    if (sharded)
      sched::AllReduceOp::create(b, cause("gradient norm"), state, i64(6), i64(1), dataAxes, b.getStringAttr("sum"),
                                 b.getStringAttr("gradient norm"));
    // Tensor parallelism: each rank summed its split parameters and, on the first rank
    // of the group only, the replicated ones (planrt_sched_sumsq).
    if (s.t > 1)
      sched::AllReduceOp::create(
          b, NameLoc::get(b.getStringAttr("tensor parallel over [" + s.tensorAxis + "]: gradient norm"), loc), state,
          i64(6), i64(1), b.getArrayAttr({b.getStringAttr(s.tensorAxis)}), b.getStringAttr("sum"),
          b.getStringAttr("gradient norm"));
    // The update reads and writes this rank's pieces: P, G, M, V per group.
    SmallVector<Attribute> bufs;
    SmallVector<int64_t> offs;
    for (FlatSymbolRefAttr buf : {sharded ? paramShard : params, g, expAvg, expAvgSq})
      for (int grp = 0; grp < 2; ++grp) {
        bufs.push_back(buf);
        offs.push_back(pieceOffset(grp, sharded));
      }
    sched::UpdateOp::create(b, loc, step, b.getArrayAttr(bufs), b.getDenseI64ArrayAttr(offs), state);
    if (sharded && !zero3)
      perGroup(false, false, "updated parameters");
    func::ReturnOp::create(b, loc);
  }

  /// Sequence parallelism: each tensor rank saw its slice of the sequence, so the gradients
  /// of the parameters it holds whole are partial sums over the tensor axis.
  void replicatedGradients() {
    if (!s.sequence)
      return;
    for (auto [offset, count] : s.replicated)
      sched::AllReduceOp::create(
          b,
          NameLoc::get(b.getStringAttr("sequence parallel over [" + s.tensorAxis + "]: replicated-parameter gradients"),
                       loc),
          grads, i64(offset), i64(count), b.getArrayAttr({b.getStringAttr(s.tensorAxis)}), b.getStringAttr("sum"),
          b.getStringAttr("replicated-parameter gradients"));
  }

  /// The collectives planc_grad issues itself (tensor parallelism), in order; null if none.
  ArrayAttr insideGrad() {
    auto grad = module.lookupSymbol<func::FuncOp>("planc_grad");
    SmallVector<Attribute> out;
    if (!grad)
      return ArrayAttr();
    auto entry = [&](StringRef kind, int64_t axis, StringRef purpose, Type type) {
      StringRef name = axis >= 0 && size_t(axis) < s.axes.size() ? StringRef(s.axes[size_t(axis)]) : "?";
      out.push_back(b.getDictionaryAttr({b.getNamedAttr("collective", b.getStringAttr(kind)),
                                         b.getNamedAttr("axis", b.getStringAttr(name)),
                                         b.getNamedAttr("purpose", b.getStringAttr(purpose)),
                                         b.getNamedAttr("floats", i64(cast<ShapedType>(type).getNumElements()))}));
    };
    grad.walk([&](Operation *op) {
      if (auto o = dyn_cast<nn::AllReduceOp>(op))
        entry("all_reduce", o.getAxis(), o.getPurpose(), o.getType());
      else if (auto o = dyn_cast<nn::AllGatherOp>(op))
        entry("all_gather", o.getAxis(), o.getPurpose(), o.getType());
      else if (auto o = dyn_cast<nn::ReduceScatterOp>(op))
        entry("reduce_scatter", o.getAxis(), o.getPurpose(), o.getX().getType());
      else if (auto o = dyn_cast<nn::VocabParallelCrossEntropyOp>(op))
        for (StringRef what : {"cross-entropy max", "cross-entropy sum", "cross-entropy target"})
          entry("all_reduce", o.getAxis(), what, o.getLse().getType());
    });
    return out.empty() ? ArrayAttr() : b.getArrayAttr(out);
  }

  /// planc_gather(ctx) and planc_release(ctx): the full parameters outside a
  /// step, for evaluation. Only ZeRO-3 has anything to do.
  void buildGather(bool zero3) {
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp gather = function("planc_gather", false);
    b.setInsertionPointToStart(gather.addEntryBlock());
    if (zero3) {
      sched::AllocOp::create(b, loc, params);
      perGroup(false, false, "parameters (evaluation)");
    }
    func::ReturnOp::create(b, loc);
    b.setInsertionPointAfter(gather);
    func::FuncOp release = function("planc_release", false);
    b.setInsertionPointToStart(release.addEntryBlock());
    if (zero3)
      sched::FreeOp::create(b, loc, params);
    func::ReturnOp::create(b, loc);
  }

  OpBuilder b;
  ModuleOp module;
  Location loc;
  const StepShape &s;
  bool sharded = false;
  ArrayAttr dataAxes;
  FlatSymbolRefAttr params, grads, paramShard, gradShard, expAvg, expAvgSq, state;
  SmallVector<std::tuple<std::string, int64_t, std::string>> declared;
};

struct PlanSchedule : plan::impl::PlanScheduleBase<PlanSchedule> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto global = module.lookupSymbol<LLVM::GlobalOp>("planc_manifest");
    if (!global && (module.lookupSymbol("planc_retrieval_manifest") || module.lookupSymbol("planc_generate_manifest")))
      return;  // a retrieval or generation executable has no training step
    if (!global) {
      module.emitError() << "plan-schedule needs the manifest of plan-train-abi (planc_manifest)";
      return signalPassFailure();
    }
    for (const char *name : {"planc_step", "planc_gather", "planc_release"})
      if (module.lookupSymbol(name)) {
        module.emitError() << "plan-schedule: the module already has a '" << name << "'";
        return signalPassFailure();
      }
    llvm::json::Value root(nullptr);
    StepShape shape;
    if (failed(readManifest(global, root, shape)))
      return signalPassFailure();
    Builder builder(module, global.getLoc(), shape);
    root.getAsObject()->insert({"schedule", builder.build()});
    std::string text;
    llvm::raw_string_ostream os(text);
    os << root;
    text.push_back('\0');
    OpBuilder b(global);
    auto arrayTy = LLVM::LLVMArrayType::get(IntegerType::get(&getContext(), 8), text.size());
    LLVM::GlobalOp::create(b, global.getLoc(), arrayTy, /*isConstant=*/true, LLVM::Linkage::Internal,
                           "planc_manifest", b.getStringAttr(text));
    global.erase();
  }
};

} // namespace
