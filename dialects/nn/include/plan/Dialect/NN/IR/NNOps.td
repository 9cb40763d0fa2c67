// The `nn` dialect: one op per primitive of the language, on tensors.
#ifndef PLAN_DIALECT_NN_IR_NNOPS_TD
#define PLAN_DIALECT_NN_IR_NNOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "plan/Dialect/NN/IR/NNInterfaces.td"

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
  // Bufferization turns library ops into LLVM-pointer calls (LibraryCalls.cpp).
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect", "mlir::func::FuncDialect"];
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [Pure])>;

// A forward op: differentiable through its VJP.
class NN_FwdOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<NN_VJPOpInterface>])>;

// Activations: [batch, seq, features] with batch and seq usually dynamic.
def NN_Activation : TensorRankOf<[AnyFloat], [3]>;
def NN_Tokens : TensorRankOf<[I32], [2]>;
def NN_Matrix : TensorRankOf<[AnyFloat], [2]>;
def NN_Vector : TensorRankOf<[AnyFloat], [1]>;
// Images [batch, channels, height, width] (NCHW, PyTorch's), and convolution
// filters [out, in, k, k].
def NN_Images : TensorRankOf<[AnyFloat], [4]>;
// Any float tensor: activations, images, and gradients of parameters summed where a
// parameter is used twice (tied weights).
def NN_AnyFloatTensor : RankedTensorOf<[AnyFloat]>;

