// `plan-schedule`: the per-rank step program of a training executable in the
// sched dialect, built from the manifest of `plan-train-abi`.
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Schedule/Passes.h"
#include "plan/Schedule/PipelineOrder.h"
#include "plan/Training/DataParallel.h"
#include "plan/Training/Manifest.h"
#include "planrt_manifest.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/JSON.h"

namespace plan {
#define GEN_PASS_DEF_PLANSCHEDULE
#include "plan/Schedule/Passes.h.inc"
} // namespace plan

using namespace mlir;
namespace key = planrt::manifest::key;
using namespace plan;

namespace {

/// One pipeline rank's flat layout, over the parameters of the stages it holds (or the
/// whole model's, without a pipeline).
struct StageShape {
  training::FlatLayout layout;
  /// Sequence parallelism: the flat ranges of the parameters the tensor axis does not
  /// split, whose gradients are partial sums over it.
  SmallVector<std::pair<int64_t, int64_t>> replicated;
  /// Each parameter: name, offset, count, and whether it is a replica of one an
  /// earlier rank owns (a tied embedding).
  SmallVector<std::tuple<std::string, int64_t, int64_t, bool>> params;
  int64_t frozen = 0; ///< floats of a fine-tuning plan's frozen base, after the layout in params
};

/// One pipeline stage's passes: what they hand on and keep.
struct ChunkShape {
  int64_t activation = 0; ///< floats of the activation it hands on
  int64_t saved = 0;      ///< `keep: activations`: floats a micro-batch's forward pass keeps
  int64_t wsaved = 0;     ///< zero-bubble: floats a micro-batch's input pass keeps for its weight pass
};

/// What the schedule needs from the manifest.
struct StepShape {
  SmallVector<std::string> axes, dataAxes;
  SmallVector<int64_t> sizes;
  int64_t d = 1, zero = 0, accumulation = 1;
  std::string tensorAxis; ///< "" without tensor parallelism
  int64_t t = 1;
  bool sequence = false;
  std::string pipelineAxis; ///< "" without pipeline parallelism
  int64_t p = 1;            ///< ranks on the pipeline axis
  bool gpipe = false, zeroBubble = false, interleaved = false;
  SmallVector<StageShape> stages; ///< per pipeline rank; one without pipeline parallelism
  SmallVector<ChunkShape> chunks; ///< per pipeline stage (p of them but under the interleaved schedule)
  /// A federated plan's round (the manifest's `federated`); axis "" otherwise.
  struct {
    std::string axis, weighting, optimizer;
    int64_t sampled = 0, localSteps = 0;
    double prox = 0, clip = 0, noise = 0, lr = 0, beta1 = 0, beta2 = 0, eps = 0;
    bool secure = false;
  } fed;
};

/// Fraction bits of a federated round's fixed-point updates: 2^-40 ≈ 9.1e-13 resolution
/// and ±2^23 range (docs/FEDERATED.md).
constexpr int64_t kFedFractionBits = 40;

/// The manifest's `federated` object into s.fed, if it has one.
LogicalResult readFederated(const llvm::json::Object &o, StepShape &s,
                            llvm::function_ref<InFlightDiagnostic(const Twine &)> bad) {
  const llvm::json::Object *f = o.getObject(key::federated);
  if (!f)
    return success();
  const llvm::json::Object *server = f->getObject(key::server);
  std::optional<StringRef> axis = f->getString(key::axis), weighting = f->getString(key::weighting),
                           kind = server ? server->getString(key::kind) : std::nullopt;
  std::optional<int64_t> sampled = f->getInteger(key::sampled), local = f->getInteger(key::local_steps);
  if (!axis || !llvm::is_contained(s.axes, axis->str()) || !weighting || !kind || !sampled || !local ||
      *sampled < 1 || *local < 1)
    return bad("has a federated round without a client axis of the mesh, weighting, server, sampled and local_steps");
  auto &x = s.fed;
  x.axis = axis->str();
  x.weighting = weighting->str();
  x.optimizer = kind->str();
  x.sampled = *sampled;
  x.localSteps = *local;
  x.prox = f->getNumber(key::prox).value_or(0);
  x.secure = f->getBoolean(key::secure).value_or(false);
  double clip = f->getNumber(key::dp_clip).value_or(0), sigma = f->getNumber(key::dp_noise).value_or(0);
  x.clip = clip;
  // DP-FedAvg's noise σ·C on the sum of the clipped updates is σ·C / sampled on their mean.
  x.noise = clip > 0 ? sigma * clip / double(x.sampled) : 0;
  x.lr = server->getNumber(key::lr).value_or(1);
  x.beta1 = server->getNumber(key::beta1).value_or(0.9);
  x.beta2 = server->getNumber(key::beta2).value_or(0.99);
  x.eps = server->getNumber(key::eps).value_or(1e-3);
  return success();
}

LogicalResult readManifest(sched::ManifestOp global, llvm::json::Value &root, StepShape &s) {
  FailureOr<llvm::json::Value> value = manifestJson(global);
  if (failed(value))
    return failure();
  root = std::move(*value);
  auto bad = [&](const Twine &what) {
    return global.emitOpError() << "planc_manifest " << what << " (plan-train-abi writes it)";
  };
  const llvm::json::Object *o = root.getAsObject();
  const llvm::json::Object *mesh = o ? o->getObject(key::mesh) : nullptr;
  const llvm::json::Object *train = o ? o->getObject(key::train) : nullptr;
  if (!mesh || !train)
    return bad("lacks mesh or train");
  const llvm::json::Array *axes = mesh->getArray(key::axes), *sizes = mesh->getArray(key::sizes),
                          *data = mesh->getArray(key::data);
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
  s.d = train->getInteger(key::data_parallel).value_or(1);
  s.t = train->getInteger(key::tensor_parallel).value_or(1);
  if (std::optional<StringRef> tensor = mesh->getString(key::tensor); tensor && !tensor->empty()) {
    if (!llvm::is_contained(s.axes, tensor->str()))
      return bad("has a tensor axis that is not a mesh axis");
    s.tensorAxis = tensor->str();
  }
  if (s.t < 1 || (s.t > 1 && s.tensorAxis.empty()))
    return bad("has a tensor_parallel size without a tensor axis");
  s.sequence = train->getBoolean(key::sequence_parallel).value_or(false) && s.t > 1;
  s.zero = train->getInteger(key::zero).value_or(0);
  s.accumulation = train->getInteger(key::accumulation).value_or(1);
  if (s.d < 1 || s.zero < 0 || s.zero > 3 || s.accumulation < 1)
    return bad("has a data_parallel, zero or accumulation out of range");
  if (failed(readFederated(*o, s, bad)))
    return failure();
  // A layout: the top level's, or a pipeline stage's.
  auto readStage = [&](const llvm::json::Object &from, StageShape &st) -> LogicalResult {
    const llvm::json::Array *spans = from.getArray(key::groups), *params = from.getArray(key::params);
    std::optional<int64_t> total = from.getInteger(key::num_floats);
    if (!spans || spans->size() != 2 || !total || !params)
      return bad("lacks groups, num_floats or params");
    for (const llvm::json::Value &p : *params) {
      const llvm::json::Object *po = p.getAsObject();
      std::optional<int64_t> offset = po ? po->getInteger(key::offset) : std::nullopt,
                             count = po ? po->getInteger(key::count) : std::nullopt;
      std::optional<StringRef> name = po ? po->getString(key::name) : std::nullopt;
      if (!offset || !count || !name)
        return bad("has a parameter without name, offset and count");
      st.params.push_back({name->str(), *offset, *count, po->getBoolean(key::replica).value_or(false)});
      if (s.sequence && !po->get(key::split))
        st.replicated.push_back({*offset, *count});
    }
    // In flat-layout order, adjacent ranges merged: one collective each.
    llvm::sort(st.replicated);
    SmallVector<std::pair<int64_t, int64_t>> merged;
    for (auto [offset, count] : st.replicated)
      if (!merged.empty() && merged.back().first + merged.back().second == offset)
        merged.back().second += count;
      else
        merged.push_back({offset, count});
    st.replicated = std::move(merged);
    st.frozen = from.getInteger(key::frozen_floats).value_or(0);
    if (st.frozen < 0 || (st.frozen % s.d != 0 && s.zero >= 3))
      return bad("has a negative frozen_floats, or under ZeRO-3 one the data-parallel ranks cannot share evenly");
    training::FlatLayout &l = st.layout;
    l.total = *total;
    l.shards = s.d;
    for (int g = 0; g < 2; ++g) {
      const llvm::json::Array *span = (*spans)[g].getAsArray();
      if (!span || span->size() != 2 || !(*span)[0].getAsInteger() || !(*span)[1].getAsInteger())
        return bad("has a group that is not a [begin, end] pair");
      l.groupBegin[g] = *(*span)[0].getAsInteger();
      l.groupEnd[g] = *(*span)[1].getAsInteger();
      if (l.groupBegin[g] < 0 || l.groupEnd[g] < l.groupBegin[g] || l.groupEnd[g] > l.total ||
          l.groupFloats(g) % s.d != 0)
        return bad("has a group outside num_floats or not divisible over the data axes");
    }
    if (l.groupEnd[0] > l.groupBegin[1] || l.total % s.d != 0)
      return bad("has overlapping groups or num_floats not divisible over the data axes");
    return success();
  };
  // A pipeline rank's stages: stage r + j·p its j-th.
  auto readChunks = [&](const llvm::json::Object &from, int64_t r) -> LogicalResult {
    const llvm::json::Array *chunks = from.getArray(key::chunks);
    if (!chunks || chunks->empty())
      return bad("has a pipeline rank without its chunks (the stages it holds)");
    if (r > 0 && chunks->size() != s.chunks.size() / size_t(r))
      return bad("has pipeline ranks holding different numbers of stages");
    for (auto [j, v] : llvm::enumerate(*chunks)) {
      const llvm::json::Object *co = v.getAsObject();
      std::optional<int64_t> stage = co ? co->getInteger(key::stage) : std::nullopt;
      if (!stage || *stage != r + s.p * int64_t(j))
        return bad("has a chunk of pipeline rank " + Twine(r) + " other than its stages r, r + p, …, in order");
      ChunkShape &c = s.chunks.emplace_back();
      c.activation = co->getInteger(key::activation).value_or(0);
      c.saved = co->getInteger(key::saved).value_or(0);
      c.wsaved = co->getInteger(key::wsaved).value_or(0);
      if (c.activation < 0 || c.saved < 0 || c.wsaved < 0)
        return bad("has a negative activation, saved or wsaved size");
    }
    return success();
  };
  if (const llvm::json::Object *pipe = o->getObject(key::pipeline)) {
    std::optional<StringRef> axis = pipe->getString(key::axis), schedule = pipe->getString(key::schedule);
    const llvm::json::Array *stages = o->getArray(key::stages);
    if (!axis || !llvm::is_contained(s.axes, axis->str()) || !schedule ||
        (*schedule != "gpipe" && *schedule != "one_f_one_b" && *schedule != "zb" && *schedule != "interleaved") ||
        !stages || stages->size() < 2)
      return bad("has a pipeline without an axis of the mesh, a gpipe, one_f_one_b, interleaved or zb schedule and "
                 "two ranks' stages or more");
    s.pipelineAxis = axis->str();
    s.gpipe = *schedule == "gpipe";
    s.zeroBubble = *schedule == "zb";
    s.interleaved = *schedule == "interleaved";
    s.p = int64_t(stages->size());
    if (s.p != s.sizes[size_t(llvm::find(s.axes, s.pipelineAxis) - s.axes.begin())])
      return bad("has a table count in stages other than the pipeline axis's size");
    for (const llvm::json::Value &v : *stages) {
      const llvm::json::Object *so = v.getAsObject();
      if (!so)
        return bad("has a stage that is not an object");
      s.stages.emplace_back();
      if (failed(readStage(*so, s.stages.back())) || failed(readChunks(*so, int64_t(s.stages.size()) - 1)))
        return failure();
    }
    // Every rank holds as many stages, one each but under the interleaved schedule.
    int64_t total = int64_t(s.chunks.size());
    if (total % s.p != 0 || (!s.interleaved && total != s.p) || (s.interleaved && total < 2 * s.p))
      return bad("has " + Twine(total) + " stages over " + Twine(s.p) +
                 " pipeline ranks: one each, or under the interleaved schedule as many each and two or more");
    if (s.interleaved && s.accumulation % s.p != 0)
      return bad("has an interleaved schedule over " + Twine(s.accumulation) +
                 " micro-batches, not a multiple of the pipeline ranks");
    std::vector<ChunkShape> byStage(static_cast<size_t>(total));
    for (int64_t r = 0, i = 0; r < s.p; ++r)
      for (int64_t j = 0; j < total / s.p; ++j)
        byStage[size_t(r + j * s.p)] = s.chunks[size_t(i++)];
    s.chunks.assign(byStage.begin(), byStage.end());
    for (auto [k, c] : llvm::enumerate(s.chunks)) {
      if (c.activation == 0 && int64_t(k) + 1 < total)
        return bad("has a stage without the size of the activation it hands on");
      if (c.wsaved > 0 && !s.zeroBubble)
        return bad("has a stage with wsaved floats under a schedule other than zb");
    }
    return success();
  }
  s.stages.emplace_back();
  return readStage(*o, s.stages.back());
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
    sharded = s.d > 1 && s.zero >= 1;
    zero3 = sharded && s.zero >= 3;
    zero2 = sharded && s.zero >= 2;
    for (int64_t k = 0; k < int64_t(s.stages.size()); ++k)
      declare(k);
    if (s.interleaved) {
      program = schedule::interleavedProgram(s.p, stageCount() / s.p, s.accumulation);
      if (program.ranks.empty())
        llvm::report_fatal_error("plan-schedule: the interleaved program deadlocks (a bug in planc)");
    }
    for (int64_t c = 0; c < stageCount(); ++c)
      declareChunk(c);
    state = buffer("state", 8, "persistent");
    if (federated())
      declareFederated();

    if (s.p > 1)
      buildPipelineStep();
    else
      buildStep();
    buildGather();
    if (federated())
      buildRound();

    llvm::json::Array table;
    for (auto &[name, floats, lifetime, stage] : declared) {
      llvm::json::Object entry{{key::name, name}, {key::floats, floats}, {key::lifetime, lifetime}};
      if (stage >= 0)
        entry[key::stage] = stage;
      table.push_back(std::move(entry));
    }
    return llvm::json::Object{{key::buffers, std::move(table)},
                              {key::master, sharded ? "param_shard" : "params"},
                              {key::sharded, sharded},
                              {key::grad_params, "params"},
                              {key::grad_grads, "grads"}};
  }

private:
  /// The buffers of one pipeline rank (of every rank without a pipeline), named with
  /// the suffix _s<k> under a pipeline.
  struct Bufs {
    FlatSymbolRefAttr params, grads, paramShard, gradShard, expAvg, expAvgSq;
    FlatSymbolRefAttr frozenShard; ///< ZeRO-3 with adapters: this rank's piece of the frozen base
    FlatSymbolRefAttr tied;        ///< pipeline only
  };
  /// The buffers of one pipeline stage's passes, named with the suffix _s<stage> and held
  /// by the stage's rank: each micro-batch's input (`stash`), output gradient (`cot`) and
  /// saved values in slot i mod slots.
  struct ChunkBufs {
    FlatSymbolRefAttr stash, act, cot, dinput;
    FlatSymbolRefAttr saved;  ///< `keep: activations`: a slot per micro-batch in flight
    FlatSymbolRefAttr wsaved; ///< zero-bubble: a slot per weight pass waiting
    int64_t savedFloats = 0, wsavedFloats = 0, wslots = 0;
    int64_t inSlots = 0, cotSlots = 0, savedSlots = 0, inFloats = 0, outFloats = 0;
  };

