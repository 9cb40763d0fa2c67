// Federated training (EXTENSIONS.md §3): `parallel { federated = AXIS }`, whose
// coordinates are the clients; `federated = fedavg(…)`, the round; `server = sgd(…) |
// adam(…)`, the server's optimizer over the clients' mean update; and
// `data = per_client(…)`, one token file per client.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

namespace {
/// Micro-batches of validation data a round's evaluation reads without an eval section.
constexpr int64_t kFederatedEvalBatches = 4;
} // namespace

void TrainCheck::checkFederated() {
  const ast::Entry *entry = sec.get("federated");
  bool axis = t.federated.any();
  if (entry && !axis) {
    diags.error(entry->loc, "'federated = fedavg(…)' needs the axis whose coordinates are the clients")
        .note("add 'federated = <axis>' to the parallel section, as in 'parallel { federated = clients }'");
    ok = false;
  }
  if (axis && !entry && !sec.misspelt("federated")) {
    diags.error(federatedLoc, "the parallel section makes '" + t.federated.axis +
                                  "' a federated axis, but the plan has no round")
        .note("add 'federated = fedavg(rounds: 20, local_steps: 10)' to " + what);
    ok = false;
  }
  if (const ast::Entry *server = sec.get("server"); server && !entry) {
    diags.error(server->loc, "'server' is the optimizer of a federated plan's server, but " + what +
                                 " is not federated")
        .note("a federated plan has 'federated = fedavg(…)' and 'parallel { federated = <axis> }'");
    ok = false;
  }
  if (t.dataPerClient && !axis) {
    diags.error(perClientLoc, "per_client(…) gives each client of a federated plan its own data, but " + what +
                                  " is not federated")
        .note("write tokens(\"…\") for data every rank samples from");
    ok = false;
  }
  if (!entry || !axis)
    return;
  if (auto args = callKey("federated",
                          {"fedavg",
                           {{"rounds", true},
                            {"local_steps", true},
                            {"fraction", false},
                            {"weighting", false},
                            {"prox", false},
                            {"secure", false},
                            {"dp", false}}},
                          "a round, as in fedavg(rounds: 20, local_steps: 10)")) {
    t.federated.loc = sec.value("federated")->loc;
    checkFedAvgArgs(*args);
  }
  checkServer();
  checkFederatedRules();
}

void TrainCheck::checkFedAvgArgs(std::map<std::string, Value> &a) {
  sema::Federated &f = t.federated;
  if (auto r = sema.toPositiveInt(a["rounds"], "'rounds' of fedavg"))
    f.rounds = *r;
  else
    ok = false;
  if (auto l = sema.toPositiveInt(a["local_steps"], "'local_steps' of fedavg"))
    f.localSteps = *l;
  else
    ok = false;
  // An optional number of fedavg(…) that `valid` accepts, else `error` at it.
  auto number = [&](const char *key, auto valid, const char *error, double &out) {
    if (!a.count(key))
      return;
    auto x = sema.toFloat(a[key], std::string("'") + key + "' of fedavg");
    if (x && valid(*x)) {
      out = *x;
      return;
    }
    if (x)
      diags.error(a[key].loc, error);
    ok = false;
  };
  number("fraction", [](double x) { return x > 0 && x <= 1; },
         "'fraction' of fedavg is the share of clients each round samples: it lies in (0, 1]", f.fraction);
  if (a.count("weighting")) {
    if (auto w = sema.toChoice(a["weighting"], "client weighting", {"tokens", "uniform"}))
      f.weighting = *w == "tokens" ? sema::FedWeighting::Tokens : sema::FedWeighting::Uniform;
    else
      ok = false;
  }
  number("prox", [](double mu) { return mu >= 0; },
         "'prox' is FedProx's μ, the weight of μ/2·‖w − w_global‖²: it must not be negative", f.prox);
  if (a.count("secure")) {
    if (auto b = sema.toBool(a["secure"], "'secure' of fedavg"))
      f.secure = *b;
    else
      ok = false;
  }
  if (a.count("dp")) {
    Value &v = a["dp"];
    if (v.kind == Value::Kind::None || (v.kind == Value::Kind::Name && v.s == "none")) {
      // no differential privacy
    } else if (v.kind == Value::Kind::Call && v.s == "gaussian") {
      if (auto g = bindArgs(sema, {"gaussian", {{"clip", true}, {"noise", true}}}, v)) {
        auto clip = sema.toFloat((*g)["clip"], "'clip' of gaussian");
        auto noise = sema.toFloat((*g)["noise"], "'noise' of gaussian");
        if (clip && !(*clip > 0)) {
          diags.error((*g)["clip"].loc, "'clip' of gaussian is the norm each client's update is clipped to: it "
                                        "must be positive");
          clip.reset();
        }
        if (noise && !(*noise >= 0)) {
          diags.error((*g)["noise"].loc, "'noise' of gaussian is the noise multiplier σ: it must not be negative");
          noise.reset();
        }
        if (clip && noise) {
          f.dpClip = *clip;
          f.dpNoise = *noise;
        } else {
          ok = false;
        }
      } else {
        ok = false;
      }
    } else if (!v.isError()) {
      sema.typeError(v, "'dp' of fedavg", "none, or gaussian(clip: C, noise: σ)");
      ok = false;
    } else {
      ok = false;
    }
  }
  if (f.dpClip > 0 && f.weighting != sema::FedWeighting::Uniform) {
    diags.error(a["dp"].loc, "differential privacy needs 'weighting: uniform'")
        .note("DP-FedAvg bounds each client's share of the mean by clip / sampled clients; a client weighted by "
              "its tokens could weigh more, so the noise would not cover it");
    ok = false;
  }
}

