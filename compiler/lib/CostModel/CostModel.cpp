// The cost model's formulas. Memory comes from the sharded shapes of the actual
// parameters and from what each op of the forward graph keeps for backward;
// communication from the collectives the layout implies (ring volumes); time
// from a roofline per op and an alpha-beta model per collective on the link the
// axis crosses. docs/EXPLAIN.md states every formula and its source.
#include "plan/Compiler/CostModel.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Schedule/PipelineOrder.h"
#include "plan/Training/DataParallel.h"
#include "planrt_nf4.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

using namespace plan;
using namespace plan::cost;
using sema::GraphOp;
using sema::OpKind;
using sema::ValueType;

const Calibration &Calibration::defaults() {
  static const Calibration c;
  return c;
}

Memory &Memory::operator+=(const Memory &o) {
  params += o.params;
  grads += o.grads;
  optimizer += o.optimizer;
  activations += o.activations;
  buffers += o.buffers;
  return *this;
}

namespace {

/// How a value is split over the tensor axis.
enum class Split { Replicated, Feature, Sequence };

/// The collectives, named as the runtime logs them (training::collectiveName).
using Coll = training::Collective;
const char *collName(Coll c) { return training::collectiveName(c); }

/// Bytes one rank sends in a ring collective over n ranks of a full buffer of S bytes.
double ringBytes(Coll c, double S, int64_t n) {
  if (n <= 1)
    return 0;
  double f = double(n - 1) / double(n);
  return c == Coll::AllReduce ? 2 * f * S : f * S;
}
int64_t ringSteps(Coll c, int64_t n) { return n <= 1 ? 0 : (c == Coll::AllReduce ? 2 : 1) * (n - 1); }

struct TensorColl {
  Coll kind;
  double fullBytes; ///< the whole buffer, before splitting
  const char *purpose;
};

/// What one op costs on one device for one micro-batch.
struct OpCost {
  double fwdFlops = 0, bwdFlops = 0, fwdBytes = 0, bwdBytes = 0;
  double modelFwdFlops = 0; ///< unsplit matmul FLOPs, full attention (per micro-batch)
  double modelBwdFlops = -1; ///< the same of the backward pass; -1: twice the forward's
  bool matmul = false;
  double saved = 0;                              ///< bytes kept for backward, recompute none
  double savedSelective = 0;                     ///< under selective recompute
  double selectiveFlops = 0, selectiveBytes = 0; ///< recomputed under selective
  double logits = 0;                             ///< cross-entropy probabilities (a buffer, not a layer activation)
  /// The CUDA target's mixed-precision cross-entropy writes the logits' rounded gradient
  /// over the logits (plan-cuda-round-results): no buffer of its own (a cuda mesh).
  bool logitsGradInPlace = false;
  /// Elements the zero-bubble weight pass reads inside the op, beyond its input and output
  /// values: the attention's input as its QKV projection reads it, q/k/v's gradient and
  /// the attention's output before its projection.
  double weightInner = 0;
  /// Of `saved` (and `savedSelective`), what only the weight gradients read: a linear
  /// layer's input, the attention's input and its output before the projection.
  double weightOnly = 0, weightOnlySelective = 0;
  std::vector<TensorColl> fwdColls, bwdColls;
  /// Collectives over the data axis inside the passes, per micro-batch (SyncBatchNorm's).
  std::vector<TensorColl> dataColls;
};

struct Link {
  double bandwidth, latency;
  std::string name;
};

class Estimator {
public:
  Estimator(const sema::Model &m, const sema::Mesh &mesh, const sema::Layout &l, const std::vector<std::string> &roles,
            const Calibration &cal, bool withTrace)
      : model(m), mesh(mesh), l(l), cal(cal), withTrace(withTrace) {
    t = l.tensor;
    d = l.data;
    p = l.pipeline;
    S = std::max<int64_t>(l.stages, 1);
    v = std::max<int64_t>(S / p, 1);
    mb = std::max<int64_t>(l.microBatches(), 1);
    if (p > 1 && v > 1 && mb % p == 0)
      program = schedule::interleavedProgram(p, v, mb);
    b = l.micro;
    s = l.seq;
    act = l.precision == sema::Precision::FP32 ? 4 : 2;
    // What the executables keep for the backward pass (Calibration::storedActivationBytes).
    storedAct = cal.storedActivationBytes > 0 ? cal.storedActivationBytes : act;
    // The CUDA target stores in 16 bits what only GEMMs and element-wise ops read of a
    // mixed-precision step (plan-cuda-half-storage): the matmuls' inputs, the activation
    // functions' and the logits; what a LayerNorm, the attention or an embedding reads
    // stays float32.
    cudaHalf = mesh.kind == sema::DeviceKind::CUDA && l.precision != sema::Precision::FP32;
    halfStored = cudaHalf ? act : storedAct;
    paramBytes = act;
    gradBytes = act;
    optBytes = l.precision == sema::Precision::FP32 ? 8 : 12;
    bool cuda = mesh.kind == sema::DeviceKind::CUDA;
    // Emulated bf16/fp16 on the CPU keeps activations in f32 and communicates them so.
    wireAct = cuda ? act : 4;
    peak = mesh.peakFlops.value_or(cuda ? cal.cudaPeakFlops : cal.cpuPeakFlops);
    hbm = mesh.hbmBytesPerSecond.value_or(cuda ? cal.cudaMemoryBandwidth : cal.cpuMemoryBandwidth);
    placeAxes(roles);
  }

  /// The estimate; with `memoryOnly`, its memory alone (no time, no trace).
  Estimate run(bool memoryOnly = false) {
    Estimate e;
    e.params = model.numParameters();
    e.devices = mesh.devices();
    e.onCuda = cudaMesh();
    e.peakFlops = peak;
    e.deviceMemory = mesh.memoryBytes;
    assignRanks();
    analyseOps();
    memory(e);
    if (!memoryOnly)
      time(e);
    return e;
  }

private:
  const sema::Model &model;
  const sema::Mesh &mesh;
  const sema::Layout &l;
  const Calibration &cal;
  bool withTrace;
  int64_t t, d, p, S, v, mb, b, s;
  double act, storedAct, halfStored, wireAct, paramBytes, gradBytes, optBytes, peak, hbm;
  bool cudaHalf = false;   ///< a mixed-precision step on the CUDA target (plan-cuda-half-storage)
  bool logitsHalf = false; ///< ...whose logits are 16-bit (no vocabulary split)
  std::map<std::string, Link> links; ///< by role
  std::vector<int> opRank;           ///< pipeline rank per op
  std::vector<int> opStage;          ///< pipeline stage per op (its rank's, but under the interleaved schedule)
  /// The interleaved schedule: each rank's program (schedule::interleavedProgram), whose
  /// slots size the stages' buffers; and, while memory() weighs one stage's backward
  /// pass, that stage (-1: every op of the rank).
  schedule::PipelineProgram program;
  int chunk = -1;
  bool onRank(size_t i, int r) const { return opRank[i] == r && (chunk < 0 || opStage[i] == chunk); }
  std::vector<int> opUnit;           ///< -1 embedding side, layer index, or layers (head)
  std::vector<OpCost> costs;
  std::vector<Split> split;   ///< per value id
  std::set<int> columnInputs; ///< values already gathered for a column-parallel matmul
  std::set<int> regathered;   ///< ...and gathered again in the backward pass for a weight gradient
  std::set<int> savedInputs;  ///< values already kept for a matmul's backward
  /// Per value: whether its gradient is computed, i.e. a trained parameter is upstream of
  /// it (under `adapt` the activations before the first adapter have none: nn-autodiff
  /// drops what no gradient needs, and the collectives of that backward with it).
  std::vector<bool> needsGrad;
  int64_t width = 0;          ///< features crossing a pipeline boundary

  // --- placement -----------------------------------------------------------
  void placeAxes(std::vector<std::string> roles) {
    if (roles.empty())
      roles = {"data", "pipeline", "tensor"};
    std::map<std::string, int64_t> size = {{"data", d}, {"tensor", t}, {"pipeline", p}};
    int64_t known = d * t * p;
    size["replicate"] = known > 0 ? std::max<int64_t>(1, mesh.devices() / known) : 1;
    // Row-major: the last role varies fastest.
    int64_t stride = 1;
    std::map<std::string, int64_t> strideOf;
    for (auto it = roles.rbegin(); it != roles.rend(); ++it) {
      strideOf[*it] = stride;
      stride *= size[*it];
    }
    bool cuda = mesh.kind == sema::DeviceKind::CUDA;
    auto bw = [&](const char *name, double dflt) {
      auto it = mesh.links.find(name);
      return it != mesh.links.end() ? it->second : dflt;
    };
    double nodeBw = bw("node", cuda ? cal.cudaNodeBandwidth : cal.cpuLinkBandwidth);
    double netBw = bw("network", mesh.links.count("node") && !mesh.links.count("network")
                                     ? nodeBw
                                     : (cuda ? cal.cudaNetworkBandwidth : cal.cpuLinkBandwidth));
    for (const char *role : {"data", "tensor", "pipeline"}) {
      int64_t span = strideOf.count(role) ? strideOf[role] * size[role] : size[role];
      bool inNode = span <= mesh.perNode && mesh.perNode % span == 0;
      links[role] = inNode ? Link{nodeBw, cal.nodeLatency, "node"} : Link{netBw, cal.networkLatency, "network"};
    }
  }

  double collSeconds(Coll c, double fullBytes, int64_t n, const std::string &role) const {
    if (n <= 1)
      return 0;
    const Link &lk = links.at(role);
    return ringSteps(c, n) * lk.latency + ringBytes(c, fullBytes, n) / (lk.bandwidth * cal.linkEfficiency);
  }

