// A federated plan's run (docs/FEDERATED.md): each rank is one client, with its own data
// file (per_client); the rounds run the compiler's planc_round, whose sched ops
// (federated.cpp) sample the clients, train the sampled ones, aggregate their updates
// and step the server. Here: the clients' files and token counts, the round loop, its
// log and the export of the global model.
#include "trainer.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <glob.h>
#include <limits>
#include <memory>

namespace planrt::train {

planrt_status Trainer::clientFiles(std::vector<std::string> &files) {
  std::vector<std::string> matches;
  for (const std::string &pattern : files) {
    glob_t g{};
    int rc = ::glob(pattern.c_str(), 0, nullptr, &g); // sorted
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        matches.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH)
      return fail(PLANRT_ERR_IO, "per_client(\"%s\"): cannot list its matches", pattern.c_str());
  }
  if (int64_t(matches.size()) != m.fed.clients) {
    std::string list;
    for (const std::string &p : files)
      list += (list.empty() ? "\"" : ", \"") + p + "\"";
    return fail(PLANRT_ERR_ARG,
                "per_client(%s) matches %zu file%s, but the federated axis '%s' has %lld clients: each client needs "
                "its own data file",
                list.c_str(), matches.size(), matches.size() == 1 ? "" : "s", m.fed.axisName.c_str(),
                (long long)m.fed.clients);
  }
  int64_t client = ctx.mesh ? planrt_mesh_coord(ctx.mesh, m.fed.axis) : 0;
  files = {matches[size_t(client)]};
  return PLANRT_OK;
}

planrt_status Trainer::clientTokens() {
  auto &f = ctx.fed;
  // Each client's count at its index, summed over the client axis as 64-bit integers.
  std::vector<uint64_t> counts(size_t(m.fed.clients), 0);
  counts[size_t(f.client)] = planrt_data_tokens(train);
  if (ctx.mesh && m.fed.clients > 1) {
    planrt::Waiting w(ctx, "all_reduce over the client axis of the clients' token counts");
    if (planrt_status s = planrt_all_reduce(ctx.mesh, 1u << unsigned(m.fed.axis),
                                            reinterpret_cast<float *>(counts.data()), int64_t(2 * counts.size()),
                                            PLANRT_SUM_U64))
      return s;
  }
  f.tokens.assign(counts.begin(), counts.end());
  return PLANRT_OK;
}

planrt_status Trainer::saveRound(int64_t done) {
  int global = bufferId("global");
  if (planrt_status st = planrt_check_finite(data(global), m.numFloats, uint64_t(done - 1), "the global model"))
    return st;
  char name[64];
  std::snprintf(name, sizeof name, "/step-%08llu.safetensors", (unsigned long long)done);
  lastCheckpoint = checkpointDir + name;
  if (!rank0)
    return PLANRT_OK; // every rank holds the same global model
  std::vector<std::string> keep;
  std::vector<planrt_tensor> tensors;
  for (const Param &p : m.params) {
    int rank = int(p.fullShape.size());
    tensors.push_back({p.name.c_str(), PLANRT_F32, rank, p.fullShape.data(), data(global) + p.offset});
  }
  for (int k = 0; k < 2; ++k) // FedAdam's moments: the server's state
    if (int id = serverMoment(k); id >= 0)
      for (const Param &p : m.params)
        keep.push_back(std::string(k ? "server.exp_avg_sq." : "server.exp_avg.") + p.name);
  for (size_t i = 0; i < keep.size(); ++i) {
    const Param &p = m.params[i % m.params.size()];
    float *moments = data(serverMoment(int(i / m.params.size())));
    tensors.push_back({keep[i].c_str(), PLANRT_F32, int(p.fullShape.size()), p.fullShape.data(), moments + p.offset});
  }
  std::vector<std::string> meta = metadata("planc-fed-1", done);
  std::vector<const char *> mp = pointers(meta);
  return planrt_ckpt_save(checkpointDir.c_str(), uint64_t(done), int(m.checkpointKeep), tensors.data(), tensors.size(),
                          mp.data(), mp.size() / 2);
}