void TrainCheck::checkServer() {
  const Expr *e = sec.value("server");
  if (!e)
    return; // sgd(lr: 1.0): FedAvg
  Value v = sema.eval(*e, nullptr);
  auto &s = t.federated.server;
  if (v.kind == Value::Kind::Call && (v.s == "sgd" || v.s == "adam")) {
    bool adam = v.s == "adam";
    auto args = optimizerArgs(v, adam, {});
    if (!args)
      return;
    auto &a = *args;
    s.kind = adam ? sema::ServerOptimizer::Adam : sema::ServerOptimizer::SGD;
    auto positive = [](double x) { return x > 0; };
    numberArg(a, "lr", s.lr, positive, "the server's learning rate must be positive");
    if (a.count("betas"))
      betas(a["betas"], s.beta1, s.beta2);
    numberArg(a, "eps", s.eps, positive, "the server's 'eps' (FedAdam's τ) must be positive");
  } else if (!v.isError()) {
    std::string name = v.kind == Value::Kind::Call || v.kind == Value::Kind::Name ? v.s : "";
    diags.error(e->loc, name.empty() ? "the server's optimizer is written 'sgd(lr: 1.0)' or 'adam(lr: 1e-2)'"
                                     : "server optimizer '" + name + "' is not implemented")
        .note("planc implements sgd(lr) (FedAvg with lr 1) and adam(lr, betas: [b1, b2], eps) (FedAdam)");
    ok = false;
  } else {
    ok = false;
  }
}

void TrainCheck::checkFederatedRules() {
  auto refuse = [&](ast::Loc loc, const std::string &what, const std::string &note) {
    diags.error(loc, what + " in a federated plan is not implemented in this version of planc").note(note);
    ok = false;
  };
  if (!t.dataPerClient) {
    const ast::Entry *data = sec.get("data");
    diags.error(data ? data->loc : decl.nameLoc, "a federated plan's data stays with its clients: write "
                                                 "'data = per_client(\"clients/*/train.bin\")'")
        .note("per_client's sorted matches are the clients' files, one per coordinate of '" + t.federated.axis + "'");
    ok = false;
  }
  if (const ast::Entry *steps = sec.get("steps")) {
    diags.error(steps->loc, "a federated plan runs rounds, not steps")
        .note("set 'rounds' and 'local_steps' in fedavg(…); each client takes local_steps optimizer steps a round");
    ok = false;
  }
  if (mesh && mesh->kind == sema::DeviceKind::CUDA)
    refuse(federatedLoc, "a cuda mesh", "federated plans build for cpu meshes, one process per client");
  std::string layout = t.dataParallel > 1        ? "a data axis"
                       : t.tensorParallel > 1    ? "a tensor axis"
                       : t.pipelineParallel > 1  ? "a pipeline axis"
                       : t.parallel.zero > 0     ? "ZeRO"
                       : t.parallel.optimizerOffload.any() || t.parallel.paramsOffload.any() ? "offload"
                                                                                               : "";
  if (!layout.empty())
    refuse(parallelEntry ? parallelEntry->loc : decl.nameLoc, layout,
           "each client trains on one device here: give the other axes size 1 (or 'replicate' them)");
  if (const ast::Entry *a = sec.get("adapt"))
    refuse(a->loc, "'adapt'", "train the whole model federated, or fine-tune without 'federated'");
  if (t.schedule.kind != sema::LRSchedule::Constant || t.schedule.warmup > 0)
    refuse(sec.get("schedule")->loc, "a learning-rate schedule",
           "the clients' optimizer starts afresh each round at its constant 'lr'");
  t.steps = t.federated.rounds * t.federated.localSteps;
  // The global model is evaluated after every round when the plan has validation data.
  if (!t.val.empty() && t.evalEvery == 0) {
    t.evalEvery = 1;
    t.evalBatches = kFederatedEvalBatches;
  }
}
