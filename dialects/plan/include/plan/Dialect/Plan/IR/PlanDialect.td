// The `plan` dialect: a checked .plan program as IR.
#ifndef PLAN_DIALECT_PLAN_IR_PLANDIALECT_TD
#define PLAN_DIALECT_PLAN_IR_PLANDIALECT_TD

include "mlir/IR/OpBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let summary = "Declarations of a training plan: meshes, models, train, retrieval and generate";
  let description = [{
    The `plan` dialect is the first IR of planc. One op per declaration of a
    `.plan` file, after semantic analysis: every value is folded, every name
    resolved, and each model instantiated into its concrete parameters
    (`plan.param`) and forward graph (`plan.apply`). Later stages expand models
    into the `nn` dialect and lay them out over the mesh.

    ```mlir
    plan.mesh @cpu4 {axes = [#plan.axis<"dp", 2>, #plan.axis<"tp", 2>],
                     devices_per_node = 4 : i64, kind = #plan.device_kind<cpu>,
                     nodes = 1 : i64}
    ```
  }];
  let cppNamespace = "::plan::pl";
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

#endif // PLAN_DIALECT_PLAN_IR_PLANDIALECT_TD
