// The compilation pipeline as an ordered list of stages, each a stop point for
// `planc emit --stage`.
#ifndef PLAN_COMPILER_PIPELINE_H
#define PLAN_COMPILER_PIPELINE_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <optional>
#include <string>

namespace plan {

enum class Stage { AST, Plan, NN, Grad, Sharded, SPMD, Sched, LLVM, PTX };

/// "ast", "plan", …
const char *stageName(Stage s);
std::optional<Stage> parseStage(const std::string &name);
/// Every stage name, in pipeline order, for help and errors.
std::string stageNames();

struct PipelineOptions {
  std::string entry; ///< keep only this declaration (and what it references)
  /// The llvm stage's target: "cpu", "cuda", or "cuda-host" (the CUDA target's kernels
  /// run by host loops); the ptx stage is always the CUDA target's, as PTX text.
  std::string target = "cpu";
  std::string cudaArch = "sm_90"; ///< the CUDA target's GPU architecture
  /// cuda-host: the order its launches' blocks and threads run in ("forward" or
  /// "reverse", the audit for races between threads).
  std::string hostOrder = "forward";
};

/// Adds the passes that take a freshly generated `plan` module to `stage`.
void buildPipeline(mlir::PassManager &pm, Stage stage, const PipelineOptions &options);

/// Every project dialect, and the upstream ones the pipeline uses.
void registerDialects(mlir::DialectRegistry &registry);
/// Every project pass, for planc-opt and pipelines.
void registerPasses();

} // namespace plan

#endif // PLAN_COMPILER_PIPELINE_H