def NN_EmbeddingOp : NN_FwdOp<"embedding"> {
  let summary = "Rows of a table gathered by integer ids";
  let description = [{
    `result[b, s, :] = table[ids[b, s], :]`. Ids out of range are a run-time error.

    With `from %offset`, the table is the slice of rows `offset … offset + rows − 1`
    of a larger one (a vocab-parallel embedding: each tensor-parallel rank holds a
    slice); ids outside the slice give zero rows, and the sum over the ranks
    (`nn.all_reduce`) is the full lookup.

    ```mlir
    %x = nn.embedding %table, %ids : (tensor<256x64xf32>, tensor<?x?xi32>) -> tensor<?x?x64xf32>
    %p = nn.embedding %slice, %ids from %first : (tensor<128x64xf32>, tensor<4x32xi32>, i64) -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins NN_Matrix:$table, NN_Tokens:$ids, Optional<I64>:$offset);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$table `,` $ids (`from` $offset^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_PositionsOp : NN_FwdOp<"positions", [AllTypesMatch<["tokens", "result"]>]> {
  let summary = "The position of every token in its sequence";
  let description = [{
    `result[b, s] = s`, of the shape of `tokens`; with `from %offset`,
    `offset + s` (the positions of a chunk decoded after `offset` cached ones).

    ```mlir
    %p = nn.positions %tokens : tensor<?x?xi32>
    %q = nn.positions %tokens from %pos : tensor<1x1xi32>
    ```
  }];
  let arguments = (ins NN_Tokens:$tokens, Optional<I64>:$offset);
  let results = (outs NN_Tokens:$result);
  let assemblyFormat = "$tokens (`from` $offset^)? attr-dict `:` type($tokens)";
  let hasVerifier = 1;
}

def NN_MatmulOp : NN_FwdOp<"matmul"> {
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

def NN_BiasAddOp : NN_FwdOp<"bias_add", [AllTypesMatch<["x", "result"]>]> {
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

def NN_LayerNormOp : NN_FwdOp<"layernorm", [AllTypesMatch<["x", "result"]>]> {
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

def NN_RMSNormOp : NN_FwdOp<"rmsnorm", [AllTypesMatch<["x", "result"]>]> {
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

def NN_SDPAOp : NN_FwdOp<"sdpa"> {
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

def NN_SDPACachedOp : NN_Op<"sdpa_cached", [AllTypesMatch<["cache", "new_cache"]>]> {
  let summary = "Scaled dot-product attention of a chunk of positions over a key/value cache";
  let description = [{
    Decoding with a key/value cache. `qkv` packs, as for `nn.sdpa`, the
    queries, keys and values of `n` new positions `offset … offset + n - 1`.
    `cache` is `[batch, window, 2·kv_heads·head_dim]`: at each position the
    keys (rotated when `rope` is set) of every key/value head, then the
    values. The op stores the new positions' keys and values at rows
    `offset …` of the cache (the result `new_cache`, written in place when
    bufferized) and returns the causal attention of each new query over the
    cache's rows up to its own position. The same numbers as `nn.sdpa` over
    the whole sequence, one chunk at a time; `offset + n` must not exceed the
    window (checked at run time). Causal only.

    ```mlir
    %o, %c = nn.sdpa_cached %qkv, %cache, %pos {heads = 4 : i64, kv_heads = 4 : i64}
        : tensor<1x1x192xf32>, tensor<1x64x128xf32> -> tensor<1x1x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$qkv, NN_Activation:$cache, I64:$offset, I64Attr:$heads,
                       I64Attr:$kv_heads, UnitAttr:$rope, DefaultValuedAttr<F64Attr, "10000.0">:$rope_theta);
  let results = (outs NN_Activation:$result, NN_Activation:$new_cache);
  let assemblyFormat = [{
    $qkv `,` $cache `,` $offset attr-dict `:` type($qkv) `,` type($cache) `->` type($result)
  }];
  let hasVerifier = 1;
}

// Elementwise activations: of [batch, seq, features] activations and of images.
class NN_UnaryOp<string mnemonic, string what> : NN_FwdOp<mnemonic, [AllTypesMatch<["x", "result"]>]> {
  let summary = what;
  let arguments = (ins NN_AnyFloatTensor:$x);
  let results = (outs NN_AnyFloatTensor:$result);
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

def NN_DropoutOp : NN_FwdOp<"dropout", [AllTypesMatch<["x", "result"]>]> {
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
    : NN_FwdOp<mnemonic, [AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = what;
  let arguments = (ins NN_AnyFloatTensor:$lhs, NN_AnyFloatTensor:$rhs);
  let results = (outs NN_AnyFloatTensor:$result);
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

def NN_CrossEntropyOp : NN_FwdOp<"cross_entropy"> {
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


//===----------------------------------------------------------------------===//
// Vision: images are [batch, channels, height, width]; a classifier's features
// become [batch, 1, features] at nn.flatten (one position per image), so that
// nn.matmul, nn.bias_add and nn.cross_entropy apply unchanged.
//===----------------------------------------------------------------------===//

def NN_Conv2dOp : NN_FwdOp<"conv2d"> {
  let summary = "2-D convolution (PyTorch's Conv2d), zero padding";
  let description = [{
    `y[n, k, p, q] = b[k] + Σ_{c,i,j} x[n, c, p·stride + i − pad, q·stride + j − pad] · w[k, c, i, j]`,
    with `P = (H + 2·pad − R) / stride + 1` (and Q likewise).

    ```mlir
    %y = nn.conv2d %x, %w, %b {stride = 1 : i64, pad = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<?x16x32x32xf32>
    ```
  }];
  let arguments = (ins NN_Images:$x, NN_Images:$w, Optional<NN_Vector>:$bias, I64Attr:$stride, I64Attr:$pad);
  let results = (outs NN_Images:$result);
  let assemblyFormat = "$x `,` $w (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_Conv2dGradDataOp : NN_Op<"conv2d_grad_data"> {
  let summary = "The input gradient of nn.conv2d";
  let description = [{
    ```mlir
    %dx = nn.conv2d_grad_data %dy, %w {stride = 1 : i64, pad = 1 : i64} : (tensor<4x16x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<4x3x32x32xf32>
    ```
  }];
  let arguments = (ins NN_Images:$dy, NN_Images:$w, I64Attr:$stride, I64Attr:$pad);
  let results = (outs NN_Images:$dx);
  let assemblyFormat = "$dy `,` $w attr-dict `:` functional-type(operands, results)";
}

def NN_Conv2dGradFilterOp : NN_Op<"conv2d_grad_filter"> {
  let summary = "The filter and bias gradients of nn.conv2d";
  let description = [{
    ```mlir
    %dw, %db = nn.conv2d_grad_filter %dy, %x {stride = 1 : i64, pad = 1 : i64} : (tensor<4x16x32x32xf32>, tensor<4x3x32x32xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins NN_Images:$dy, NN_Images:$x, I64Attr:$stride, I64Attr:$pad);
  let results = (outs NN_Images:$dw, NN_Vector:$db);
  let assemblyFormat = "$dy `,` $x attr-dict `:` functional-type(operands, results)";
}

def NN_MaxPool2dOp : NN_FwdOp<"maxpool2d"> {
  let summary = "Max pooling over k × k windows (MaxPool2d), padding as −∞";
  let description = [{
    ```mlir
    %y = nn.maxpool2d %x {kernel = 3 : i64, stride = 2 : i64, pad = 1 : i64} : tensor<?x64x112x112xf32> -> tensor<?x64x56x56xf32>
    ```
  }];
  let arguments = (ins NN_Images:$x, I64Attr:$kernel, I64Attr:$stride, I64Attr:$pad);
  let results = (outs NN_Images:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def NN_MaxPool2dGradOp : NN_Op<"maxpool2d_grad", [AllTypesMatch<["x", "dx"]>]> {
  let summary = "The gradient of nn.maxpool2d: each dy to its window's first maximum";
  let description = [{
    ```mlir
    %dx = nn.maxpool2d_grad %dy, %x {kernel = 3 : i64, stride = 2 : i64, pad = 1 : i64} : tensor<4x64x56x56xf32>, tensor<4x64x112x112xf32>
    ```
  }];
  let arguments = (ins NN_Images:$dy, NN_Images:$x, I64Attr:$kernel, I64Attr:$stride, I64Attr:$pad);
  let results = (outs NN_Images:$dx);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `,` type($x)";
}

def NN_AvgPoolOp : NN_FwdOp<"avgpool"> {
  let summary = "Global average pooling: [N, C, H, W] to [N, C, 1, 1]";
  let description = [{
    ```mlir
    %y = nn.avgpool %x : tensor<?x512x7x7xf32> -> tensor<?x512x1x1xf32>
    ```
  }];
  let arguments = (ins NN_Images:$x);
  let results = (outs NN_Images:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def NN_AvgPoolGradOp : NN_Op<"avgpool_grad"> {
  let summary = "The gradient of nn.avgpool: dy / (H · W) everywhere";
  let description = [{
    ```mlir
    %dx = nn.avgpool_grad %dy : tensor<4x512x1x1xf32> -> tensor<4x512x7x7xf32>
    ```
  }];
  let arguments = (ins NN_Images:$dy);
  let results = (outs NN_Images:$dx);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($dx)";
}

def NN_FlattenOp : NN_FwdOp<"flatten"> {
  let summary = "Images [N, C, H, W] as features [N, 1, C·H·W] (one position per image)";
  let description = [{
    ```mlir
    %f = nn.flatten %x : tensor<?x512x1x1xf32> -> tensor<?x1x512xf32>
    ```
  }];
  let arguments = (ins NN_Images:$x);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def NN_UnflattenOp : NN_Op<"unflatten"> {
  let summary = "The gradient of nn.flatten: features [N, 1, C·H·W] as images";
  let description = [{
    ```mlir
    %dx = nn.unflatten %df : tensor<4x1x512xf32> -> tensor<4x512x1x1xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x);
  let results = (outs NN_Images:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def NN_BatchNormOp : NN_FwdOp<"batchnorm", [AllTypesMatch<["x", "result"]>, AllTypesMatch<["weight", "bias"]>]> {
  let summary = "Batch normalisation in training (BatchNorm2d): per-channel batch statistics";
  let description = [{
    `y = (x − mean) / sqrt(var + eps) · weight + bias` per channel, mean and the
    biased variance over the batch and the image (N, H, W). `stats` holds them,
    per channel the mean and the biased variance (the gradient reads them, and
    the running statistics are updated from them).

    With `axis` and `ranks` (SyncBatchNorm over a data-parallel group of `ranks`
    processes along mesh axis number `axis`), the statistics are those of the
    group's whole micro-batch: each rank's are all-gathered and combined; the
    gradient all-reduces its sums the same way.

    With `running` (the layer's index in the step's table of running statistics,
    which the runtime keeps: PyTorch's running_mean, running_var and
    num_batches_tracked), each evaluation in training moves the layer's running
    statistics towards the batch's by `momentum` (the unbiased variance), except in
    a recomputation (`nn.recomputed`), which must not count the batch twice. With
    `inference` as well (evaluation), the running statistics normalise instead,
    nothing is updated, and `stats` holds them.

    ```mlir
    %y, %stats = nn.batchnorm %x, %w, %b {eps = 1.0e-05 : f64} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
    %y2, %s2 = nn.batchnorm %x, %w, %b {eps = 1.0e-05 : f64, momentum = 1.0e-01 : f64, running = 0 : i64, inference} : tensor<?x16x32x32xf32>, tensor<16xf32> -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins NN_Images:$x, NN_Vector:$weight, NN_Vector:$bias, F64Attr:$eps,
                       OptionalAttr<I64Attr>:$axis, OptionalAttr<I64Attr>:$ranks,
                       OptionalAttr<I64Attr>:$running, OptionalAttr<F64Attr>:$momentum, UnitAttr:$inference);
  let results = (outs NN_Images:$result, NN_Matrix:$stats);
  let assemblyFormat = "$x `,` $weight `,` $bias attr-dict `:` type($x) `,` type($weight) `->` type($stats)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Mean and biased variance: two rows of one float per channel.
    static mlir::RankedTensorType statsType(mlir::RankedTensorType weight) {
      return mlir::RankedTensorType::get({2, weight.getDimSize(0)}, weight.getElementType());
    }
  }];
}

def NN_BatchNormGradOp : NN_Op<"batchnorm_grad", [AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["weight", "dweight", "dbias"]>]> {
  let summary = "Gradients of nn.batchnorm, from its batch statistics";
  let description = [{
    ```mlir
    %dx, %dw, %db = nn.batchnorm_grad %dy, %x, %stats, %w {eps = 1.0e-05 : f64} : tensor<4x16x32x32xf32>, tensor<2x16xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins NN_Images:$dy, NN_Images:$x, NN_Matrix:$stats, NN_Vector:$weight, F64Attr:$eps,
                       OptionalAttr<I64Attr>:$axis, OptionalAttr<I64Attr>:$ranks);
  let results = (outs NN_Images:$dx, NN_Vector:$dweight, NN_Vector:$dbias);
  let assemblyFormat = "$dy `,` $x `,` $stats `,` $weight attr-dict `:` type($x) `,` type($stats) `,` type($weight)";
}

//===----------------------------------------------------------------------===//
// Tensor parallelism (nn-tensor-parallel): the SPMD form of a forward function
// on one rank of a tensor-parallel group, its collectives explicit.
//===----------------------------------------------------------------------===//

def NN_AxisIndexOp : NN_Op<"axis_index"> {
  let summary = "This process's coordinate on a mesh axis";
  let description = [{
    The coordinate, 0 … size − 1, of the running process on mesh axis number
    `axis` (the position of the axis in the plan's mesh); 0 in a process that
    runs without a mesh.

    ```mlir
    %c = nn.axis_index {axis = 1 : i64} : i64
    ```
  }];
  let arguments = (ins I64Attr:$axis);
  let results = (outs I64:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def NN_AllReduceOp : NN_FwdOp<"all_reduce", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Sum (or maximum) of a value over the ranks of a mesh axis";
  let description = [{
    Every rank of the group along mesh axis `axis` gets the elementwise sum
    (`reduce = "sum"`) or maximum (`"max"`) of its peers' `x`. Megatron's `g`:
    after a row-parallel matmul each rank holds a partial sum; the result is
    replicated, and so its gradient arrives replicated and passes through
    unchanged (the VJP of a sum is the identity). `purpose` names it in logs and
    `planc explain`.

    ```mlir
    %y = nn.all_reduce %x {axis = 1 : i64, reduce = "sum", purpose = "row-parallel output"} : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$x, I64Attr:$axis, StrAttr:$reduce, StrAttr:$purpose);
  let results = (outs NN_AnyFloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def NN_AllReduceBackwardOp : NN_FwdOp<"all_reduce_backward", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Identity whose gradient is summed over a mesh axis";
  let description = [{
    Megatron's `f`: the replicated input of a column-parallel matmul. Forward it
    is `x`; its VJP all-reduces (sums) the gradient over mesh axis `axis`, where
    each rank holds the part of it that its columns contribute.

    ```mlir
    %y = nn.all_reduce_backward %x {axis = 1 : i64, purpose = "attention input"} : tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$x, I64Attr:$axis, StrAttr:$purpose);
  let results = (outs NN_AnyFloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def NN_AllGatherOp : NN_FwdOp<"all_gather"> {
  let summary = "The whole sequence from each rank's slice of it (sequence parallelism)";
  let description = [{
    Each rank of the group along mesh axis `axis` holds positions
    `c·n … (c+1)·n − 1` of the sequence (dim 1, `n` its extent in `x`); the result
    is the whole sequence, in order, on every rank. Its VJP is `nn.reduce_scatter`
    of the gradient. Before a column-parallel matmul under sequence parallelism
    (Korthikanti et al. 2022); the backward pass gathers again rather than keep the
    whole input (`nn-autodiff` recomputes it).

    ```mlir
    %y = nn.all_gather %x {axis = 1 : i64, purpose = "attention input"} : tensor<4x16x64xf32> -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, I64Attr:$axis, StrAttr:$purpose);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def NN_ReduceScatterOp : NN_FwdOp<"reduce_scatter"> {
  let summary = "Each rank's slice of the sequence of a sum over the group (sequence parallelism)";
  let description = [{
    The sum over the group along mesh axis `axis` of every rank's `x`, of which
    rank c keeps positions `c·n … (c+1)·n − 1` of the sequence (dim 1, `n` its
    extent in the result). Its VJP is `nn.all_gather` of the gradient. After a
    row-parallel matmul or a vocab-parallel embedding under sequence parallelism.

    ```mlir
    %y = nn.reduce_scatter %x {axis = 1 : i64, purpose = "row-parallel output"} : tensor<4x32x64xf32> -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, I64Attr:$axis, StrAttr:$purpose);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def NN_SequenceSliceOp : NN_FwdOp<"sequence_slice"> {
  let summary = "Positions offset … offset + n − 1 of the sequence (dim 1)";
  let description = [{
    This rank's slice of a value every rank holds whole (a position embedding)
    under sequence parallelism; no communication. Its VJP places the gradient at
    those positions of zeros (`nn.sequence_unslice`).

    ```mlir
    %y = nn.sequence_slice %x from %first : tensor<4x32x64xf32> -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, I64:$offset);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `from` $offset attr-dict `:` type($x) `->` type($result)";
}

def NN_SequenceUnsliceOp : NN_Op<"sequence_unslice"> {
  let summary = "The gradient of nn.sequence_slice: the slice at its positions of zeros";
  let description = [{
    ```mlir
    %dx = nn.sequence_unslice %dy at %first : tensor<4x16x64xf32> -> tensor<4x32x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, I64:$offset);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$x `at` $offset attr-dict `:` type($x) `->` type($result)";
}

def NN_VocabParallelCrossEntropyOp : NN_FwdOp<"vocab_parallel_cross_entropy"> {
  let summary = "Cross-entropy of logits split over the vocabulary across a mesh axis";
  let description = [{
    The logits of this rank are columns `offset … offset + V − 1` of the full
    vocabulary. The result is `nn.cross_entropy` of the full logits, computed with
    three all-reduces over mesh axis `axis` of one value per row (Megatron's
    vocab-parallel cross-entropy): the row maxima (max), the sums of
    `exp(logit − max)` (sum), and the target's logit (sum, from the rank that
    holds it). The second result is each row's log-sum-exp, kept for the
    gradient, which then needs no communication.

    ```mlir
    %loss, %lse = nn.vocab_parallel_cross_entropy %logits, %targets from %first {axis = 1 : i64}
        : (tensor<4x32x128xf32>, tensor<4x32xi32>, i64) -> (tensor<f32>, tensor<4x32xf32>)
    ```
  }];
  let arguments = (ins NN_Activation:$logits, NN_Tokens:$targets, I64:$offset, I64Attr:$axis);
  let results = (outs 0DTensorOf<[F32]>:$loss, TensorRankOf<[F32], [2]>:$lse);
  let assemblyFormat = "$logits `,` $targets `from` $offset attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_RoundOp : NN_FwdOp<"round", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Rounds every element to a narrower float type and back (mixed precision)";
  let description = [{
    How a plan with `precision = bf16` or `fp16` computes on the CPU: values stay
    f32 in memory but are rounded, to nearest even, to the precision the
    accelerator would hold them in — parameters as they are read (the f32
    master weights are kept), every activation, and, through this op's VJP, every
    gradient flowing back. fp16 overflows to infinity as the hardware does.

    ```mlir
    %y = nn.round %x {to = bf16} : tensor<4x64x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$x, TypeAttrOf<AnyFloat>:$to);
  let results = (outs NN_AnyFloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def NN_DequantizeNF4Op : NN_FwdOp<"dequantize_nf4"> {
  let summary = "A QLoRA base matrix made fp32 from its NF4 storage where it is used";
  let description = [{
    `q` holds the bytes of a matrix quantized as 4-bit NormalFloat in blocks of
    `block` values, with double quantization of the block scales if `double_quant`
    (runtime/include/planrt_nf4.h defines the layout; `q` has as many f32 elements
    as the layout has 4-byte words). The result is the matrix dequantized, of the
    shape the result type gives. plan-quantize inserts one before each use of a
    frozen base matrix of a `quantize = nf4(…)` plan; the autodiff makes it again
    in the backward pass rather than keep the dequantized copy. No gradient flows
    to `q` (the base is frozen).

    ```mlir
    %w = nn.dequantize_nf4 %q {block = 64, double_quant} : tensor<2114xf32> -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [1]>:$q, I64Attr:$block, UnitAttr:$double_quant);
  let results = (outs NN_Matrix:$result);
  let assemblyFormat = "$q attr-dict `:` type($q) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops: what the VJPs of the forward ops are made of. They have no VJP
// of their own (no higher derivatives).
//===----------------------------------------------------------------------===//

def NN_ScaleOp : NN_FwdOp<"scale", [AllTypesMatch<["x", "result"]>]> {
  let summary = "Multiplies every element by a constant";
  let description = [{
    Used by the VJPs, and forward by LoRA's alpha / rank (plan-lora); its own VJP
    scales the cotangent by the same constant.

    ```mlir
    %y = nn.scale %x {factor = -1.0 : f64} : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$x, F64Attr:$factor);
  let results = (outs NN_AnyFloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def NN_MatmulWGradOp : NN_Op<"matmul_wgrad"> {
  let summary = "The weight gradient of nn.matmul";
  let description = [{
    `dw[k, n] = Σ_{b,s} x[b, s, k] · dy[b, s, n]`, or `dw[n, k]` with `transpose_w`
    (the layout of the weight the forward op read).

    ```mlir
    %dw = nn.matmul_wgrad %x, %dy : (tensor<4x64x64xf32>, tensor<4x64x256xf32>) -> tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x, NN_Activation:$dy, UnitAttr:$transpose_w);
  let results = (outs NN_Matrix:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_SumRowsOp : NN_Op<"sum_rows"> {
  let summary = "Sum over batch and sequence: the gradient of a bias or a scale";
  let description = [{
    ```mlir
    %db = nn.sum_rows %dy : tensor<4x64x64xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$x);
  let results = (outs NN_Vector:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_Op<"embedding_grad"> {
  let summary = "The table gradient of nn.embedding: rows of dy summed by id";
  let description = [{
    `dtable[v, :] = Σ_{b,s : ids[b,s] = v} dy[b, s, :]`; with `from %offset`, the
    gradient of the slice of rows starting there (ids outside it contribute nothing).

    ```mlir
    %dt = nn.embedding_grad %dy, %ids : (tensor<4x64x64xf32>, tensor<4x64xi32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$dy, NN_Tokens:$ids, Optional<I64>:$offset);
  let results = (outs NN_Matrix:$result);
  let assemblyFormat = "$dy `,` $ids (`from` $offset^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_LayerNormGradOp : NN_Op<"layernorm_grad", [AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["weight", "dweight", "dbias"]>]> {
  let summary = "Gradients of nn.layernorm (statistics recomputed from x)";
  let description = [{
    ```mlir
    %dx, %dw, %db = nn.layernorm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : tensor<4x64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$dy, NN_Activation:$x, NN_Vector:$weight, F64Attr:$eps);
  let results = (outs NN_Activation:$dx, NN_Vector:$dweight, NN_Vector:$dbias);
  let assemblyFormat = "$dy `,` $x `,` $weight attr-dict `:` type($x) `,` type($weight)";
  let hasVerifier = 1;
}

def NN_RMSNormGradOp : NN_Op<"rmsnorm_grad", [AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["weight", "dweight"]>]> {
  let summary = "Gradients of nn.rmsnorm (statistics recomputed from x)";
  let description = [{
    ```mlir
    %dx, %dw = nn.rmsnorm_grad %dy, %x, %w {eps = 1.0e-06 : f64} : tensor<4x64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$dy, NN_Activation:$x, NN_Vector:$weight, F64Attr:$eps);
  let results = (outs NN_Activation:$dx, NN_Vector:$dweight);
  let assemblyFormat = "$dy `,` $x `,` $weight attr-dict `:` type($x) `,` type($weight)";
  let hasVerifier = 1;
}

def NN_SDPAGradOp : NN_Op<"sdpa_grad", [AllTypesMatch<["qkv", "result"]>]> {
  let summary = "The gradient of nn.sdpa with respect to the packed q, k, v";
  let description = [{
    Recomputes the attention probabilities from `qkv` (nothing is kept from the
    forward op), as flash attention's backward does.

    ```mlir
    %dqkv = nn.sdpa_grad %dy, %qkv {heads = 4 : i64, kv_heads = 4 : i64, causal} : tensor<4x64x64xf32>, tensor<4x64x192xf32>
    ```
  }];
  let arguments = (ins NN_Activation:$dy, NN_Activation:$qkv, I64Attr:$heads, I64Attr:$kv_heads,
                       UnitAttr:$causal, UnitAttr:$rope, DefaultValuedAttr<F64Attr, "10000.0">:$rope_theta);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$dy `,` $qkv attr-dict `:` type($dy) `,` type($qkv)";
  let hasVerifier = 1;
}

class NN_ActGradOp<string mnemonic, string what>
    : NN_Op<mnemonic, [AllTypesMatch<["dy", "x", "result"]>]> {
  let summary = what;
  let arguments = (ins NN_AnyFloatTensor:$dy, NN_AnyFloatTensor:$x);
  let results = (outs NN_AnyFloatTensor:$result);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($x)";
}
def NN_GeluGradOp : NN_ActGradOp<"gelu_grad", "dy · gelu'(x)"> {
  let description = [{
    ```mlir
    %dx = nn.gelu_grad %dy, %x : tensor<4x64x256xf32>
    ```
  }];
}
def NN_SiluGradOp : NN_ActGradOp<"silu_grad", "dy · silu'(x)"> {
  let description = [{
    ```mlir
    %dx = nn.silu_grad %dy, %x : tensor<4x64x256xf32>
    ```
  }];
}
def NN_ReluGradOp : NN_ActGradOp<"relu_grad", "dy · [x > 0]"> {
  let description = [{
    ```mlir
    %dx = nn.relu_grad %dy, %x : tensor<4x64x256xf32>
    ```
  }];
}

def NN_CrossEntropyGradOp : NN_Op<"cross_entropy_grad", [AllTypesMatch<["logits", "result"]>]> {
  let summary = "The gradient of nn.cross_entropy with respect to the logits";
  let description = [{
    `dloss / rows · (softmax(logits) − onehot(targets))`.

    ```mlir
    %dl = nn.cross_entropy_grad %dloss, %logits, %targets : tensor<f32>, tensor<4x64x256xf32>, tensor<4x64xi32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$dloss, NN_Activation:$logits, NN_Tokens:$targets);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$dloss `,` $logits `,` $targets attr-dict `:` type($dloss) `,` type($logits) `,` type($targets)";
  let hasVerifier = 1;
}

def NN_VocabParallelCrossEntropyGradOp : NN_Op<"vocab_parallel_cross_entropy_grad", [AllTypesMatch<["logits", "result"]>]> {
  let summary = "The gradient of nn.vocab_parallel_cross_entropy with respect to this rank's logits";
  let description = [{
    `dloss / rows · (exp(logits − lse) − onehot(targets − offset))`: local, from the
    log-sum-exp the forward op kept.

    ```mlir
    %dl = nn.vocab_parallel_cross_entropy_grad %dloss, %logits, %targets, %lse from %first
        : tensor<f32>, tensor<4x32x128xf32>, tensor<4x32xi32>, tensor<4x32xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$dloss, NN_Activation:$logits, NN_Tokens:$targets,
                       TensorRankOf<[F32], [2]>:$lse, I64:$offset);
  let results = (outs NN_Activation:$result);
  let assemblyFormat = "$dloss `,` $logits `,` $targets `,` $lse `from` $offset attr-dict `:` type($dloss) `,` type($logits) `,` type($targets) `,` type($lse)";
}

//===----------------------------------------------------------------------===//
// Optimizer ops.
//===----------------------------------------------------------------------===//

def NN_SumSquaresOp : NN_Op<"sumsq"> {
  let summary = "Sum of the squares of every element: a term of the global gradient norm";
  let description = [{
    ```mlir
    %s = nn.sumsq %g : tensor<64x256xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$x);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def NN_AdamWOp : NN_Op<"adamw", [AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "One AdamW update of a parameter (PyTorch's formulation)";
  let description = [{
    With `g = grad · grad_scale` (the clipping factor):
    `p ← p · (1 − lr · weight_decay)`, `m ← β1 m + (1 − β1) g`, `v ← β2 v + (1 − β2) g²`,
    `p ← p − lr / bc1 · m / (√v / √bc2 + eps)`, where `bc1 = 1 − β1^t` and
    `bc2 = 1 − β2^t` are the bias corrections of step t (1-based). With
    `if %apply`, a false `%apply` returns the parameter and moments unchanged
    (a step skipped by fp16 loss scaling).

    ```mlir
    %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %lr, %scale, %bc1, %bc2
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64} : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$param, NN_AnyFloatTensor:$grad, NN_AnyFloatTensor:$m,
                       NN_AnyFloatTensor:$v, F64:$lr, F32:$grad_scale, F64:$bc1, F64:$bc2,
                       Optional<I1>:$apply,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs NN_AnyFloatTensor:$new_param, NN_AnyFloatTensor:$new_m, NN_AnyFloatTensor:$new_v);
  let assemblyFormat = "$param `,` $grad `,` $m `,` $v `,` $lr `,` $grad_scale `,` $bc1 `,` $bc2 (`if` $apply^)? attr-dict `:` type($param)";
}

def NN_SGDOp : NN_Op<"sgd", [AllTypesMatch<["param", "grad", "buf", "new_param", "new_buf"]>]> {
  let summary = "One SGD update of a parameter (PyTorch's torch.optim.SGD, no dampening)";
  let description = [{
    With `g = grad · grad_scale + weight_decay · p` (L2 decay, as torch.optim.SGD):
    with momentum μ > 0, `buf ← μ · buf + g` and `p ← p − lr · buf` (a buffer that
    starts at zero makes the first step's `buf = g`, as PyTorch's); without, `p ← p −
    lr · g` and the buffer is returned unchanged. With `if %apply`, a false `%apply`
    returns both unchanged (a step skipped by fp16 loss scaling).

    ```mlir
    %p2, %b2 = nn.sgd %p, %g, %buf, %lr, %scale {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins NN_AnyFloatTensor:$param, NN_AnyFloatTensor:$grad, NN_AnyFloatTensor:$buf, F64:$lr,
                       F32:$grad_scale, Optional<I1>:$apply, F64Attr:$momentum, F64Attr:$weight_decay);
  let results = (outs NN_AnyFloatTensor:$new_param, NN_AnyFloatTensor:$new_buf);
  let assemblyFormat = "$param `,` $grad `,` $buf `,` $lr `,` $grad_scale (`if` $apply^)? attr-dict `:` type($param)";
}

#endif // PLAN_DIALECT_NN_IR_NNOPS_TD
