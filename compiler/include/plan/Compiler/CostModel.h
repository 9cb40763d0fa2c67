// The cost model: per-device memory, FLOPs, communication and step time of a
// model laid out over a mesh, before anything runs. The single source of these
// formulas for `planc explain`, the fit check of `planc check`, and layout search.
#ifndef PLAN_COMPILER_COSTMODEL_H
#define PLAN_COMPILER_COSTMODEL_H

#include "plan/Lang/Layout.h"
#include "plan/Lang/Program.h"

#include <optional>
#include <string>
#include <vector>

namespace plan::cost {

/// Figures the plan does not give: the one place to calibrate the model against
/// measurements (see docs/EXPLAIN.md for where each comes from).
struct Calibration {
  /// Fraction of the dense peak that large GEMMs reach.
  double matmulEfficiency = 0.75;
  /// Fraction of the HBM bandwidth that streaming kernels reach.
  double memoryEfficiency = 0.8;
  /// Fraction of a link's bandwidth that ring collectives reach.
  double linkEfficiency = 0.8;
  /// Latency per ring step (alpha), inside a node and across the network.
  double nodeLatency = 5e-6, networkLatency = 15e-6;
  /// Per-device figures for meshes that do not state them: one CPU process
  /// (one core, AVX2 FMA) and an H100 SXM.
  double cpuPeakFlops = 50e9, cpuMemoryBandwidth = 10e9, cpuLinkBandwidth = 5e9;
  double cudaPeakFlops = 989e12, cudaMemoryBandwidth = 3.35e12;
  double cudaNodeBandwidth = 450e9, cudaNetworkBandwidth = 50e9;
  /// Offload (`offload { … }`) on meshes that do not state `pcie`, `nvme` and
  /// `host_memory`: host ↔ device per device (PCIe 4.0 x16, as measured by
  /// ZeRO-Offload), NVMe per node (one data-center drive), host memory bandwidth per node.
  double pcieBandwidth = 25e9, nvmeBandwidth = 3e9, hostMemoryBandwidth = 100e9;
  /// cuBLASLt workspace per device.
  int64_t cudaWorkspaceBytes = 32ll << 20;
  /// FLOPs per element of the elementwise and normalisation ops (forward).
  double elementwiseFlops = 8;
  /// Bytes per activation element kept for the backward pass: 4, because this
  /// version's code generators keep every activation in f32 (bf16 and fp16 values
  /// rounded); 0 for the precision's own size (2 under bf16 and fp16, the papers').
  int storedActivationBytes = 4;

