// The precision of a train plan: the compute type, loss scaling and activation
// recomputation.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

void TrainCheck::checkPrecision() {
  bool precisionOk = true;
  if (const Expr *e = sec.value("precision")) {
    auto p = sema.toChoice(sema.eval(*e, nullptr), "precision", {"fp32", "bf16", "fp16"});
    precisionOk = p.has_value();
    if (!p)
      ok = false;
    else
      t.precision = *p == "fp32" ? sema::Precision::FP32 : *p == "bf16" ? sema::Precision::BF16 : sema::Precision::FP16;
  }
  if (t.precision == sema::Precision::FP16)
    t.lossScale = sema::LossScale::Dynamic;
  if (const Expr *e = sec.value("loss_scale")) {
    Value v = sema.eval(*e, nullptr);
    if (v.kind == Value::Kind::None && t.precision != sema::Precision::FP16) {
      // `loss_scale = none` states what fp32 and bf16 do anyway.
    } else if (t.precision != sema::Precision::FP16 && !v.isError()) {
      if (precisionOk)
        diags.error(e->loc, "loss_scale applies only to precision = fp16");
      ok = false;
    } else if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Float) {
      if (!(v.f >= 1)) {
        diags.error(e->loc, "a static loss scale must be at least 1");
        ok = false;
      }
      t.lossScale = sema::LossScale::Static;
      t.staticLossScale = v.f;
    } else if (auto c = sema.toChoice(v, "loss_scale", {"dynamic", "none"})) {
      if (*c == "none") {
        diags.error(e->loc, "fp16 training without loss scaling underflows small gradients to zero")
            .note("use 'loss_scale = dynamic', a static scale such as 'loss_scale = 1024', or precision = bf16");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (const Expr *e = sec.value("recompute")) {
    auto r = sema.toChoice(sema.eval(*e, nullptr), "recompute mode", {"none", "full", "selective"});
    if (!r)
      ok = false;
    else
      t.recompute = *r == "none"   ? sema::Recompute::None
                    : *r == "full" ? sema::Recompute::Full
                                   : sema::Recompute::Selective;
  }
}
