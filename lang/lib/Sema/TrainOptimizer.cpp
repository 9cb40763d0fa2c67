// The optimizer of a train plan: AdamW's settings, the learning-rate schedule and
// gradient clipping.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

std::optional<std::map<std::string, Value>> TrainCheck::optimizerArgs(const Value &v, bool adam,
                                                                     std::vector<Signature::Param> more) {
  Signature sig{v.s, {{"lr", true}}};
  for (Signature::Param &p : more)
    if (!p.name.empty())
      sig.params.push_back(std::move(p));
  if (adam)
    sig.params.insert(sig.params.end(), {{"betas", false}, {"eps", false}});
  auto args = bindArgs(sema, sig, v);
  ok = ok && args.has_value();
  return args;
}

void TrainCheck::numberArg(std::map<std::string, Value> &a, const char *key, double &out, bool (*valid)(double),
                           const char *must) {
  if (!a.count(key))
    return;
  auto x = sema.toFloat(a[key], std::string("'") + key + "'");
  if (x && valid(*x)) {
    out = *x;
  } else {
    if (x)
      diags.error(a[key].loc, must);
    ok = false;
  }
}

void TrainCheck::betas(const Value &b, double &beta1, double &beta2) {
  if (b.kind != Value::Kind::List || b.items.size() != 2 || !b.items[0].key.empty()) {
    sema.typeError(b, "'betas'", "a list of two numbers, as in [0.9, 0.95]");
    ok = false;
    return;
  }
  auto b1 = sema.toFloat(*b.items[0].value, "beta1");
  auto b2 = sema.toFloat(*b.items[1].value, "beta2");
  if (b1 && b2 && *b1 >= 0 && *b1 < 1 && *b2 >= 0 && *b2 < 1) {
    beta1 = *b1;
    beta2 = *b2;
  } else {
    if (b1 && b2)
      diags.error(b.loc, "betas must lie in [0, 1)");
    ok = false;
  }
}

void TrainCheck::checkOptimizer() {
  const Expr *e = sec.value("optimizer");
  if (!e) {
    if (!sec.get("optimizer")) {
      diags.error(decl.nameLoc, what + " needs 'optimizer', as in 'optimizer = adamw(lr: 3e-4)'");
      ok = false;
    }
    return;
  }
  Value v = sema.eval(*e, nullptr);
  bool sgd = v.kind == Value::Kind::Call && v.s == "sgd";
  if (v.kind == Value::Kind::Call && (v.s == "adamw" || sgd)) {
    auto args = optimizerArgs(v, !sgd, {{"weight_decay", false}, {sgd ? "momentum" : "", false}});
    if (!args)
      return;
    auto &a = *args;
    t.optimizer.kind = sgd ? sema::OptimizerKind::SGD : sema::OptimizerKind::AdamW;
    auto number = [&](const char *key, double &out, bool (*valid)(double), const char *must) {
      numberArg(a, key, out, valid, must);
    };
    number("lr", t.optimizer.lr, [](double x) { return x > 0; }, "the learning rate must be positive");
    if (a.count("betas"))
      betas(a["betas"], t.optimizer.beta1, t.optimizer.beta2);
    number("eps", t.optimizer.eps, [](double x) { return x > 0; }, "'eps' must be positive");
    number("weight_decay", t.optimizer.weightDecay, [](double x) { return x >= 0; },
           "'weight_decay' must not be negative");
    number("momentum", t.optimizer.momentum, [](double x) { return x >= 0 && x < 1; },
           "'momentum' must lie in [0, 1)");
    if (sgd && t.parallel.optimizerOffload.any()) {
      diags.error(e->loc, "sgd(…) with an offloaded optimizer is not implemented in this version of planc")
          .note(t.parallel.optimizerOffload.loc, "the offload streams AdamW's moments");
      ok = false;
    }
  } else if (!v.isError()) {
    std::string name = v.kind == Value::Kind::Call || v.kind == Value::Kind::Name ? v.s : "";
    auto d = diags.error(e->loc, name.empty() ? "the optimizer is written 'adamw(lr: …)'"
                                              : "optimizer '" + name + "' is not implemented");
    d.note("planc implements adamw(lr, betas: [b1, b2], eps, weight_decay) and sgd(lr, momentum, weight_decay)");
    ok = false;
  } else {
    ok = false;
  }
}

void TrainCheck::checkSchedule() {
  if (const Expr *e = sec.value("schedule")) {
    Value v = sema.eval(*e, nullptr);
    std::string kind = v.kind == Value::Kind::Name || v.kind == Value::Kind::Call ? v.s : "";
    if (kind != "constant" && kind != "linear" && kind != "cosine") {
      if (!v.isError()) {
        std::string best = closestMatch(kind, {"constant", "linear", "cosine"});
        diags
            .error(e->loc, "unknown schedule" + (kind.empty() ? std::string() : " '" + kind + "'") +
                               (best.empty() ? "" : "; did you mean '" + best + "'?"))
            .note("schedules are constant, linear(warmup: N, min_lr: x) and cosine(warmup: N, min_lr: x)");
      }
      ok = false;
    } else {
      t.schedule.kind = kind == "constant" ? sema::LRSchedule::Constant
                        : kind == "linear" ? sema::LRSchedule::Linear
                                           : sema::LRSchedule::Cosine;
      if (v.kind == Value::Kind::Call) {
        Signature sig{kind, {{"warmup", false}, {"min_lr", false}}};
        if (kind == "constant")
          sig.params.pop_back();
        if (auto args = bindArgs(sema, sig, v)) {
          if (args->count("warmup")) {
            auto w = sema.toInt((*args)["warmup"], "'warmup'");
            if (w && *w >= 0)
              t.schedule.warmup = *w;
            else {
              if (w)
                diags.error((*args)["warmup"].loc, "'warmup' must not be negative");
              ok = false;
            }
          }
          if (args->count("min_lr")) {
            auto m = sema.toFloat((*args)["min_lr"], "'min_lr'");
            if (m && *m >= 0 && *m <= t.optimizer.lr)
              t.schedule.minLr = *m;
            else {
              if (m)
                diags.error((*args)["min_lr"].loc, "'min_lr' must lie between 0 and the learning rate");
              ok = false;
            }
          }
        } else {
          ok = false;
        }
      }
      if (t.steps > 0 && t.schedule.warmup > t.steps) {
        diags.error(e->loc, "warmup of " + std::to_string(t.schedule.warmup) + " steps is longer than the " +
                                std::to_string(t.steps) + " steps of training");
        ok = false;
      }
    }
  }
}

void TrainCheck::checkClip() {
  if (const Expr *e = sec.value("clip")) {
    Value v = sema.eval(*e, nullptr);
    if (v.kind != Value::Kind::None) {
      auto c = sema.toFloat(v, "'clip'");
      if (c && *c > 0)
        t.clip = *c;
      else {
        if (c)
          diags.error(e->loc, "'clip' must be positive (or none)");
        ok = false;
      }
    }
  }
}
