// Rendering estimates: tables for people, JSON for tools, Chrome traces for Perfetto.
#include "plan/Compiler/CostModel.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace plan;
using namespace plan::cost;

std::string plan::cost::formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? llvm::formatv("{0} B", int64_t(bytes)).str() : llvm::formatv("{0:f2} {1}", bytes, units[u]).str();
}

static std::string seconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:f3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:f3} ms", s * 1e3).str();
  return llvm::formatv("{0:f1} us", s * 1e6).str();
}

static std::string schedule(const sema::Layout &l) { return sema::scheduleName(l.schedule); }

/// What a pipeline stage keeps for its backward pass (`keep:`).
static const char *keep(const sema::Layout &l) { return l.keepActivations ? "activations" : "inputs"; }

static bool offloaded(const sema::Layout &l) { return l.optimizerOffload.any() || l.paramsOffload.any(); }

/// " (offload: optimizer nvme, params nvme)" for a search row, or nothing.
static std::string offloadNote(const sema::Layout &l) {
  if (!offloaded(l))
    return "";
  std::string out = std::string(" (offload: optimizer ") + sema::offloadTargetName(l.optimizerOffload.target);
  if (l.paramsOffload.any())
    out += std::string(", params ") + sema::offloadTargetName(l.paramsOffload.target);
  return out + ")";
}

std::string plan::cost::parallelBlock(const sema::Layout &l) {
  // `dp` is always written (the block gives it the data role, size 1 or not);
  // `pp` and `tp` only when they split something.
  std::string axes = "dp: " + std::to_string(l.data);
  if (l.pipeline > 1)
    axes += ", pp: " + std::to_string(l.pipeline);
  if (l.tensor > 1)
    axes += ", tp: " + std::to_string(l.tensor);
  std::string out;
  out += "  axes = [" + axes + "]            // in the mesh\n";
  out += "  micro = " + std::to_string(l.micro) + "\n";
  out += "  parallel {\n";
  out += "    data     = dp\n"; // every mesh axis needs a role, a size-1 one too
  out += "    zero     = " + std::to_string(l.zero) + "\n";
  out += "    tensor   = " + std::string(l.tensor > 1 ? "tp" : "none") + "\n";
  if (l.pipeline > 1)
    out += "    pipeline = pp(stages: " + std::to_string(l.stages) + ", schedule: " + schedule(l) +
           (l.keepActivations ? ", keep: activations" : "") + ")\n";
  else
    out += "    pipeline = none\n";
  if (l.sequence)
    out += "    sequence = true\n";
  if (offloaded(l)) {
    auto place = [](const sema::Offload &o) {
      if (o.target != sema::OffloadTarget::NVMe)
        return std::string(sema::offloadTargetName(o.target));
      std::string buffer = o.bufferBytes == sema::kDefaultOffloadBufferBytes
                               ? ""
                               : ", buffer: " + std::to_string(o.bufferBytes >> 10) + " KiB";
      return "nvme(\"" + o.dir + "\"" + buffer + ")";
    };
    out += "    offload { optimizer = " + place(l.optimizerOffload);
    if (l.paramsOffload.any())
      out += "  params = " + place(l.paramsOffload);
    out += " }\n";
  }
  out += "  }\n";
  out += "  recompute = " + std::string(sema::recomputeName(l.recompute)) + "\n";
  if (l.tensor == 1)
    out += "  shard = []                       // no tensor axis: no logical-dim overrides\n";
  return out;
}

/// Which mesh axes stay inside a node (sema::Mesh::axisWithinNode): "axes within a node:
/// tp; across nodes: dp".
static std::string axisLinks(const sema::Mesh &mesh) {
  std::string inside, across;
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    if (mesh.axes[a].size == 1)
      continue;
    std::string &to = mesh.axisWithinNode(a) ? inside : across;
    to += (to.empty() ? "" : ", ") + mesh.axes[a].name;
  }
  return "axes within a node: " + (inside.empty() ? std::string("none") : inside) +
         "; across nodes: " + (across.empty() ? std::string("none") : across);
}

