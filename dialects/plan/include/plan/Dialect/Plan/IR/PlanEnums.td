// Enumerations of the `plan` dialect.
#ifndef PLAN_DIALECT_PLAN_IR_PLANENUMS_TD
#define PLAN_DIALECT_PLAN_IR_PLANENUMS_TD

include "mlir/IR/EnumAttr.td"
include "plan/Dialect/Plan/IR/PlanDialect.td"

class Plan_Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::plan::pl";
  let genSpecializedAttr = 0;
}

def Plan_DeviceKind : Plan_Enum<"DeviceKind", "device kind", [
  I32EnumAttrCase<"cpu", 0>, I32EnumAttrCase<"cuda", 1>]>;
def Plan_DeviceKindAttr : EnumAttr<Plan_Dialect, Plan_DeviceKind, "device_kind">;

def Plan_Precision : Plan_Enum<"Precision", "training precision", [
  I32EnumAttrCase<"fp32", 0>, I32EnumAttrCase<"bf16", 1>, I32EnumAttrCase<"fp16", 2>]>;
def Plan_PrecisionAttr : EnumAttr<Plan_Dialect, Plan_Precision, "precision">;

def Plan_LossScale : Plan_Enum<"LossScale", "fp16 loss scaling", [
  I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"dynamic", 1>, I32EnumAttrCase<"fixed", 2>]>;
def Plan_LossScaleAttr : EnumAttr<Plan_Dialect, Plan_LossScale, "loss_scale">;

def Plan_Recompute : Plan_Enum<"Recompute", "activation recompute", [
  I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"full", 1>, I32EnumAttrCase<"selective", 2>]>;
def Plan_RecomputeAttr : EnumAttr<Plan_Dialect, Plan_Recompute, "recompute">;

// `1f1b` is not an MLIR keyword, so the IR spells it one_f_one_b.
def Plan_PipelineSchedule : Plan_Enum<"PipelineSchedule", "pipeline schedule", [
  I32EnumAttrCase<"gpipe", 0>, I32EnumAttrCase<"one_f_one_b", 1>,
  I32EnumAttrCase<"interleaved", 2>, I32EnumAttrCase<"zb", 3>]>;

def Plan_LRSchedule : Plan_Enum<"LRSchedule", "learning-rate schedule", [
  I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"linear", 1>, I32EnumAttrCase<"cosine", 2>]>;
def Plan_LRScheduleAttr : EnumAttr<Plan_Dialect, Plan_LRSchedule, "lr_schedule">;

def Plan_Init : Plan_Enum<"Init", "parameter initialisation", [
  I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"zeros", 1>, I32EnumAttrCase<"ones", 2>]>;
def Plan_InitAttr : EnumAttr<Plan_Dialect, Plan_Init, "init">;

def Plan_LayerKind : Plan_Enum<"LayerKind", "primitive layer or tensor operation", [
  I32EnumAttrCase<"embedding", 0>, I32EnumAttrCase<"attend", 1>,
  I32EnumAttrCase<"linear", 2>, I32EnumAttrCase<"layernorm", 3>,
  I32EnumAttrCase<"rmsnorm", 4>, I32EnumAttrCase<"attention", 5>,
  I32EnumAttrCase<"gelu", 6>, I32EnumAttrCase<"silu", 7>, I32EnumAttrCase<"relu", 8>,
  I32EnumAttrCase<"dropout", 9>, I32EnumAttrCase<"cross_entropy", 10>,
  I32EnumAttrCase<"positions", 11>, I32EnumAttrCase<"add", 12>,
  I32EnumAttrCase<"sub", 13>, I32EnumAttrCase<"mul", 14>,
  I32EnumAttrCase<"conv2d", 15>, I32EnumAttrCase<"batchnorm", 16>,
  I32EnumAttrCase<"maxpool", 17>, I32EnumAttrCase<"avgpool", 18>,
  I32EnumAttrCase<"flatten", 19>]>;
def Plan_LayerKindAttr : EnumAttr<Plan_Dialect, Plan_LayerKind, "layer">;

def Plan_ChunkKind : Plan_Enum<"ChunkKind", "chunker", [
  I32EnumAttrCase<"tokens", 0>, I32EnumAttrCase<"sentences", 1>,
  I32EnumAttrCase<"paragraphs", 2>,
  I32EnumAttrCase<"semantic", 3>]>;
def Plan_ChunkKindAttr : EnumAttr<Plan_Dialect, Plan_ChunkKind, "chunk">;

def Plan_EmbedKind : Plan_Enum<"EmbedKind", "embedder", [
  I32EnumAttrCase<"hashing", 0>, I32EnumAttrCase<"model", 1>, I32EnumAttrCase<"fasttext", 2>]>;
def Plan_EmbedKindAttr : EnumAttr<Plan_Dialect, Plan_EmbedKind, "embed">;

def Plan_Metric : Plan_Enum<"Metric", "vector metric", [
  I32EnumAttrCase<"ip", 0>, I32EnumAttrCase<"l2", 1>]>;
def Plan_MetricAttr : EnumAttr<Plan_Dialect, Plan_Metric, "metric">;

def Plan_SearchKind : Plan_Enum<"SearchKind", "search mode", [
  I32EnumAttrCase<"hybrid", 0>, I32EnumAttrCase<"vector", 1>, I32EnumAttrCase<"keyword", 2>]>;
def Plan_SearchKindAttr : EnumAttr<Plan_Dialect, Plan_SearchKind, "search">;

def Plan_Fusion : Plan_Enum<"Fusion", "hybrid score fusion", [
  I32EnumAttrCase<"weighted", 0>, I32EnumAttrCase<"rrf", 1>]>;
def Plan_FusionAttr : EnumAttr<Plan_Dialect, Plan_Fusion, "fusion">;

def Plan_Guard : Plan_Enum<"Guard", "retrieved-text guard", [
  I32EnumAttrCase<"quarantine", 0>, I32EnumAttrCase<"off", 1>]>;
def Plan_GuardAttr : EnumAttr<Plan_Dialect, Plan_Guard, "guard">;

#endif // PLAN_DIALECT_PLAN_IR_PLANENUMS_TD
