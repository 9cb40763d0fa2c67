// Conversions between planc's dialects and to upstream ones: one folder each under lib/Conversion.
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

def ConvertNNToLinalg : Pass<"convert-nn-to-linalg", "mlir::ModuleOp"> {
  let summary = "Elementwise and reduction nn ops to linalg.generic";
  let description = [{
    Activations and their gradients, adds, scales, bias adds, row sums, sums of
    squares, positions and the AdamW update become `linalg.generic` ops on
    tensors, which linalg's elementwise fusion merges and which compile to
    loops. GEMMs, attention, normalisations, embeddings and cross-entropy stay:
    bufferization turns them into calls to BLAS and to the runtime's kernels.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect", "mlir::tensor::TensorDialect"];
}

def ConvertSchedToRuntime : Pass<"convert-sched-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower sched ops to calls into libplanrt (planrt_sched_*)";
  let description = [{
    Every sched op becomes an `llvm.call` to its `planrt_sched_*` function with
    the step context (the function's first argument), buffer ids (declaration
    order) and the op's constants; `sched.micro_loop` becomes an `scf.for` and
    `sched.on` an `scf.if` on the rank's coordinate. Buffer declarations and the
    mesh are dropped: the manifest carries them.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

#endif // PLAN_CONVERSION_PASSES_TD
