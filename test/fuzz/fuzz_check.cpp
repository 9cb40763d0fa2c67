// libFuzzer target: any bytes through the whole front end and the cost model, as
// `planc check`, `planc emit --stage plan` and `planc explain` run them. Invariants:
// no crash, no sanitizer report, every program sema accepts yields plan IR that
// verifies and expands into nn IR that verifies, and every estimate is finite with
// a breakdown that sums to its step.
#include "plan/Compiler/CostModel.h"
#include "plan/Compiler/FitCheck.h"
#include "plan/Compiler/Pipeline.h"
#include "plan/Compiler/PlanGen.h"
#include "plan/Lang/Sema.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

// LLVM's allocator headers, inlined into this instrumented build, poison slab
// memory that the uninstrumented libMLIR.so then uses legitimately; ignore such
// user poisoning so ASan reports only real errors.
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  plan::registerDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  plan::lang::SourceFiles files;
  // Render every diagnostic, with its source line and caret, into the void.
  plan::lang::DiagnosticPrinter printer(ctx, files, llvm::nulls());
  plan::lang::Diags diags(&ctx, files);
  plan::lang::FrontendOptions options;
  options.stdlibDir = PLANC_STDLIB_SOURCE_DIR;
  auto buffer =
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.plan");
  auto program = plan::lang::analyzeBuffer(std::move(buffer), "/nonexistent/fuzz.plan", options, diags);
  if (!program)
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> module = plan::genPlanModule(*program, diags);
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "accepted program produced plan IR that does not verify\n");
    std::abort();
  }
  // The nn stage: every accepted model expands into verifying nn IR.
  {
    mlir::PassManager pm(&ctx);
    plan::buildPipeline(pm, plan::Stage::NN, {});
    if (mlir::failed(pm.run(*module)) || mlir::failed(mlir::verify(*module))) {
      std::fprintf(stderr, "accepted program failed convert-plan-to-nn\n");
      std::abort();
    }
  }
  plan::checkFit(*program, diags);
  for (const plan::sema::Train &t : program->trains) {
    const auto &model = program->models[t.model];
    const auto &mesh = program->meshes[t.mesh];
    plan::sema::Layout layout = plan::sema::layoutOf(t);
    plan::cost::Estimate e = plan::cost::estimate(model, mesh, layout, plan::cost::axisRolesOf(t, mesh),
                                                  plan::cost::Calibration::defaults(), /*withTrace=*/true);
    double parts = e.computeSeconds + e.memorySeconds + e.tensorCommSeconds + e.pipelineCommSeconds + e.bubbleSeconds +
                   e.dataCommSeconds + e.optimizerSeconds + e.offload.seconds;
    if (!std::isfinite(e.stepSeconds) || e.stepSeconds < 0 || e.perDevice.total() < 0 ||
        std::abs(parts - e.stepSeconds) > 1e-6 * std::max(1.0, e.stepSeconds)) {
      std::fprintf(stderr, "estimate is not finite or does not add up: step %g, parts %g\n", e.stepSeconds, parts);
      std::abort();
    }
    (void)plan::cost::renderText(e, model, mesh, layout, true);
    (void)plan::cost::renderJson(e, model, mesh, layout);
    (void)plan::cost::renderTrace(e);
  }
  return 0;
}
