// Passes over the `plan` dialect.
#ifndef PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_TD
#define PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanSelectEntry : Pass<"plan-select-entry", "mlir::ModuleOp"> {
  let summary = "Keep one entry declaration and everything it references";
  let description = [{
    `planc build --entry NAME` compiles one `train`, `retrieval` or `generate`
    declaration. This pass keeps that declaration and, transitively, the
    models, meshes and retrieval graphs it references, and erases every other
    `plan` declaration. It fails, naming the declarations there are, when the
    entry does not exist or is not a train, retrieval or generate.

    ```mlir
    // plan-select-entry{entry=t}
    plan.mesh @m {...}
    plan.mesh @unused {...}      // erased
    plan.train @t {mesh = @m, ...}
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "The train, retrieval or generate declaration to keep">,
  ];
}

#endif // PLAN_DIALECT_PLAN_TRANSFORMS_PASSES_TD
