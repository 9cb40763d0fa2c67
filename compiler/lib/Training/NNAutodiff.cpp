// `nn-autodiff`: every nn.model (and pipeline-stage) function gets its reverse-mode
// gradient function <name>_grad (the algorithm is training::differentiate, Autodiff.cpp).
#include "plan/Training/Passes.h"
#include "plan/Training/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace plan {
#define GEN_PASS_DEF_NNAUTODIFF
#include "plan/Training/Passes.h.inc"
} // namespace plan

using namespace mlir;
using namespace plan;

namespace {

struct NNAutodiff : plan::impl::NNAutodiffBase<NNAutodiff> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> models;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr("nn.model") || f->hasAttr("nn.stage"))
        models.push_back(f);
    for (func::FuncOp f : models) {
      std::string name = (f.getName() + "_grad").str();
      if (getOperation().lookupSymbol(name)) {
        f.emitOpError() << "cannot be differentiated into '" << name << "': the name is taken";
        return signalPassFailure();
      }
      if (failed(training::differentiate(f, name)))
        return signalPassFailure();
    }
  }
};

} // namespace
