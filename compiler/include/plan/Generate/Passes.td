// The decoding executable's entry points and manifest.
#ifndef PLAN_GENERATE_PASSES_TD
#define PLAN_GENERATE_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // PLAN_GENERATE_PASSES_TD