  IntegerAttr i64(int64_t v) { return b.getI64IntegerAttr(v); }
  const training::FlatLayout &layout(int64_t k) const { return s.stages[size_t(k)].layout; }

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
  Location because(StringRef rule, StringRef axis, StringRef purpose) {
    return NameLoc::get(b.getStringAttr(rule + " over [" + axis + "]: " + purpose), loc);
  }

  /// A buffer of the ranks of pipeline coordinate `stage` (-1: of every rank), named
  /// `name`_s<suffix> (the suffix: `stage`, or the pipeline stage it serves).
  FlatSymbolRefAttr buffer(StringRef name, int64_t floats, StringRef lifetime, int64_t stage = -1,
                           int64_t suffix = -1) {
    suffix = suffix >= 0 ? suffix : stage;
    std::string full = suffix >= 0 ? (name + "_s" + Twine(suffix)).str() : name.str();
    sched::BufferOp::create(b, loc, b.getStringAttr(full), i64(floats), b.getStringAttr(lifetime),
                            stage >= 0 ? i64(stage) : IntegerAttr());
    declared.push_back({full, floats, lifetime.str(), stage});
    return FlatSymbolRefAttr::get(b.getContext(), full);
  }

  void declare(int64_t k) {
    int64_t stage = s.p > 1 ? k : -1;
    const training::FlatLayout &l = layout(k);
    Bufs &x = bufs.emplace_back();
    int64_t pieces = sharded ? l.shardTotal() : l.total;
    // A fine-tuning plan's frozen base lies after the trained parameters in params.
    x.params = buffer("params", l.total + s.stages[size_t(k)].frozen, zero3 ? "transient" : "persistent", stage);
    x.grads = buffer("grads", l.total, zero2 ? "transient" : "step", stage);
    if (sharded) {
      x.paramShard = buffer("param_shard", pieces, "persistent", stage);
      x.gradShard = buffer("grad_shard", pieces, "step", stage);
    }
    // ZeRO-3 shards the frozen base too: each rank keeps its piece, gathered with the
    // parameters (for each micro-batch; under a pipeline once per step).
    if (zero3 && s.stages[size_t(k)].frozen > 0)
      x.frozenShard = buffer("frozen_shard", s.stages[size_t(k)].frozen / s.d, "persistent", stage);
    x.expAvg = buffer("exp_avg", pieces, "persistent", stage);
    x.expAvgSq = buffer("exp_avg_sq", pieces, "persistent", stage);
    if (s.p <= 1)
      return;
    if (int64_t zeros = zerosFor(k); zeros > 0)
      x.tied = buffer("tied", zeros, "step", stage);
  }

