// Operations of the `plan` dialect: one per declaration kind, plus the contents
// of an instantiated model (parameters and the forward graph).
#ifndef PLAN_DIALECT_PLAN_IR_PLANOPS_TD
#define PLAN_DIALECT_PLAN_IR_PLANOPS_TD

include "plan/Dialect/Plan/IR/PlanAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_AxisArrayAttr : TypedArrayAttrBase<Plan_AxisAttr, "mesh axes">;

//===----------------------------------------------------------------------===//
// plan.mesh
//===----------------------------------------------------------------------===//

def Plan_MeshOp : Plan_Op<"mesh", [Symbol]> {
  let summary = "A device mesh: devices, named axes and hardware figures";
  let description = [{
    `devices_per_node × nodes` devices of one kind, arranged as the row-major
    product of `axes`. `memory` (bytes), `peak` (FLOP/s), `hbm` (bytes/s) and
    `links` (bytes/s per named link) are per device and optional; they feed the
    cost model.

    ```mlir
    plan.mesh @dgx2 {axes = [#plan.axis<"dp", 4>, #plan.axis<"tp", 4>],
                     devices_per_node = 8 : i64, kind = #plan.device_kind<cuda>,
                     nodes = 2 : i64, memory = 85899345920 : i64}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Plan_DeviceKindAttr:$kind,
    I64Attr:$devices_per_node,
    I64Attr:$nodes,
    Plan_AxisArrayAttr:$axes,
    OptionalAttr<I64Attr>:$memory,
    OptionalAttr<F64Attr>:$peak,
    OptionalAttr<F64Attr>:$hbm,
    OptionalAttr<DictionaryAttr>:$links);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumDevices() { return getDevicesPerNode() * getNodes(); }
    /// The size of the named axis, or 0 if the mesh has no such axis.
    int64_t getAxisSize(::llvm::StringRef name);
  }];
}

//===----------------------------------------------------------------------===//
// plan.model, plan.param, plan.apply, plan.return
//===----------------------------------------------------------------------===//

def Plan_ModelOp : Plan_Op<"model", [Symbol, SymbolTable, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "An instantiated model: its parameters and forward graph";
  let description = [{
    The body holds one `plan.param` per trainable tensor (its path is the
    checkpoint name) and the forward graph as `plan.apply` ops over the two
    block arguments, token ids and targets, ending in `plan.return` of the loss.
    `layers` is the number of repeated units (what pipeline stages split),
    `vocab` the rows of the token embedding, `max_seq` the positional table's
    rows (0 when there is none), `num_params` the total element count.

    ```mlir
    plan.model @m attributes {layers = 0 : i64, max_seq = 0 : i64,
                              num_params = 1024 : i64, vocab = 16 : i64} {
    ^bb0(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>):
      plan.param @wte.weight : tensor<16x64xf32> dims ["vocab", "embed"] init normal std 2.0e-02
      %wte = plan.apply embedding [@wte.weight] (%tokens) {layer = "wte"} : (tensor<?x?xi32>) -> tensor<?x?x64xf32>
      %wte_0 = plan.apply attend [@wte.weight] (%wte) {layer = "wte"} : (tensor<?x?x64xf32>) -> tensor<?x?x16xf32>
      %0 = plan.apply cross_entropy [] (%wte_0, %targets) : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
      plan.return %0 : tensor<f32>
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$layers,
    I64Attr:$vocab,
    I64Attr:$max_seq,
    I64Attr:$num_params);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
  }];
}

