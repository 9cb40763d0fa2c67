// What a train plan does every N steps besides training: evaluation on the
// validation data and checkpoints.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

void TrainCheck::checkEval() {
  if (const ast::Entry *ev = sec.section("eval")) {
    Section s(sema, ev->children, "the eval section", {"every", "batches"});
    for (auto [key, out] : {std::pair<const char *, int64_t *>{"every", &t.evalEvery}, {"batches", &t.evalBatches}}) {
      const Expr *e = s.value(key);
      if (!e) {
        if (!s.get(key))
          diags.error(ev->loc, std::string("the eval section needs '") + key + "'");
        ok = false;
        continue;
      }
      if (auto i = sema.toPositiveInt(sema.eval(*e, nullptr), std::string("'") + key + "' of eval"))
        *out = *i;
      else
        ok = false;
    }
    if (t.val.empty() && !t.valImages.any()) {
      diags.error(ev->loc, model && model->images ? "eval needs validation images: add 'val = images(\"…\")'"
                                                  : "eval needs validation data: add 'val = tokens(\"…\")'");
      ok = false;
    }
  }
}

void TrainCheck::checkCheckpoint() {
  if (const ast::Entry *ck = sec.section("checkpoint")) {
    Section s(sema, ck->children, "the checkpoint section", {"every", "dir", "keep"});
    if (const Expr *e = s.value("every")) {
      if (auto i = sema.toPositiveInt(sema.eval(*e, nullptr), "'every' of checkpoint"))
        t.checkpointEvery = *i;
      else
        ok = false;
    } else if (!s.get("every")) {
      diags.error(ck->loc, "the checkpoint section needs 'every'");
      ok = false;
    }
    if (const Expr *e = s.value("dir")) {
      if (auto str = sema.toString(sema.eval(*e, nullptr), "'dir' of checkpoint")) {
        if (str->empty()) {
          diags.error(e->loc, "'dir' of checkpoint is empty");
          ok = false;
        }
        t.checkpointDir = *str;
      } else {
        ok = false;
      }
    } else if (!s.get("dir")) {
      diags.error(ck->loc, "the checkpoint section needs 'dir'");
      ok = false;
    }
    if (const Expr *e = s.value("keep")) {
      if (auto i = sema.toPositiveInt(sema.eval(*e, nullptr), "'keep' of checkpoint"))
        t.checkpointKeep = *i;
      else
        ok = false;
    }
  }
}