  int64_t stageCount() const { return int64_t(s.chunks.size()); }
  /// The rank that holds pipeline stage c.
  int64_t rankOf(int64_t c) const { return c % s.p; }
  bool lastStage(int64_t c) const { return c + 1 == stageCount(); }

  /// The buffers of stage c's passes. Every stage but the first keeps each micro-batch's
  /// input until its backward pass: all of them under GPipe, at most p - c under 1F1B,
  /// as many as the interleaved program holds at once (schedule::pipelineProgram), as
  /// it may also receive an output gradient before the pass that reads it.
  void declareChunk(int64_t c) {
    ChunkBufs &x = chunks.emplace_back();
    if (s.p <= 1)
      return;
    int64_t m = s.accumulation;
    auto named = [&](StringRef name, int64_t floats) { return buffer(name, floats, "step", rankOf(c), c); };
    x.inFloats = c > 0 ? s.chunks[size_t(c - 1)].activation : 0;
    x.outFloats = lastStage(c) ? 0 : s.chunks[size_t(c)].activation;
    if (s.interleaved) {
      x.inSlots = program.inputSlots[size_t(c)];
      x.cotSlots = std::max<int64_t>(program.gradientSlots[size_t(c)], 1);
      x.savedSlots = program.savedSlots[size_t(c)];
    } else {
      x.inSlots = x.savedSlots = s.gpipe ? m : std::min<int64_t>(m, s.p - c);
      x.cotSlots = 1;
    }
    if (c > 0) {
      x.stash = named("stash", x.inSlots * x.inFloats);
      x.dinput = named("dinput", x.inFloats);
    }
    if (!lastStage(c)) {
      x.act = named("act", x.outFloats);
      x.cot = named("cot", x.cotSlots * x.outFloats);
    }
    // keep: activations: what each micro-batch in flight's forward pass keeps for its
    // backward pass.
    x.savedFloats = s.chunks[size_t(c)].saved;
    if (x.savedFloats > 0)
      x.saved = named("saved", x.savedSlots * x.savedFloats);
    // The zero-bubble schedule: what each waiting weight pass reads, as many slots as
    // the order has weight passes waiting at once.
    x.wsavedFloats = s.chunks[size_t(c)].wsaved;
    if (s.zeroBubble && c > 0) {
      if (orders.empty())
        orders = schedule::zeroBubbleOrders(s.p, s.accumulation);
      x.wslots = orders[size_t(c)].weightSlots;
      if (x.wsavedFloats > 0 && x.wslots > 0)
        x.wsaved = named("wsaved", x.wslots * x.wsavedFloats);
    }
  }