  static const Calibration &defaults();
};

/// Bytes per device, by component.
struct Memory {
  int64_t params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
  int64_t total() const { return params + grads + optimizer + activations + buffers; }
  Memory &operator+=(const Memory &o);
};

/// One unit of the model (embedding, layer i, head) on the rank that holds it.
struct LayerRow {
  std::string name;
  int rank = 0;              ///< pipeline rank
  int64_t paramElements = 0; ///< on one device (after tensor splitting)
  Memory memory;             ///< activations: per micro-batch, before in-flight scaling
};

struct BufferRow {
  std::string name;
  int64_t bytes = 0;
  /// Held between steps too (the update's shards, an offload's staging buffer), not
  /// only while a step runs.
  bool held = false;
};

/// Bytes one rank sends (= receives) per optimizer step for one collective on one axis.
struct CommRow {
  std::string collective; ///< all_reduce, all_gather, reduce_scatter, send_recv
  std::string axis;       ///< data, tensor, pipeline
  std::string purpose;    ///< "gradients", "layer outputs", …
  int64_t bytes = 0;      ///< sent by one rank per step
  int64_t calls = 0;      ///< per step
  int64_t ranks = 0;      ///< in the collective
  double seconds = 0;     ///< alpha-beta time
  double exposedSeconds = 0;
  std::string link; ///< node or network
};

struct TraceEvent {
  std::string name, stream;       ///< stream: compute, tensor, data, pipeline, bubble
  double start = 0, duration = 0; ///< seconds
};

/// A federated plan's round (docs/FEDERATED.md): what each client hands to the
/// aggregation, what it sends under the ring model, and how long a round takes.
struct FederatedRound {
  int64_t clients = 0, sampled = 0, localSteps = 0, rounds = 0;
  /// The fixed-point update and round loss each client hands to the all-reduce:
  /// 8 × (the flat layout's floats + 1) bytes.
  int64_t updateBytes = 0;
  /// Sent by every client per round (sampled or not; ring all-reduce over the client axis).
  int64_t bytesPerClient = 0;
  /// The server's state on every rank: the global model, the update's integers and
  /// FedAdam's two moments (in the estimate's buffers).
  int64_t serverBytes = 0;
  double localSeconds = 0, aggregationSeconds = 0, roundSeconds = 0, totalSeconds = 0;
  std::string link; ///< node or network
};

struct Estimate {
  int64_t params = 0;        ///< model parameters
  /// Fine-tuning (`adapt`): the adapters' elements, which train, and the model's, which
  /// are frozen, of them those stored as NF4 (`quantize`); without `adapt` every
  /// parameter trains. The frozen base's bytes on the worst rank, and their NF4 part, are
  /// in perDevice.params.
  int64_t trainableParams = 0, frozenParams = 0, quantizedParams = 0;
  int64_t frozenBytes = 0, quantizedBytes = 0;
  int64_t maxRankParams = 0; ///< the most parameter elements a device holds whole (its stage's, its tensor share)
  int64_t devices = 0;
  bool onCuda = false;         ///< the mesh's devices are GPUs
  int worstRank = 0;           ///< pipeline rank with the largest memory total
  Memory perDevice;            ///< that rank
  std::vector<Memory> perRank; ///< by pipeline rank
  std::vector<LayerRow> layers;
  std::vector<BufferRow> buffers;  ///< of the worst rank
  std::vector<CommRow> comm;       ///< the rank that communicates most
  double inFlight = 1;             ///< micro-batches of activations live on the worst rank
  double modelFlopsPerStep = 0;    ///< 3 × forward matmul FLOPs, full attention (for MFU)
  double hardwareFlopsPerStep = 0; ///< what runs: causal attention halved, recompute added
  double computeSeconds = 0, memorySeconds = 0, bubbleSeconds = 0, optimizerSeconds = 0;
  double tensorCommSeconds = 0, dataCommSeconds = 0, pipelineCommSeconds = 0;
  double stepSeconds = 0, tokensPerSecond = 0, mfu = 0;
  double peakFlops = 0; ///< per device, as used
  std::string bottleneck;
  std::optional<int64_t> deviceMemory;
  bool fits() const { return (!deviceMemory || perDevice.total() <= *deviceMemory) && fitsHost(); }
  /// Where offloaded state lives (`offload`), per device of the worst rank: bytes in
  /// host memory and on NVMe (both generations of planc's files on a cpu mesh), bytes
  /// moved per step over PCIe and to and from NVMe, and the seconds that takes (in
  /// stepSeconds). hostMemory: the mesh's host memory per node, if stated.
  struct OffloadState {
    int64_t hostBytes = 0, nvmeBytes = 0, pcieBytesPerStep = 0, nvmeBytesPerStep = 0;
    double seconds = 0;
    std::optional<int64_t> hostMemory;
    int64_t devicesPerNode = 1;
  } offload;
  bool fitsHost() const {
    return !offload.hostMemory || offload.hostBytes * offload.devicesPerNode <= *offload.hostMemory;
  }
  std::vector<TraceEvent> trace; ///< one step of the slowest pipeline rank
  int traceRank = 0;
  std::optional<FederatedRound> federated; ///< a federated plan's round (addFederated)
};

/// Estimates `model` laid out as `layout` on `mesh`. The layout must pass
/// sema::checkLayout. Axis placement: data outermost, then pipeline, tensor
/// innermost, unless `axisRoles` gives the mesh's own order of roles. The Chrome
/// trace is built only when `withTrace` is set.
Estimate estimate(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout,
                  const std::vector<std::string> &axisRoles = {}, const Calibration &cal = Calibration::defaults(),
                  bool withTrace = false);

/// A federated plan's round added to its estimate: e.federated, and the server's
/// buffers in e.buffers and perDevice (nothing for a plan that is not federated).
void addFederated(Estimate &e, const sema::Model &model, const sema::Train &train, const sema::Mesh &mesh,
                  const Calibration &cal = Calibration::defaults());

/// Whether `layout` fits the mesh's memory (device, and host under offload): estimate's
/// memory alone, for searches that only need to know.
bool fits(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout,
          const Calibration &cal = Calibration::defaults());

/// The roles of the mesh's axes in order ("data", "tensor", "pipeline",
/// "replicate"), for link placement.
std::vector<std::string> axisRolesOf(const sema::Train &train, const sema::Mesh &mesh);

/// One candidate of the layout search.
struct Candidate {
  sema::Layout layout;
  Estimate estimate;
};

struct SearchOptions {
  size_t top = 10;
  bool allowPipeline = true;
  /// Only layouts this version of planc builds executables for (buildable), which the
  /// cost model estimates and the code generator would refuse otherwise.
  bool buildableOnly = true;
};

/// Whether this version of planc builds an executable for a layout it estimated: not
/// NF4 with a tensor axis, offload on a cuda mesh or the parameters offloaded without
/// the optimizer, nor the interleaved schedule over micro-batches not a multiple of the
/// pipeline ranks.
bool buildable(const sema::Layout &layout, const Estimate &estimate);

/// Enumerates data × tensor × pipeline factorisations of the mesh, ZeRO stages,
/// recompute modes, micro-batch sizes and sequence parallelism that pass the
/// static rules; returns those that fit, fastest first.
std::vector<Candidate> search(const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &base,
                              const SearchOptions &options = {}, const Calibration &cal = Calibration::defaults());

/// Formatting: human tables, JSON (fields documented in docs/EXPLAIN.md), and a
/// Chrome trace of one step.
std::string formatBytes(double bytes);
std::string renderText(const Estimate &e, const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout,
                       bool perLayer);
std::string renderJson(const Estimate &e, const sema::Model &model, const sema::Mesh &mesh, const sema::Layout &layout);
std::string renderTrace(const Estimate &e);
/// `unbuilt`: how many more layouts fit that the code generator refuses, which the search
/// leaves out (SearchOptions::buildableOnly).
std::string renderSearch(const std::vector<Candidate> &candidates, size_t total, const sema::Model &model,
                         const sema::Mesh &mesh, size_t unbuilt = 0);
/// A ready-to-paste `parallel { … }` block (and mesh axes) for a layout.
std::string parallelBlock(const sema::Layout &layout);

} // namespace plan::cost

#endif // PLAN_COMPILER_COSTMODEL_H
