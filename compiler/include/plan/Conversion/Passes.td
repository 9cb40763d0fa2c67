// Conversions between planc's dialects (and to upstream ones).
#ifndef PLAN_CONVERSION_PASSES_TD
#define PLAN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertPlanToNN : Pass<"convert-plan-to-nn", "mlir::ModuleOp"> {
  let summary = "Expand each plan.model into a forward function of nn ops";
  let description = [{
    Every `plan.model` becomes a `func.func` of the same name, marked `nn.model`,
    taking the token ids, the targets, and then one argument per `plan.param`
    (its path, logical dims and initialisation as argument attributes), and
    returning the loss. Each `plan.apply` becomes the `nn` primitives it is
    made of: a linear layer is `nn.matmul` (+ `nn.bias_add`), an attention
    layer `nn.matmul` → `nn.sdpa` → `nn.matmul`, the tied head a transposed
    `nn.matmul` of the embedding table. Locations (and layer names) carry over.

    ```mlir
    // before
    %0 = plan.apply linear [@p.weight, @p.bias](%x) {layer = "p"} : (tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
    // after
    %1 = nn.matmul %x, %p_weight : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
    %2 = nn.bias_add %1, %p_bias : tensor<?x?x16xf32>, tensor<16xf32>
    ```
  }];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::func::FuncDialect"];
}

#endif // PLAN_CONVERSION_PASSES_TD