  /// Where group g's piece of this rank lies: in a shard buffer (offset 0, then
  /// after group 0's piece), or in a full buffer at the group's span.
  int64_t pieceOffset(int64_t k, int g, bool inShard) const {
    const training::FlatLayout &l = layout(k);
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
  void perGroup(int64_t k, bool scatter, bool accumulate, StringRef purpose) {
    const training::FlatLayout &l = layout(k);
    const Bufs &x = bufs[size_t(k)];
    for (int g = 0; g < 2; ++g) {
      int64_t count = l.shardFloats(g);
      if (count == 0)
        continue;
      if (scatter) {
        auto op = sched::ReduceScatterOp::create(b, cause(purpose), x.grads, i64(l.groupBegin[g]), i64(count),
                                                 x.gradShard, i64(pieceOffset(k, g, true)), dataAxes,
                                                 b.getStringAttr(purpose), UnitAttr());
        op.setAccumulate(accumulate);
      } else {
        sched::AllGatherOp::create(b, cause(purpose), x.paramShard, i64(pieceOffset(k, g, true)), i64(count), x.params,
                                   i64(l.groupBegin[g]), dataAxes, b.getStringAttr(purpose));
      }
    }
  }

  /// ZeRO-3 with adapters: the frozen base gathered whole after the trained parameters.
  void gatherFrozen(int64_t k, StringRef purpose) {
    const Bufs &x = bufs[size_t(k)];
    if (!x.frozenShard)
      return;
    int64_t piece = s.stages[size_t(k)].frozen / s.d;
    sched::AllGatherOp::create(b, cause(purpose), x.frozenShard, i64(0), i64(piece), x.params, i64(layout(k).total),
                               dataAxes, b.getStringAttr(purpose));
  }

  /// ZeRO-3: stage k's parameters allocated and gathered whole, the frozen base with them;
  /// `why` is added to the purposes.
  void gatherWhole(int64_t k, StringRef why) {
    sched::AllocOp::create(b, loc, bufs[size_t(k)].params);
    gatherFrozen(k, ("frozen base" + why).str());
    perGroup(k, false, false, ("parameters" + why).str());
  }

  /// The gradient buffers zeroed at the start of a step (ZeRO-2 and 3 zero theirs per
  /// micro-batch, or under a pipeline once per step as they allocate them).
  void zeroGradients(int64_t k) {
    const Bufs &x = bufs[size_t(k)];
    if (sharded)
      sched::FillOp::create(b, loc, x.gradShard, i64(0), i64(layout(k).shardTotal()), b.getF32FloatAttr(0));
    if (!zero2)
      sched::FillOp::create(b, loc, x.grads, i64(0), i64(layout(k).total), b.getF32FloatAttr(0));
  }

  /// The data-parallel reduction of a step's whole gradient (DDP or ZeRO-1).
  void reduceGradients(int64_t k) {
    const Bufs &x = bufs[size_t(k)];
    if (s.d > 1 && !sharded)
      sched::AllReduceOp::create(b, cause("gradients"), x.grads, i64(0), i64(layout(k).total), dataAxes,
                                 b.getStringAttr("sum"), b.getStringAttr("gradients"));
    if (sharded && !zero2)
      perGroup(k, true, false, "gradients");
  }

  void sumSquares(int64_t k) {
    const Bufs &x = bufs[size_t(k)];
    FlatSymbolRefAttr g = sharded ? x.gradShard : x.grads;
    SmallVector<Attribute> sumsqBufs{g, g};
    SmallVector<int64_t> sumsqOffs{pieceOffset(k, 0, sharded), pieceOffset(k, 1, sharded)};
    sched::SumSquaresOp::create(b, loc, b.getArrayAttr(sumsqBufs), b.getDenseI64ArrayAttr(sumsqOffs), state);
  }

  /// The update reads and writes this rank's pieces: P, G, M, V per group; ZeRO-1 and 2
  /// then gather the updated parameters.
  void update(int64_t k, Value step) {
    const Bufs &x = bufs[size_t(k)];
    SmallVector<Attribute> pieces;
    SmallVector<int64_t> offs;
    for (FlatSymbolRefAttr buf :
         {sharded ? x.paramShard : x.params, sharded ? x.gradShard : x.grads, x.expAvg, x.expAvgSq})
      for (int grp = 0; grp < 2; ++grp) {
        pieces.push_back(buf);
        offs.push_back(pieceOffset(k, grp, sharded));
      }
    sched::UpdateOp::create(b, loc, step, b.getArrayAttr(pieces), b.getDenseI64ArrayAttr(offs), state);
    if (sharded && !zero3)
      perGroup(k, false, false, "updated parameters");
  }

  /// The gradient norm's partial sums: over the data axes (ZeRO's pieces), the tensor
  /// axis (each rank summed its split parameters and, on the group's first rank only,
  /// the replicated ones: planrt_sched_sumsq) and the pipeline stages.
  void reduceNorm() {
    if (sharded)
      sched::AllReduceOp::create(b, cause("gradient norm"), state, i64(6), i64(1), dataAxes, b.getStringAttr("sum"),
                                 b.getStringAttr("gradient norm"));
    if (s.t > 1)
      sched::AllReduceOp::create(b, because("tensor parallel", s.tensorAxis, "gradient norm"), state, i64(6), i64(1),
                                 b.getArrayAttr({b.getStringAttr(s.tensorAxis)}), b.getStringAttr("sum"),
                                 b.getStringAttr("gradient norm"));
    if (s.p > 1)
      sched::AllReduceOp::create(b, because("pipeline", s.pipelineAxis, "gradient norm"), state, i64(6), i64(1),
                                 b.getArrayAttr({b.getStringAttr(s.pipelineAxis)}), b.getStringAttr("sum"),
                                 b.getStringAttr("gradient norm"));
  }

  void buildStep() {
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp f = function("planc_step", true);
    Block *entry = f.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value step = entry->getArgument(1);
    const training::FlatLayout &l = layout(0);
    const Bufs &x = bufs[0];
    // The loss of the step accumulates in state[7].
    sched::FillOp::create(b, loc, state, i64(7), i64(1), b.getF32FloatAttr(0));
    zeroGradients(0);
    auto loop = sched::MicroLoopOp::create(b, loc, b.getI64IntegerAttr(s.accumulation));
    Block *body = b.createBlock(&loop.getBody(), {}, {b.getI64Type()}, {loc});
    b.setInsertionPointToStart(body);
    SmallVector<Value> gathered;
    if (zero3) {
      ArrayAttr prefetch = paramBuckets();
      auto alloc = sched::AllocOp::create(b, loc, x.params);
      if (prefetch) // held by parts: each bucket while gathered (plan-train-abi's releases)
        alloc.setParts(true);
      gatherFrozen(0, "frozen base");
      if (prefetch)
        gathered = gatherInBuckets(prefetch);
      else
        perGroup(0, false, false, "parameters");
    }
    ArrayAttr buckets = gradBuckets();
    if (zero2) {
      // With buckets, held by parts: each bucket from when the backward pass finishes it
      // until its reduce-scatter is done (zeroed as allocated).
      auto alloc = sched::AllocOp::create(b, loc, x.grads);
      if (buckets)
        alloc.setParts(true);
      else
        sched::FillOp::create(b, loc, x.grads, i64(0), i64(l.total), b.getF32FloatAttr(0));
    }
    if (zero2 && buckets) {
      // ZeRO-2 and 3: every micro-batch's buckets reduce-scattered as its backward pass
      // finishes them, added to the shard when there are several micro-batches (with one,
      // the shard is zero: each bucket's sum goes straight in).
      gradInBuckets(step, body->getArgument(0), gathered, buckets, /*accumulate=*/s.accumulation > 1);
    } else {
      sched::GradOp::create(b, loc, TypeRange{}, step, body->getArgument(0), gathered, x.params, x.grads, state,
                            inside("planc_grad"));
    }
    if (zero3)
      sched::FreeOp::create(b, loc, x.params);
    if (zero2) {
      if (!buckets) {
        replicatedGradients(0); // per micro-batch: ZeRO-2 and 3 keep the whole gradient no longer
        perGroup(0, true, true, "gradients");
      }
      sched::FreeOp::create(b, loc, x.grads);
    }
    b.setInsertionPointAfter(loop);
    if (buckets && !zero2) {
      // DDP and ZeRO-1 buckets: the last micro-batch runs outside the loop, and its
      // gradient buckets are reduced as its backward pass finishes them.
      if (s.accumulation == 1)
        loop.erase();
      else
        loop.setCountAttr(b.getI64IntegerAttr(s.accumulation - 1));
      Value last = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(s.accumulation - 1));
      gradInBuckets(step, last, ValueRange{}, buckets, /*accumulate=*/false);
    }
    if (!zero2)
      replicatedGradients(0); // once per step, on the whole gradient
    if (!buckets)
      reduceGradients(0);
    if (s.d > 1)
      sched::AllReduceOp::create(b, cause("loss"), state, i64(7), i64(1), dataAxes, b.getStringAttr("mean"),
                                 b.getStringAttr("loss"));
    if (federated() && s.fed.prox > 0) // FedProx: the proximal term's gradient, before clipping
      sched::FedProxOp::create(b, loc, x.grads, i64(l.total), b.getF64FloatAttr(s.fed.prox), x.params, global);
    sumSquares(0);
    reduceNorm();
    update(0, step);
    func::ReturnOp::create(b, loc);
  }

  bool federated() const { return !s.fed.axis.empty(); }

