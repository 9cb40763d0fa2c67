// Checks of train declarations: the order of the sections, the model and the
// mesh. Each section of sema::Train has its function in a Train*.cpp file.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

TrainCheck::TrainCheck(Sema &sema, const ast::Decl &decl)
    : sema(sema), diags(sema.diags), decl(decl), what("train '" + decl.name + "'"),
      sec(sema, decl.entries, what,
          {"model", "mesh", "data", "val", "batch", "micro", "seq", "parallel", "shard", "precision", "loss_scale",
           "recompute", "optimizer", "schedule", "clip", "steps", "seed", "eval", "checkpoint", "init", "adapt", "quantize", "tokenizer", "federated",
           "server"}) {
  t.name = decl.name;
  t.loc = decl.nameLoc;
  t.baseDir = sema.baseDir(decl.loc);
}

void TrainCheck::run() {
  // Later sections read what earlier ones derived (the mesh, the parallel sizes,
  // micro), so this order is also the order of the errors.
  checkModelAndMesh();
  checkData();
  checkSizes();
  checkParallel();
  checkAxisRoles();
  checkParallelRules();
  checkAccumulation();
  checkSeq();
  checkShard();
  checkLayoutRules();
  checkPrecision();
  checkOptimizer();
  checkSchedule();
  checkClip();
  checkEval();
  checkCheckpoint();
  checkInit();
  checkAdapt();
  checkQuantize();
  checkFederated();
  checkImages();
  if (ok && diags.errorCount() == 0)
    sema.program.trains.push_back(std::move(t));
}

const Expr *TrainCheck::need(const char *key, const char *example) {
  const Expr *e = sec.value(key);
  if (!e && !sec.get(key) && !sec.misspelt(key)) {
    diags.error(decl.nameLoc, what + " needs '" + key + "', as in '" + key + " = " + example + "'");
    ok = false;
  }
  if (!e)
    ok = false;
  return e;
}

std::optional<std::string> TrainCheck::symbol(const Expr *e, const char *key) {
  Value v = sema.eval(*e, nullptr);
  if (v.kind != Value::Kind::Name) {
    sema.typeError(v, std::string("'") + key + "' of " + what, "a name");
    return std::nullopt;
  }
  return v.s;
}

void TrainCheck::checkModelAndMesh() {
  if (const Expr *e = need("model", "tiny"))
    if (auto name = symbol(e, "model"))
      if (auto idx = sema.modelIndex(*name, e->loc)) {
        t.model = *idx;
        model = &sema.program.models[*idx];
      }
  if (const Expr *e = need("mesh", "cpu4"))
    if (auto name = symbol(e, "mesh")) {
      const ast::Decl *meshDecl = sema.decls.lookup(*name);
      for (size_t i = 0; i < sema.program.meshes.size(); ++i)
        if (sema.program.meshes[i].name == *name) {
          t.mesh = int(i);
          mesh = &sema.program.meshes[i];
        }
      if (!meshDecl || meshDecl->kind != ast::Decl::Kind::Mesh) {
        std::string best =
            closestMatch(*name, sema.decls.names([](const ast::Decl &d) { return d.kind == ast::Decl::Kind::Mesh; }));
        diags.error(e->loc, "unknown mesh '" + *name + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?"));
        ok = false;
      } else if (!mesh) {
        ok = false; // the mesh itself has errors, already reported
      }
    }
}

void Sema::checkTrain(const ast::Decl &decl) { TrainCheck(*this, decl).run(); }
