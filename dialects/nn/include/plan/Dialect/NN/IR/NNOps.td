// The `nn` dialect: one op per primitive of the language, on tensors.
#ifndef PLAN_DIALECT_NN_IR_NNOPS_TD
#define PLAN_DIALECT_NN_IR_NNOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let summary = "Neural-network primitives of a model's forward graph, on tensors";
  let description = [{
    A model's forward function after expansion: every layer of the `plan`
    dialect becomes the primitives it is made of (an attention layer is two
    `nn.matmul`s around `nn.sdpa`), parameters become function arguments named
    by their paths, and batch and sequence stay dynamic. Autodiff, optimizer
    updates and the parallel layout build on these ops.

    ```mlir
    func.func @m(%tokens: tensor<?x?xi32>, %targets: tensor<?x?xi32>,
                 %w: tensor<16x8xf32> {nn.param = "wte.weight"}) -> tensor<f32>
        attributes {nn.model} {
      %x = nn.embedding %w, %tokens : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
      %l = nn.matmul %x, %w {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
      %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```
  }];
  let cppNamespace = "::plan::nn";
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [Pure])>;

// Activations: [batch, seq, features] with batch and seq usually dynamic.
def NN_Activation : TensorRankOf<[AnyFloat], [3]>;
def NN_Tokens : TensorRankOf<[I32], [2]>;
def NN_Matrix : TensorRankOf<[AnyFloat], [2]>;
def NN_Vector : TensorRankOf<[AnyFloat], [1]>;

