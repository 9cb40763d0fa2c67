// Stages and registration: the one place that knows every dialect and pass.
#include "plan/Compiler/Pipeline.h"

#include "plan/Conversion/Passes.h"
#include "plan/Dialect/NN/IR/NN.h"
#include "plan/Dialect/NN/IR/Sharding.h"
#include "plan/Dialect/Plan/IR/Plan.h"
#include "plan/Dialect/Plan/Transforms/Passes.h"
#include "plan/Generate/Passes.h"
#include "plan/Retrieval/Passes.h"
#include "plan/Schedule/Passes.h"
#include "plan/Target/CPU.h"
#include "plan/Target/CPU/Passes.h"
#include "plan/Target/CUDA.h"
#include "plan/Target/CUDA/Passes.h"
#include "plan/Training/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace plan;

static const struct {
  Stage stage;
  const char *name;
} kStages[] = {
    {Stage::AST, "ast"},     {Stage::Plan, "plan"},       {Stage::NN, "nn"},
    {Stage::Grad, "grad"},   {Stage::Sharded, "sharded"}, {Stage::SPMD, "spmd"},
    {Stage::Sched, "sched"}, {Stage::LLVM, "llvm"},       {Stage::PTX, "ptx"},
};

const char *plan::stageName(Stage s) {
  for (auto &e : kStages)
    if (e.stage == s)
      return e.name;
  return "?";
}

std::optional<Stage> plan::parseStage(const std::string &name) {
  for (auto &e : kStages)
    if (name == e.name)
      return e.stage;
  return std::nullopt;
}

std::string plan::stageNames() {
  std::string out;
  for (auto &e : kStages)
    out += (out.empty() ? "" : "|") + std::string(e.name);
  return out;
}

void plan::buildPipeline(mlir::PassManager &pm, Stage stage, const PipelineOptions &options) {
  if (!options.entry.empty()) {
    pl::PlanSelectEntryOptions select;
    select.entry = options.entry;
    pm.addPass(pl::createPlanSelectEntry(select));
  }
  if (stage >= Stage::NN) {
    pm.addPass(createConvertPlanToNN());
    pm.addPass(createPlanLoRA());
    pm.addPass(createPlanQuantize());
  }
  // The layout stages branch off after nn: the global program annotated with the
  // layout (upstream shard dialect, propagated), and the per-rank forward functions.
  if (stage == Stage::Sharded) {
    pm.addPass(createPlanShard());
    pm.addNestedPass<mlir::func::FuncOp>(mlir::shard::createShardingPropagation());
    return;
  }
  if (stage == Stage::SPMD) {
    PlanTrainStepOptions spmd;
    spmd.partitionOnly = true;
    pm.addPass(createPlanTrainStep(spmd));
    return;
  }
  if (stage >= Stage::Grad)
    pm.addPass(createPlanTrainStep());
  if (stage >= Stage::Sched) {
    pm.addPass(createPlanTrainABI());
    pm.addPass(createPlanRetrievalABI());
    pm.addPass(createPlanGenerateABI());
    pm.addPass(createPlanSchedule());
    pm.addPass(createSchedCheckDeadlock());
  }
  if (stage == Stage::PTX) {
    cuda::TargetOptions ptx;
    ptx.chip = options.cudaArch;
    ptx.format = "isa";
    cuda::buildLoweringPipeline(pm, ptx);
  } else if (stage == Stage::LLVM && options.target == "cuda") {
    cuda::TargetOptions cubin;
    cubin.chip = options.cudaArch;
    cuda::buildLoweringPipeline(pm, cubin);
  } else if (stage == Stage::LLVM && options.target == "cuda-host") {
    cuda::buildHostEmulationPipeline(pm, options.hostOrder);
  } else if (stage == Stage::LLVM) {
    cpu::buildLoweringPipeline(pm);
  }
}

void plan::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<pl::PlanDialect, nn::NNDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect>();
  cpu::registerTarget(registry);
  cuda::registerTarget(registry);
  registry.insert<mlir::shard::ShardDialect, sched::SchedDialect>();
  nn::registerShardingModels(registry);
}

void plan::registerPasses() {
  pl::registerPlanPasses();
  registerPlanConversionPasses();
  registerPlanTrainingPasses();
  registerPlanSchedulePasses();
  registerPlanRetrievalPasses();
  registerPlanGeneratePasses();
  registerPlanCPUPasses();
  registerPlanCUDAPasses();
  mlir::registerTransformsPasses();
  mlir::shard::registerShardPasses();
}
