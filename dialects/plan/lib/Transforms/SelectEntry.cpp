// plan-select-entry: keep one entry declaration and what it references.
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Dialect/Plan/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace plan::pl {
#define GEN_PASS_DEF_PLANSELECTENTRY
#include "plan/Dialect/Plan/Transforms/Passes.h.inc"
} // namespace plan::pl

using namespace mlir;
using namespace plan::pl;

namespace {
struct SelectEntry : plan::pl::impl::PlanSelectEntryBase<SelectEntry> {
  using PlanSelectEntryBase::PlanSelectEntryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable table(module);
    Operation *entryOp = table.lookup(entry);
    if (!entryOp || !isa<TrainOp, RetrievalOp, GenerateOp>(entryOp)) {
      std::string names;
      for (Operation &op : module.getOps())
        if (isa<TrainOp, RetrievalOp, GenerateOp>(op))
          names += (names.empty() ? "" : ", ") + SymbolTable::getSymbolName(&op).getValue().str();
      InFlightDiagnostic diag = module.emitError();
      if (!entryOp)
        diag << "no declaration named '" << entry << "'";
      else
        diag << "'" << entry << "' is a " << entryOp->getName().stripDialect()
             << "; the entry is a train, retrieval or generate declaration";
      diag << "; the entries are: " << (names.empty() ? std::string("none") : names);
      return signalPassFailure();
    }
    // Everything reachable from the entry through symbol references.
    llvm::SetVector<Operation *> keep;
    keep.insert(entryOp);
    for (size_t i = 0; i < keep.size(); ++i) {
      auto uses = SymbolTable::getSymbolUses(keep[i]);
      if (!uses)
        continue;
      for (const SymbolTable::SymbolUse &use : *uses)
        if (Operation *def = table.lookup(use.getSymbolRef().getRootReference()))
          keep.insert(def);
    }
    for (Operation &op : llvm::make_early_inc_range(module.getOps()))
      if (op.getDialect() == op.getContext()->getLoadedDialect<PlanDialect>() && !keep.contains(&op))
        op.erase();
  }
};
} // namespace