def NN_EmbeddingOp : NN_Op<"embedding"> {
  let summary = "Rows of a table gathered by integer ids";
  let description = [{
    `result[b, s, :] = table[ids[b, s], :]`. Ids out of range are a run-time error.

    ```mlir
    %x = nn.embedding %table, %ids : (tensor<256x64xf32>, tensor<?x?xi32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins NN_Matrix:$table, NN_Tokens:$ids);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_PositionsOp : NN_Op<"positions", [AllTypesMatch<["tokens", "result"]>]> {
  let summary = "The position of every token in its sequence";
  let description = [{
    `result[b, s] = s`, of the shape of `tokens`.

    ```mlir
    %p = nn.positions %tokens : tensor<?x?xi32>
    ```
  }];
  let arguments = (ins NN_Tokens:$tokens);
  let results = (outs NN_Tokens:$result);
  let assemblyFormat = "$tokens attr-dict `:` type($tokens)";
  let hasVerifier = 1;
}

def NN_MatmulOp : NN_Op<"matmul"> {
  let summary = "Activations times a weight matrix";
  let description = [{
    `result[b, s, n] = Σ_k x[b, s, k] · w[k, n]`, or with `transpose_w`
    `Σ_k x[b, s, k] · w[n, k]` (a tied output head reads the embedding table).
    Weights are stored [in, out], as Hugging Face GPT-2's Conv1D.

    ```mlir
    %y = nn.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, NN_Matrix:$w, UnitAttr:$transpose_w);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `,` $w attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_BiasAddOp : NN_Op<"bias_add", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Adds a bias vector along the last dim";
  let description = [{
    ```mlir
    %y = nn.bias_add %x, %b : tensor<?x?x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, NN_Vector:$bias);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `,` $bias attr-dict `:` type($x) `,` type($bias)";
  let hasVerifier = 1;
}

def NN_LayerNormOp : NN_Op<"layernorm", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Layer normalisation over the last dim, with a scale and an optional bias";
  let description = [{
    `(x − mean) / sqrt(var + eps) · weight + bias`, with the biased variance (as PyTorch).

    ```mlir
    %y = nn.layernorm %x, %w, %b {eps = 1.0e-05 : f64} : tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, NN_Vector:$weight, Optional<NN_Vector>:$bias, F64Attr:$eps);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `,` $weight (`,` $bias^)? attr-dict `:` type($x) `,` type($weight) (`,` type($bias)^)?";
  let hasVerifier = 1;
}

def NN_RMSNormOp : NN_Op<"rmsnorm", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Root-mean-square normalisation over the last dim, with a scale";
  let description = [{
    `x / sqrt(mean(x²) + eps) · weight`.

    ```mlir
    %y = nn.rmsnorm %x, %w {eps = 1.0e-06 : f64} : tensor<?x?x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, NN_Vector:$weight, F64Attr:$eps);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `,` $weight attr-dict `:` type($x) `,` type($weight)";
  let hasVerifier = 1;
}

def NN_SDPAOp : NN_Op<"sdpa"> {
  let summary = "Scaled dot-product attention over packed q, k, v";
  let description = [{
    The core of an attention layer. `qkv` packs, along its last dim, `heads`
    query heads, then `kv_heads` key heads and `kv_heads` value heads, each
    `head_dim = result_dim / heads` wide; query head h reads key/value head
    `h / (heads / kv_heads)` (grouped-query attention). Rotary embeddings
    (theta `rope_theta`) rotate q and k when `rope` is set; `causal` masks the
    future. Scale 1/√head_dim. The result concatenates the heads.

    ```mlir
    %o = nn.sdpa %qkv {heads = 4 : i64, kv_heads = 4 : i64, causal} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$qkv, I64Attr:$heads, I64Attr:$kv_heads, UnitAttr:$causal,
                       UnitAttr:$rope, DefaultValuedAttr<F64Attr, "10000.0">:$rope_theta);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$qkv attr-dict `:` type($qkv) `->` type($result)";
  let hasVerifier = 1;
}

class NN_UnaryOp<string mnemonic, string what> : NN_Op<mnemonic, [AllTypesMatch<["x", "result"]>]> {
  let summary = what;
  let arguments = (ins NN_Activation:$x);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def NN_GeluOp : NN_UnaryOp<"gelu", "GELU, tanh approximation (GPT-2's)"> {
  let description = [{
    `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.

    ```mlir
    %y = nn.gelu %x : tensor<?x?x256xf32>
    ```
  }];
}
def NN_SiluOp : NN_UnaryOp<"silu", "SiLU: x · sigmoid(x)"> {
  let description = [{
    ```mlir
    %y = nn.silu %x : tensor<?x?x256xf32>
    ```
  }];
}
def NN_ReluOp : NN_UnaryOp<"relu", "ReLU: max(x, 0)"> {
  let description = [{
    ```mlir
    %y = nn.relu %x : tensor<?x?x256xf32>
    ```
  }];
}

def NN_DropoutOp : NN_Op<"dropout", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Dropout with probability p (inverted scaling), identity in evaluation";
  let description = [{
    ```mlir
    %y = nn.dropout %x {p = 1.0e-01 : f64} : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, F64Attr:$p);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

class NN_BinaryOp<string mnemonic, string what>
    : NN_Op<mnemonic, [AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = what;
  let arguments = (ins NN_Activation:$lhs, NN_Activation:$rhs);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def NN_AddOp : NN_BinaryOp<"add", "Elementwise sum"> {
  let description = [{
    ```mlir
    %y = nn.add %a, %b : tensor<?x?x64xf32>
    ```
  }];
}
def NN_SubOp : NN_BinaryOp<"sub", "Elementwise difference"> {
  let description = [{
    ```mlir
    %y = nn.sub %a, %b : tensor<?x?x64xf32>
    ```
  }];
}
def NN_MulOp : NN_BinaryOp<"mul", "Elementwise product"> {
  let description = [{
    ```mlir
    %y = nn.mul %a, %b : tensor<?x?x64xf32>
    ```
  }];
}

def NN_CrossEntropyOp : NN_Op<"cross_entropy"> {
  let summary = "Mean softmax cross-entropy of logits against target ids";
  let description = [{
    `mean over (b, s) of logsumexp(logits[b, s, :]) − logits[b, s, targets[b, s]]`.

    ```mlir
    %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x256xf32>, tensor<?x?xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_Activation:$logits, NN_Tokens:$targets);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

#endif // PLAN_DIALECT_NN_IR_NNOPS_TD
