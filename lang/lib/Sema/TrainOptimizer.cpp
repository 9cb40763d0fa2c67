// The optimizer of a train plan: AdamW's settings, the learning-rate schedule and
// gradient clipping.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

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
  if (const Expr *e = sec.value("optimizer")) {
    Value v = sema.eval(*e, nullptr);
    if (v.kind == Value::Kind::Call && v.s == "adamw") {
      if (auto args =
              bindArgs(sema, {"adamw", {{"lr", true}, {"betas", false}, {"eps", false}, {"weight_decay", false}}}, v)) {
        auto &a = *args;
        if (auto lr = sema.toFloat(a["lr"], "'lr'")) {
          t.optimizer.lr = *lr;
          if (!(*lr > 0)) {
            diags.error(a["lr"].loc, "the learning rate must be positive");
            ok = false;
          }
        } else {
          ok = false;
        }
        if (a.count("betas"))
          betas(a["betas"], t.optimizer.beta1, t.optimizer.beta2);
        if (a.count("eps")) {
          auto eps = sema.toFloat(a["eps"], "'eps'");
          if (eps && *eps > 0)
            t.optimizer.eps = *eps;
          else {
            if (eps)
              diags.error(a["eps"].loc, "'eps' must be positive");
            ok = false;
          }
        }
        if (a.count("weight_decay")) {
          auto wd = sema.toFloat(a["weight_decay"], "'weight_decay'");
          if (wd && *wd >= 0)
            t.optimizer.weightDecay = *wd;
          else {
            if (wd)
              diags.error(a["weight_decay"].loc, "'weight_decay' must not be negative");
            ok = false;
          }
        }
      } else {
        ok = false;
      }
    } else if (!v.isError()) {
      std::string name = v.kind == Value::Kind::Call || v.kind == Value::Kind::Name ? v.s : "";
      auto d = diags.error(e->loc, name.empty() ? "the optimizer is written 'adamw(lr: …)'"
                                                : "optimizer '" + name + "' is not implemented");
      d.note("planc implements adamw(lr, betas: [b1, b2], eps, weight_decay)");
      ok = false;
    } else {
      ok = false;
    }
  } else if (!sec.get("optimizer")) {
    diags.error(decl.nameLoc, what + " needs 'optimizer', as in 'optimizer = adamw(lr: 3e-4)'");
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