planrt_status Trainer::resumeRound(int64_t &first) {
  std::string file;
  uint64_t rounds = 0;
  bool sharded = false;
  if (planrt_status s = planrt::latestCheckpoint(o.resume, file, rounds, sharded))
    return s;
  planrt_st *st = nullptr;
  if (sharded || planrt_st_open(file.c_str(), &st) != PLANRT_OK)
    return fail(PLANRT_ERR_FORMAT, "%s: not a federated plan's round checkpoint (one safetensors file)", file.c_str());
  std::unique_ptr<planrt_st, void (*)(planrt_st *)> guard(st, planrt_st_close);
  const char *format = planrt_st_metadata(st, "format");
  if (!format || std::string(format) != "planc-fed-1")
    return fail(PLANRT_ERR_FORMAT, "%s: not a federated plan's round checkpoint (metadata format '%s', expected "
                                   "planc-fed-1)",
                file.c_str(), format ? format : "");
  int global = bufferId("global");
  for (const Param &p : m.params)
    if (planrt_status s = read(st, p.name, p, data(global) + p.offset))
      return s;
  for (int k = 0; k < 2; ++k)
    if (int id = serverMoment(k); id >= 0)
      for (const Param &p : m.params)
        if (planrt_status s = read(st, std::string(k ? "server.exp_avg_sq." : "server.exp_avg.") + p.name, p,
                                   data(id) + p.offset))
          return s;
  std::memcpy(data(params), data(global), size_t(m.numFloats) * sizeof(float));
  first = int64_t(rounds);
  progress.line("resuming from " + file + " after round " + std::to_string(first));
  return PLANRT_OK;
}

int Trainer::runFederated() {
  auto &f = ctx.fed;
  f.seed = m.seed;
  f.clients = m.fed.clients;
  f.client = ctx.mesh ? planrt_mesh_coord(ctx.mesh, m.fed.axis) : 0;
  f.localSteps = m.fed.localSteps;
  if (planrt_status s = clientTokens())
    return error(s);
  int global = bufferId("global");
  if (global < 0)
    return error(fail(PLANRT_ERR_FORMAT, "the federated executable's schedule has no 'global' buffer"));
  std::memcpy(data(global), data(params), size_t(m.numFloats) * sizeof(float));
  int64_t first = 0, rounds = o.steps ? *o.steps : m.fed.rounds;
  if (!o.resume.empty())
    if (planrt_status s = resumeRound(first))
      return error(s);
  double seconds = 0;
  for (int64_t r = first; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t before[4], after[4], comm[4];
    commTotals(before);
    ctx.step = r;
    runProgram(e.round, r);
    if (ctx.status)
      return error(fail(ctx.status, "round %lld: %s", (long long)r, ctx.error.c_str()));
    commTotals(after);
    for (int k = 0; k < 4; ++k)
      comm[k] = after[k] - before[k];
    lastLoss = state[7];
    double valLoss = std::numeric_limits<double>::quiet_NaN();
    bool last = r + 1 == rounds;
    if (evaluating() && ((r + 1) % m.evalEvery == 0 || last))
      if (planrt_status st = validationLoss(valLoss))
        return error(st);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (log)
      if (planrt_status st = planrt_log_round(log, uint64_t(r), lastLoss, valLoss, f.sampled.data(), f.sampled.size(),
                                              comm))
        return error(st);
    char buf[160];
    std::snprintf(buf, sizeof buf, "round %lld/%lld · %zu clients · loss %.4f", (long long)(r + 1),
                  (long long)rounds, f.sampled.size(), lastLoss);
    std::string line = buf;
    if (!std::isnan(valLoss)) {
      std::snprintf(buf, sizeof buf, " · val loss %.4f", valLoss);
      line += buf;
    }
    progress.line(line);
    if (checkpointing() && ((r + 1) % checkpointEvery == 0 || last))
      if (planrt_status st = saveRound(r + 1))
        return error(st);
  }
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "done · %lld rounds (to round %lld) of %lld local steps on %lld of %lld clients · final loss %.4f · "
                "%.2f s",
                (long long)(rounds - first), (long long)rounds, (long long)m.fed.localSteps, (long long)m.fed.sampled,
                (long long)m.fed.clients, lastLoss, seconds);
  progress.line(std::string(buf) + (lastCheckpoint.empty() ? "" : " · checkpoint " + lastCheckpoint), true);
  return finish();
}

} // namespace planrt::train