  /// A federated plan's server state: the global model, the clients' fixed-point updates
  /// (and the round loss) as 64-bit integers, and FedAdam's moments.
  void declareFederated() {
    int64_t n = layout(0).total;
    global = buffer("global", n, "persistent");
    fedUpdate = buffer("update", 2 * (n + 1), "persistent");
    if (s.fed.optimizer == "adam") {
      serverMoments.push_back(buffer("server_exp_avg", n, "persistent"));
      serverMoments.push_back(buffer("server_exp_avg_sq", n, "persistent"));
    }
  }

  /// planc_round(ctx, round): the clients sampled, their local steps (planc_step), their
  /// updates encoded (and masked), summed over the client axis, and the server step.
  void buildRound() {
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp f = function("planc_round", true);
    Block *entry = f.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value ctx = entry->getArgument(0), round = entry->getArgument(1);
    int64_t n = layout(0).total, words = 2 * (n + 1);
    const Bufs &x = bufs[0];
    auto rule = [&](StringRef what) { return because("federated", s.fed.axis, what); };
    sched::FedBeginOp::create(b, rule("sampled clients start from the global model"), round, b.getStringAttr(s.fed.axis),
                              i64(s.fed.sampled), global, x.params, b.getArrayAttr({x.expAvg, x.expAvgSq}));
    auto local = sched::FedLocalOp::create(b, rule("local steps"), i64(s.fed.localSteps));
    Block *body = b.createBlock(&local.getBody(), {}, {b.getI64Type()}, {loc});
    b.setInsertionPointToStart(body);
    func::CallOp::create(b, loc, "planc_step", TypeRange{}, ValueRange{ctx, body->getArgument(0)});
    sched::FedLossOp::create(b, loc, state);
    b.setInsertionPointAfter(local);
    sched::FedEncodeOp::create(b, rule("client update"), fedUpdate, x.params, global, i64(n),
                               b.getStringAttr(s.fed.weighting), b.getF64FloatAttr(s.fed.clip),
                               i64(kFedFractionBits));
    if (s.fed.secure)
      sched::FedMaskOp::create(b, rule("secure aggregation"), round, fedUpdate, i64(words),
                               b.getStringAttr(s.fed.axis));
    sched::AllReduceOp::create(b, rule("client updates"), fedUpdate, i64(0), i64(words),
                               b.getArrayAttr({b.getStringAttr(s.fed.axis)}), b.getStringAttr("sum_u64"),
                               b.getStringAttr("client updates"));
    sched::FedServerOp::create(b, rule("server step"), round, global, fedUpdate, x.params,
                               serverMoments.empty() ? ArrayAttr() : b.getArrayAttr(serverMoments),
                               b.getStringAttr(s.fed.optimizer), b.getF64FloatAttr(s.fed.lr),
                               b.getF64FloatAttr(s.fed.beta1), b.getF64FloatAttr(s.fed.beta2),
                               b.getF64FloatAttr(s.fed.eps), b.getF64FloatAttr(s.fed.noise), i64(kFedFractionBits),
                               state);
    func::ReturnOp::create(b, loc);
  }

  Type event() { return sched::EventType::get(b.getContext()); }

