// Checks of generate declarations: the model and its checkpoint, an optional
// retrieval graph as context, the sampling settings and the key/value window.
#include "SemaInternal.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

void Sema::checkGenerate(const ast::Decl &decl) {
  std::string what = "generate '" + decl.name + "'";
  Section sec(*this, decl.entries, what,
              {"model", "checkpoint", "context", "max_tokens", "temperature", "top_k", "seed", "window", "tokenizer"});
  sema::Generate g;
  g.name = decl.name;
  g.loc = decl.nameLoc;
  g.baseDir = baseDir(decl.loc);
  bool ok = true;
  if (const Expr *e = sec.value("model")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::Name) {
      typeError(v, "'model'", "a model name");
      ok = false;
    } else if (auto idx = modelIndex(v.s, v.loc)) {
      g.model = *idx;
    } else {
      ok = false;
    }
  } else if (!sec.get("model")) {
    diags.error(decl.nameLoc, what + " needs 'model'");
    ok = false;
  }
  if (const Expr *e = sec.value("checkpoint")) {
    if (auto s = toString(eval(*e, nullptr), "'checkpoint'")) {
      if (s->empty()) {
        diags.error(e->loc, "'checkpoint' of " + what + " is empty");
        ok = false;
      }
      g.checkpoint = *s;
    } else {
      ok = false;
    }
  } else if (!sec.get("checkpoint")) {
    diags.error(decl.nameLoc, what + " needs 'checkpoint', the directory a train plan wrote");
    ok = false;
  }
  if (const Expr *e = sec.value("context")) {
    Value v = eval(*e, nullptr);
    if (v.kind != Value::Kind::None) {
      const ast::Decl *d = v.kind == Value::Kind::Name ? decls.lookup(v.s) : nullptr;
      if (!d || d->kind != ast::Decl::Kind::Retrieval) {
        if (v.kind == Value::Kind::Name) {
          std::string best =
              closestMatch(v.s, decls.names([](const ast::Decl &x) { return x.kind == ast::Decl::Kind::Retrieval; }));
          diags.error(v.loc,
                      "unknown retrieval graph '" + v.s + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
        } else {
          typeError(v, "'context'", "the name of a retrieval graph");
        }
        ok = false;
      } else {
        for (size_t i = 0; i < program.retrievals.size(); ++i)
          if (program.retrievals[i].name == v.s)
            g.context = int(i);
        if (g.context < 0)
          ok = false; // that retrieval has errors of its own
      }
    }
  }
  if (const Expr *e = sec.value("max_tokens")) {
    if (auto i = toPositiveInt(eval(*e, nullptr), "'max_tokens'"))
      g.maxTokens = *i;
    else
      ok = false;
  }
  if (const Expr *e = sec.value("temperature")) {
    auto f = toFloat(eval(*e, nullptr), "'temperature'");
    if (f && *f >= 0)
      g.temperature = *f;
    else {
      if (f)
        diags.error(e->loc, "'temperature' must not be negative (0 = greedy)");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("top_k")) {
    auto i = toInt(eval(*e, nullptr), "'top_k'");
    if (i && *i >= 0)
      g.topK = *i;
    else {
      if (i)
        diags.error(e->loc, "'top_k' must not be negative (0 = off)");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("seed")) {
    auto i = toInt(eval(*e, nullptr), "'seed'");
    if (i && *i >= 0)
      g.seed = *i;
    else {
      if (i)
        diags.error(e->loc, "'seed' must not be negative");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("window")) {
    if (auto i = toPositiveInt(eval(*e, nullptr), "'window'")) {
      g.window = *i;
      const sema::Model *m = g.model >= 0 ? &program.models[size_t(g.model)] : nullptr;
      if (m && m->maxSeq > 0 && g.window > m->maxSeq) {
        diags.error(e->loc, "'window' " + std::to_string(g.window) + " exceeds model '" + m->name + "''s context of " +
                                std::to_string(m->maxSeq) + " positions (its positional table)");
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (g.model >= 0) {
    g.window = program.models[size_t(g.model)].maxSeq;
    if (g.window == 0) {
      diags.error(decl.nameLoc, what + " needs 'window', the positions its key/value cache holds: model '" +
                                    program.models[size_t(g.model)].name + "' has no positional table to bound them");
      ok = false;
    }
  }
  if (const Expr *e = sec.value("tokenizer")) {
    if (auto path = bpePath(eval(*e, nullptr), g.baseDir))
      g.tokenizer = *path;
    else
      ok = false;
  }
  if (ok && diags.errorCount() == 0)
    program.generates.push_back(std::move(g));
}
