// planc explain for a federated plan (docs/FEDERATED.md): a round is local_steps of the
// client's step, which the estimate prices as a one-device plan, then one all-reduce over
// the client axis of the clients' fixed-point updates (8 bytes per float of the flat
// layout, and one for the round loss), exactly what the runtime counts.
#include "plan/Compiler/CostModel.h"
#include "plan/Training/DataParallel.h"

using namespace plan;

void plan::cost::addFederated(Estimate &e, const sema::Model &model, const sema::Train &train,
                              const sema::Mesh &mesh, const Calibration &cal) {
  const sema::Federated &f = train.federated;
  if (!f.any())
    return;
  FederatedRound r;
  r.clients = f.clients;
  r.sampled = f.sampled();
  r.localSteps = f.localSteps;
  r.rounds = f.rounds;
  // The flat layout plan-train-abi gives the client's parameters (one shard).
  std::vector<int64_t> counts;
  std::vector<bool> decayed;
  for (const sema::Parameter &p : model.params) {
    counts.push_back(p.numElements());
    decayed.push_back(p.shape.size() >= 2);
  }
  int64_t floats = training::flatLayout(counts, decayed, 1).total;
  r.updateBytes = 8 * (floats + 1);
  r.bytesPerClient =
      int64_t(training::ringBytes(training::Collective::AllReduce, f.clients, uint64_t(r.updateBytes)));
  // The clients' axis inside a node when the node holds all of them (row-major placement).
  bool cuda = mesh.kind == sema::DeviceKind::CUDA;
  bool inNode = f.clients <= mesh.perNode && mesh.perNode % f.clients == 0;
  auto link = mesh.links.find(inNode ? "node" : "network");
  double bandwidth = link != mesh.links.end() ? link->second
                     : cuda                   ? (inNode ? cal.cudaNodeBandwidth : cal.cudaNetworkBandwidth)
                                              : cal.cpuLinkBandwidth;
  double latency = inNode ? cal.nodeLatency : cal.networkLatency;
  r.link = inNode ? "node" : "network";
  r.aggregationSeconds = f.clients > 1 ? 2.0 * double(f.clients - 1) * latency +
                                             double(r.bytesPerClient) / (bandwidth * cal.linkEfficiency)
                                       : 0;
  r.localSeconds = double(f.localSteps) * e.stepSeconds;
  r.roundSeconds = r.localSeconds + r.aggregationSeconds;
  r.totalSeconds = double(f.rounds) * r.roundSeconds;
  // Held on every rank between rounds: the global model, the update's integers, FedAdam's moments.
  int64_t moments = f.server.kind == sema::ServerOptimizer::Adam ? 2 : 0;
  r.serverBytes = 4 * floats * (1 + moments) + r.updateBytes;
  e.buffers.push_back({"global model", 4 * floats, true});
  e.buffers.push_back({"client update (64-bit fixed point)", r.updateBytes, true});
  if (moments)
    e.buffers.push_back({"server moments (FedAdam)", 4 * floats * moments, true});
  e.perDevice.buffers += r.serverBytes;
  if (!e.perRank.empty())
    e.perRank[size_t(e.worstRank)].buffers += r.serverBytes;
  e.federated = r;
}