  /// One micro-batch's sched.grad with an event per gradient bucket plan-train-abi gave
  /// `planc_grad`, the collective of each started on it (DDP's ranges all-reduced, ZeRO's
  /// cut at the optimizer groups into slices of their reduce-scatters into this rank's
  /// shard; `accumulate`: added to it, every micro-batch of ZeRO-2 and 3), then
  /// sched.wait for them all.
  void gradInBuckets(Value step, Value micro, ValueRange gathered, ArrayAttr buckets, bool accumulate) {
    const training::FlatLayout &l = layout(0);
    const Bufs &x = bufs[0];
    auto grad = sched::GradOp::create(b, loc, SmallVector<Type>(buckets.size(), event()), step, micro, gathered,
                                      x.params, x.grads, state, inside("planc_grad"));
    SmallVector<Value> done;
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      ArrayRef<int64_t> r = cast<DenseI64ArrayAttr>(bucket).asArrayRef();
      Location at = cause("gradients (bucket " + std::to_string(k) + ")");
      Value ready = grad.getResult(unsigned(k));
      for (size_t j = 0; j + 1 < r.size(); j += 2) {
        if (!sharded) { // DDP: the range all-reduced
          done.push_back(sched::AllReduceStartOp::create(b, at, event(), ready, x.grads, i64(r[j]), i64(r[j + 1]),
                                                         dataAxes, b.getStringAttr("sum"),
                                                         b.getStringAttr("gradients")));
          continue;
        }
        perGroupPart(r[j], r[j + 1], [&](int g, int64_t lo, int64_t n) {
          auto start = sched::ReduceScatterStartOp::create(
              b, at, event(), ready, x.grads, i64(l.groupBegin[g]), i64(l.shardFloats(g)), x.gradShard,
              i64(pieceOffset(0, g, true)), dataAxes, i64(lo), i64(n), b.getStringAttr("gradients"));
          start.setAccumulate(accumulate);
          done.push_back(start);
        });
      }
    }
    sched::WaitOp::create(b, loc, done);
  }

  /// Builds body() in a sched.on region of stage k (pipeline parallelism) at the
  /// insertion point, which it leaves after the region.
  void onStage(int64_t k, llvm::function_ref<void()> body) {
    OpBuilder::InsertionGuard g(b);
    auto on = sched::OnOp::create(b, loc, b.getStringAttr(s.pipelineAxis), i64(k));
    b.setInsertionPointToStart(b.createBlock(&on.getBody()));
    body();
  }

  /// Pipeline parallelism: each stage's ranks run their part of the schedule in a
  /// sched.on region; the loss and the gradient norm are then summed over the stages.
  /// ZeRO-2 and 3 work as FSDP does under torchtitan's pipelines: the stage's gradient
  /// accumulates whole over the micro-batches and is reduce-scattered once, after its
  /// last backward pass, and ZeRO-3 gathers the stage's parameters once, before its
  /// first forward pass, and frees them after its last backward pass (gathering them per
  /// micro-batch would gather m times what 1F1B reads between two frees). Between steps,
  /// and in the update, a stage holds only its shards.
  void buildPipelineStep() {
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp f = function("planc_step", true);
    Block *entry = f.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value step = entry->getArgument(1);
    sched::FillOp::create(b, loc, state, i64(7), i64(1), b.getF32FloatAttr(0));
    SmallVector<Value> micro;
    for (int64_t i = 0; i < s.accumulation; ++i)
      micro.push_back(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(i)));
    stepValue = step;
    microValues = micro;
    nextPass.assign(size_t(s.p), 0);
    for (int64_t k = 0; k < s.p; ++k)
      onStage(k, [&] {
        const Bufs &x = bufs[size_t(k)];
        zeroGradients(k);
        if (zero3)
          gatherWhole(k, "");
        if (zero2) {
          sched::AllocOp::create(b, loc, x.grads);
          sched::FillOp::create(b, loc, x.grads, i64(0), i64(layout(k).total), b.getF32FloatAttr(0));
        }
        Block *here = b.getInsertionBlock();
        if (s.gpipe)
          gpipe(k, step, micro);
        else if (s.interleaved)
          interleaved(k, step, micro);
        else
          oneFOneB(k, step, micro);
        b.setInsertionPointToEnd(here);
        if (zero3)
          sched::FreeOp::create(b, loc, x.params);
        tiedGradients(k);
        replicatedGradients(k);
        if (zero2) {
          perGroup(k, true, false, "gradients");
          sched::FreeOp::create(b, loc, x.grads);
        } else {
          reduceGradients(k);
        }
      });
    // Only the last stage computed a loss; the others add zero.
    sched::AllReduceOp::create(b, because("pipeline", s.pipelineAxis, "loss"), state, i64(7), i64(1),
                               b.getArrayAttr({b.getStringAttr(s.pipelineAxis)}), b.getStringAttr("sum"),
                               b.getStringAttr("loss"));
    if (s.d > 1)
      sched::AllReduceOp::create(b, cause("loss"), state, i64(7), i64(1), dataAxes, b.getStringAttr("mean"),
                                 b.getStringAttr("loss"));
    for (int64_t k = 0; k < s.p; ++k)
      onStage(k, [&] { sumSquares(k); });
    reduceNorm();
    for (int64_t k = 0; k < s.p; ++k)
      onStage(k, [&] { update(k, step); });
    func::ReturnOp::create(b, loc);
  }

  // --- The pipeline schedule of stage k: micro-batch i's forward (F), backward (B)
  // and the transfers between neighbouring stages. Stage k's passes use its rank's
  // parameters and gradients (bufs[rankOf(k)]) and its own buffers (chunks[k]).
  /// Where micro-batch i's slot lies in stage k's stash, output gradients, saved values
  /// and values kept for the weight pass.
  int64_t slot(int64_t k, int64_t i) const {
    const ChunkBufs &x = chunks[size_t(k)];
    return i % std::max<int64_t>(x.inSlots, 1) * x.inFloats;
  }
  int64_t cotSlot(int64_t k, int64_t i) const {
    const ChunkBufs &x = chunks[size_t(k)];
    return i % x.cotSlots * x.outFloats;
  }
  int64_t savedSlot(int64_t k, int64_t i) const {
    const ChunkBufs &x = chunks[size_t(k)];
    return i % std::max<int64_t>(x.savedSlots, 1) * x.savedFloats;
  }
  int64_t wsavedSlot(int64_t k, int64_t i) const { return i % chunks[size_t(k)].wslots * chunks[size_t(k)].wsavedFloats; }
  StringAttr pipe() { return b.getStringAttr(s.pipelineAxis); }
  void forward(int64_t k, Value step, Value i, int64_t micro) {
    passDue(k, {schedule::PipelinePass::Forward, micro});
    const ChunkBufs &x = chunks[size_t(k)];
    sched::ForwardOp::create(b, loc, step, i, i64(k), bufs[size_t(rankOf(k))].params,
                             k > 0 ? x.stash : FlatSymbolRefAttr(), k > 0 ? i64(slot(k, micro)) : IntegerAttr(), x.act,
                             i64(0), x.saved, x.saved ? i64(savedSlot(k, micro)) : IntegerAttr(),
                             inside("planc_fwd_s" + std::to_string(k)));
  }
  void backward(int64_t k, Value step, Value i, int64_t micro) {
    passDue(k, {schedule::PipelinePass::Backward, micro});
    const ChunkBufs &x = chunks[size_t(k)];
    const Bufs &r = bufs[size_t(rankOf(k))];
    bool first = k == 0, last = lastStage(k);
    bool split = s.zeroBubble && !first;
    sched::BackwardOp::create(b, loc, step, i, i64(k), r.params, r.grads, state, first ? FlatSymbolRefAttr() : x.stash,
                              first ? IntegerAttr() : i64(slot(k, micro)), last ? FlatSymbolRefAttr() : x.cot,
                              last ? IntegerAttr() : i64(cotSlot(k, micro)), first ? FlatSymbolRefAttr() : x.dinput,
                              first ? IntegerAttr() : i64(0), x.saved,
                              x.saved ? i64(savedSlot(k, micro)) : IntegerAttr(),
                              split ? x.wsaved : FlatSymbolRefAttr(),
                              split && x.wsaved ? i64(wsavedSlot(k, micro)) : IntegerAttr(),
                              inside("planc_bwd_s" + std::to_string(k)));
  }
  /// Zero-bubble schedule: micro-batch i's weight pass on stage k.
  void weights(int64_t k, Value step, Value i, int64_t micro) {
    const ChunkBufs &x = chunks[size_t(k)];
    const Bufs &r = bufs[size_t(rankOf(k))];
    FlatSymbolRefAttr kept = x.wsaved ? x.wsaved : r.grads; // nothing kept: any buffer, read for 0 floats
    sched::WGradOp::create(b, loc, step, i, i64(k), r.params, r.grads, state, kept,
                           i64(x.wsaved ? wsavedSlot(k, micro) : 0), inside("planc_wgrad_s" + std::to_string(k)));
  }
  /// Zero-bubble schedule: the weight passes stage k's order runs before its next forward
  /// or backward pass, emitted where oneFOneB calls it (before a receive the stage would
  /// wait in) or, at the latest, by passDue, before `pass`, which it checks against the
  /// order. Nothing under other schedules and on the first stage.
  void weightsDue(int64_t k) {
    if (!s.zeroBubble || k == 0)
      return;
    const std::vector<schedule::PipelinePass> &passes = orders[size_t(k)].passes;
    size_t &at = nextPass[size_t(k)];
    for (; at < passes.size() && passes[at].kind == schedule::PipelinePass::Weight; ++at)
      weights(k, stepValue, microValues[size_t(passes[at].micro)], passes[at].micro);
  }
  void passDue(int64_t k, schedule::PipelinePass pass) {
    if (!s.zeroBubble || k == 0)
      return;
    weightsDue(k);
    size_t &at = nextPass[size_t(k)];
    if (at >= orders[size_t(k)].passes.size() || !(orders[size_t(k)].passes[at] == pass))
      llvm::report_fatal_error("plan-schedule: stage " + Twine(k) +
                               "'s passes differ from the zero-bubble order it simulated (a bug in planc)");
    ++at;
  }
  /// Transfers of stage k with its neighbours' ranks (the next stage's under 1F1B and
  /// GPipe is k + 1, under the interleaved schedule (k + 1) mod p).
  void recvForward(int64_t k, int64_t i) {
    const ChunkBufs &x = chunks[size_t(k)];
    sched::RecvOp::create(b, loc, x.stash, i64(slot(k, i)), i64(x.inFloats), pipe(), i64(rankOf(k - 1)),
                          b.getStringAttr("activations"));
  }
  void sendForward(int64_t k) {
    const ChunkBufs &x = chunks[size_t(k)];
    sched::SendOp::create(b, loc, x.act, i64(0), i64(x.outFloats), pipe(), i64(rankOf(k + 1)),
                          b.getStringAttr("activations"));
  }
  void recvBackward(int64_t k, int64_t i) {
    const ChunkBufs &x = chunks[size_t(k)];
    sched::RecvOp::create(b, loc, x.cot, i64(cotSlot(k, i)), i64(x.outFloats), pipe(), i64(rankOf(k + 1)),
                          b.getStringAttr("activation gradients"));
  }
  void sendBackward(int64_t k) {
    const ChunkBufs &x = chunks[size_t(k)];
    sched::SendOp::create(b, loc, x.dinput, i64(0), i64(x.inFloats), pipe(), i64(rankOf(k - 1)),
                          b.getStringAttr("activation gradients"));
  }

  /// Interleaved 1F1B (schedule::interleavedOrders): rank r's program, its passes and
  /// transfers in the order schedule::pipelineProgram placed them so that none can
  /// deadlock. A forward pass's send follows it before the rank's next pass (the
  /// program gives a transfer the time its data is made, and puts transfers first), so
  /// each stage hands its activation and input gradient on from one buffer; the inputs
  /// and output gradients it receives wait in their slots until their backward pass.
  void interleaved(int64_t r, Value step, ArrayRef<Value> micro) {
    using schedule::PipelinePass;
    using schedule::ProgramStep;
    for (const ProgramStep &x : program.ranks[size_t(r)]) {
      int64_t k = x.pass.stage, i = x.pass.micro;
      bool fwd = x.pass.kind == PipelinePass::Forward;
      switch (x.kind) {
      case ProgramStep::Compute:
        if (!fwd)
          backward(k, step, micro[size_t(i)], i);
        else if (!lastStage(k)) // the last stage's backward pass runs its forward pass
          forward(k, step, micro[size_t(i)], i);
        break;
      case ProgramStep::Send:
        if (x.peer != rankOf(fwd ? k + 1 : k - 1))
          llvm::report_fatal_error("plan-schedule: an interleaved transfer to the wrong rank (a bug in planc)");
        fwd ? sendForward(k) : sendBackward(k);
        break;
      case ProgramStep::Recv:
        fwd ? recvForward(k, i) : recvBackward(k, i);
        break;
      }
    }
  }

  /// GPipe: every micro-batch forward, then every one backward.
  void gpipe(int64_t k, Value step, ArrayRef<Value> micro) {
    int64_t m = s.accumulation;
    bool first = k == 0, last = k + 1 == s.p;
    for (int64_t i = 0; i < m; ++i) {
      if (!first)
        recvForward(k, i);
      if (!last) {
        forward(k, step, micro[size_t(i)], i);
        sendForward(k);
      }
    }
    for (int64_t j = 0; j < m; ++j) {
      if (!last)
        recvBackward(k, j);
      backward(k, step, micro[size_t(j)], j);
      if (!first)
        sendBackward(k);
    }
  }

  /// 1F1B (PipeDream-Flush, Narayanan et al. 2021): p - k - 1 forwards to fill the
  /// pipeline, then one forward and one backward in turn, then the remaining backwards.
  /// In the steady state a stage sends its activation while it receives the gradient
  /// for an earlier micro-batch (sched.send_recv), as Megatron does. The zero-bubble
  /// schedule runs the same passes and transfers, with its weight passes where its order
  /// puts them: before a receive the stage would wait in (the warm-up's activations, the
  /// cool-down's gradients), but never between a pass and the send of what it made (the
  /// steady state's send_recv also brings the next input: they follow it).
  void oneFOneB(int64_t k, Value step, ArrayRef<Value> micro) {
    int64_t m = s.accumulation;
    bool first = k == 0, last = k + 1 == s.p;
    int64_t warmup = std::min<int64_t>(s.p - 1 - k, m), steady = m - warmup;
    const ChunkBufs &x = chunks[size_t(k)];
    for (int64_t i = 0; i < warmup; ++i) {
      weightsDue(k);
      if (!first)
        recvForward(k, i);
      forward(k, step, micro[size_t(i)], i);
      sendForward(k);
    }
    weightsDue(k);
    if (steady > 0 && !first)
      recvForward(k, warmup);
    for (int64_t j = 0; j < steady; ++j) {
      int64_t i = warmup + j;
      if (!last) {
        forward(k, step, micro[size_t(i)], i);
        sched::SendRecvOp::create(b, loc, x.act, i64(0), i64(x.outFloats), i64(k + 1), x.cot, i64(0), i64(x.outFloats),
                                  i64(k + 1), pipe(), b.getStringAttr("activations / activation gradients"));
      }
      backward(k, step, micro[size_t(j)], j);
      if (first)
        continue;
      if (j + 1 == steady)
        sendBackward(k);
      else
        sched::SendRecvOp::create(b, loc, x.dinput, i64(0), i64(x.inFloats), i64(k - 1), x.stash, i64(slot(k, i + 1)),
                                  i64(x.inFloats), i64(k - 1), pipe(),
                                  b.getStringAttr("activation gradients / activations"));
    }
    for (int64_t j = steady; j < m; ++j) {
      weightsDue(k);
      recvBackward(k, j);
      backward(k, step, micro[size_t(j)], j);
      if (!first)
        sendBackward(k);
    }
    weightsDue(k);
  }

  /// A parameter that two stages or more hold (the tied embedding and head) gets the sum
  /// of their gradients: an all-reduce over the pipeline axis per such parameter, in the
  /// same order on every stage (the first stage's that holds it, then its place there), to
  /// which the stages that lack it contribute zeros. (name, floats) of each.
  SmallVector<std::pair<std::string, int64_t>> shared() const {
    SmallVector<std::pair<std::string, int64_t>> out;
    if (s.p <= 1)
      return out;
    for (const StageShape &st : s.stages)
      for (auto &[name, offset, count, replica] : st.params)
        if (replica && llvm::none_of(out, [&](auto &e) { return e.first == name; }))
          out.push_back({name, count});
    return out;
  }
  /// Where stage k holds parameter `name` in its flat layout, or -1.
  int64_t offsetIn(int64_t k, StringRef name) const {
    for (auto &[other, offset, count, replica] : s.stages[size_t(k)].params)
      if (other == name)
        return offset;
    return -1;
  }
  /// The zeros a stage that lacks a shared parameter contributes: the largest such one.
  int64_t zerosFor(int64_t k) const {
    int64_t n = 0;
    for (auto &[name, count] : shared())
      if (offsetIn(k, name) < 0)
        n = std::max(n, count);
    return n;
  }
  void tiedGradients(int64_t k) {
    const Bufs &x = bufs[size_t(k)];
    Location at = because("pipeline", s.pipelineAxis, "tied-parameter gradients");
    if (x.tied)
      sched::FillOp::create(b, loc, x.tied, i64(0), i64(zerosFor(k)), b.getF32FloatAttr(0));
    for (auto &[name, count] : shared()) {
      int64_t offset = offsetIn(k, name);
      sched::AllReduceOp::create(b, at, offset >= 0 ? x.grads : x.tied, i64(std::max<int64_t>(offset, 0)), i64(count),
                                 b.getArrayAttr({pipe()}), b.getStringAttr("sum"),
                                 b.getStringAttr("tied-parameter gradients"));
    }
  }

  /// Sequence parallelism: each tensor rank saw its slice of the sequence, so the gradients
  /// of the parameters it holds whole are partial sums over the tensor axis.
  void replicatedGradients(int64_t k) {
    if (!s.sequence)
      return;
    for (auto [offset, count] : s.stages[size_t(k)].replicated)
      sched::AllReduceOp::create(b, because("sequence parallel", s.tensorAxis, "replicated-parameter gradients"),
                                 bufs[size_t(k)].grads, i64(offset), i64(count),
                                 b.getArrayAttr({b.getStringAttr(s.tensorAxis)}), b.getStringAttr("sum"),
                                 b.getStringAttr("replicated-parameter gradients"));
  }

  /// The gradient buckets plan-train-abi gave `planc_grad` (plan.grad_buckets), or
  /// null: DDP's (all-reduced), ZeRO's (reduce-scattered) over data ranks.
  ArrayAttr gradBuckets() {
    auto fn = module.lookupSymbol<func::FuncOp>("planc_grad");
    auto buckets = fn ? fn->getAttrOfType<ArrayAttr>("plan.grad_buckets") : ArrayAttr();
    if (!buckets || buckets.empty() || s.d <= 1)
      return ArrayAttr();
    return buckets;
  }

  /// The ZeRO-3 parameter buckets plan-train-abi gave `planc_grad`
  /// (plan.param_buckets), or null.
  ArrayAttr paramBuckets() {
    auto fn = module.lookupSymbol<func::FuncOp>("planc_grad");
    auto buckets = fn ? fn->getAttrOfType<ArrayAttr>("plan.param_buckets") : ArrayAttr();
    if (!buckets || buckets.empty() || s.d <= 1 || !zero3)
      return ArrayAttr();
    return buckets;
  }

  /// The parts of the flat range [offset, offset + count) in each optimizer group:
  /// fn(group, begin, floats) for each non-empty one (a bucket's slices of the groups'
  /// collectives).
  void perGroupPart(int64_t offset, int64_t count, llvm::function_ref<void(int, int64_t, int64_t)> fn) {
    const training::FlatLayout &l = layout(0);
    for (int g = 0; g < 2; ++g) {
      int64_t lo = std::max(offset, l.groupBegin[g]), hi = std::min(offset + count, l.groupEnd[g]);
      if (lo < hi)
        fn(g, lo, hi - lo);
    }
  }

  /// ZeRO-3's prefetch: the all-gather of each optimizer group, cut at the buckets'
  /// ranges (plan.param_buckets, in the order the forward pass first reads them), then
  /// again at the same ranges for the backward pass in the order it reads them
  /// (plan.param_regather, as buckets K + j), all handed to sched.grad, which starts
  /// them one bucket ahead of its reads and waits for bucket k before reading it.
  SmallVector<Value> gatherInBuckets(ArrayAttr buckets) {
    const training::FlatLayout &l = layout(0);
    const Bufs &x = bufs[0];
    auto fn = module.lookupSymbol<func::FuncOp>("planc_grad");
    auto regather = fn ? fn->getAttrOfType<ArrayAttr>("plan.param_regather") : ArrayAttr();
    SmallVector<Value> events;
    auto gather = [&](int64_t id, Attribute bucket, StringRef purpose) {
      ArrayRef<int64_t> r = cast<DenseI64ArrayAttr>(bucket).asArrayRef();
      for (size_t j = 0; j + 1 < r.size(); j += 2)
        perGroupPart(r[j], r[j + 1], [&](int g, int64_t begin, int64_t n) {
          events.push_back(sched::AllGatherStartOp::create(
              b, cause(purpose.str() + " (bucket " + std::to_string(id) + ")"),
              sched::EventType::get(b.getContext()), x.paramShard, i64(pieceOffset(0, g, true)),
              i64(l.shardFloats(g)), x.params, i64(l.groupBegin[g]), dataAxes, i64(begin), i64(n), i64(id),
              b.getStringAttr(purpose)));
        });
    };
    for (auto [k, bucket] : llvm::enumerate(buckets))
      gather(int64_t(k), bucket, regather ? "parameters (forward)" : "parameters");
    if (regather)
      for (auto [j, k] : llvm::enumerate(regather.getAsValueRange<IntegerAttr>()))
        gather(int64_t(buckets.size() + j), buckets[k.getZExtValue()], "parameters (backward)");
    return events;
  }

  /// The collectives the entry point `name` issues itself (tensor parallelism), in
  /// order; null if none.
  ArrayAttr inside(StringRef name) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    SmallVector<Attribute> out;
    if (!fn)
      return ArrayAttr();
    auto entry = [&](StringRef kind, int64_t axis, StringRef purpose, Type type) {
      StringRef axisName = axis >= 0 && size_t(axis) < s.axes.size() ? StringRef(s.axes[size_t(axis)]) : "?";
      out.push_back(b.getDictionaryAttr({b.getNamedAttr("collective", b.getStringAttr(kind)),
                                         b.getNamedAttr("axis", b.getStringAttr(axisName)),
                                         b.getNamedAttr("purpose", b.getStringAttr(purpose)),
                                         b.getNamedAttr("floats", i64(cast<ShapedType>(type).getNumElements()))}));
    };
    fn.walk([&](Operation *op) {
      if (auto o = dyn_cast<nn::AllReduceOp>(op))
        entry("all_reduce", o.getAxis(), o.getPurpose(), o.getType());
      else if (auto o = dyn_cast<nn::AllGatherOp>(op))
        entry("all_gather", o.getAxis(), o.getPurpose(), o.getType());
      else if (auto o = dyn_cast<nn::ReduceScatterOp>(op))
        entry("reduce_scatter", o.getAxis(), o.getPurpose(), o.getX().getType());
      else if (auto o = dyn_cast<nn::VocabParallelCrossEntropyOp>(op))
        for (StringRef what : {"cross-entropy max", "cross-entropy sum", "cross-entropy target"})
          entry("all_reduce", o.getAxis(), what, o.getLse().getType());
      else if (auto o = dyn_cast<nn::BatchNormOp>(op); o && o.getRanks()) // SyncBatchNorm
        entry("all_gather", *o.getAxis(), "batchnorm statistics",
              RankedTensorType::get({int64_t(*o.getRanks()), cast<ShapedType>(o.getStats().getType()).getNumElements()},
                                    b.getF32Type()));
      else if (auto o = dyn_cast<nn::BatchNormGradOp>(op); o && o.getRanks())
        entry("all_reduce", *o.getAxis(), "batchnorm gradient sums", o.getStats().getType());
    });
    return out.empty() ? ArrayAttr() : b.getArrayAttr(out);
  }

  /// planc_gather(ctx) and planc_release(ctx): the full parameters outside a
  /// step, for evaluation. Only ZeRO-3 has anything to do.
  void buildGather() {
    OpBuilder::InsertionGuard guard(b);
    // Each stage its own under a pipeline.
    auto eachStage = [&](llvm::function_ref<void(int64_t)> body) {
      if (s.p <= 1)
        return body(0);
      for (int64_t k = 0; k < s.p; ++k)
        onStage(k, [&] { body(k); });
    };
    func::FuncOp gather = function("planc_gather", false);
    b.setInsertionPointToStart(gather.addEntryBlock());
    if (zero3)
      eachStage([&](int64_t k) { gatherWhole(k, " (evaluation)"); });
    func::ReturnOp::create(b, loc);
    b.setInsertionPointAfter(gather);
    func::FuncOp release = function("planc_release", false);
    b.setInsertionPointToStart(release.addEntryBlock());
    if (zero3)
      eachStage([&](int64_t k) { sched::FreeOp::create(b, loc, bufs[size_t(k)].params); });
    func::ReturnOp::create(b, loc);
  }

  OpBuilder b;
  ModuleOp module;
  Location loc;
  const StepShape &s;
  bool sharded = false, zero2 = false, zero3 = false;
  ArrayAttr dataAxes;
  FlatSymbolRefAttr state;
  SmallVector<Bufs> bufs;        ///< per pipeline rank (one without a pipeline)
  SmallVector<ChunkBufs> chunks; ///< per pipeline stage
  schedule::PipelineProgram program; ///< the interleaved schedule's
  /// The zero-bubble schedule: each stage's order of passes, how far each stage's
  /// emission has got in it, and the step's step and micro-batch values.
  std::vector<schedule::StageOrder> orders;
  SmallVector<size_t> nextPass;
  Value stepValue;
  SmallVector<Value> microValues;
  FlatSymbolRefAttr global, fedUpdate;   ///< a federated plan's global model and client updates
  SmallVector<Attribute> serverMoments; ///< FedAdam's

  SmallVector<std::tuple<std::string, int64_t, std::string, int64_t>> declared;
};

struct PlanSchedule : plan::impl::PlanScheduleBase<PlanSchedule> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto global = module.lookupSymbol<sched::ManifestOp>("planc_manifest");
    if (!global && (module.lookupSymbol("planc_retrieval_manifest") || module.lookupSymbol("planc_generate_manifest")))
      return; // a retrieval or generation executable has no training step
    if (!global) {
      module.emitError() << "plan-schedule needs the manifest of plan-train-abi (planc_manifest)";
      return signalPassFailure();
    }
    for (const char *name : {"planc_step", "planc_gather", "planc_release", "planc_round"})
      if (module.lookupSymbol(name)) {
        module.emitError() << "plan-schedule: the module already has a '" << name << "'";
        return signalPassFailure();
      }
    llvm::json::Value root(nullptr);
    StepShape shape;
    if (failed(readManifest(global, root, shape)))
      return signalPassFailure();
    Builder builder(module, global.getLoc(), shape);
    root.getAsObject()->insert({key::schedule, builder.build()});
    setManifestJson(global, root);
  }
};

} // namespace