std::string plan::cost::renderText(const Estimate &e, const sema::Model &model, const sema::Mesh &mesh,
                                   const sema::Layout &l, bool perLayer) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "model " << model.name << ": " << e.params << " parameters; mesh " << mesh.name << ": " << e.devices << " "
     << sema::deviceKindName(mesh.kind) << " devices\n";
  os << "layout: data " << l.data << " x tensor " << l.tensor << " x pipeline " << l.pipeline;
  if (l.pipeline > 1)
    os << " (" << l.stages << " stages, " << schedule(l) << ", keep " << keep(l) << ")";
  os << "; zero " << l.zero << "; " << sema::precisionName(l.precision) << "; recompute "
     << sema::recomputeName(l.recompute) << (l.sequence ? "; sequence parallel" : "");
  if (offloaded(l))
    os << "; offload optimizer " << sema::offloadTargetName(l.optimizerOffload.target) << ", params "
       << sema::offloadTargetName(l.paramsOffload.target);
  os << "\n";
  os << "batch " << l.batch << " = micro " << l.micro << " x data " << l.data << " x " << l.microBatches()
     << " micro-batches; ";
  if (model.images)
    os << "images " << l.images.channels << "x" << l.images.height << "x" << l.images.width << "\n";
  else
    os << "seq " << l.seq << "\n";
  os << "topology: " << mesh.nodes << " node" << (mesh.nodes == 1 ? "" : "s") << " of " << mesh.perNode
     << " devices, ranks node-major; " << axisLinks(mesh) << "\n";
  if (l.adapt.rank > 0) {
    os << "fine-tuning: LoRA rank " << l.adapt.rank << " on " << l.adapt.matrices.size() << " weights: "
       << e.trainableParams << " parameters train, " << e.frozenParams << " are frozen";
    if (l.adapt.nf4Block > 0)
      os << " (" << e.quantizedParams << " stored as NF4, block " << l.adapt.nf4Block
         << (l.adapt.nf4Double ? ", double quantization" : "") << ")";
    os << "\n";
  }
  os << "\n";

  os << "memory per device (pipeline rank " << e.worstRank << ", the largest):\n";
  auto row = [&](const char *name, int64_t bytes) {
    os << llvm::formatv("  {0,-14} {1,14}\n", name, formatBytes(double(bytes)));
  };
  row("parameters", e.perDevice.params);
  if (l.adapt.rank > 0) {
    // The frozen base, and its NF4 part, are in the parameters' bytes.
    os << llvm::formatv("    {0,-12} {1,14}\n", "trainable", formatBytes(double(e.perDevice.params - e.frozenBytes)));
    os << llvm::formatv("    {0,-12} {1,14}\n", "frozen", formatBytes(double(e.frozenBytes - e.quantizedBytes)));
    if (l.adapt.nf4Block > 0)
      os << llvm::formatv("    {0,-12} {1,14}\n", "quantized", formatBytes(double(e.quantizedBytes)));
  }
  row("gradients", e.perDevice.grads);
  row("optimizer", e.perDevice.optimizer);
  row("activations", e.perDevice.activations);
  row("buffers", e.perDevice.buffers);
  row("total", e.perDevice.total());
  if (e.deviceMemory)
    os << llvm::formatv("  {0,-14} {1,14}  ({2})\n", "device memory", formatBytes(double(*e.deviceMemory)),
                        e.perDevice.total() <= *e.deviceMemory ? "fits" : "DOES NOT FIT");
  if (offloaded(l)) {
    // Where the rest lives (offload), and what moves each step.
    const auto &o = e.offload;
    os << llvm::formatv("  {0,-14} {1,14}\n", "host memory", formatBytes(double(o.hostBytes)));
    if (o.hostMemory)
      os << llvm::formatv("    {0,-12} {1,14}  ({2}; {3} per node of {4} devices)\n", "per node",
                          formatBytes(double(o.hostBytes * o.devicesPerNode)), e.fitsHost() ? "fits" : "DOES NOT FIT",
                          formatBytes(double(*o.hostMemory)), o.devicesPerNode);
    os << llvm::formatv("  {0,-14} {1,14}\n", "nvme", formatBytes(double(o.nvmeBytes)));
    os << llvm::formatv("  offload moves {0} over PCIe and {1} to and from NVMe per step: {2}\n",
                        formatBytes(double(o.pcieBytesPerStep)), formatBytes(double(o.nvmeBytesPerStep)),
                        seconds(o.seconds));
  }
  os << llvm::formatv("  activations hold {0:f2} micro-batch(es) in flight\n", e.inFlight);
  for (const BufferRow &b : e.buffers)
    os << llvm::formatv("  buffer: {0,-36} {1,12}\n", b.name, formatBytes(double(b.bytes)));

  if (perLayer) {
    os << "\nper unit (one device; activations per micro-batch before recompute):\n";
    os << llvm::formatv("  {0,-12} {1,4} {2,14} {3,12} {4,12} {5,12} {6,12}\n", "unit", "rank", "parameters", "params",
                        "grads", "optimizer", "activations");
    for (const LayerRow &r : e.layers)
      os << llvm::formatv("  {0,-12} {1,4} {2,14} {3,12} {4,12} {5,12} {6,12}\n", r.name, r.rank, r.paramElements,
                          formatBytes(double(r.memory.params)), formatBytes(double(r.memory.grads)),
                          formatBytes(double(r.memory.optimizer)), formatBytes(double(r.memory.activations)));
  }

  os << "\ncommunication per step (bytes one rank sends, ring algorithms):\n";
  if (e.comm.empty())
    os << "  none\n";
  for (const CommRow &c : e.comm)
    os << llvm::formatv("  {0,-15} {1,-9} {2,-34} {3,12} {4,7} calls {5,11} ({6} link, {7} exposed)\n", c.collective,
                        c.axis, c.purpose, formatBytes(double(c.bytes)), c.calls, seconds(c.seconds), c.link,
                        seconds(c.exposedSeconds));

  os << "\ntime per step:\n";
  os << llvm::formatv("  {0,-32} {1,12}\n", "compute (matmul-bound)", seconds(e.computeSeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "memory-bound ops", seconds(e.memorySeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "tensor-parallel communication", seconds(e.tensorCommSeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "pipeline communication", seconds(e.pipelineCommSeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "pipeline bubble", seconds(e.bubbleSeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "data-parallel (exposed)", seconds(e.dataCommSeconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "optimizer step", seconds(e.optimizerSeconds));
  if (offloaded(l))
    os << llvm::formatv("  {0,-32} {1,12}\n", "offload transfers", seconds(e.offload.seconds));
  os << llvm::formatv("  {0,-32} {1,12}\n", "step", seconds(e.stepSeconds));
  // A model over images has one position per image: its tokens are images.
  os << llvm::formatv("  {0}/s {1:f0}; model FLOPs/step {2:e3}; MFU {3:f1}% of {4:e3} FLOP/s per device\n",
                      model.images ? "images" : "tokens", e.tokensPerSecond, e.modelFlopsPerStep, 100 * e.mfu,
                      e.peakFlops);
  os << "  bottleneck: " << e.bottleneck << "\n";
  if (e.federated) {
    const FederatedRound &r = *e.federated;
    os << llvm::formatv("\nfederated round ({0} of {1} clients sampled, {2} local steps each, {3} rounds):\n",
                        r.sampled, r.clients, r.localSteps, r.rounds);
    os << llvm::formatv("  {0,-32} {1,12}\n", "update each client hands over", formatBytes(double(r.updateBytes)));
    os << llvm::formatv("  {0,-32} {1,12} ({2} link)\n", "sent per client per round", formatBytes(double(r.bytesPerClient)),
                        r.link);
    os << llvm::formatv("  {0,-32} {1,12}\n", "local steps", seconds(r.localSeconds));
    os << llvm::formatv("  {0,-32} {1,12}\n", "aggregation", seconds(r.aggregationSeconds));
    os << llvm::formatv("  {0,-32} {1,12}\n", "round", seconds(r.roundSeconds));
    os << llvm::formatv("  {0,-32} {1,12}\n", "all rounds", seconds(r.totalSeconds));
  }
  return s;
}

std::string plan::cost::renderJson(const Estimate &e, const sema::Model &model, const sema::Mesh &mesh,
                                   const sema::Layout &l) {
  using llvm::json::Array;
  using llvm::json::Object;
  auto mem = [](const Memory &m) {
    return Object{{"params", m.params},           {"grads", m.grads},     {"optimizer", m.optimizer},
                  {"activations", m.activations}, {"buffers", m.buffers}, {"total", m.total()}};
  };
  Object comm;
  Array commRows;
  for (const CommRow &c : e.comm) {
    Object *byAxis = comm.getObject(c.collective);
    if (!byAxis) {
      comm[c.collective] = Object{};
      byAxis = comm.getObject(c.collective);
    }
    int64_t prev = byAxis->getInteger(c.axis).value_or(0);
    (*byAxis)[c.axis] = prev + c.bytes;
    commRows.push_back(Object{{"collective", c.collective},
                              {"axis", c.axis},
                              {"purpose", c.purpose},
                              {"bytes", c.bytes},
                              {"calls", c.calls},
                              {"ranks", c.ranks},
                              {"seconds", c.seconds},
                              {"exposed_seconds", c.exposedSeconds},
                              {"link", c.link}});
  }
  Array perRank, layers, buffers;
  for (const Memory &m : e.perRank)
    perRank.push_back(mem(m));
  for (const LayerRow &r : e.layers)
    layers.push_back(
        Object{{"unit", r.name}, {"rank", r.rank}, {"param_elements", r.paramElements}, {"bytes", mem(r.memory)}});
  for (const BufferRow &b : e.buffers)
    buffers.push_back(Object{{"name", b.name}, {"bytes", b.bytes}});
  Object root{
      {"model", model.name},
      {"mesh", mesh.name},
      {"devices", e.devices},
      {"params", e.params},
      {"adapt", l.adapt.rank > 0 ? llvm::json::Value(Object{{"rank", l.adapt.rank},
                                                            {"nf4_block", l.adapt.nf4Block},
                                                            {"nf4_double", l.adapt.nf4Block > 0 && l.adapt.nf4Double},
                                                            {"trainable_params", e.trainableParams},
                                                            {"frozen_params", e.frozenParams},
                                                            {"quantized_params", e.quantizedParams},
                                                            {"trainable_bytes", e.perDevice.params - e.frozenBytes},
                                                            {"frozen_bytes", e.frozenBytes - e.quantizedBytes},
                                                            {"quantized_bytes", e.quantizedBytes}})
                                 : llvm::json::Value(nullptr)},
      {"layout", Object{{"data", l.data},
                        {"tensor", l.tensor},
                        {"pipeline", l.pipeline},
                        {"stages", l.stages},
                        {"schedule", schedule(l)},
                        {"keep", keep(l)},
                        {"zero", l.zero},
                        {"sequence", l.sequence},
                        {"recompute", sema::recomputeName(l.recompute)},
                        {"precision", sema::precisionName(l.precision)},
                        {"batch", l.batch},
                        {"micro", l.micro},
                        {"micro_batches", l.microBatches()},
                        {"seq", l.seq}}},
      {"per_device_bytes", mem(e.perDevice)},
      {"worst_rank", e.worstRank},
      {"per_rank_bytes", std::move(perRank)},
      {"in_flight_micro_batches", e.inFlight},
      {"buffers", std::move(buffers)},
      {"per_layer", std::move(layers)},
      {"device_memory_bytes", e.deviceMemory ? llvm::json::Value(*e.deviceMemory) : llvm::json::Value(nullptr)},
      {"fits", e.fits()},
      {"offload", offloaded(l) ? llvm::json::Value(Object{{"optimizer", sema::offloadTargetName(l.optimizerOffload.target)},
                                                          {"params", sema::offloadTargetName(l.paramsOffload.target)},
                                                          {"host_bytes", e.offload.hostBytes},
                                                          {"nvme_bytes", e.offload.nvmeBytes},
                                                          {"pcie_bytes_per_step", e.offload.pcieBytesPerStep},
                                                          {"nvme_bytes_per_step", e.offload.nvmeBytesPerStep},
                                                          {"seconds", e.offload.seconds}})
                               : llvm::json::Value(nullptr)},
      {"comm_bytes_per_step", std::move(comm)},
      {"comm", std::move(commRows)},
      {"flops_per_step", e.modelFlopsPerStep},
      {"hardware_flops_per_step", e.hardwareFlopsPerStep},
      {"step_time_s", e.stepSeconds},
      {"time_breakdown_s", Object{{"compute", e.computeSeconds},
                                  {"memory", e.memorySeconds},
                                  {"tensor_comm", e.tensorCommSeconds},
                                  {"pipeline_comm", e.pipelineCommSeconds},
                                  {"bubble", e.bubbleSeconds},
                                  {"data_comm_exposed", e.dataCommSeconds},
                                  {"optimizer", e.optimizerSeconds},
                                  {"offload", e.offload.seconds}}},
      {"tokens_per_s", e.tokensPerSecond},
      {"mfu", e.mfu},
      {"peak_flops_per_device", e.peakFlops},
      {"bottleneck", e.bottleneck},
  };
  Object axisLinks;
  for (size_t a = 0; a < mesh.axes.size(); ++a)
    axisLinks[mesh.axes[a].name] = mesh.axisWithinNode(a) ? "node" : "network";
  root["axis_links"] = std::move(axisLinks);
  if (e.federated) {
    const FederatedRound &r = *e.federated;
    root["federated"] = Object{{"clients", r.clients},
                               {"sampled", r.sampled},
                               {"local_steps", r.localSteps},
                               {"rounds", r.rounds},
                               {"update_bytes", r.updateBytes},
                               {"bytes_per_client_per_round", r.bytesPerClient},
                               {"server_bytes", r.serverBytes},
                               {"link", r.link},
                               {"local_s", r.localSeconds},
                               {"aggregation_s", r.aggregationSeconds},
                               {"round_s", r.roundSeconds},
                               {"total_s", r.totalSeconds}};
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return s;
}

std::string plan::cost::renderTrace(const Estimate &e) {
  using llvm::json::Array;
  using llvm::json::Object;
  static const std::map<std::string, int> tids = {
      {"compute", 0}, {"tensor", 1}, {"pipeline", 2}, {"data", 3}, {"bubble", 4}};
  Array events;
  for (auto &[name, tid] : tids)
    events.push_back(
        Object{{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", Object{{"name", name}}}});
  events.push_back(Object{{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", 0},
                          {"args", Object{{"name", "planc explain: one step of pipeline rank " +
                                                       std::to_string(e.traceRank) + " (predicted)"}}}});
  for (const TraceEvent &t : e.trace)
    events.push_back(Object{{"name", t.name},
                            {"ph", "X"},
                            {"pid", 0},
                            {"tid", tids.count(t.stream) ? tids.at(t.stream) : 5},
                            {"ts", t.start * 1e6},
                            {"dur", t.duration * 1e6}});
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(Object{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}))
     << "\n";
  return s;
}

std::string plan::cost::renderSearch(const std::vector<Candidate> &c, size_t total, const sema::Model &model,
                                     const sema::Mesh &mesh, size_t unbuilt) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "layouts of model " << model.name << " on mesh " << mesh.name << " (" << mesh.devices()
     << (mesh.devices() == 1 ? " device" : " devices") << ") that fit, fastest first: " << total << " found";
  if (total > c.size())
    os << ", the first " << c.size() << " shown";
  os << "\n";
  if (unbuilt)
    os << "(" << unbuilt << " more fit that this version of planc does not build, left out: the optimizer in "
       << "host memory or the parameters offloaded on cuda meshes, the parameters offloaded without the optimizer)\n";
  if (c.empty())
    return s;
  os << llvm::formatv("  {0,3} {1,5} {2,5} {3,5} {4,-16} {5,4} {6,-10} {7,4} {8,6} {9,12} {10,12} {11,6}  {12}\n", "#",
                      "data", "tens", "pipe", "schedule", "zero", "recompute", "sp", "micro", "memory", "step", "MFU",
                      "bottleneck");
  for (size_t i = 0; i < c.size(); ++i) {
    const sema::Layout &l = c[i].layout;
    const Estimate &e = c[i].estimate;
    os << llvm::formatv("  {0,3} {1,5} {2,5} {3,5} {4,-16} {5,4} {6,-10} {7,4} {8,6} {9,12} {10,12} {11,5:f1}%  {12}\n",
                        i + 1, l.data, l.tensor, l.pipeline,
                        l.pipeline > 1 ? schedule(l) + (l.keepActivations ? " +act" : "") : "-", l.zero,
                        sema::recomputeName(l.recompute), l.sequence ? "yes" : "no", l.micro,
                        formatBytes(double(e.perDevice.total())), seconds(e.stepSeconds), 100 * e.mfu,
                        e.bottleneck + offloadNote(l));
  }
  os << "\nbest layout, ready to paste into the train plan:\n" << parallelBlock(c.front().layout);
  return s;
}
