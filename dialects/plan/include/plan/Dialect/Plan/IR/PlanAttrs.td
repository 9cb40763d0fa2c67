// Attributes of the `plan` dialect.
#ifndef PLAN_DIALECT_PLAN_IR_PLANATTRS_TD
#define PLAN_DIALECT_PLAN_IR_PLANATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "plan/Dialect/Plan/IR/PlanEnums.td"

class Plan_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Plan_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Plan_AxisAttr : Plan_Attr<"Axis", "axis"> {
  let summary = "A named mesh axis and its size";
  let description = [{
    One axis of a device mesh: `#plan.axis<"tp", 4>`. Axes are row-major; the
    last axis of a mesh varies fastest.
  }];
  let parameters = (ins "::mlir::StringAttr":$name, "int64_t":$size);
  let assemblyFormat = "`<` $name `,` $size `>`";
  let genVerifyDecl = 1;
}

def Plan_ParallelAttr : Plan_Attr<"Parallel", "parallel"> {
  let summary = "The roles of the mesh axes in a train plan";
  let description = [{
    Which mesh axes split the batch (`data`), the Megatron tensor dims
    (`tensor`), and the layers (`pipeline`, with its stage count and schedule);
    the ZeRO stage over the data axes; sequence parallelism; and the axes that
    keep replicas; `bucket`, the bytes of gradients per DDP bucket, or of
    parameters per ZeRO-3 all-gather bucket (0, the default: one collective
    of the whole buffer); `keep_activations` (`keep: activations`), a pipeline
    stage keeps its forward pass's values for its backward pass instead of its
    input alone; `offload`, where state lives off the device
    (`{optimizer = {target = "nvme", dir = "…", buffer = N}, params = {…}}`,
    absent: everything on the device). An empty string means "no axis".

    ```mlir
    #plan.parallel<data = ["dp"], zero = 1, tensor = "tp", pipeline = "",
                   stages = 1, schedule = one_f_one_b, sequence = false,
                   replicate = []>
    ```
  }];
  let parameters = (ins
    "::mlir::ArrayAttr":$data,
    "int64_t":$zero,
    "::mlir::StringAttr":$tensor,
    "::mlir::StringAttr":$pipeline,
    "int64_t":$stages,
    EnumParameter<Plan_PipelineSchedule>:$schedule,
    "::mlir::BoolAttr":$sequence,
    "::mlir::ArrayAttr":$replicate,
    DefaultValuedParameter<"int64_t", "0">:$bucket,
    OptionalParameter<"::mlir::DictionaryAttr">:$offload,
    DefaultValuedParameter<"bool", "false">:$keep_activations);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // PLAN_DIALECT_PLAN_IR_PLANATTRS_TD