  // --- pipeline ranks ------------------------------------------------------
  void assignRanks() {
    const auto &ops = model.ops;
    int64_t L = std::max<int64_t>(model.layers, 1);
    std::vector<int> layerStage(L);
    for (int64_t i = 0; i < L; ++i)
      layerStage[i] = int(training::pipelineStageOfLayer(i, L, S));
    size_t firstLayered = ops.size();
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].layerIndex >= 0) {
        firstLayered = i;
        break;
      }
    opRank.resize(ops.size());
    opStage.resize(ops.size());
    opUnit.resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      int li = ops[i].layerIndex;
      if (li >= 0 && li < L) {
        opStage[i] = layerStage[li];
        opUnit[i] = li;
      } else if (i < firstLayered) {
        opStage[i] = 0;
        opUnit[i] = -1;
      } else {
        // After the trunk: the head, on the last stage. Between two trunk segments:
        // with the layer before it.
        bool laterLayer = false;
        for (size_t k = i + 1; k < ops.size() && !laterLayer; ++k)
          laterLayer = ops[k].layerIndex >= 0;
        opStage[i] = laterLayer ? opStage[i - 1] : int(S - 1);
        opUnit[i] = laterLayer ? opUnit[i - 1] : int(model.layers);
      }
      opRank[i] = int(opStage[i] % p);
      if (li == 0 && !width)
        for (int o : ops[i].operands)
          if (o >= sema::kFirstOpValue)
            width = std::max<int64_t>(width, ops[o - sema::kFirstOpValue].result.features);
    }
    if (!width)
      for (const GraphOp &op : ops)
        if (op.result.kind == ValueType::Kind::Hidden)
          width = std::max(width, op.result.features);
  }

  // --- per-op costs --------------------------------------------------------
  ValueType typeOf(int v) const {
    if (v < sema::kFirstOpValue && model.images)
      return v == sema::kTokensValue ? ValueType{ValueType::Kind::Images, l.images.channels}
                                     : ValueType{ValueType::Kind::Labels, 0};
    return v < sema::kFirstOpValue ? ValueType{ValueType::Kind::Tokens, 0} : model.ops[v - sema::kFirstOpValue].result;
  }
  /// Elements of a value on one device, for one micro-batch.
  double elems(int v) const {
    ValueType ty = typeOf(v);
    double n = ty.kind == ValueType::Kind::Hidden      ? double(b) * s * (ty.features ? ty.features : flatFeatures(v))
               : ty.kind == ValueType::Kind::Tokens    ? double(b) * s
               : ty.kind == ValueType::Kind::Positions ? double(s)
               : ty.kind == ValueType::Kind::Images    ? double(b) * channels(v) * area(v)
               : ty.kind == ValueType::Kind::Labels    ? double(b)
                                                       : 1;
    Split sp = v < int(split.size()) ? split[v] : Split::Replicated;
    return sp == Split::Replicated ? n : n / t;
  }
  // --- models over images ----------------------------------------------------
  /// Each value's height and width (images; 1 × 1 otherwise), from the plan's image size
  /// layer by layer as plan-train-step sizes them (nn::windowedExtent).
  std::vector<std::pair<int64_t, int64_t>> extent;
  void sizeImages() {
    extent.assign(model.ops.size() + sema::kFirstOpValue, {1, 1});
    if (!model.images)
      return;
    extent[sema::kTokensValue] = {l.images.height, l.images.width};
    for (size_t i = 0; i < model.ops.size(); ++i) {
      const GraphOp &op = model.ops[i];
      auto &out = extent[i + sema::kFirstOpValue];
      if (op.operands.empty() || typeOf(int(i) + sema::kFirstOpValue).kind != ValueType::Kind::Images)
        continue;
      auto [h, w] = extent[size_t(op.operands[0])];
      if (op.kind == OpKind::Conv2d || op.kind == OpKind::MaxPool)
        out = {nn::windowedExtent(h, op.kernel, op.stride, op.pad), nn::windowedExtent(w, op.kernel, op.stride, op.pad)};
      else if (op.kind != OpKind::AvgPool)
        out = {h, w};
    }
  }
  double area(int v) const { return double(extent[size_t(v)].first) * double(extent[size_t(v)].second); }
  /// An image value's channels (the images' own until a layer sets them).
  double channels(int v) const {
    int64_t c = typeOf(v).features;
    return double(c ? c : l.images.channels);
  }
  /// The features of a flatten's output (its input's channels × height × width), and of
  /// a value computed from one elementwise (an activation, a sum); 0 for another value.
  double flatFeatures(int v) const {
    if (v < sema::kFirstOpValue)
      return 0;
    const GraphOp &op = model.ops[size_t(v - sema::kFirstOpValue)];
    if (op.operands.empty())
      return 0;
    int in = op.operands[0];
    if (op.kind == OpKind::Flatten)
      return channels(in) * area(in);
    bool elementwise = op.kind == OpKind::Relu || op.kind == OpKind::Gelu || op.kind == OpKind::Silu ||
                       op.kind == OpKind::Dropout || op.kind == OpKind::Add || op.kind == OpKind::Sub ||
                       op.kind == OpKind::Mul;
    return elementwise && typeOf(in).kind == ValueType::Kind::Hidden && !typeOf(in).features ? flatFeatures(in) : 0;
  }
  /// The costs of a vision op (conv2d, batchnorm, pooling, flatten) for one micro-batch:
  /// im2col and a GEMM for a convolution (and two for its gradients, the input's only where
  /// it needs one), two passes for batch statistics, SyncBatchNorm's collectives.
  void visionCost(const GraphOp &op, OpCost &c, int in, int out) {
    double inE = elems(in), outE = elems(out), C = channels(in);
    switch (op.kind) {
    case OpKind::Conv2d: {
      double window = C * double(op.kernel * op.kernel), cols = double(b) * window * area(out);
      double f = 2 * outE * window;
      int passes = needsGrad[in] ? 2 : 1; // the filter's gradient, and the input's
      c.matmul = true;
      c.fwdFlops = c.modelFwdFlops = f;
      c.bwdFlops = c.modelBwdFlops = passes * f;
      c.fwdBytes = (inE + cols + outE) * act;
      c.bwdBytes = (passes * cols + inE + outE) * act;
      c.saved = inE * storedAct; // the filter's gradient reads the input
      break;
    }
    case OpKind::BatchNorm:
      c.fwdFlops = 7 * inE; // mean and variance (two passes), then the normalisation
      c.bwdFlops = 8 * inE; // the two sums, then the input gradient
      c.fwdBytes = 4 * inE * act;
      c.bwdBytes = 5 * inE * act;
      c.saved = inE * storedAct + 2 * C * 4; // the input and the statistics
      if (d > 1 && l.images.batchnormSync) {
        c.dataColls.push_back({Coll::AllGather, double(d) * 2 * C * 4, "batchnorm statistics"});
        c.dataColls.push_back({Coll::AllReduce, 2 * C * 4, "batchnorm gradient sums"});
      }
      break;
    case OpKind::MaxPool:
      c.fwdFlops = outE * double(op.kernel * op.kernel);
      c.bwdFlops = c.fwdFlops; // the maximum found again, from the input
      c.fwdBytes = (inE + outE) * act;
      c.bwdBytes = (2 * inE + outE) * act;
      c.saved = inE * storedAct;
      break;
    case OpKind::AvgPool:
      c.fwdFlops = c.bwdFlops = inE;
      c.fwdBytes = c.bwdBytes = (inE + outE) * act;
      break;
    default: // flatten: a reshape
      break;
    }
    c.savedSelective = c.saved;
  }

  bool splitsDim(int param, size_t i) const {
    // Asked per op and parameter by every estimate, and the dims are names to look up.
    if (splitCache.empty())
      splitCache.resize(model.params.size());
    std::vector<char> &known = splitCache[size_t(param)];
    const sema::Parameter &pr = model.params[param];
    if (known.empty())
      for (const std::string &dim : pr.dims)
        known.push_back(l.splits(dim));
    return i < known.size() && known[i];
  }
  mutable std::vector<std::vector<char>> splitCache;
  /// A parameter's elements on one rank of the tensor axis (kept: every memory pass of
  /// every estimate a search makes asks, and the split's dims are names to look up).
  int64_t localElems(int pr) const {
    if (localCache.empty())
      localCache.assign(model.params.size(), -1);
    int64_t &n = localCache[size_t(pr)];
    if (n < 0) {
      n = model.params[pr].numElements();
      for (size_t i = 0; i < model.params[pr].dims.size(); ++i)
        if (splitsDim(pr, int(i)))
          n /= t;
    }
    return n;
  }
  mutable std::vector<int64_t> localCache;
  // --- fine-tuning (adapt, quantize) -----------------------------------------
  bool lora() const { return l.adapt.rank > 0; }
  bool adapted(int pr) const { return lora() && l.adapt.matrices.count(model.params[pr].path); }
  /// Whether parameter pr, or an adapter of it, trains.
  bool trains(int pr) const { return !lora() || adapted(pr); }
  bool quantized(int pr) const {
    return lora() && l.adapt.nf4Block > 0 && l.adapt.quantized.count(model.params[pr].path);
  }
  /// A piece of what trains: its elements on one tensor rank, and whether it is whole there.
  struct Piece {
    int64_t elems;
    bool whole;
  };
  /// What trains of parameter pr, piece by piece as the executable lays it out: the
  /// parameter; under `adapt`, an adapted weight [in, out]'s adapters a [in, r] and b [r,
  /// out] (each split where its base is: plan-lora, nn-tensor-parallel), and nothing of
  /// any other.
  std::vector<Piece> trainedPieces(int pr) const {
    if (!lora())
      return {{localElems(pr), localElems(pr) == model.params[pr].numElements()}};
    if (!adapted(pr))
      return {};
    const std::vector<int64_t> &shape = model.params[pr].shape;
    int64_t r = l.adapt.rank;
    bool rows = splitsDim(pr, 0), cols = splitsDim(pr, 1);
    return {{shape[0] * r / (rows ? t : 1), !rows}, {r * shape[1] / (cols ? t : 1), !cols}};
  }
  int64_t trainedElems(int pr) const {
    // Asked per parameter by the memory passes of every estimate a search makes: kept.
    if (trainedCache.empty())
      trainedCache.assign(model.params.size(), -1);
    int64_t &n = trainedCache[size_t(pr)];
    if (n < 0) {
      n = 0;
      for (const Piece &piece : trainedPieces(pr))
        n += piece.elems;
    }
    return n;
  }
  mutable std::vector<int64_t> trainedCache;
  /// Bytes of parameter pr's frozen copy on one device (0 when it trains): fp32, or its
  /// NF4 storage (planrt_nf4.h) when quantized; each padded to 16 floats, as
  /// plan-train-abi places the frozen base after the trained layout.
  int64_t frozenBytes(int pr) const {
    if (!lora())
      return 0;
    int64_t n = localElems(pr);
    int64_t floats = quantized(pr) ? planrt_nf4_bytes(n, l.adapt.nf4Block, l.adapt.nf4Double) / 4 : n;
    return (floats + 15) / 16 * 16 * 4;
  }
  /// A matmul by weight pr (k → n over `tokens` rows) under `adapt`: a frozen weight has
  /// no weight gradient, so the backward pass computes the input's alone (`baseBwd`
  /// becomes the forward's FLOPs) and keeps nothing of the input for it (returns false);
  /// LoRA adds x·a then ·b (and twice that backward) and keeps x·a; a quantized weight is
  /// dequantized before the forward and again before the backward. `inSplit`: how the
  /// matmul's input is split. Returns whether the matmul keeps its input.
  bool fineTune(OpCost &c, int pr, Split inSplit, double tokens, double k, double n, double baseFwd, double &baseBwd,
                double &modelBwd) {
    if (!lora())
      return true;
    baseBwd = baseFwd;
    modelBwd += 2 * tokens * k * n;
    if (quantized(pr)) {
      double local = double(localElems(pr));
      double bytes = double(planrt_nf4_bytes(localElems(pr), l.adapt.nf4Block, l.adapt.nf4Double)) + 4 * local;
      c.fwdBytes += bytes;
      c.bwdBytes += bytes;
    }
    if (!adapted(pr))
      return false;
    double r = double(l.adapt.rank);
    double kk = splitsDim(pr, 0) ? k / double(t) : k, nn = splitsDim(pr, 1) ? n / double(t) : n;
    double f = 2 * tokens * r * (kk + nn);
    c.fwdFlops += f;
    c.bwdFlops += 2 * f;
    c.modelFwdFlops += 2 * tokens * r * (k + n);
    modelBwd += 4 * tokens * r * (k + n);
    c.fwdBytes += tokens * (4 * r + 3 * nn) * act; // x·a and its scaling, ·b, the sum
    c.bwdBytes += 2 * tokens * (4 * r + 3 * nn) * act;
    c.saved += tokens * r * storedAct;
    c.savedSelective += tokens * r * storedAct;
    adapterCollectives(c, pr, inSplit, tokens * r * wireAct);
    return true;
  }
  /// The adapter's two matmuls as nn-tensor-parallel splits them, x·a of `xaBytes`: a [in,
  /// r] is split where W's rows are (row-parallel: x·a is a partial sum, all-reduced, or
  /// reduce-scattered under sequence parallelism and its gradient gathered); b [r, out]
  /// where W's columns are (column-parallel: the gradient of x·a reduced, and x·a gathered
  /// in the forward pass and again for b's gradient when it is split by sequence).
  void adapterCollectives(OpCost &c, int pr, Split inSplit, double xaBytes) {
    Split xa = inSplit == Split::Sequence ? Split::Sequence : Split::Replicated;
    if (splitsDim(pr, 0)) {
      xa = l.sequence ? Split::Sequence : Split::Replicated;
      c.fwdColls.push_back({l.sequence ? Coll::ReduceScatter : Coll::AllReduce, xaBytes, "LoRA x·a"});
      if (l.sequence)
        c.bwdColls.push_back({Coll::AllGather, xaBytes, "LoRA x·a"});
    }
    if (!splitsDim(pr, 1))
      return;
    if (xa == Split::Sequence) {
      c.fwdColls.push_back({Coll::AllGather, xaBytes, "LoRA x·a"});
      c.bwdColls.push_back({Coll::AllGather, xaBytes, "LoRA x·a"});
    }
    c.bwdColls.push_back({xa == Split::Sequence ? Coll::ReduceScatter : Coll::AllReduce, xaBytes, "LoRA x·a"});
  }

  bool producedByElementwise(int v) const {
    if (v < sema::kFirstOpValue)
      return false;
    OpKind k = model.ops[v - sema::kFirstOpValue].kind;
    return k == OpKind::Gelu || k == OpKind::Silu || k == OpKind::Relu || k == OpKind::Mul || k == OpKind::Dropout;
  }

  /// The collectives around a column-parallel matmul reading `in`, and the state of its input.
  /// `weightGrad`: whether the matmul's weight gradient reads its input (the weight
  /// trains; an adapter's a reads x as the forward pass split it, not gathered).
  void columnInput(OpCost &c, int in, const char *what, bool weightGrad) {
    // Column-parallel matmuls that read the same value (SwiGLU's gate and up) share
    // one gather, and their input gradients are summed before one reduction.
    double full = double(b) * s * typeOf(in).features * wireAct;
    bool sequence = split[in] == Split::Sequence;
    if (sequence && weightGrad && regathered.insert(in).second)
      c.bwdColls.push_back({Coll::AllGather, full, what}); // re-gather the input for dW
    if (!columnInputs.insert(in).second)
      return;
    if (sequence)
      c.fwdColls.push_back({Coll::AllGather, full, what});
    if (needsGrad[in])
      c.bwdColls.push_back({sequence ? Coll::ReduceScatter : Coll::AllReduce, full, what});
  }
  /// The collectives after a row-parallel matmul producing `features`.
  /// `backward`: whether the op's backward pass runs (its output's gradient is read).
  Split rowOutput(OpCost &c, int64_t features, const char *what, bool backward) {
    double full = double(b) * s * features * wireAct;
    if (l.sequence) {
      c.fwdColls.push_back({Coll::ReduceScatter, full, what});
      if (backward)
        c.bwdColls.push_back({Coll::AllGather, full, what});
      return Split::Sequence;
    }
    c.fwdColls.push_back({Coll::AllReduce, full, what});
    return Split::Replicated;
  }

  /// needsGrad: a value's gradient is made when a trained parameter is upstream of it.
  void markGradients() {
    const auto &ops = model.ops;
    needsGrad.assign(ops.size() + sema::kFirstOpValue, false);
    for (size_t i = 0; i < ops.size(); ++i) {
      bool g = false;
      for (int v : ops[i].operands)
        g = g || needsGrad[size_t(v)];
      for (int pr : ops[i].params)
        g = g || trains(pr);
      needsGrad[i + sema::kFirstOpValue] = g;
    }
  }

  void analyseOps() {
    const auto &ops = model.ops;
    split.assign(ops.size() + sema::kFirstOpValue, Split::Replicated);
    markGradients();
    sizeImages();
    costs.resize(ops.size());
    bool tp = t > 1;
    for (size_t i = 0; i < ops.size(); ++i) {
      const GraphOp &op = ops[i];
      OpCost &c = costs[i];
      int out = int(i) + sema::kFirstOpValue;
      int in = op.operands.empty() ? -1 : op.operands[0];
      double inE = in >= 0 ? elems(in) : 0;
      switch (op.kind) {
      case OpKind::Embedding: {
        bool vocab = tp && splitsDim(op.params[0], 0);
        double full = double(b) * s * op.outFeatures * wireAct;
        if (vocab && l.sequence) {
          c.fwdColls.push_back({Coll::ReduceScatter, full, "embedding output"});
          if (trains(op.params[0]))
            c.bwdColls.push_back({Coll::AllGather, full, "embedding output"});
        } else if (vocab) {
          c.fwdColls.push_back({Coll::AllReduce, full, "embedding output"});
        }
        split[out] = l.sequence && tp ? Split::Sequence : Split::Replicated;
        double outE = elems(out);
        c.fwdBytes = 2 * outE * act;
        c.bwdBytes = 2 * outE * act;
        c.saved = inE * 4; // token ids or positions
        break;
      }
      case OpKind::Attend:
      case OpKind::Linear: {
        // weight [in, out] for linear; [vocab, embed] for attend (the output is the vocab).
        int w = op.params[0];
        bool attend = op.kind == OpKind::Attend;
        bool col = tp && splitsDim(w, attend ? 0 : 1);
        bool row = tp && !attend && splitsDim(w, 0);
        double k = op.inFeatures, n = op.outFeatures;
        double tokens = double(b) * s;
        double flops = 2 * tokens * k * n;
        c.modelFwdFlops = flops;
        c.matmul = true;
        if (col) {
          columnInput(c, in, attend ? "head input" : "column-parallel input", !lora());
          split[out] = Split::Feature;
          flops /= t;
        } else if (row) {
          split[out] = rowOutput(c, int64_t(n), "row-parallel output", needsGrad[in] || trains(w));
          flops /= t;
        } else {
          split[out] = split[in];
        }
        c.fwdFlops = flops;
        c.bwdFlops = 2 * flops;
        double wBytes = k * n * paramBytes / ((col || row) ? t : 1);
        double inStored = col && split[in] == Split::Replicated ? tokens * k : elems(in);
        c.fwdBytes = inStored * act + elems(out) * act + wBytes;
        c.bwdBytes = 2 * c.fwdBytes;
        double modelBwd = 0;
        bool keeps = fineTune(c, w, split[in], tokens, k, n, flops, c.bwdFlops, modelBwd);
        if (lora())
          c.modelBwdFlops = modelBwd;
        // Matmuls reading the same value (SwiGLU's gate and up) keep it once.
        c.saved += keeps && savedInputs.insert(in).second ? inStored * halfStored : 0;
        c.savedSelective = producedByElementwise(in) ? 0 : c.saved;
        c.weightOnly = c.saved;
        c.weightOnlySelective = c.savedSelective;
        if (producedByElementwise(in)) {
          c.selectiveFlops = cal.elementwiseFlops * inStored;
          c.selectiveBytes = 2 * inStored * act;
        }
        break;
      }
      case OpKind::Attention: {
        bool heads = tp && (l.splits("qkv") || l.splits("heads"));
        double dm = op.inFeatures;
        double hd = dm / op.heads;
        double qkv = (op.heads + 2 * op.kvHeads) * hd;
        double tokens = double(b) * s;
        double proj = 2 * tokens * dm * qkv + 2 * tokens * dm * dm;
        double core = 4 * double(b) * s * s * dm; // QKᵀ and PV over all query heads
        c.modelFwdFlops = proj + core;
        c.matmul = true;
        double div = heads ? double(t) : 1.0;
        double coreRun = (op.causal ? 0.5 : 1.0) * core / div;
        if (heads) {
          int qkvW = op.params[0], outW = op.params[op.params.size() == 4 ? 2 : 1];
          columnInput(c, in, "attention input", !lora());
          split[out] = rowOutput(c, int64_t(dm), "attention output", needsGrad[in] || trains(qkvW) || trains(outW));
        } else {
          split[out] = split[in];
        }
        c.fwdFlops = proj / div + coreRun;
        c.bwdFlops = 2 * proj / div + 2.5 * coreRun; // flash backward recomputes P
        double inStored = heads && split[in] == Split::Replicated ? tokens * dm : elems(in);
        double qkvE = tokens * qkv / div, attnOut = tokens * dm / div;
        double lse = double(b) * (op.heads / div) * s * 4;
        double wBytes = (dm * qkv + dm * dm) * paramBytes / div;
        c.fwdBytes = (inStored + qkvE + 2 * attnOut + elems(out)) * act + wBytes;
        c.bwdBytes = 2 * c.fwdBytes;
        // Under `adapt`, each projection as a matmul of its own (fineTune): the input
        // kept for c_attn's weight gradient, the attention's output for c_proj's.
        double inProj = 2 * tokens * dm * qkv / div, outProj = 2 * tokens * dm * dm / div;
        double modelBwd = 2 * core, bwdIn = 2 * inProj, bwdOut = 2 * outProj;
        bool keepIn = fineTune(c, op.params[0], split[in], tokens, dm, qkv, inProj, bwdIn, modelBwd);
        bool keepOut = fineTune(c, op.params[op.params.size() == 4 ? 2 : 1], heads ? Split::Feature : split[in], tokens,
                                dm, dm, outProj, bwdOut, modelBwd);
        if (lora()) {
          c.bwdFlops += bwdIn + bwdOut - 2 * (inProj + outProj); // the projections' backward as fineTune says
          c.modelBwdFlops = modelBwd;
        }
        // q, k, v stay float32 (the attention reads them); the projections' inputs are 16-bit
        // on the CUDA target (halfStored).
        c.saved += ((keepIn ? inStored : 0) + (keepOut ? attnOut : 0)) * halfStored + qkvE * storedAct + lse;
        c.weightInner = inStored + qkvE + attnOut;
        c.weightOnly = ((keepIn ? inStored : 0) + (keepOut ? attnOut : 0)) * halfStored;
        c.weightOnlySelective = (keepIn ? inStored : 0) * halfStored;
        c.savedSelective += (keepIn ? inStored : 0) * halfStored + qkvE * storedAct;
        c.selectiveFlops = coreRun;
        c.selectiveBytes = (qkvE + attnOut) * act;
        break;
      }
      case OpKind::LayerNorm:
      case OpKind::RMSNorm: {
        split[out] = split[in];
        double rows = inE / std::max<int64_t>(typeOf(in).features, 1);
        double stats = rows * 4 * (op.kind == OpKind::LayerNorm ? 2 : 1);
        c.fwdFlops = cal.elementwiseFlops * inE;
        c.bwdFlops = 2 * c.fwdFlops;
        c.fwdBytes = 2 * inE * act;
        c.bwdBytes = 3 * inE * act;
        c.saved = c.savedSelective = inE * storedAct + stats;
        break;
      }
      case OpKind::Gelu:
      case OpKind::Silu:
      case OpKind::Relu:
      case OpKind::Dropout: {
        split[out] = split[in];
        c.fwdFlops = cal.elementwiseFlops * inE;
        c.bwdFlops = c.fwdFlops;
        c.fwdBytes = 2 * inE * act;
        c.bwdBytes = 3 * inE * act;
        c.saved = c.savedSelective = op.kind == OpKind::Dropout ? inE : inE * halfStored; // masks are bytes
        break;
      }
      case OpKind::Mul:
        split[out] = split[in];
        c.fwdFlops = inE;
        c.bwdFlops = 2 * inE;
        c.fwdBytes = 3 * inE * act;
        c.bwdBytes = 5 * inE * act;
        c.saved = c.savedSelective = 2 * inE * halfStored;
        break;
      case OpKind::Add:
      case OpKind::Sub:
        split[out] = split[in];
        c.fwdFlops = inE;
        c.fwdBytes = 3 * inE * act;
        c.bwdBytes = 3 * inE * act;
        break;
      case OpKind::Positions:
        split[out] = Split::Replicated;
        break;
      case OpKind::Conv2d:
      case OpKind::BatchNorm:
      case OpKind::MaxPool:
      case OpKind::AvgPool:
      case OpKind::Flatten:
        visionCost(op, c, in, out);
        break;
      case OpKind::CrossEntropy: {
        split[out] = Split::Replicated;
        bool vocab = split[in] == Split::Feature;
        double tokens = double(b) * s;
        if (vocab)
          for (const char *what : {"cross-entropy max", "cross-entropy sum", "cross-entropy target"})
            c.fwdColls.push_back({Coll::AllReduce, tokens * 4, what});
        c.fwdFlops = 5 * inE;
        c.bwdFlops = 2 * inE;
        c.fwdBytes = inE * (act + 4);
        c.bwdBytes = inE * (4 + act);
        logitsHalf = !vocab && cudaHalf;
        c.logits = inE * (logitsHalf ? halfStored : 4); // kept for backward
        c.logitsGradInPlace = cudaMesh() && l.precision != sema::Precision::FP32 && !vocab;
        break;
      }
      }
      if (!c.savedSelective && c.saved && op.kind != OpKind::Attend && op.kind != OpKind::Linear &&
          op.kind != OpKind::Attention)
        c.savedSelective = c.saved;
      if (c.modelBwdFlops < 0)
        c.modelBwdFlops = 2 * c.modelFwdFlops;
    }
  }

  double inFlight(int rank) const {
    if (p == 1)
      return 1;
    switch (l.schedule) {
    case sema::PipelineSchedule::GPipe:
      return double(mb);
    case sema::PipelineSchedule::OneFOneB:
    case sema::PipelineSchedule::ZeroBubble: // ZB-H1 holds 1F1B's micro-batches (Qi et al. 2023)
      return double(std::min<int64_t>(mb, p - rank));
    case sema::PipelineSchedule::Interleaved:
      // Korthikanti et al. 2022 §4.2.3: the first stage holds p·(1 + (p−1)/(p·v)).
      return std::min<double>(double(mb), double(p - rank) + double(p - 1) / double(v));
    }
    return 1;
  }

  // --- memory --------------------------------------------------------------
  void memory(Estimate &e) {
    const auto &ops = model.ops;
    // Parameters on each rank, after tensor splitting (a tied weight lives on both ends).
    paramRanks.assign(model.params.size(), {});
    for (size_t i = 0; i < ops.size(); ++i)
      for (int pr : ops[i].params)
        paramRanks[pr].insert(opRank[i]);
    std::vector<int64_t> rankElems(p, 0);
    // Per unit (embedding side, layer, head) rows.
    std::map<int, LayerRow> units;
    auto unitName = [&](int u) {
      return u < 0 ? std::string("embedding") : u >= model.layers ? std::string("head") : "layer " + std::to_string(u);
    };
    std::vector<int> paramUnit(model.params.size(), -2);
    for (size_t i = 0; i < ops.size(); ++i)
      for (int pr : ops[i].params)
        if (paramUnit[pr] == -2)
          paramUnit[pr] = opUnit[i];
    rankReplicatedElems.assign(p, 0);
    rankFrozenBytes.assign(p, 0);
    rankQuantizedBytes.assign(p, 0);
    rankFrozenRegion.assign(p, 0);
    std::map<int, int64_t> unitTrained, unitFrozen;
    for (size_t pr = 0; pr < model.params.size(); ++pr) {
      int i = int(pr);
      std::vector<Piece> pieces = trainedPieces(i);
      int64_t trained = trainedElems(i), frozen = frozenBytes(i);
      for (int r : paramRanks[pr]) {
        rankElems[r] += trained;
        for (const Piece &piece : pieces)
          if (piece.whole)
            rankReplicatedElems[r] += piece.elems;
        rankFrozenBytes[r] += frozen;
        if (quantized(i))
          rankQuantizedBytes[r] += frozen;
      }
      LayerRow &row = units[paramUnit[pr]];
      row.paramElements += localElems(i);
      unitTrained[paramUnit[pr]] += trained;
      unitFrozen[paramUnit[pr]] += frozen;
    }
    int64_t largestUnit = 0;
    for (auto &[u, row] : units) {
      row.name = unitName(u);
      largestUnit = std::max(largestUnit, unitTrained[u]);
    }
    largestUnitElems = largestUnit;

    // Activations per micro-batch, per pipeline stage (a rank's but under the interleaved
    // schedule) and per unit.
    std::vector<double> actStage(S, 0), logitsStage(S, 0), workingSet(S, 0);
    std::vector<char> logitsInPlace(S, 0);
    std::map<int, double> unitAct;
    std::map<int, int> unitRank, unitStage;
    std::map<int, double> unitInput; // the unit's input, for full recompute
    opKept.assign(ops.size(), 0);
    std::map<int, size_t> unitFirstOp;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpCost &c = costs[i];
      int u = opUnit[i];
      unitRank[u] = opRank[i];
      unitStage[u] = opStage[i];
      double bytes = l.recompute == sema::Recompute::Selective ? c.savedSelective : c.saved;
      // The zero-bubble schedule's input pass writes what only the weight pass reads to the
      // weight pass's slot as it makes it (counted there), where the stage's backward pass
      // runs from a forward it computes (the last stage, or `keep: inputs`).
      if (splitsWeightPass(opRank[i]) && l.recompute != sema::Recompute::Full && inWeightPass(i))
        bytes -= l.recompute == sema::Recompute::Selective ? c.weightOnlySelective : c.weightOnly;
      unitAct[u] += c.saved;
      double keptBefore = actStage[opStage[i]];
      unitFirstOp.try_emplace(u, i);
      if (l.recompute == sema::Recompute::Full && u >= 0 && u < model.layers) {
        if (!unitInput.count(u) && !ops[i].operands.empty())
          unitInput[u] = elems(ops[i].operands[0]) * storedAct;
        // A recomputed layer does not communicate again: the results of its forward
        // tensor all-reduces and reduce-scatters are kept (the gathers are repeated).
        for (const TensorColl &tc : c.fwdColls)
          if (tc.kind == Coll::AllReduce)
            actStage[opStage[i]] += tc.fullBytes / wireAct * storedAct;
          else if (tc.kind == Coll::ReduceScatter)
            actStage[opStage[i]] += tc.fullBytes / wireAct * storedAct / double(t);
      } else {
        actStage[opStage[i]] += bytes;
      }
      opKept[i] = actStage[opStage[i]] - keptBefore;
      logitsStage[opStage[i]] += c.logits;
      logitsInPlace[opStage[i]] |= c.logitsGradInPlace;
    }
    if (l.recompute == sema::Recompute::Full)
      for (auto &[u, bytes] : unitInput) {
        actStage[unitStage[u]] += bytes;
        workingSet[unitStage[u]] = std::max(workingSet[unitStage[u]], unitAct[u]);
        opKept[unitFirstOp[u]] += bytes;
      }
    for (auto &[u, row] : units) {
      row.rank = unitRank.count(u) ? unitRank[u] : 0;
      row.memory.activations = int64_t(std::llround(unitAct[u]));
    }

    // Bytes per rank.
    e.perRank.assign(p, Memory());
    int64_t worstTotal = -1;
    for (int64_t r = 0; r < p; ++r) {
      Memory &mem = e.perRank[r];
      int64_t n = rankElems[r];
      int64_t shard = d > 1 ? (n + d - 1) / d : n;
      // ZeRO-3 shards the frozen base too, in equal pieces of its region (plan-train-abi).
      bool zero3 = d > 1 && l.zero >= 3;
      rankFrozenRegion[r] = zero3 ? (rankFrozenBytes[r] / 4 + 16 * d - 1) / (16 * d) * (16 * d) * 4 : rankFrozenBytes[r];
      int64_t frozenHeld = zero3 ? rankFrozenRegion[r] / d : rankFrozenBytes[r];
      mem.params = int64_t((l.zero >= 3 ? shard : n) * paramBytes) + frozenHeld;
      mem.grads = int64_t((l.zero >= 2 ? shard : n) * gradBytes);
      mem.optimizer = int64_t((l.zero >= 1 ? shard : n) * optBytes);
      double flight = inFlight(int(r));
      std::vector<BufferRow> bufs;
      std::vector<RankActivations> perStage;
      for (int64_t k = 0; k < S; ++k)
        perStage.push_back({actStage[k], workingSet[k], logitsStage[k], logitsInPlace[k] != 0});
      if (!program.ranks.empty()) {
        stagesActivations(r, perStage, mem, bufs);
      } else {
        // One stage a rank; or several without the interleaved program (micro-batches not a
        // multiple of the ranks, which sema refuses), their ops weighed as one stage's.
        RankActivations a;
        for (int64_t k = r; k < S; k += p) {
          a.kept += perStage[size_t(k)].kept;
          a.workingSet = std::max(a.workingSet, perStage[size_t(k)].workingSet);
          a.logits += perStage[size_t(k)].logits;
          a.logitsGradInPlace = a.logitsGradInPlace || perStage[size_t(k)].logitsGradInPlace;
        }
        activations(r, {flight, p > 1 && r > 0 ? flight * boundaryStored() : 0, p > 1 && l.keepActivations && r + 1 < p},
                    a, mem, bufs);
      }
      // DDP reduces its gradients in place, bucket by bucket: no bucket buffers.
      Estimate::OffloadState offloaded;
      if (!offloadState(offloaded, r, n, shard, mem.params - frozenHeld, mem, bufs))
        heldBeyondModelStates(r, n, shard, mem.params - frozenHeld, mem, bufs);
      if (zero3 && rankFrozenRegion[r] > 0)
        bufs.push_back({"ZeRO-3 frozen base gathered whole " + wholeFor(), rankFrozenRegion[r]});
      if (p > 1)
        bufs.push_back({"pipeline send/recv", int64_t(sendRecvBoundaries(r) * boundaryStored())});
      if (int64_t slots = weightPassSlots(r); slots > 0)
        bufs.push_back({"zero-bubble weight passes' inputs (fp32, a slot per pass waiting)",
                        int64_t(double(slots) * weightPassBytes(int(r)))});
      if (mesh.kind == sema::DeviceKind::CUDA)
        bufs.push_back({"cuBLASLt workspace", cal.cudaWorkspaceBytes, true});
      checkpointRow(int(r), mem, bufs);
      for (auto &bf : bufs)
        mem.buffers += bf.bytes;
      if (mem.total() > worstTotal) {
        worstTotal = mem.total();
        e.worstRank = int(r);
        e.buffers = bufs;
        e.inFlight = flight;
        e.offload = offloaded;
      }
    }
    e.perDevice = e.perRank[e.worstRank];
    countTrained(e);
    for (auto &[u, row] : units) {
      int64_t trained = unitTrained[u];
      row.memory.params = int64_t(trained * paramBytes) + unitFrozen[u];
      row.memory.grads = int64_t(trained * gradBytes);
      row.memory.optimizer = int64_t(trained * optBytes);
      if (d > 1) {
        int64_t shard = (trained + d - 1) / d;
        if (l.zero >= 3)
          row.memory.params = int64_t(shard * paramBytes) + unitFrozen[u];
        if (l.zero >= 2)
          row.memory.grads = int64_t(shard * gradBytes);
        if (l.zero >= 1)
          row.memory.optimizer = int64_t(shard * optBytes);
      }
      e.layers.push_back(row);
    }
    rankParamElems = rankElems;
    e.maxRankParams = *std::max_element(rankElems.begin(), rankElems.end());
    tiedElems = 0;
    for (size_t pr = 0; pr < model.params.size(); ++pr)
      if (paramRanks[pr].size() > 1)
        tiedElems += trainedElems(int(pr));
  }
  /// What rank r's activations hold per micro-batch (memory()).
  struct RankActivations {
    double kept = 0, workingSet = 0, logits = 0;
    bool logitsGradInPlace = false; ///< the logits' gradient written over them (OpCost)
  };
  /// What a pipeline rank holds beside the backward pass activations() weighs: the
  /// micro-batches in flight, whose forward values a stage that `keeps` them holds, and
  /// the bytes of the inputs waiting in its slots (and, under the interleaved schedule,
  /// of its other stages' kept values).
  struct Held {
    double flight = 1, waiting = 0;
    bool keeps = false;
  };
  /// Bytes of the activation a pipeline stage hands on, as a stage keeps it.
  double boundaryStored() const { return double(b) * s * width * storedAct / (l.sequence && t > 1 ? t : 1); }
  /// The activations' a rank's pipeline transfers hold beside the inputs in flight: 1F1B's
  /// two (its activation sent on, its gradient received); under the interleaved schedule
  /// each stage's activation sent on and the gradients its slots receive, and its input's
  /// gradient sent back (plan-schedule's act, cot and dinput).
  double sendRecvBoundaries(int64_t r) const {
    if (program.ranks.empty())
      return 2;
    double n = 0;
    for (int64_t k = r; k < S; k += p)
      n += (k + 1 < S ? 1 + double(std::max<int64_t>(program.gradientSlots[size_t(k)], 1)) : 0) + (k > 0 ? 1 : 0);
    return n;
  }
  /// The interleaved schedule: each of rank r's stages' backward pass weighed in turn
  /// (their ops only: `chunk`), beside every stage's inputs waiting in their slots and,
  /// under `keep: activations`, the values the other stages keep; the heaviest one's.
  void stagesActivations(int64_t r, const std::vector<RankActivations> &a, Memory &mem, std::vector<BufferRow> &bufs) {
    auto keeps = [&](int64_t k) { return l.keepActivations && k + 1 < S; };
    auto slots = [&](int64_t k) { return double(std::max<int64_t>(program.savedSlots[size_t(k)], 1)); };
    auto kept = [&](int64_t k) { return keeps(k) ? a[size_t(k)].kept * slots(k) : 0.0; };
    double waiting = 0;
    for (int64_t k = r; k < S; k += p)
      waiting += double(program.inputSlots[size_t(k)]) * boundaryStored() + kept(k);
    int64_t heaviest = -1;
    Memory held = mem;
    std::vector<BufferRow> heaviestRows;
    for (int64_t k = r; k < S; k += p) {
      Memory m = mem;
      std::vector<BufferRow> rows;
      chunk = int(k);
      activations(r, {keeps(k) ? slots(k) : 1, waiting - kept(k), keeps(k)}, a[size_t(k)], m, rows);
      chunk = -1;
      int64_t bytes = m.activations;
      for (const BufferRow &row : rows)
        bytes += row.bytes;
      if (bytes > heaviest) {
        heaviest = bytes;
        held = m;
        heaviestRows = std::move(rows);
      }
    }
    mem = held;
    bufs.insert(bufs.end(), heaviestRows.begin(), heaviestRows.end());
  }
  /// Rank r's activations (mem.activations) with what it holds beside them (`held`), and
  /// the buffers the logits and the backward pass add at its peak.
  void activations(int64_t r, const Held &held, const RankActivations &a, Memory &mem,
                   std::vector<BufferRow> &bufs) const {
    // Under a pipeline a stage keeps only its input per micro-batch in flight (the first
    // stage reads the tokens again) and computes its forward again in its backward pass:
    // one micro-batch's activations, plus the inputs of those in flight.
    // Under `keep: activations` every stage but the last (whose backward pass follows its
    // forward pass at once) keeps each micro-batch's activations in flight too.
    double flight = held.flight, stash = held.waiting;
    bool keeps = held.keeps;
    double otherKept = keeps ? a.kept * (flight - 1) : 0; // the micro-batches in flight but this one
    mem.activations =
        int64_t(std::llround(p > 1 ? a.kept + otherKept + a.workingSet + stash : a.kept * flight + a.workingSet));
    // The logits' probabilities and, as the backward pass starts, their gradient beside
    // them. Under full recompute the activations row counts a layer recomputed, which the
    // backward pass makes only once those two are freed (after the head's backward): the
    // rows hold what the two need beyond it.
    // On the CUDA target a mixed-precision plan's gradient is written over the logits.
    double both = (a.logitsGradInPlace ? 1 : 2) * a.logits;
    double logitsHeld = both - std::min(both, a.workingSet);
    if (logitsHeld > 0) {
      double first = std::min(a.logits, logitsHeld);
      bufs.push_back({logitsHalf ? "logits (16-bit)" : "logits (fp32 probabilities)",
                      int64_t(std::llround(first))});
      if (logitsHeld > first)
        bufs.push_back({"logits gradient (fp32)", int64_t(std::llround(logitsHeld - first))});
    }
    // The backward pass at its peak, over what the activations and logits rows hold
    // (a pipeline stage: beside the inputs of the micro-batches in flight).
    // A fine-tuning pipeline stage's backward pass starts from its recomputed forward with
    // every activation and an op's gradients at once (measured so on the LoRA pipelines,
    // whose frozen layers keep no inputs the sweep would count).
    double start = p > 1 && lora() ? double(mem.activations) +
                                         std::max(logitsHeld, maxOpGrads(int(r)) - (both - logitsHeld))
                                   : 0;
    double beyond =
        std::max(backwardPeak(int(r), keeps) + stash + otherKept, start) - double(mem.activations) - logitsHeld;
    if (beyond > 0)
      bufs.push_back({"the backward pass at its peak (fp32: gradients made, parameters rounded to the "
                      "precision, a layer recomputed, an op's gradients)",
                      int64_t(std::llround(beyond))});
    // A zero-bubble weight pass makes its gradients whole before it adds them to the
    // stage's, beside the inputs in flight: more than the input pass holds on a small stage.
    if (splitsWeightPass(r)) {
      double grads = 0;
      for (int pr : weightPassParams(r))
        grads += 4.0 * double(trainedElems(pr));
      double inputPass = double(mem.activations) + logitsHeld + std::max(beyond, 0.0);
      if (stash + grads > inputPass)
        bufs.push_back({"the weight pass at its peak (fp32: its gradients made), beyond the input pass",
                        int64_t(std::llround(stash + grads - inputPass))});
    }
  }
  /// The trained, frozen and quantized parameters (whole), and the worst rank's frozen bytes.
  void countTrained(Estimate &e) const {
    // Held between steps: under ZeRO-3 a piece of the base (the whole is gathered per
    // micro-batch, a buffer).
    int64_t parts = d > 1 && l.zero >= 3 ? d : 1;
    e.frozenBytes = rankFrozenRegion[e.worstRank] / parts;
    e.quantizedBytes = rankQuantizedBytes[e.worstRank] / parts;
    for (size_t pr = 0; pr < model.params.size(); ++pr) {
      const sema::Parameter &param = model.params[pr];
      int64_t whole = lora() && adapted(int(pr)) ? l.adapt.rank * (param.shape[0] + param.shape[1]) : 0;
      e.trainableParams += lora() ? whole : param.numElements();
      e.frozenParams += lora() ? param.numElements() : 0;
      e.quantizedParams += quantized(int(pr)) ? param.numElements() : 0;
    }
  }
  // --- the backward pass's working set --------------------------------------
  /// What each op adds to its rank's kept activations (memory(): under full recompute
  /// a layer's input on its first op).
  std::vector<double> opKept;

  /// For each parameter, the op of rank r's backward pass (from the loss down) from which
  /// its rounded copy is held: under ZeRO-3 buckets on a cpu mesh, the first op that
  /// reads its bucket (the highest; the bucket is gathered again there and its
  /// parameters read and rounded anew); otherwise the pass's start (n).
  std::vector<size_t> regatheredAt(int r) const {
    size_t n = model.ops.size();
    std::vector<size_t> out(model.params.size(), n);
    if (d <= 1 || l.zero != 3 || l.bucketBytes <= 0 || cudaMesh())
      return out;
    Buckets buckets = bucketsOf(false, r);
    std::vector<int64_t> gatheredAt = backwardGatherOps(r, buckets);
    for (size_t pr = 0; pr < model.params.size(); ++pr)
      if (int k = buckets.paramBucket[pr]; k >= 0 && gatheredAt[size_t(k)] >= 0)
        out[pr] = size_t(gatheredAt[size_t(k)]);
    return out;
  }
  /// The most the step's own buffers hold on rank r, op by op through the
  /// backward pass from the loss down. At op i it holds the activations kept by i and
  /// every op before it; what its unit's backward recomputed (selective: the dropped
  /// values of the unit's ops up to i; full: the unit's activations up to i, from the last
  /// kept collective result on); the
  /// gradient of every parameter an op from i on reads (kept whole until the pass ends,
  /// or with gradient buckets until its lowest op is done, plan-train-abi), and a tied
  /// weight's later contribution beside its sum; the copy of every parameter rounded to bf16/fp16 (emulated
  /// precision rounds each once, as the forward pass starts) that an op up to i still
  /// reads in its backward (an embedding does not: a table only embeddings read is freed
  /// after the forward's lookups); and the op's own gradients: its
  /// output's and its input's (the cross-entropy: the logits' probabilities and their
  /// gradient; the head: the logits' gradient and its input's). With `keptWhole` (a
  /// pipeline stage under `keep: activations`, whose saved slot lives through the step)
  /// every activation the stage keeps is held at every op.
  /// The bytes of parameter pr's rounded copy in a mixed-precision step: float32, but
  /// 16-bit on the CUDA target where only GEMMs and element-wise ops read it (not a
  /// normalisation's weight or an embedding's table: plan-cuda-half-storage).
  double roundedCopyBytes(int pr) const {
    double elems = double(trainedElems(pr));
    if (!cudaHalf)
      return 4.0 * elems;
    if (keptFp32.empty()) { // the parameters a normalisation or an embedding reads, found once
      keptFp32.assign(model.params.size(), false);
      for (const auto &op : model.ops)
        if (op.kind == OpKind::LayerNorm || op.kind == OpKind::RMSNorm || op.kind == OpKind::Embedding)
          for (int q : op.params)
            keptFp32[size_t(q)] = true;
    }
    return (keptFp32[size_t(pr)] ? 4.0 : halfStored) * elems;
  }
  mutable std::vector<bool> keptFp32;

  double backwardPeak(int r, bool keptWhole = false) const {
    const auto &ops = model.ops;
    size_t n = ops.size();
    // Offload on a cuda mesh is estimated as its design holds it: each gradient bucket
    // streamed to the host as it is made, the parameters in their precision.
    bool streamed = designOffload(), rounded = l.precision != sema::Precision::FP32 && !streamed;
    // roundedAt[i]: the rounded copies whose last reader is op i; roundedFrom[i]: those
    // made at op i of the backward pass (all at its start, but under ZeRO-3 buckets, read
    // and rounded again as their bucket is gathered again: plan-train-abi).
    std::vector<double> gradsAt(n, 0), roundedAt(n, 0), roundedFrom(n, 0);
    // Each parameter's first op whose backward reads it (lowest: any op; first: not an
    // embedding), and its last op, on rank r.
    std::vector<size_t> lowest(model.params.size(), n), first(model.params.size(), n),
        last(model.params.size(), n);
    for (size_t i = 0; i < n; ++i)
      if (onRank(i, r))
        for (int pr : ops[i].params) {
          if (ops[i].kind != OpKind::Embedding && first[pr] == n)
            first[pr] = i;
          lowest[pr] = std::min(lowest[pr], i);
          last[pr] = i;
        }
    std::vector<size_t> roundedUntil = regatheredAt(r);
    // A gradient is made at its parameter's last op and summed over the ops that read it
    // (a tied weight: each later contribution made beside the sum, then added). Without
    // gradient buckets it is kept whole until the pass ends (accumulateGrads); with them
    // it is added into its bucket once its lowest op is done (accumulateInBuckets), so
    // gradsAt[i] is what op i makes and gradsDone[i] what op i's end lets go.
    bool inBuckets = gradientsStreamedToBuckets();
    std::vector<double> gradsDone(n, 0), contribution(n, 0);
    // The zero-bubble input pass makes no gradient of a weight pass's parameter.
    std::set<int> madeLater = splitsWeightPass(r) ? weightPassParams(r) : std::set<int>();
    for (size_t pr = 0; pr < model.params.size(); ++pr) {
      double bytes = 4.0 * double(trainedElems(int(pr)));
      if (last[pr] == n || bytes == 0)
        continue;
      if (!streamed && !madeLater.count(int(pr))) {
        gradsAt[last[pr]] += bytes;
        if (inBuckets)
          gradsDone[lowest[pr]] += bytes;
        for (size_t i = lowest[pr]; i < last[pr]; ++i)
          if (onRank(i, r) && std::count(ops[i].params.begin(), ops[i].params.end(), int(pr)))
            contribution[i] += bytes;
      }
      // A parameter only embeddings read on rank r (a pipeline's first stage's token and
      // position tables) is rounded for the forward's lookups and freed after them: its
      // backward pass reads no copy.
      if (rounded && first[pr] != n) {
        double copy = roundedCopyBytes(int(pr));
        roundedAt[first[pr]] += copy;
        roundedFrom[std::min(roundedUntil[pr], n - 1)] += copy;
      }
    }
    // The rounded copies alive at op i: those an op up to i still reads, made by then.
    std::vector<double> roundedAlive(n, 0);
    double made = 0;
    for (size_t i = n; i-- > 0;) {
      made += roundedFrom[i];
      roundedAlive[i] = made;
      made -= roundedAt[i];
    }
    // The op whose result the cross-entropy reads: the head, holding the logits' gradient.
    std::set<int> logitsOps;
    double logits = 0;
    for (size_t i = 0; i < n; ++i)
      if (costs[i].logits > 0 && !ops[i].operands.empty()) {
        logitsOps.insert(ops[i].operands[0] - sema::kFirstOpValue);
        logits += onRank(i, r) ? costs[i].logits : 0;
      }
    // Kept by ops before i; recomputed by i's unit up to i.
    std::vector<double> keptBelow(n + 1, 0), recomputed(n, 0);
    for (size_t i = 0; i < n; ++i) {
      keptBelow[i + 1] = keptBelow[i] + (onRank(i, r) ? opKept[i] : 0);
      recomputed[i] = recomputedBytes(i) + (i > 0 && opUnit[i - 1] == opUnit[i] && !keptCollective(i - 1)
                                                ? recomputed[i - 1]
                                                : 0);
    }
    auto value = [&](int v) { return v >= sema::kFirstOpValue ? 4 * elems(v) : 0.0; };
    const std::vector<bool> &fromCotangent = gradientsFromCotangent();
    std::vector<double> gatheredReleased;
    std::vector<double> bucketsBeyond = gradientBucketsBeyondRow(r, lowest),
                        gathered = gatheredBucketsBeyondRow(r, gatheredReleased);
    for (size_t i = 0; i < n; ++i)
      bucketsBeyond[i] += gathered[i];
    double peak = 0, grads = 0;
    for (size_t i = n; i-- > 0;) {
      if (!onRank(i, r))
        continue;
      grads += gradsAt[i];
      double own = ops[i].operands.empty() ? 0 : value(ops[i].operands[0]) + value(int(i) + sema::kFirstOpValue);
      // A pipeline stage's output, or an op the residual add that hands it on reads: its
      // gradient is the cotangent the next stage sent, in the runtime's buffer (the row
      // "pipeline send/recv").
      if (fromCotangent[i])
        own -= value(int(i) + sema::kFirstOpValue);
      // Sequence parallelism: a row-parallel op's output gradient arrives gathered (the
      // backward of its reduce-scatter), the whole sequence beside the slice.
      for (const TensorColl &tc : costs[i].fwdColls)
        if (tc.kind == Coll::ReduceScatter && !ops[i].operands.empty())
          own += 4 * tc.fullBytes / wireAct - value(int(i) + sema::kFirstOpValue);
      if (costs[i].logits > 0)
        own = (costs[i].logitsGradInPlace ? 1 : 2) * costs[i].logits;
      else if (logitsOps.count(int(i)))
        own = logits + value(ops[i].operands[0]);
      own += contribution[i]; // a tied weight's later contribution, whatever the op
      // Beside its gradients, an op under `adapt` holds one of: its NF4 weights dequantized
      // for the base's input gradient (QLoRA), or, once they are freed, the adapter's
      // part of the input gradient, whole before the two parts are summed.
      double dequantized = 0, adapterPart = 0;
      for (int pr : ops[i].params)
        if (quantized(pr))
          dequantized += 4.0 * double(localElems(pr));
      if ((ops[i].kind == OpKind::Linear || ops[i].kind == OpKind::Attend) && !ops[i].params.empty() &&
          adapted(ops[i].params[0]) && needsGrad[size_t(ops[i].operands[0])])
        adapterPart = value(ops[i].operands[0]);
      own += std::max(dequantized, adapterPart);
      // keptWhole: every kept activation, and the rounded copies still read.
      double held = (keptWhole ? keptBelow[n] : keptBelow[i + 1]) + roundedAlive[i];
      // The rounded copies of the weights only op i reads die with its input gradient,
      // before its weight gradients are made: the two are not held at once.
      peak = std::max(peak, held + recomputed[i] + grads + own -
                                std::min(roundedAt[i] + gatheredReleased[i], gradsAt[i]) + bucketsBeyond[i]);
      grads -= gradsDone[i];
    }
    return peak;
  }
  /// The largest gradients an op's backward holds on rank r: its output's and its input's.
  double maxOpGrads(int r) const {
    double out = 0;
    for (size_t i = 0; i < model.ops.size(); ++i)
      if (onRank(i, r) && !model.ops[i].operands.empty() &&
          typeOf(model.ops[i].operands[0]).kind == ValueType::Kind::Hidden &&
          typeOf(int(i) + sema::kFirstOpValue).kind == ValueType::Kind::Hidden)
        out = std::max(out, 4 * (elems(model.ops[i].operands[0]) + elems(int(i) + sema::kFirstOpValue)));
    return out;
  }
  /// For each op, whether its output gradient is its pipeline stage's cotangent: the op
  /// is handed on (a later stage reads it), or read only by a residual add that is (whose
  /// backward passes the gradient through). All false without a pipeline.
  const std::vector<bool> &gradientsFromCotangent() const {
    // Asked per rank by the memory passes: made once an estimate.
    if (!cotangentCache.empty() || model.ops.empty())
      return cotangentCache;
    size_t n = model.ops.size();
    std::vector<bool> handed(n, false), &out = cotangentCache;
    out.assign(n, false);
    if (p <= 1)
      return out;
    std::vector<std::vector<size_t>> users(n);
    for (size_t j = 0; j < n; ++j)
      for (int v : model.ops[j].operands)
        if (v >= sema::kFirstOpValue) {
          size_t i = size_t(v - sema::kFirstOpValue);
          users[i].push_back(j);
          handed[i] = handed[i] || opStage[j] > opStage[i];
        }
    for (size_t i = 0; i < n; ++i)
      out[i] = handed[i] || (!users[i].empty() && std::all_of(users[i].begin(), users[i].end(), [&](size_t j) {
                               return model.ops[j].kind == OpKind::Add && handed[j];
                             }));
    return out;
  }
  mutable std::vector<bool> cotangentCache;
  /// Whether full recompute keeps op j's result: a tensor all-reduce's or reduce-scatter's
  /// (Autodiff never computes a collective twice), from which the backward pass recomputes
  /// the ops after it, not those before.
  bool keptCollective(size_t j) const {
    return l.recompute == sema::Recompute::Full &&
           std::any_of(costs[j].fwdColls.begin(), costs[j].fwdColls.end(),
                        [](const TensorColl &c) { return c.kind == Coll::AllReduce || c.kind == Coll::ReduceScatter; });
  }
  /// Whether op j is in a layer that full recompute computes again in the backward pass.
  bool inRecomputedLayer(size_t j) const {
    return l.recompute == sema::Recompute::Full && opUnit[j] >= 0 && opUnit[j] < model.layers;
  }
  /// What op j's unit recomputes of it in the backward pass.
  double recomputedBytes(size_t j) const {
    const OpCost &c = costs[j];
    if (l.recompute == sema::Recompute::Selective)
      return c.saved - c.savedSelective;
    if (inRecomputedLayer(j))
      return c.saved;
    return 0;
  }

  /// Whether rank r's input passes hold its forward pass's values without what only the
  /// weight pass reads (weightPassBytes): a zero-bubble stage but the first whose backward
  /// pass computes its forward (the last stage, or every stage with `keep: inputs`).
  bool splitsWeightPass(int64_t r) const {
    return p > 1 && r > 0 && l.schedule == sema::PipelineSchedule::ZeroBubble && (r + 1 == p || !l.keepActivations);
  }
  /// Whether op i is one whose weight gradient the zero-bubble weight pass makes: a
  /// linear layer, an attention, but not the head (whose result the cross-entropy reads:
  /// its weight gradient stays in the input pass, training::splitWeightGradients).
  bool inWeightPass(size_t i) const {
    const sema::GraphOp &op = model.ops[i];
    if (op.kind != OpKind::Linear && op.kind != OpKind::Attend && op.kind != OpKind::Attention)
      return false;
    if (lossInputs.empty()) { // the ops whose result a cross-entropy reads, found once
      lossInputs.assign(model.ops.size() + 1, false);
      for (const sema::GraphOp &user : model.ops)
        if (user.kind == OpKind::CrossEntropy && !user.operands.empty() && user.operands[0] >= sema::kFirstOpValue)
          lossInputs[size_t(user.operands[0] - sema::kFirstOpValue)] = true;
    }
    return !lossInputs[i];
  }
  mutable std::vector<bool> lossInputs;
  /// The parameters whose gradients rank r's zero-bubble weight pass makes.
  std::set<int> weightPassParams(int64_t r) const {
    std::set<int> out;
    for (size_t i = 0; i < model.ops.size(); ++i)
      if (opRank[i] == r && inWeightPass(i))
        out.insert(model.ops[i].params.begin(), model.ops[i].params.end());
    // A parameter the head reads too (a tied embedding) gets its head gradient in B.
    for (size_t i = 0; i < model.ops.size(); ++i)
      if (opRank[i] == r && !inWeightPass(i))
        for (int pr : model.ops[i].params)
          out.erase(pr);
    return out;
  }
  /// The zero-bubble schedule: how many weight passes wait at once on rank r, in the
  /// order plan-schedule runs (schedule::zeroBubbleWeightSlots); 0 otherwise and on the
  /// first stage, whose backward pass is whole.
  int64_t weightPassSlots(int64_t r) const {
    if (p <= 1 || r == 0 || l.schedule != sema::PipelineSchedule::ZeroBubble)
      return 0;
    return schedule::zeroBubbleWeightSlots(r, p, mb);
  }
  /// What one micro-batch's weight pass reads from its input pass on rank r
  /// (training::splitWeightGradients): each weight's GEMM input and its output's
  /// gradient, fp32, each value once (an attention's are inside it), but the head's.
  double weightPassBytes(int r) const {
    std::set<int> values;
    double bytes = 0;
    for (size_t i = 0; i < model.ops.size(); ++i) {
      const sema::GraphOp &op = model.ops[i];
      if (opRank[i] != r || op.operands.empty())
        continue;
      if (!inWeightPass(i))
        continue;
      if (op.kind == OpKind::Linear || op.kind == OpKind::Attend)
        values.insert(op.operands[0]);
      values.insert(int(i) + sema::kFirstOpValue);
      bytes += 4 * costs[i].weightInner;
    }
    for (int v : values)
      bytes += 4 * elems(v);
    return bytes;
  }

  /// Whether planc_grad adds each gradient into its bucket as soon as it is final
  /// (plan-train-abi's accumulateInBuckets): data parallel with `bucket`, no pipeline.
  bool gradientsStreamedToBuckets() const {
    return p == 1 && d > 1 && l.bucketBytes > 0 && training::gradientsInBuckets(l.zero, l.sequence && t > 1);
  }

  // --- offload (ZeRO-Offload, ZeRO-Infinity) -------------------------------
  bool cudaMesh() const { return mesh.kind == sema::DeviceKind::CUDA; }
  /// Offload as this version's executables build it: the optimizer's moments in files,
  /// with the ZeRO-3 parameter shard beside them on a cpu mesh; on a cuda mesh the
  /// moments alone, streamed through the device's update.
  bool builtOffload() const {
    return l.optimizerOffload.any() &&
           (!cudaMesh() || (l.optimizerOffload.target == sema::OffloadTarget::NVMe && !l.paramsOffload.any()));
  }
  /// Offload on a cuda mesh that the executables do not build (`optimizer = cpu`,
  /// `params`): estimated as ZeRO-Offload and ZeRO-Infinity hold state.
  bool designOffload() const {
    return cudaMesh() && (l.optimizerOffload.any() || l.paramsOffload.any()) && !builtOffload();
  }
  /// Bytes of one generation of a rank's optimizer files (planc's executables):
  /// exp_avg and exp_avg_sq of each optimizer group's span, in chunks of the plan's
  /// buffer (of `chunk` floats if given: 1 for the moments' own bytes), the last padded.
  int64_t momentFileBytes(int64_t rank, int64_t chunk = 0) const {
    chunk = chunk > 0 ? chunk : std::max<int64_t>(1, l.optimizerOffload.bufferBytes / 4);
    int64_t floats = 0;
    training::FlatLayout flat = flatLayoutOf(rank);
    for (int g = 0; g < 2; ++g) {
      int64_t span = d > 1 && l.zero >= 1 ? flat.shardFloats(g) : flat.groupFloats(g);
      floats += (span + chunk - 1) / chunk * chunk;
    }
    return 8 * floats;
  }
  /// Bytes a step's offloaded update copies to and from the device on a cuda mesh
  /// (runtime/lib/offload.cpp): every record in and out; for an optimizer group's
  /// partial last chunk of n floats, its gradient and parameters out and in again (to the
  /// padded chunk the device zeroes), and the parameters back; the step state's 38 floats.
  int64_t deviceCopyBytes(int64_t rank) const {
    int64_t chunk = std::max<int64_t>(1, l.optimizerOffload.bufferBytes / 4), floats = 38;
    training::FlatLayout flat = flatLayoutOf(rank);
    for (int g = 0; g < 2; ++g) {
      int64_t span = d > 1 && l.zero >= 1 ? flat.shardFloats(g) : flat.groupFloats(g), n = span % chunk;
      floats += 4 * ((span + chunk - 1) / chunk) * chunk + 6 * n;
    }
    return 4 * floats;
  }
  /// The device side of `offload` for one rank (n trained elements, `shard` of them
  /// its ZeRO piece), with where the rest lives and what moves per step; false when
  /// nothing is offloaded. The executables (optimizer = nvme; builtOffload) hold
  /// everything but Adam's moments, and a staging buffer: on a cuda mesh a record on the
  /// device, the slots the files stream through in the host's page-locked memory, each
  /// record copied in and out over PCIe. Otherwise, on a cuda mesh, the state is as
  /// ZeRO-Offload and ZeRO-Infinity hold it: the optimizer (fp32 master and moments)
  /// and the gradients, streamed to the host as the backward pass makes them, in
  /// host memory or on NVMe; with `params`, the parameter shards too, a layer's
  /// gathered at a time and one ahead.
  bool offloadState(Estimate::OffloadState &off, int64_t rank, int64_t n, int64_t shard, int64_t trainedParams,
                    Memory &mem, std::vector<BufferRow> &bufs) const {
    const sema::Offload &opt = l.optimizerOffload, &par = l.paramsOffload;
    if (!opt.any() && !par.any())
      return false;
    bool sharded = d > 1 && l.zero >= 1;
    int64_t span = sharded ? shard : n;
    off.devicesPerNode = mesh.perNode;
    off.hostMemory = mesh.hostMemoryBytes;
    if (builtOffload()) { // the executables: the moments in files, both generations
      mem.optimizer = 0;
      // With `params`, the ZeRO-3 shard in files too: each record's parameter chunk
      // beside its moments (half their bytes), streamed by the update, and this rank's
      // part of every all-gather read from them (the forward and backward passes' with
      // buckets, once per micro-batch without; a pipeline stage gathers once a step).
      bool params = par.any();
      int64_t paramFile = params ? momentFileBytes(rank) / 2 : 0;
      if (params)
        mem.params -= trainedParams;
      heldBeyondModelStates(rank, n, shard, params ? 0 : trainedParams, mem, bufs);
      // The slots the ring reads into and writes from (two records and the pads for a
      // partial chunk) and, on a cuda mesh, where the update runs: one record, its pads,
      // the step state and its next values (runtime/lib/offload.cpp).
      int64_t slots = (params ? 7 : 6) * opt.bufferBytes + 4096;
      if (cudaMesh()) {
        bufs.push_back({"offloaded optimizer's record on the device (its update)", 4 * opt.bufferBytes + 64, true});
        // Page-locked; and a checkpoint reads the moments back into host memory.
        off.hostBytes = slots + (l.checkpoints ? momentFileBytes(rank, 1) : 0);
        off.pcieBytesPerStep = deviceCopyBytes(rank);
      } else {
        bufs.push_back({params ? "offloaded optimizer's and parameters' staging buffer (io_uring)"
                               : "offloaded optimizer's staging buffer (io_uring)",
                        slots, true});
      }
      off.nvmeBytes = 2 * momentFileBytes(rank) + 2 * paramFile;
      int64_t gathers = !params ? 0 : p > 1 ? 1 : (l.bucketBytes > 0 ? 2 : 1) * mb;
      off.nvmeBytesPerStep = 2 * momentFileBytes(rank) + 2 * paramFile + gathers * momentFileBytes(rank, 1) / 2;
      return true;
    }
    int64_t optState = int64_t(double(span) * optBytes), gradState = int64_t(double(span) * gradBytes);
    if (opt.any()) {
      mem.optimizer = 0;
      // Gradients leave bucket by bucket: two buckets on the device (filling, in flight).
      int64_t bucket = l.bucketBytes > 0 ? l.bucketBytes : int64_t(25) << 20;
      mem.grads = std::min<int64_t>(mem.grads, 2 * bucket);
      off.hostBytes += gradState + (opt.target == sema::OffloadTarget::CPU ? optState : 0);
      off.nvmeBytes += opt.target == sema::OffloadTarget::NVMe ? optState : 0;
      off.pcieBytesPerStep += gradState + int64_t(double(span) * paramBytes); // gradients down, parameters up
      off.nvmeBytesPerStep += opt.target == sema::OffloadTarget::NVMe ? 2 * optState : 0;
    }
    if (par.any()) {
      int64_t shardBytes = int64_t(double(shard) * paramBytes);
      // Two layers gathered: the one computing and the one prefetched.
      mem.params = int64_t(2 * double(largestUnitElems) * paramBytes) + (mem.params - shardBytes);
      (par.target == sema::OffloadTarget::CPU ? off.hostBytes : off.nvmeBytes) += shardBytes;
      // Each micro-batch's forward and backward passes fetch the shard again.
      int64_t fetched = 2 * mb * shardBytes;
      off.pcieBytesPerStep += fetched;
      off.nvmeBytesPerStep += par.target == sema::OffloadTarget::NVMe ? fetched : 0;
    }
    return true;
  }
  /// A checkpoint of an offloaded optimizer (a cpu mesh's executables) reads the moments
  /// back into memory between steps, where the step's activations and buffers were: the
  /// row of what they exceed them by. (On a cuda mesh they come back to host memory:
  /// offloadState's host bytes.)
  void checkpointRow(int r, const Memory &mem, std::vector<BufferRow> &bufs) const {
    if (!l.checkpoints || !builtOffload() || cudaMesh())
      return;
    // (With `params`, the parameter shard comes back too: half the moments' bytes.)
    double step = double(mem.activations), moments = double(momentFileBytes(r, 1)) * (l.paramsOffload.any() ? 1.5 : 1);
    for (const BufferRow &b : bufs)
      step += b.held ? 0 : double(b.bytes);
    if (moments > step)
      bufs.push_back({"the moments read back for a checkpoint (between steps, beyond the step's buffers)",
                      int64_t(moments - step), true});
  }
  /// Seconds per step of the offloaded state's transfers: PCIe per device and the node's
  /// NVMe shared by its devices, overlapping each other but not the step.
  double offloadSeconds(Estimate &e) const {
    double pcie = mesh.pcieBytesPerSecond.value_or(cal.pcieBandwidth);
    double nvme = mesh.nvmeBytesPerSecond.value_or(cal.nvmeBandwidth) / double(std::max<int64_t>(1, mesh.perNode));
    e.offload.seconds = std::max(double(e.offload.pcieBytesPerStep) / pcie, double(e.offload.nvmeBytesPerStep) / nvme);
    return e.offload.seconds;
  }

  /// What this version's executables hold beyond the model states of the ZeRO paper
  /// (params, grads and optimizer above, with mixed precision's fp32 master copy in the
  /// optimizer's 12 bytes): the runtime keeps a rank's n parameters and their gradients
  /// in fp32, whole — under ZeRO-3 the parameters gathered for each micro-batch, under
  /// ZeRO-2 and 3 the gradients of each micro-batch before their reduce-scatter — and,
  /// under ZeRO, the update's parameter and gradient shards in fp32 beside Adam's two
  /// moments. The rows add up to that state minus the model states.
  /// `trainedParams`: the parameters' bytes less the frozen base's.
  /// What the CPU target holds by parts (LOWERING.md) on rank `rank`, in bytes; true if
  /// the gathered parameters are. Counted where the backward pass starts, its peak beside
  /// every kept activation. ZeRO-3 with buckets: the gathered parameters' bucket in use
  /// and the one gathered ahead: the bucket of the last op that reads a parameter (the
  /// head's) and the next one the backward pass reads. ZeRO-2 and 3 with gradient
  /// buckets: the gradient's first bucket, which the backward pass writes, and with
  /// several micro-batches the sum its reduce-scatter receives to add (this rank's part,
  /// 1/d of it); the runtime holds three buckets at most later, as the activations go.
  bool byParts(int64_t rank, int64_t &gathered, int64_t &gradients) const {
    if (d <= 1 || l.zero < 2 || l.bucketBytes <= 0 || cudaMesh())
      return false;
    if (training::gradientsInBuckets(l.zero, l.sequence && t > 1))
      gradients = firstGradientBucket(bucketsOf(true, rank).floats);
    if (l.zero < 3)
      return false;
    gathered = firstGatheredBuckets(rank);
    return true;
  }
  /// The buffer row of ZeRO-3's parameter buckets: where the backward pass starts, the
  /// head's bucket and the next; under full recompute the most a layer gathers at once.
  int64_t firstGatheredBuckets(int64_t rank) const {
    Buckets buckets = bucketsOf(false, rank);
    std::vector<int> first;
    for (size_t i = model.ops.size(); i-- > 0 && first.size() < 2;)
      for (int pr : model.ops[i].params)
        if (int k = buckets.paramBucket[size_t(pr)];
            k >= 0 && first.size() < 2 && std::find(first.begin(), first.end(), k) == first.end())
          first.push_back(k);
    int64_t gathered = 0;
    for (int k : first)
      gathered += 4 * buckets.floats[size_t(k)];
    if (l.recompute == sema::Recompute::Full)
      gathered = std::max(gathered, gatheredForRecompute(rank));
    return gathered;
  }
  /// Whether op's backward pass reads parameter pr: a matrix (not an embedding's table,
  /// whose gradient is a scatter of the output's) or a normalisation's scale, not a bias.
  bool readInBackward(const sema::GraphOp &op, int pr) const {
    if (op.kind == OpKind::Embedding)
      return false;
    if (model.params[size_t(pr)].shape.size() >= 2)
      return true;
    return (op.kind == OpKind::LayerNorm || op.kind == OpKind::RMSNorm || op.kind == OpKind::BatchNorm) &&
           !op.params.empty() && op.params[0] == pr;
  }
  /// For each op of rank r's backward pass, what ZeRO-3's parameter buckets (a cpu
  /// mesh's, held by parts) hold while it runs, less their buffer row
  /// (firstGatheredBuckets); zeros where nothing is held by parts. The backward pass gathers a bucket again
  /// before its first read there (the highest op reading it; under full recompute its
  /// layer's first, which computes the layer's forward again), starts the next one in
  /// that order ahead, and releases it after its last read (an embedding's backward reads
  /// no table: a tied table is the head's); the head's bucket is still held from the
  /// forward pass.
  /// `released[i]`: the buckets whose last read op i is, released after its input
  /// gradient, before its weight gradients are made. (The op's reads and weight
  /// gradients interleave in the executable, a linear at a time: counting every such
  /// bucket released before all of the op's weight gradients measures closer, 0.983
  /// against 0.968 on e2e-layouts' zero3_buckets, than only those released after the
  /// op's most held.)
  std::vector<double> gatheredBucketsBeyondRow(int r, std::vector<double> &released) const {
    size_t n = model.ops.size();
    std::vector<double> out(n, 0);
    released.assign(n, 0);
    if (d <= 1 || l.zero != 3 || l.bucketBytes <= 0 || cudaMesh() || p > 1)
      return out;
    Buckets buckets = bucketsOf(false, r);
    size_t K = buckets.floats.size();
    std::vector<int64_t> unitTop(model.layers + 1, -1);
    for (size_t i = 0; i < n; ++i)
      if (opRank[i] == r && opUnit[i] >= 0 && opUnit[i] < model.layers)
        unitTop[size_t(opUnit[i])] = int64_t(i);
    std::vector<int64_t> highest(K, -1), lowest(K, int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      if (opRank[i] != r)
        continue;
      bool full = inRecomputedLayer(i);
      for (int pr : model.ops[i].params)
        if (int k = buckets.paramBucket[size_t(pr)]; k >= 0 && (full || readInBackward(model.ops[i], pr))) {
          highest[size_t(k)] = std::max(highest[size_t(k)], full ? unitTop[size_t(opUnit[i])] : int64_t(i));
          lowest[size_t(k)] = std::min(lowest[size_t(k)], int64_t(i));
        }
    }
    std::vector<size_t> order;
    for (size_t k = 0; k < K; ++k)
      if (highest[k] >= 0) {
        order.push_back(k);
        released[size_t(lowest[k])] += 4.0 * double(buckets.floats[k]);
      }
    // Read first by one op, the later forward bucket first (an op's backward reads its
    // parameters in reverse); under full recompute a layer's forward, computed again,
    // reads them in the forward's order.
    bool fullRecompute = l.recompute == sema::Recompute::Full;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return highest[a] != highest[b] ? highest[a] > highest[b] : fullRecompute ? a < b : a > b;
    });
    // A bucket the backward pass does not read (an embedding's table, biases) comes last,
    // gathered ahead after the last read one and held to the pass's end.
    for (size_t k = 0; k < K; ++k)
      if (highest[k] < 0)
        order.push_back(k);
    double row = double(firstGatheredBuckets(r));
    for (size_t i = 0; i < n; ++i) {
      // The buckets op i's backward reads, one after another, the later forward bucket
      // first: one whose last read that is goes before the next is gathered (under full
      // recompute a layer's are gathered at once, as its forward pass is computed again).
      std::vector<size_t> reads;
      bool full = inRecomputedLayer(i);
      if (opRank[i] == r && !full)
        for (int pr : model.ops[i].params)
          if (int k = buckets.paramBucket[size_t(pr)]; k >= 0 && readInBackward(model.ops[i], pr))
            reads.push_back(size_t(k));
      std::sort(reads.begin(), reads.end(), std::greater<>());
      reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
      auto position = [&](size_t k) { return size_t(std::find(reads.begin(), reads.end(), k) - reads.begin()); };
      double most = 0;
      for (size_t j = 0; j < std::max<size_t>(1, reads.size()); ++j) {
        double held = 0;
        size_t started = 0;
        for (; started < order.size(); ++started) {
          size_t k = order[started];
          if (highest[k] < int64_t(i) || (highest[k] == int64_t(i) && !full && position(k) > j))
            break;
          bool released = lowest[k] > int64_t(i) || (lowest[k] == int64_t(i) && !full && position(k) < j);
          held += released ? 0 : 4.0 * double(buckets.floats[k]);
        }
        if (started < order.size()) // the next one, gathered ahead
          held += 4.0 * double(buckets.floats[order[started]]);
        most = std::max(most, held);
      }
      out[i] = most - row;
    }
    return out;
  }
  /// ZeRO-2/3 gradient buckets (a cpu mesh's, held by parts): the bytes the runtime
  /// holds once `ready` buckets are ready. planrt_grad_ready(k), after the add of bucket
  /// k's last gradient, completes the buckets up to k - 2, starts k's reduce-scatter (with
  /// several micro-batches into a sum of this rank's part, 1/d of it, to add) and commits
  /// k + 1, which the pass writes next: buckets k - 1 to k + 1, sums k - 1 and k.
  double gradientBucketsHeld(const std::vector<int64_t> &floats, int64_t ready) const {
    int64_t K = int64_t(floats.size()), k = ready - 1;
    double out = 0;
    for (int64_t j = std::max<int64_t>(0, k - 1); j <= std::min(K - 1, k + 1); ++j)
      out += 4.0 * double(floats[size_t(j)]) * (1 + (mb > 1 && j <= k ? 1.0 / double(d) : 0.0));
    return out;
  }
  /// The buffer row of the gradient buckets held by parts: the first bucket, which the
  /// backward pass writes first, and with several micro-batches its sum to add.
  int64_t firstGradientBucket(const std::vector<int64_t> &floats) const {
    return floats.empty() ? 0 : 4 * floats.front() + (mb > 1 ? 4 * floats.front() / d : 0);
  }
  /// For each op of rank r's backward pass, what the gradient buckets held by parts
  /// (gradientBucketsHeld) hold while it runs, less what the buffer row counts (the first
  /// bucket, and its sum: byParts); zeros where nothing is held by parts. A bucket is ready after its params'
  /// lowest ops (`lowest`, where their gradients are final and added) and the bucket's
  /// before it.
  std::vector<double> gradientBucketsBeyondRow(int r, const std::vector<size_t> &lowest) const {
    size_t n = model.ops.size();
    std::vector<double> out(n, 0);
    if (d <= 1 || l.zero < 2 || !gradientsStreamedToBuckets() || cudaMesh())
      return out;
    Buckets buckets = bucketsOf(true, r);
    size_t K = buckets.floats.size();
    std::vector<size_t> readyAfter(K, n); // the op whose end makes bucket k ready
    for (size_t pr = 0; pr < model.params.size(); ++pr)
      if (int k = buckets.paramBucket[pr]; k >= 0 && lowest[pr] < n)
        readyAfter[size_t(k)] = std::min(readyAfter[size_t(k)], lowest[pr]);
    for (size_t k = 1; k < K; ++k)
      readyAfter[k] = std::min(readyAfter[k], readyAfter[k - 1]);
    double row = double(firstGradientBucket(buckets.floats));
    for (size_t i = 0; i < n; ++i) {
      int64_t ready = 0;
      while (size_t(ready) < K && readyAfter[size_t(ready)] > i && readyAfter[size_t(ready)] < n)
        ++ready;
      out[i] = gradientBucketsHeld(buckets.floats, ready) - row;
    }
    return out;
  }
  /// Full recompute under ZeRO-3 buckets: a layer's backward pass starts by computing its
  /// forward pass again, which reads every parameter of the layer, so all the layer's
  /// buckets are gathered at once, and the one after them (in the backward pass's order:
  /// by the highest op that reads each) is started ahead. The most over the layers.
  int64_t gatheredForRecompute(int64_t rank) const {
    auto buckets = bucketsOf(false, rank);
    size_t K = buckets.floats.size();
    std::vector<int64_t> highest = backwardGatherOps(rank, buckets);
    std::map<int, std::set<int>> ofLayer;
    for (size_t i = 0; i < model.ops.size(); ++i)
      if (opRank[i] == rank && opUnit[i] >= 0 && opUnit[i] < model.layers)
        for (int pr : model.ops[i].params)
          if (int k = buckets.paramBucket[size_t(pr)]; k >= 0)
            ofLayer[opUnit[i]].insert(k);
    std::vector<int> order; // the backward pass's gathers
    for (size_t k = 0; k < K; ++k)
      if (highest[k] >= 0)
        order.push_back(int(k));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return highest[size_t(a)] > highest[size_t(b)]; });
    int64_t most = 0;
    for (auto &[u, set] : ofLayer) {
      int64_t floats = 0;
      size_t last = 0;
      for (size_t j = 0; j < order.size(); ++j)
        if (set.count(order[j])) {
          floats += buckets.floats[size_t(order[j])];
          last = j;
        }
      if (last + 1 < order.size())
        floats += buckets.floats[size_t(order[last + 1])];
      most = std::max(most, 4 * floats);
    }
    return most;
  }
  /// How long ZeRO-2/3 hold what they gather or reduce whole (the buffer rows).
  std::string wholeFor() const { return p > 1 ? "for the stage's micro-batches" : "for each micro-batch"; }
  void heldBeyondModelStates(int64_t rank, int64_t n, int64_t shard, int64_t trainedParams, const Memory &mem,
                             std::vector<BufferRow> &bufs) const {
    bool sharded = d > 1 && l.zero >= 1;
    // Offloaded moments (a cpu mesh's nvme) are not held: the update streams them; nor
    // is an offloaded parameter shard.
    int64_t moments = l.optimizerOffload.any() ? 0 : 8 * (sharded ? shard : n);
    int64_t paramShard = sharded && !l.paramsOffload.any() ? 4 * shard : 0;
    int64_t gathered = 4 * n, gradients = 4 * n;
    bool paramsByParts = byParts(rank, gathered, gradients);
    int64_t held = gathered + gradients + (sharded ? paramShard + 4 * shard : 0) + moments;
    int64_t extra = held - (trainedParams + mem.grads + mem.optimizer);
    auto add = [&](const std::string &name, int64_t bytes, bool held = false) {
      bytes = std::min(bytes, extra);
      if (bytes > 0) {
        bufs.push_back({name, bytes, held});
        extra -= bytes;
      }
    };
    if (paramsByParts)
      add("ZeRO-3 parameters gathered by bucket, the one in use and the next (fp32)", gathered);
    else if (d > 1 && l.zero == 3)
      add("ZeRO-3 parameters gathered whole " + wholeFor() + " (fp32)", 4 * n);
    if (gradients < 4 * n)
      add("ZeRO-2/3 gradients by bucket: the first the backward pass writes, and its sum (fp32)", gradients);
    else if (d > 1 && l.zero >= 2)
      add("ZeRO-2/3 gradients whole " + wholeFor() + " (fp32)", 4 * n);
    add(l.precision == sema::Precision::FP32 ? "ZeRO shards of the update (parameters and gradients, fp32)"
                                             : "parameters and gradients kept in fp32, and the update's shards",
        extra, /*held=*/true);
  }
  std::vector<int64_t> rankParamElems, rankReplicatedElems; ///< trained elements
  std::vector<int64_t> rankFrozenBytes, rankQuantizedBytes;  ///< under `adapt`
  std::vector<int64_t> rankFrozenRegion; ///< the frozen base's floats in params, as bytes (ZeRO-3: padded)
  std::vector<std::set<int>> paramRanks; ///< the pipeline ranks that hold each parameter
  int64_t tiedElems = 0, largestUnitElems = 0;
  int64_t replicatedElems(int64_t rank) const { return rankReplicatedElems[rank]; }

  // --- time and communication ----------------------------------------------
  struct RankTime {
    double fwd = 0, bwd = 0;        // per micro-batch, compute only
    double compute = 0, memory = 0; // matmul-bound vs bandwidth-bound share of fwd + bwd
    double tpFwd = 0, tpBwd = 0;    // tensor collectives per micro-batch
    double ppSend = 0;              // pipeline sends per micro-batch
    double wgrad = 0;               // of bwd: the weight gradients' GEMMs (zero-bubble's W pass)
    struct Row {
      double bytes = 0, seconds = 0;
      int64_t calls = 0;
    };
    std::map<std::pair<std::string, std::string>, Row> tpRows; // by (collective, purpose)
  };

  /// An op's seconds bound by compute and by memory bandwidth.
  std::pair<double, double> bounds(double flops, double bytes, bool matmul) const {
    return {flops / (peak * (matmul ? cal.matmulEfficiency : 1.0)), bytes / (hbm * cal.memoryEfficiency)};
  }
  /// The seconds of roofline(), counted nowhere.
  double rooflineSeconds(double flops, double bytes, bool matmul) const {
    auto [ct, mt] = bounds(flops, bytes, matmul);
    return std::max(ct, mt);
  }
  double roofline(double flops, double bytes, bool matmul, RankTime &rt) const {
    auto [ct, mt] = bounds(flops, bytes, matmul);
    (ct >= mt ? rt.compute : rt.memory) += std::max(ct, mt);
    return std::max(ct, mt);
  }

  /// Under a pipeline, what a stage's backward pass does not compute again: its output
  /// (the residual add) and a projection only that add reads, whose values no gradient
  /// needs (so the projection's collectives are not repeated either).
  std::set<size_t> notRepeatedOps() const {
    const auto &ops = model.ops;
    std::set<size_t> notRepeated;
    if (p > 1)
      for (int64_t k = 0; k + 1 < S; ++k) {
        size_t last = ops.size();
        for (size_t i = 0; i < ops.size(); ++i)
          if (opStage[i] == k)
            last = i;
        if (last == ops.size() || ops[last].kind != OpKind::Add)
          continue;
        notRepeated.insert(last);
        for (int v : ops[last].operands) {
          int j = v - sema::kFirstOpValue;
          if (j < 0 || ops[size_t(j)].kind != OpKind::Linear)
            continue;
          int readers = 0;
          for (const auto &o : ops)
            readers += int(std::count(o.operands.begin(), o.operands.end(), v));
          if (readers == 1)
            notRepeated.insert(size_t(j));
        }
      }
    return notRepeated;
  }

  /// Each op's compute and tensor-parallel collectives per micro-batch, on the pipeline
  /// rank that runs it (rt), with the model FLOPs (forward and backward) and the
  /// hardware's.
  void opTimes(std::vector<RankTime> &rt, double &modelFlops, double &hardware) {
    const auto &ops = model.ops;
    std::set<size_t> notRepeated = notRepeatedOps();
    bool full = l.recompute == sema::Recompute::Full;
    bool selective = l.recompute == sema::Recompute::Selective;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpCost &c = costs[i];
      RankTime &r = rt[opRank[i]];
      modelFlops += c.modelFwdFlops + c.modelBwdFlops;
      double f = roofline(c.fwdFlops, c.fwdBytes, c.matmul, r);
      double bw = roofline(c.bwdFlops, c.bwdBytes, c.matmul, r);
      double hw = c.fwdFlops + c.bwdFlops;
      bool layered = opUnit[i] >= 0 && opUnit[i] < model.layers;
      if (full && layered) {
        bw += roofline(c.fwdFlops, c.fwdBytes, c.matmul, r);
        hw += c.fwdFlops;
      } else if (selective && c.selectiveFlops > 0) {
        bw += roofline(c.selectiveFlops, c.selectiveBytes, ops[i].kind == OpKind::Attention, r);
        hw += c.selectiveFlops;
      }
      r.fwd += f;
      r.bwd += bw;
      // A linear op's (and the head's) backward is its input's gradient, a GEMM of its
      // forward's size, and its weight's: the rest (a frozen base's adapters under LoRA).
      if (ops[i].kind == OpKind::Linear || ops[i].kind == OpKind::Attend)
        r.wgrad += rooflineSeconds(std::max(0.0, c.bwdFlops - c.fwdFlops), c.bwdBytes / 2, c.matmul);
      hardware += hw;
      auto addColl = [&](const TensorColl &tc, bool fwd, int times) {
        double sec = collSeconds(tc.kind, tc.fullBytes, t, "tensor") * times;
        (fwd ? r.tpFwd : r.tpBwd) += sec;
        auto &row = r.tpRows[{collName(tc.kind), tc.purpose}];
        row.bytes += ringBytes(tc.kind, tc.fullBytes, t) * times;
        row.seconds += sec;
        row.calls += times;
      };
      for (const TensorColl &tc : c.fwdColls)
        addColl(tc, true, 1);
      for (const TensorColl &tc : c.bwdColls)
        addColl(tc, false, 1);
      // A pipeline stage before the last computes its forward again in its backward pass
      // (from the input it kept): the forward's compute and collectives, once more; not
      // under `keep: activations`.
      if (p > 1 && opStage[i] < S - 1 && !notRepeated.count(i) && !l.keepActivations) {
        r.bwd += roofline(c.fwdFlops, c.fwdBytes, c.matmul, r);
        hardware += c.fwdFlops;
        for (const TensorColl &tc : c.fwdColls)
          addColl(tc, false, 1);
      }
      // A recomputed forward does not communicate again (its all-reduce results are kept).
    }
  }

  // Buckets formed by the executable's rule (training::gradientBuckets): DDP's gradients
  // with the parameters in reverse model order, ZeRO-3's parameter gathers in model
  // order; the executable takes the order in which its backward pass finishes the
  // gradients or its forward pass first reads the parameters, which these approximate. How many collectives (a bucket's
  // parameters of one optimizer group are one range), and the share of the buffer no compute hides: DDP's last bucket,
  // ZeRO-3's first.
  struct Buckets {
    int64_t calls = 1;
    double exposedShare = 1;
    std::vector<int64_t> floats; ///< each bucket's
    std::vector<int> paramBucket; ///< each parameter's bucket (its first piece's; -1: none here)
  };
  /// Each bucket's first read in rank r's backward pass, where plan-train-abi gathers it
  /// again: the highest op on the rank that reads one of its parameters (-1: none there).
  std::vector<int64_t> backwardGatherOps(int64_t rank, const Buckets &buckets) const {
    std::vector<int64_t> highest(buckets.floats.size(), -1);
    for (size_t i = 0; i < model.ops.size(); ++i)
      if (opRank[i] == rank)
        for (int pr : model.ops[i].params)
          if (int k = buckets.paramBucket[size_t(pr)]; k >= 0)
            highest[size_t(k)] = std::max(highest[size_t(k)], int64_t(i));
    return highest;
  }
  Buckets bucketsOf(bool reverse, int64_t commRank) const {
    std::vector<int64_t> owned;
    std::vector<bool> decayed;
    std::vector<int> pieceParam;
    for (size_t k = 0; k < model.params.size(); ++k) {
      size_t pr = reverse ? model.params.size() - 1 - k : k;
      if (paramRanks[pr].count(int(commRank)))
        for (const Piece &piece : trainedPieces(int(pr))) {
          owned.push_back((piece.elems + 15) / 16 * 16);
          decayed.push_back(lora() || model.params[pr].shape.size() >= 2);
          pieceParam.push_back(int(pr));
        }
    }
    std::vector<std::vector<size_t>> buckets = training::gradientBuckets(owned, l.bucketBytes);
    Buckets out;
    out.calls = 0;
    out.paramBucket.assign(model.params.size(), -1);
    for (size_t k = 0; k < buckets.size(); ++k)
      for (size_t i : buckets[k])
        if (int &at = out.paramBucket[size_t(pieceParam[i])]; at < 0)
          at = int(k);
    double total = 0, first = 0, last = 0;
    for (const std::vector<size_t> &bk : buckets) {
      bool group[2] = {false, false};
      last = 0;
      for (size_t i : bk) {
        group[decayed[i] ? 0 : 1] = true;
        last += double(owned[i]);
      }
      if (total == 0)
        first = last;
      total += last;
      out.calls += group[0] + group[1];
      out.floats.push_back(int64_t(last));
    }
    out.calls = std::max<int64_t>(1, out.calls);
    out.exposedShare = total > 0 ? (reverse ? last : first) / total : 1;
    return out;
  }

  /// The executable's layout of a pipeline rank's trained parameters (after tensor
  /// splitting; under a pipeline, those of its stage).
  training::FlatLayout flatLayoutOf(int64_t rank) const {
    std::vector<int64_t> counts;
    std::vector<bool> decay;
    for (size_t pr = 0; pr < model.params.size(); ++pr)
      if (paramRanks[pr].count(int(rank)))
        for (const Piece &piece : trainedPieces(int(pr))) {
          counts.push_back(piece.elems);
          decay.push_back(lora() || model.params[pr].shape.size() >= 2); // adapters are matrices
        }
    return training::flatLayout(counts, decay, d);
  }

  /// The data-parallel collectives of rank commRank's step (ZeRO paper volumes, as
  /// training::dataCollectives schedules them), each a row of e.comm; returns the seconds
  /// they add to the step (what no compute hides). cr: the rank's per-micro-batch times.
  double dataParallelComm(Estimate &e, const RankTime &cr, int64_t commRank, bool cpu, double wire) {
    // What the step communicates over the data axes (training::dataCollectives, the
    // schedule plan-schedule builds). Without tensor or pipeline splits the buffers
    // are the executable's flat layout, padded so that every rank owns an aligned,
    // equal piece of each optimizer group.
    training::FlatLayout flat = flatLayoutOf(commRank);
    // Emulated precision on the CPU keeps f32 buffers, and communicates them.
    double wireParams = cpu ? 4.0 : paramBytes;
    struct DP {
      Coll kind;
      double full;
      int64_t times, calls;
      std::string purpose;
      bool params;
    };
    std::vector<DP> dp;
    // ZeRO-3 with buckets frees each bucket of gathered parameters after the forward pass
    // and gathers it again for the backward pass (plan-train-abi).
    bool regather = l.bucketBytes > 0;
    for (const training::DataCollective &c : training::dataCollectives(l.zero, d, mb, flat, !regather, p > 1)) {
      bool params = c.kind == training::Collective::AllGather;
      dp.push_back({c.kind, double(c.floats) * (params ? wireParams : wire), c.times, c.calls, c.purpose, params});
    }
    double dpTotal = 0, dpExposed = 0;
    double bwdMicro = cr.bwd + cr.tpBwd;
    double fwdMicro = cr.fwd + cr.tpFwd;
    // Gradient buckets (the backward pass's order): DDP's, ZeRO's but ZeRO-3's under
    // sequence parallelism (which reduces its gradients whole); ZeRO-3's parameter
    // buckets (the forward pass's order).
    bool gradBuckets = l.bucketBytes > 0 && training::gradientsInBuckets(l.zero, l.sequence && t > 1);
    Buckets grads, params;
    if (gradBuckets)
      grads = bucketsOf(true, commRank);
    if (l.bucketBytes > 0 && l.zero == 3)
      params = bucketsOf(false, commRank);
    for (const DP &x : dp) {
      // The gradients' all-reduce (DDP) or reduce-scatter (ZeRO) runs in buckets of the
      // plan's `bucket` size (fp32 gradients, as the executable keeps them), one ring
      // latency each, started as the backward pass finishes them (DDP and ZeRO-1: the last
      // micro-batch's; ZeRO-2 and 3: every one's); ZeRO-3's parameter all-gathers in
      // buckets, each a bucket ahead of the pass that reads it (plan-train-abi,
      // plan-schedule). Every other data-parallel collective runs whole, between the
      // micro-batches and the update.
      bool ddpBuckets = gradBuckets && x.purpose == "gradients" &&
                        x.kind == (l.zero == 0 ? Coll::AllReduce : Coll::ReduceScatter);
      bool gatherBuckets = l.bucketBytes > 0 && l.zero == 3 && x.kind == Coll::AllGather &&
                           (x.purpose == "parameters" || x.purpose == "parameters (forward)" ||
                            x.purpose == "parameters (backward)");
      bool bucketed = ddpBuckets || gatherBuckets;
      const Buckets &buckets = ddpBuckets ? grads : params;
      int64_t calls = bucketed ? buckets.calls : x.calls;
      double one = collSeconds(x.kind, x.full, d, "data") +
                   double(bucketed ? calls - 1 : 0) * ringSteps(x.kind, d) * links.at("data").latency;
      double total = one * x.times;
      double exposed = total;
      // All but the edge bucket hide: the gradients' and the backward gathers behind the
      // backward pass, the forward gathers behind the forward pass. On a cpu mesh MPI
      // shares the cores with the compute: nothing hides.
      if (bucketed && !cpu)
        exposed = x.times * (std::max(0.0, one - (ddpBuckets || x.purpose == "parameters (backward)" ? bwdMicro
                                                                                                     : fwdMicro)) +
                             one * buckets.exposedShare);
      exposed = std::min(exposed, total);
      dpTotal += total;
      dpExposed += exposed;
      CommRow row;
      row.collective = collName(x.kind);
      row.axis = "data";
      row.purpose = x.purpose;
      // Exactly what the runtime counts (training::ringBytes, per call).
      row.bytes = int64_t(training::ringBytes(x.kind, d, uint64_t(std::llround(x.full))) * uint64_t(x.times));
      row.calls = x.times * calls;
      row.ranks = d;
      row.seconds = total;
      row.exposedSeconds = exposed;
      row.link = links.at("data").name;
      e.comm.push_back(row);
    }
    // SyncBatchNorm: each batchnorm's statistics gathered and its gradient sums reduced
    // over the data axis, per micro-batch, inside the passes (nothing hides them).
    std::map<std::pair<std::string, std::string>, CommRow> inside;
    for (size_t i = 0; i < costs.size(); ++i)
      for (const TensorColl &tc : opRank[i] == commRank ? costs[i].dataColls : std::vector<TensorColl>())
        if (d > 1) {
          CommRow &row = inside[{collName(tc.kind), tc.purpose}];
          double sec = collSeconds(tc.kind, tc.fullBytes, d, "data") * double(mb);
          row.bytes += int64_t(training::ringBytes(tc.kind, d, uint64_t(std::llround(tc.fullBytes))) * uint64_t(mb));
          row.calls += mb;
          row.seconds += sec;
          row.exposedSeconds += sec;
        }
    for (auto &[key, row] : inside) {
      row.collective = key.first;
      row.axis = "data";
      row.purpose = key.second;
      row.ranks = d;
      row.link = links.at("data").name;
      dpTotal += row.seconds;
      dpExposed += row.exposedSeconds;
      e.comm.push_back(row);
    }
    // ZeRO-3 with adapters: the frozen base gathered whole for each micro-batch (a
    // pipeline stage's once per step), before its forward pass reads it (plan-schedule):
    // exposed.
    if (lora() && d > 1 && l.zero >= 3 && rankFrozenRegion[commRank] > 0) {
      double full = double(rankFrozenRegion[commRank]);
      int64_t times = training::zeroCollectivesPerStep(mb, p > 1);
      double total = collSeconds(Coll::AllGather, full, d, "data") * double(times);
      dpTotal += total;
      dpExposed += total;
      e.comm.push_back({collName(Coll::AllGather), "data", "frozen base",
                        int64_t(training::ringBytes(Coll::AllGather, d, uint64_t(full)) * uint64_t(times)), times, d,
                        total, total, links.at("data").name});
    }
    return dpExposed;
  }

  /// The tensor- and pipeline-axis collectives of rank commRank's step, each a row of
  /// e.comm: the replicated gradients' and the norm's sums over the tensor axis (their
  /// seconds added to tensorStep), the tied gradients', the loss's and the norm's over
  /// the stages (returned), the ops' tensor collectives, the pipeline sends.
  double tensorAndPipelineComm(Estimate &e, const RankTime &cr, int64_t commRank, double wire, double boundary,
                               double &tensorStep) {
    // Under sequence parallelism each tensor rank sees a slice of the tokens, so the
    // gradients of parameters it does not split (norms, biases) are summed over it.
    // ZeRO-2 and 3 keep a micro-batch's whole gradient only until its reduce-scatter: there
    // the sum runs per micro-batch (under a pipeline they reduce once per step).
    if (t > 1 && l.sequence && replicatedElems(commRank) > 0) {
      double full = double(replicatedElems(commRank)) * wire;
      int64_t times = l.zero >= 2 && d > 1 ? training::zeroCollectivesPerStep(mb, p > 1) : 1;
      double sec = collSeconds(Coll::AllReduce, full, t, "tensor") * double(times);
      e.comm.push_back({"all_reduce", "tensor", "replicated-parameter gradients",
                        int64_t(std::llround(ringBytes(Coll::AllReduce, full, t))) * times, times, t, sec, sec,
                        links.at("tensor").name});
      e.tensorCommSeconds += sec;
      tensorStep = sec;
    }
    // Under tensor parallelism the gradient norm sums each rank's split parameters and
    // the replicated ones once: one float, reduced over the tensor axis.
    if (t > 1) {
      double sec = collSeconds(Coll::AllReduce, 4, t, "tensor");
      e.comm.push_back({"all_reduce", "tensor", "gradient norm", int64_t(training::ringBytes(Coll::AllReduce, t, 4)), 1,
                        t, sec, sec, links.at("tensor").name});
      e.tensorCommSeconds += sec;
      tensorStep += sec;
    }
    // The tied embedding's gradient is summed between the first and last stage: an
    // all-reduce over the pipeline axis, to which the stages between add zeros.
    double pipelineSums = 0; // the all-reduces over the stages, after the micro-batches
    if (p > 1 && tiedElems > 0) {
      double full = double(tiedElems) * wire;
      double tied = collSeconds(Coll::AllReduce, full, p, "pipeline");
      pipelineSums += tied;
      e.comm.push_back({"all_reduce", "pipeline", "tied-parameter gradients",
                        int64_t(training::ringBytes(Coll::AllReduce, p, uint64_t(std::llround(full)))), 1, p, tied,
                        tied, links.at("pipeline").name});
    }
    // The loss (computed on the last stage) and the gradient norm's partial sums are
    // summed over the stages: one float each.
    if (p > 1)
      for (const char *what : {"loss", "gradient norm"}) {
        double sec = collSeconds(Coll::AllReduce, 4, p, "pipeline");
        e.comm.push_back({"all_reduce", "pipeline", what, int64_t(training::ringBytes(Coll::AllReduce, p, 4)), 1, p,
                          sec, sec, links.at("pipeline").name});
        pipelineSums += sec;
      }
    for (auto &[key, val] : cr.tpRows)
      e.comm.push_back({key.first, "tensor", key.second, int64_t(std::llround(val.bytes * mb)), val.calls * mb, t,
                        val.seconds * mb, val.seconds * mb, links.at("tensor").name});
    if (p > 1) {
      // Rank 0, the first stage, sends each micro-batch's activation on (the stages after
      // it also send gradients back); under the interleaved schedule from each of its v
      // stages, and the input gradients of its v - 1 stages after the first back.
      int64_t sends = mb * (2 * v - 1);
      const Link &lk = links.at("pipeline");
      double wireBoundary = boundary / act * wireAct;
      double sec = double(sends) * (lk.latency + wireBoundary / (lk.bandwidth * cal.linkEfficiency));
      e.comm.push_back({"send_recv", "pipeline", "activations", int64_t(std::llround(wireBoundary * double(sends))),
                        sends, 2, sec, sec, lk.name});
    }
    return pipelineSums;
  }

  void time(Estimate &e) {
    std::vector<RankTime> rt(p);
    double modelFlops = 0, hardware = 0;
    opTimes(rt, modelFlops, hardware);
    // Pipeline sends: activations forward, gradients backward, at each of v boundaries.
    double boundary = double(b) * s * width * act / (l.sequence && t > 1 ? t : 1);
    if (p > 1) {
      const Link &lk = links.at("pipeline");
      double one = lk.latency + boundary / (lk.bandwidth * cal.linkEfficiency);
      for (int64_t r = 0; r < p; ++r)
        rt[r].ppSend = one * v * ((r < p - 1 ? 1 : 0) + (r > 0 ? 1 : 0));
    }

    // The pipeline runs m micro-batches through the slowest stage, plus the bubble.
    double stage = 0;
    double tensorStep = 0; // tensor-axis reductions once per step (or micro-batch), after backward
    int slowest = 0;
    for (int64_t r = 0; r < p; ++r) {
      double T = rt[r].fwd + rt[r].bwd + rt[r].tpFwd + rt[r].tpBwd + rt[r].ppSend;
      if (T > stage) {
        stage = T;
        slowest = int(r);
      }
    }
    double bubbleStages = p > 1 ? double(p - 1) / double(v) : 0;
    double pipelined = (double(mb) + bubbleStages) * stage;
    e.bubbleSeconds = bubbleStages * stage;
    // ZB-H1 (Qi et al. 2023): the weight-gradient passes fill the bubble where they can,
    // in the order plan-schedule emits (schedule::zeroBubbleStepTime, the slowest stage's
    // forward, input-gradient and weight-gradient times on every stage).
    if (p > 1 && l.schedule == sema::PipelineSchedule::ZeroBubble) {
      double wgrad = rt[slowest].wgrad, fwd = rt[slowest].fwd + rt[slowest].tpFwd;
      pipelined = schedule::zeroBubbleStepTime(p, mb, fwd, std::max(0.0, stage - fwd - wgrad), wgrad);
      e.bubbleSeconds = std::max(0.0, pipelined - double(mb) * stage);
    }
    RankTime &w = rt[slowest];
    e.computeSeconds = w.compute * mb;
    e.memorySeconds = w.memory * mb;
    e.tensorCommSeconds = (w.tpFwd + w.tpBwd) * mb;
    e.pipelineCommSeconds = w.ppSend * mb;

    // The rows describe rank 0 (the first pipeline stage), whose log the runtime writes.
    int64_t commRank = 0;
    int64_t n = rankParamElems[commRank];
    // Emulated precision on the CPU keeps f32 buffers, and communicates them.
    bool cpu = mesh.kind != sema::DeviceKind::CUDA;
    double wire = cpu ? 4.0 : gradBytes;
    double dpExposed = dataParallelComm(e, rt[commRank], commRank, cpu, wire);
    double pipelineSums = tensorAndPipelineComm(e, rt[commRank], commRank, wire, boundary, tensorStep);
    e.pipelineCommSeconds += pipelineSums;
    e.dataCommSeconds = dpExposed;

    // Optimizer: streams master weights, moments, gradients and parameters once.
    int64_t shard = d > 1 && l.zero >= 1 ? (n + d - 1) / d : n;
    // Reads the gradient and the moments (and fp32 master weights), writes them back
    // and the working parameters; without a master copy it also reads the parameters.
    double paramTraffic = l.precision == sema::Precision::FP32 ? 2 * paramBytes : paramBytes;
    e.optimizerSeconds = double(shard) * (gradBytes + 2 * optBytes + paramTraffic) / (hbm * cal.memoryEfficiency);

    if (designOffload() && l.optimizerOffload.any()) // Adam on the host's cores
      e.optimizerSeconds = double(shard) * (gradBytes + 2 * optBytes + paramTraffic) / cal.hostMemoryBandwidth *
                           double(std::max<int64_t>(1, mesh.perNode));
    e.stepSeconds = pipelined + dpExposed + pipelineSums + tensorStep + e.optimizerSeconds + offloadSeconds(e);
    double tokens = double(l.batch) * double(l.seq);
    e.tokensPerSecond = tokens / e.stepSeconds;
    // Model FLOPs (PaLM/Megatron convention): 3 × forward matmuls, full attention; under
    // `adapt`, a frozen weight's backward computes the input gradient alone (2 ×).
    e.modelFlopsPerStep = modelFlops * double(mb) * double(d);
    e.hardwareFlopsPerStep = hardware * double(mb) * double(d) * double(t);
    e.mfu = e.modelFlopsPerStep / (e.stepSeconds * double(mesh.devices()) * peak);

    std::vector<std::pair<double, const char *>> parts = {{e.computeSeconds, "compute"},
                                                          {e.memorySeconds, "memory bandwidth"},
                                                          {e.tensorCommSeconds, "tensor-parallel communication"},
                                                          {e.pipelineCommSeconds, "pipeline communication"},
                                                          {e.bubbleSeconds, "pipeline bubble"},
                                                          {dpExposed, "data-parallel communication"},
                                                          {e.optimizerSeconds, "optimizer step"},
                                                          {e.offload.seconds, "offload transfers"}};
    e.bottleneck = std::max_element(parts.begin(), parts.end())->second;

    e.traceRank = slowest;
    if (withTrace)
      buildTrace(e, rt[slowest], slowest);
  }

  void buildTrace(Estimate &e, const RankTime &r, int rank) {
    double f = r.fwd, bwd = r.bwd, tf = r.tpFwd, tb = r.tpBwd;
    double send = p > 1 ? r.ppSend / double(std::max<int64_t>(1, ((rank < p - 1) ? 1 : 0) + (rank > 0 ? 1 : 0))) : 0;
    double now = 0;
    auto event = [&](const std::string &name, const std::string &stream, double start, double dur) {
      if (dur > 0)
        e.trace.push_back({name, stream, start, dur});
    };
    auto fwdBlock = [&](int64_t i) {
      event("forward " + std::to_string(i), "compute", now, f);
      now += f;
      event("tensor collectives (forward " + std::to_string(i) + ")", "tensor", now, tf);
      now += tf;
      if (rank < p - 1) {
        event("send activations " + std::to_string(i), "pipeline", now, send);
        now += send;
      }
    };
    auto bwdBlock = [&](int64_t i) {
      event("backward " + std::to_string(i), "compute", now, bwd);
      now += bwd;
      event("tensor collectives (backward " + std::to_string(i) + ")", "tensor", now, tb);
      now += tb;
      if (rank > 0) {
        event("send gradients " + std::to_string(i), "pipeline", now, send);
        now += send;
      }
    };
    int64_t warmup = p > 1 ? std::min<int64_t>(mb, (p - rank - 1) * v) : 0;
    if (l.schedule == sema::PipelineSchedule::GPipe && p > 1)
      warmup = mb;
    double bubble = e.bubbleSeconds;
    // The first stage waits nowhere before it starts; later ones wait for activations.
    double lead = p > 1 ? bubble * double(rank) / double(p - 1) : 0;
    event("pipeline bubble", "bubble", now, lead);
    now += lead;
    int64_t fi = 0, bi = 0;
    for (; fi < warmup; ++fi)
      fwdBlock(fi);
    event("pipeline bubble", "bubble", now, bubble - lead);
    now += bubble - lead;
    double lastBwdStart = 0;
    // The steady state repeats: past 64 micro-batches, draw the first and last 32 and
    // one block for the rest.
    while (bi < mb) {
      if (mb > 64 && bi == 32 && mb - 32 > bi) {
        int64_t skipped = mb - 64;
        double span = double(skipped) * (f + tf + bwd + tb + 2 * send);
        event(std::to_string(skipped) + " more micro-batches (forward and backward)", "compute", now, span);
        now += span;
        bi += skipped;
        fi = std::min<int64_t>(mb, fi + skipped);
      }
      if (fi < mb)
        fwdBlock(fi++);
      lastBwdStart = now;
      bwdBlock(bi++);
    }
    // Gradient reduction (and the sums over the pipeline's stages) starts with the last
    // backward pass; the updated parameters' all-gather (ZeRO-1/2) follows the optimizer step.
    double dpStart = lastBwdStart;
    for (const CommRow &c : e.comm)
      if ((c.axis == "data" && !(c.collective == "all_gather" && l.zero < 3)) ||
          (c.axis == "pipeline" && c.collective == "all_reduce") || c.purpose == "replicated-parameter gradients") {
        event(c.collective + " " + c.purpose, c.axis == "data" ? "data" : c.axis, dpStart, c.seconds);
        dpStart += c.seconds;
      }
    double optStart = std::max(now, dpStart);
    event("optimizer step", "compute", optStart, e.optimizerSeconds);
    for (const CommRow &c : e.comm)
      if (c.axis == "data" && c.collective == "all_gather" && l.zero < 3)
        event(c.collective + " " + c.purpose, "data", optStart + e.optimizerSeconds, c.seconds);
  }
};

} // namespace

std::vector<std::string> plan::cost::axisRolesOf(const sema::Train &train, const sema::Mesh &mesh) {
  std::vector<std::string> roles;
  for (const sema::MeshAxis &a : mesh.axes) {
    const auto &par = train.parallel;
    if (std::find(par.dataAxes.begin(), par.dataAxes.end(), a.name) != par.dataAxes.end()) {
      if (std::find(roles.begin(), roles.end(), "data") == roles.end())
        roles.push_back("data");
    } else if (a.name == par.tensorAxis) {
      roles.push_back("tensor");
    } else if (a.name == par.pipelineAxis) {
      roles.push_back("pipeline");
    } else {
      roles.push_back("replicate");
    }
  }
  return roles;
}

Estimate plan::cost::estimate(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout,
                              const std::vector<std::string> &roles, const Calibration &cal, bool withTrace) {
  return Estimator(model, mesh, layout, roles, cal, withTrace).run();
}

bool plan::cost::fits(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout,
                      const Calibration &cal) {
  return Estimator(model, mesh, layout, {}, cal, false).run(/*memoryOnly=*/true).fits();
}