def Plan_ParamOp : Plan_Op<"param", [Symbol, HasParent<"ModelOp">]> {
  let summary = "A trainable parameter of a model";
  let description = [{
    A parameter's static shape and element type, the logical dim of each axis
    (`vocab`, `embed`, `qkv`, `heads`, `mlp`, …: what a train plan maps to mesh
    axes), and its initialisation. `residual` marks an output projection that
    feeds a residual add (GPT-2 scales its init by 1/√(2·layers)).

    ```mlir
    plan.param @h.0.attn.c_attn.weight : tensor<64x192xf32> dims ["embed", "qkv"] init normal std 2.0e-02
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<AnyStaticShapeTensor>:$type,
    StrArrayAttr:$dims,
    Plan_InitAttr:$init,
    F64Attr:$std,
    UnitAttr:$residual);
  let assemblyFormat = [{
    $sym_name `:` $type `dims` $dims `init` custom<InitKind>($init) `std` $std
    (`residual` $residual^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::mlir::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Plan_ApplyOp : Plan_Op<"apply", [HasParent<"ModelOp">, Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "Applies a primitive layer or tensor operation";
  let description = [{
    One node of the forward graph: the primitive `kind`, the parameters it
    reads (symbols of `plan.param` in the enclosing model), its tensor inputs,
    and its configuration (`heads`, `kv_heads`, `causal`, `rope`, `eps`, `p`)
    as attributes. `layer` is the path of the layer that was applied, and
    `layer_index` the index of the repeated unit it belongs to.

    ```mlir
    %1 = plan.apply layernorm [@ln_f.weight, @ln_f.bias] (%0) {eps = 1.0e-05 : f64, layer = "ln_f"}
           : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins
    Plan_LayerKindAttr:$kind,
    SymbolRefArrayAttr:$params,
    Variadic<AnyTensor>:$inputs);
  let results = (outs AnyTensor:$result);
  let assemblyFormat = [{
    custom<LayerKind>($kind) $params `(` $inputs `)` attr-dict `:`
    functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
}

def Plan_ReturnOp : Plan_Op<"return", [HasParent<"ModelOp">, Pure, ReturnLike,
                                       Terminator]> {
  let summary = "Returns the loss of a model";
  let description = [{
    ```mlir
    plan.return %loss : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

//===----------------------------------------------------------------------===//
// plan.train
//===----------------------------------------------------------------------===//

def Plan_TrainOp : Plan_Op<"train", [Symbol,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A training plan: a model laid out over a mesh";
  let description = [{
    Binds a `plan.model` to a `plan.mesh` with a parallel layout. Everything is
    explicit: `micro` is the per-rank micro-batch, `accumulation` the derived
    gradient-accumulation steps (`batch = micro × data-parallel size ×
    accumulation`), `shard` maps logical dims to the tensor axis ("" =
    replicated). Relative paths resolve against `base_dir`. `init_path` and
    `init_format` (`planc` or `hf`) name the pretrained parameters loaded before
    step 0 (`init = checkpoint(…)`). `adapt` (`adapt = lora(…)`) holds the LoRA
    `rank` and `alpha`, the `targets` as written and the weight `matrices` they
    matched (plan-lora adds the adapters and freezes every other parameter), and
    with `quantize = nf4(…)` a `quantize` dictionary: `format` "nf4", `block`,
    `double` and the base `matrices` stored quantized (plan-quantize).
    `data_text` / `val_text`: `data` / `val` are text files, which the executable
    tokenizes at load with `tokenizer` (a Hugging Face tokenizer.json).
    `federated` (`federated = fedavg(…)`, EXTENSIONS.md §3): the client `axis`
    and its size `clients`, `rounds`, `local_steps`, `fraction` and the clients
    a round samples (`sampled`), `weighting` ("tokens" or "uniform"), `prox`
    (FedProx's μ), `secure`, `dp_clip` and `dp_noise` (DP-FedAvg; clip 0: off),
    `per_client` (`data` is one file per client) and the `server` optimizer
    (`kind` "sgd" or "adam", `lr`, `beta1`, `beta2`, `eps`). `optimizer` is
    "adamw" (`lr`, `beta1`, `beta2`, `eps`, `weight_decay`) or "sgd" (`lr`,
    `momentum`, `weight_decay`).

    ```mlir
    plan.train @t {model = @tiny, mesh = @cpu4, batch = 32 : i64, micro = 4 : i64,
                   accumulation = 4 : i64, seq = 64 : i64, ...}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$model,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$data,
    StrArrayAttr:$val,
    I64Attr:$batch,
    I64Attr:$micro,
    I64Attr:$seq,
    I64Attr:$accumulation,
    Plan_ParallelAttr:$parallel,
    DictionaryAttr:$shard,
    Plan_PrecisionAttr:$precision,
    Plan_LossScaleAttr:$loss_scale,
    OptionalAttr<F64Attr>:$fixed_loss_scale,
    Plan_RecomputeAttr:$recompute,
    F64Attr:$lr,
    F64Attr:$beta1,
    F64Attr:$beta2,
    F64Attr:$eps,
    F64Attr:$weight_decay,
    Plan_LRScheduleAttr:$lr_schedule,
    I64Attr:$warmup,
    F64Attr:$min_lr,
    F64Attr:$clip,
    I64Attr:$steps,
    I64Attr:$seed,
    I64Attr:$eval_every,
    I64Attr:$eval_batches,
    I64Attr:$checkpoint_every,
    I64Attr:$checkpoint_keep,
    StrAttr:$checkpoint_dir,
    StrAttr:$base_dir,
    OptionalAttr<StrAttr>:$init_path,
    OptionalAttr<StrAttr>:$init_format,
    OptionalAttr<DictionaryAttr>:$adapt,
    OptionalAttr<StrAttr>:$tokenizer,
    UnitAttr:$data_text,
    UnitAttr:$val_text,
    OptionalAttr<DictionaryAttr>:$federated,
    DefaultValuedAttr<StrAttr, "\"adamw\"">:$optimizer,
    DefaultValuedAttr<F64Attr, "0.0">:$momentum);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// plan.retrieval, plan.generate
//===----------------------------------------------------------------------===//

def Plan_RetrievalOp : Plan_Op<"retrieval", [Symbol,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A retrieval (RAG) graph: ingest, chunk, embed, index, search";
  let description = [{
    The corpus globs and the sha256 manifest that admits files (empty: none),
    the chunker, the embedder (feature hashing, a model and its checkpoint, or
    fastText vectors trained on the corpus, whose options `fasttext` holds),
    the FAISS index factory string, hybrid search weights, optional re-rank,
    the guard on retrieved text, and the store directory.

    ```mlir
    plan.retrieval @docs {corpus = ["docs/**/*.md"], manifest = "docs/MANIFEST.sha256",
                          index = "IVF64,Flat", guard = #plan.guard<quarantine>, ...}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    StrArrayAttr:$corpus,
    StrAttr:$manifest,
    Plan_ChunkKindAttr:$chunk,
    I64Attr:$chunk_size,
    I64Attr:$chunk_overlap,
    DefaultValuedAttr<F64Attr, "0.0">:$chunk_threshold,
    Plan_EmbedKindAttr:$embed,
    I64Attr:$embed_dim,
    OptionalAttr<FlatSymbolRefAttr>:$embed_model,
    StrAttr:$embed_checkpoint,
    OptionalAttr<DictionaryAttr>:$fasttext,
    StrAttr:$pool,
    StrAttr:$index,
    Plan_MetricAttr:$metric,
    I64Attr:$nprobe,
    DefaultValuedAttr<I64Attr, "0">:$ef_search,
    DefaultValuedAttr<I64Attr, "0">:$ef_construction,
    Plan_SearchKindAttr:$search,
    F64Attr:$vector_weight,
    F64Attr:$keyword_weight,
    I64Attr:$top,
    Plan_FusionAttr:$fusion,
    I64Attr:$rrf_k,
    OptionalAttr<FlatSymbolRefAttr>:$rerank_model,
    StrAttr:$rerank_checkpoint,
    I64Attr:$rerank_top,
    Plan_GuardAttr:$guard,
    StrAttr:$store,
    StrAttr:$base_dir);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Plan_GenerateOp : Plan_Op<"generate", [Symbol,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Decoding from a trained model, optionally grounded on a retrieval graph";
  let description = [{
    ```mlir
    plan.generate @answer {model = @tiny, checkpoint = "ckpt/tiny", context = @docs,
                           max_tokens = 200 : i64, temperature = 8.0e-01 : f64,
                           top_k = 0 : i64, seed = 7 : i64, window = 64 : i64, base_dir = "."}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$model,
    StrAttr:$checkpoint,
    OptionalAttr<FlatSymbolRefAttr>:$context,
    I64Attr:$max_tokens,
    F64Attr:$temperature,
    I64Attr:$top_k,
    I64Attr:$seed,
    I64Attr:$window,
    StrAttr:$base_dir,
    OptionalAttr<StrAttr>:$tokenizer);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

#endif // PLAN_DIALECT_PLAN_IR_PLANOPS_TD
