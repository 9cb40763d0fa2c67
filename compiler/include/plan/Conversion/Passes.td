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
                           "mlir::LLVM::LLVMDialect"];
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

def PlanFreeBuffers : Pass<"plan-free-buffers", "mlir::func::FuncOp"> {
  let summary = "Free each top-level buffer of a straight-line function after its last use";
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def PlanRetrievalABI : Pass<"plan-retrieval-abi", "mlir::ModuleOp"> {
  let summary = "The manifest and main of a retrieval executable";
  let description = [{
    A module whose entry is a `plan.retrieval` (and no `plan.train`) becomes a
    retrieval executable: every parameter of the graph — corpus patterns and
    manifest (paths resolved against the plan's directory), chunker, embedder,
    FAISS factory string, metric, nprobe, search mode and weights, fusion, guard,
    store — in the JSON constant `planc_retrieval_manifest`, and a `main` that
    calls `planrt_retrieval_main_manifest(argc, argv, manifest)`. Embedding or
    re-ranking with a model are refused, naming them.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def PlanGenerateABI : Pass<"plan-generate-abi", "mlir::ModuleOp"> {
  let summary = "The entry points and manifest of a decoding executable";
  let description = [{
    A module whose entry is a `plan.generate` becomes a decoding executable.
    The model's forward function is specialised to a prefill chunk of
    min(window, 64) positions and to one position, taking the positions'
    offset and a key/value cache per attention layer: `nn.sdpa` becomes
    `nn.sdpa_cached`, `nn.positions` counts from the offset, dropout is the
    identity, and the logits replace the loss. `planc_prefill` and
    `planc_step(P, tokens, offset, cache, logits)` run them on flat buffers (the
    parameters at the offsets of the manifest's table, every layer's cache in
    one array, written in place). The manifest (`planc_generate_manifest`,
    format planc-generate-1) carries the parameter table, vocabulary, window,
    checkpoint and sampling settings; a `context` graph's manifest becomes
    `planc_retrieval_manifest`. Models that do not return
    `cross_entropy(logits, targets)`, attention that is not causal, and a window
    beyond the positional table are refused.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::bufferization::BufferizationDialect",
                           "mlir::memref::MemRefDialect", "plan::nn::NNDialect"];
}

def PlanSchedule : Pass<"plan-schedule", "mlir::ModuleOp"> {
  let summary = "The per-rank step program of a training executable, in the sched dialect";
  let description = [{
    From the manifest of `plan-train-abi`: the mesh (`sched.mesh`), the flat
    buffers and their lifetimes (`sched.buffer`), and `planc_step(ctx, step)`,
    one optimizer step as every rank runs it: the micro-batch loop around
    `sched.grad`, the data-parallel collectives of the plan's ZeRO stage (DDP:
    all-reduce the gradients; ZeRO-1/2: reduce-scatter them, once or after every
    micro-step, and all-gather the updated parameters; ZeRO-3: gather the
    parameters before each micro-step, free them after, reduce-scatter the
    gradients), the loss and gradient-norm reductions, and `sched.update` on this
    rank's pieces. `planc_gather(ctx)` / `planc_release(ctx)` make the full
    parameters available outside a step (evaluation) when ZeRO-3 shards them.
    Under a pipeline each stage's ranks run their part in a `sched.on` region on
    the stage's own buffers: `sched.forward` / `sched.backward` per micro-batch in
    GPipe's or 1F1B's order with the sends, receives and `sched.send_recv`
    exchanges between neighbours, then the shared (tied) parameters' gradients,
    the loss and the norm summed over the stages. The manifest gains the buffer
    table the runtime allocates.
  }];
  let dependentDialects = ["plan::sched::SchedDialect", "mlir::func::FuncDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::arith::ArithDialect"];
}

def SchedCheckDeadlock : Pass<"sched-check-deadlock", "mlir::ModuleOp"> {
  let summary = "Prove that every rank's collectives and sends match";
  let description = [{
    Simulates `planc_step` on every rank of the `sched.mesh` (micro-batch loops
    unrolled, `sched.on` regions taken where the rank's coordinate matches):
    a collective completes when every rank of its communicator has reached one
    with the same kind and size, a send when its peer has reached the matching
    receive. A program in which some rank waits forever, or in which ranks of
    one communicator disagree about a collective, is rejected with the two
    operations located.
  }];
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
