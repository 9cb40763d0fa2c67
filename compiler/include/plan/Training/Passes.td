// The training passes: autodiff, the train step, the layouts (tensor, pipeline, shard) and the entry points.
#ifndef PLAN_TRAINING_PASSES_TD
#define PLAN_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

def NNAutodiff : Pass<"nn-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff of every nn.model function";
  let description = [{
    For each function marked `nn.model` (tokens, targets, parameters → loss),
    adds `<name>_grad` returning the loss and the gradient of every parameter
    (result attribute `nn.grad` names it). The forward ops are cloned, then
    walked in reverse; each op's `VJPOpInterface` builds the gradients of its
    operands, and a value used twice (residual stream, tied embedding) gets the
    `nn.add` of its gradients. An op without a VJP is an error at that op.

    A function marked `nn.stage` returns a tensor (the activation a pipeline
    stage hands on) instead of a loss: its `_grad` takes the cotangent of that
    result as a last argument (`nn.cotangent`) and seeds the backward pass with
    it, and arguments marked `nn.activation` (the stage's input) get gradients
    too, after the parameters' (`nn.grad_input`): the vector-Jacobian product a
    pipeline stage's backward step needs.
  }];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::arith::ArithDialect"];
}

def NNTensorParallel : Pass<"nn-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron-style tensor parallelism: each forward function as one rank of its group runs it";
  let description = [{
    Rewrites every forward function (`nn.forward` or `nn.model`) into the SPMD
    program of one rank of a tensor-parallel group of `size` ranks along mesh
    axis number `axis`. Parameters with a logical dim in `dims` hold 1/size of
    it (`nn.split = {dim, parts, blocks}` on the argument); column-parallel
    matmuls (the split dim is the output) read their input through
    `nn.all_reduce_backward`, row-parallel ones (the split dim is the input) are
    followed by `nn.all_reduce`, attention runs on 1/size of its heads, a
    vocab-split embedding looks up its slice (`from` this rank's first row) and
    sums over the group, and a loss on vocab-split logits is
    `nn.vocab_parallel_cross_entropy`. What cannot be split (a norm over split
    features, a split value meeting a replicated one, heads not divisible by the
    group) is an error at the op or parameter. `plan-train-step` runs it on a
    plan's forward function when the plan has a tensor axis.
  }];
  let options = [Option<"axis", "axis", "int64_t", /*default=*/"0", "mesh axis number of the tensor group">,
                 Option<"size", "size", "int64_t", /*default=*/"2", "ranks in the tensor group">,
                 ListOption<"dims", "dims", "std::string", "logical dims split over the group">,
                 Option<"sequence", "sequence", "bool", /*default=*/"false",
                        "sequence parallelism between the tensor-parallel blocks">];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::arith::ArithDialect"];
}

def NNPipelineSplit : Pass<"nn-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cut each forward function (nn.forward) into pipeline-stage functions";
  let description = [{
    Layer k of L (the first all-digit component of a parameter's path) runs on
    stage ⌊k·S/L⌋; every other op on the latest stage among its operands, so
    embeddings open the first stage and the final norm, head and loss close the
    last. Each stage becomes `<f>_stage<s>` (attribute `nn.stage = s`): it takes
    the function's arguments it reads (tokens, targets, its parameters; a
    parameter read on two stages, like a tied embedding, is an argument of
    both) and, after the first stage, the activation of the previous one
    (`nn.activation`); it returns the activation it hands on, or on the last
    stage the loss. A cut that more than one value crosses is an error with
    notes at those values. `nn-autodiff` differentiates the stages (a
    vector-Jacobian product each). Executables do not use it yet: pipeline
    parallelism is refused by `plan-train-abi`.
  }];
  let options = [Option<"stages", "stages", "int64_t", /*default=*/"2", "pipeline stages">];
  let dependentDialects = ["plan::nn::NNDialect"];
}

def PlanLoRA : Pass<"plan-lora", "mlir::ModuleOp"> {
  let summary = "Low-rank adapters on a fine-tuning plan's model; its base frozen";
  let description = [{
    For each `plan.train @t` with `adapt` (`adapt = lora(rank: R, alpha: A, …)`),
    whose model has been expanded to nn: `@t_lora`, a copy of the model in which
    every weight matrix `W` named in `adapt.matrices` is read as
    `x·W + ((A/R)·(x·a))·b` — `a` [in, R] (`<path>.lora_a`, uniform in ±1/√in
    from the seed, as PEFT) and `b` [R, out] (`<path>.lora_b`, zeros, so the
    first step's loss is the base model's) new arguments marked `nn.param` — and
    every argument of the original model is marked `nn.frozen` instead: no
    gradient, no optimizer state, never written. The plan then trains `@t_lora`.
    A matrix the model never multiplies by (untransposed) is an error.
  }];
  let dependentDialects = ["plan::nn::NNDialect"];
}

