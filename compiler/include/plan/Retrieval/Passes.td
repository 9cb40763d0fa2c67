// The retrieval executable's entry point and manifest.
#ifndef PLAN_RETRIEVAL_PASSES_TD
#define PLAN_RETRIEVAL_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // PLAN_RETRIEVAL_PASSES_TD