def PlanQuantize : Pass<"plan-quantize", "mlir::ModuleOp"> {
  let summary = "QLoRA: a fine-tuning plan's frozen base matrices stored as NF4";
  let description = [{
    For each `plan.train @t` whose `adapt` has `quantize` (`quantize = nf4(block:
    B, double: D)`), after `plan-lora`: every frozen argument of its model named in
    `quantize.matrices` becomes the 1-D f32 tensor of its NF4 storage
    (runtime/include/planrt_nf4.h; marked `nn.quant` with the format, block,
    double quantization and the matrix's shape), and an `nn.dequantize_nf4` just
    before its first use makes the matrix again. The runtime quantizes the loaded
    base into that storage; the autodiff dequantizes again in the backward pass, so
    at most a few dequantized matrices are alive at once. A named matrix that is not
    a frozen 2-D argument is an error.
  }];
  let dependentDialects = ["plan::nn::NNDialect"];
}

def PlanTrainStep : Pass<"plan-train-step", "mlir::ModuleOp"> {
  let summary = "The forward, gradient and optimizer-update functions of each train plan";
  let description = [{
    For each `plan.train @t` whose model has been expanded to nn: `@t_forward`
    (the model with batch and sequence static: [micro, seq]; what one rank of a
    tensor group computes, `nn-tensor-parallel`; under a pipeline also cut into
    `@t_forward_stage<k>`, `nn-pipeline-split`), `@t_grad` (`nn-autodiff` of it;
    `@t_stage<k>_grad` per stage) and `@t_update` (global gradient norm,
    clipping, learning-rate schedule and one `nn.adamw` per parameter, weight
    decay on matrices only). With `partition-only`, it stops after the per-rank
    forward functions (`planc emit --stage spmd`).
  }];
  let options = [Option<"partitionOnly", "partition-only", "bool", /*default=*/"false",
                        "stop after the per-rank forward functions (no gradient, no update)">];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect", "mlir::tensor::TensorDialect"];
}

def PlanShard : Pass<"plan-shard", "mlir::ModuleOp"> {
  let summary = "The global program of each train plan, annotated with its layout in the upstream shard dialect";
  let description = [{
    For each `plan.train @t` whose model has been expanded to nn: `@t_sharded`,
    the model at the step's global micro-batch ([micro × data-parallel size,
    seq]), on a `shard.grid` named after the plan's mesh (its axes' sizes), with
    each argument annotated (`shard.shard … annotate_for_users`) by how the
    executable lays it out: the tokens and targets split along the batch over
    the data axes, each parameter split along the dim `nn-tensor-parallel`
    splits over the tensor axis (replicated otherwise; a packed q/k/v weight is
    split per block, which one split axis only approximates: its `nn.split`
    argument attribute gives the blocks), and under a pipeline the stages that
    hold each parameter as `nn.pipeline_stages` (a tied embedding: the first and
    the last). Upstream's
    `sharding-propagation` then carries the layout through the ops that have the
    ShardingInterface (`planc emit --stage sharded`). The executable is built
    from the per-rank functions of `plan-train-step`, which apply this layout.
  }];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::shard::ShardDialect"];
}

def PlanTrainABI : Pass<"plan-train-abi", "mlir::ModuleOp"> {
  let summary = "The C entry points and manifest of a training executable";
  let description = [{
    Inlines `@t_grad`, `@t_update` and `@t_forward` into `planc_grad`,
    `planc_update` and `planc_eval`, functions on flat f32 buffers (every
    parameter, gradient and Adam moment at its 64-byte-aligned offset in one
    array) and static [micro, seq] token buffers, as `planrt.h` declares; adds
    the manifest (parameter table, data, batch, schedule, checkpoints) as the
    constant `planc_manifest`; and drops what remains of the plan.
  }];
  let dependentDialects = ["plan::nn::NNDialect", "mlir::arith::ArithDialect", "mlir::tensor::TensorDialect",
                           "mlir::memref::MemRefDialect", "mlir::bufferization::BufferizationDialect",
                           "mlir::LLVM::LLVMDialect", "plan::sched::SchedDialect",
                           "mlir::linalg::LinalgDialect"];
}

#endif // PLAN_TRAINING_PASSES_TD
