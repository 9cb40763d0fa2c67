// nn-tensor-parallel: one rank of a tensor-parallel group of 2 along mesh axis 1, on a
// one-layer GPT (tied vocab-split embedding, packed q/k/v, GELU MLP). Parameters with a
// split dim hold half of it (nn.split gives the dim, the parts and the full blocks: q, k
// and v one by one for the packed projection); the embedding looks up this rank's rows
// and all-reduces; the column-parallel matmuls read their input through
// nn.all_reduce_backward, the row-parallel ones are followed by nn.all_reduce before
// their (replicated) bias; attention runs on 1 of 2 heads; the loss is vocab-parallel.
// nn-autodiff then all-reduces the gradients of the column-parallel inputs, and only them.
// RUN: planc-opt %s -nn-tensor-parallel="axis=1 size=2 dims=heads,qkv,mlp,vocab" | FileCheck %s
// RUN: planc-opt %s -nn-tensor-parallel="axis=1 size=2 dims=heads,qkv,mlp,vocab" -nn-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: planc-opt %s -nn-tensor-parallel="axis=1 size=1 dims=heads" | FileCheck %s --check-prefix=ONE
// Sequence parallelism: between the tensor-parallel blocks each rank holds 2 of the 4
// positions. The embedding reduce-scatters instead of all-reducing, a position embedding is
// sliced, the column-parallel inputs are gathered (and gathered again in the backward pass,
// nn.recomputed, rather than kept whole), the row-parallel outputs reduce-scattered.
// RUN: planc-opt %s -nn-tensor-parallel="axis=1 size=2 dims=heads,qkv,mlp,vocab sequence=true" | FileCheck %s --check-prefix=SEQ
// RUN: planc-opt %s -nn-tensor-parallel="axis=1 size=2 dims=heads,qkv,mlp,vocab sequence=true" -nn-autodiff | FileCheck %s --check-prefix=SEQGRAD

// CHECK-LABEL: func.func @m(
// CHECK-SAME: tensor<8x8xf32> {nn.dims = ["vocab", "embed"], nn.param = "wte.weight", nn.split = {blocks = array<i64: 16>, dim = 0 : i64, parts = 2 : i64}}
// CHECK-SAME: tensor<8x12xf32> {nn.dims = ["embed", "qkv"], nn.param = "h.0.attn.c_attn.weight", nn.split = {blocks = array<i64: 8, 8, 8>, dim = 1 : i64, parts = 2 : i64}}
// CHECK-SAME: tensor<12xf32> {nn.dims = ["qkv"], nn.param = "h.0.attn.c_attn.bias", nn.split = {blocks = array<i64: 8, 8, 8>, dim = 0 : i64, parts = 2 : i64}}
// CHECK-SAME: tensor<4x8xf32> {nn.dims = ["heads", "embed"], nn.param = "h.0.attn.c_proj.weight", nn.split = {blocks = array<i64: 8>, dim = 0 : i64, parts = 2 : i64}}
// CHECK-SAME: tensor<8xf32> {nn.dims = ["embed"], nn.param = "h.0.attn.c_proj.bias"}
// CHECK-SAME: tensor<8x16xf32> {nn.dims = ["embed", "mlp"], nn.param = "h.0.mlp.c_fc.weight", nn.split = {blocks = array<i64: 32>, dim = 1 : i64, parts = 2 : i64}}
// CHECK-SAME: tensor<16x8xf32> {nn.dims = ["mlp", "embed"], nn.param = "h.0.mlp.c_proj.weight", nn.split = {blocks = array<i64: 32>, dim = 0 : i64, parts = 2 : i64}}
// CHECK:      %[[C:.*]] = nn.axis_index {axis = 1 : i64} : i64
// CHECK:      %[[FIRST:.*]] = arith.muli %[[C]], %{{.*}} : i64
// CHECK:      %[[E:.*]] = nn.embedding %{{.*}}, %{{.*}} from %[[FIRST]] : (tensor<8x8xf32>, tensor<2x4xi32>, i64) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[X:.*]] = nn.all_reduce %[[E]] {axis = 1 : i64, purpose = "embedding output", reduce = "sum"}
// CHECK:      %[[LN:.*]] = nn.layernorm %[[X]]
// CHECK-NEXT: %[[F:.*]] = nn.all_reduce_backward %[[LN]] {axis = 1 : i64, purpose = "attention input"}
// CHECK-NEXT: %[[QKV:.*]] = nn.matmul %[[F]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[QKVB:.*]] = nn.bias_add %[[QKV]], %{{.*}} : tensor<2x4x12xf32>, tensor<12xf32>
// CHECK-NEXT: %[[A:.*]] = nn.sdpa %[[QKVB]] {causal, heads = 1 : i64, kv_heads = 1 : i64} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[P:.*]] = nn.matmul %[[A]], %{{.*}} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[PR:.*]] = nn.all_reduce %[[P]] {axis = 1 : i64, purpose = "attention output", reduce = "sum"}
// CHECK-NEXT: nn.bias_add %[[PR]], %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK:      nn.all_reduce_backward %{{.*}} {axis = 1 : i64, purpose = "column-parallel input"}
// CHECK-NEXT: nn.matmul %{{.*}} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: nn.gelu %{{.*}} : tensor<2x4x16xf32>
// CHECK-NEXT: nn.matmul %{{.*}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.all_reduce %{{.*}} {axis = 1 : i64, purpose = "row-parallel output", reduce = "sum"}
// CHECK:      %[[H:.*]] = nn.all_reduce_backward %{{.*}} {axis = 1 : i64, purpose = "head input"}
// CHECK-NEXT: %[[LOGITS:.*]] = nn.matmul %[[H]], %{{.*}} {transpose_w} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK:      %[[LOSS:.*]], %{{.*}} = nn.vocab_parallel_cross_entropy %[[LOGITS]], %{{.*}} from %{{.*}} {axis = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>, i64) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK-NEXT: return %[[LOSS]]

// GRAD-LABEL: func.func @m_grad(
// GRAD:     nn.vocab_parallel_cross_entropy_grad
// GRAD:     nn.all_reduce %{{.*}} {axis = 1 : i64, purpose = "head input", reduce = "sum"}
// GRAD:     nn.all_reduce %{{.*}} {axis = 1 : i64, purpose = "column-parallel input", reduce = "sum"}
// GRAD:     nn.all_reduce %{{.*}} {axis = 1 : i64, purpose = "attention input", reduce = "sum"}
// GRAD:     nn.embedding_grad %{{.*}}, %{{.*}} from %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>, i64) -> tensor<8x8xf32>
// GRAD-NOT: nn.all_reduce
// GRAD:     return

// SEQ-LABEL: func.func @m(
// SEQ:      %[[E:.*]] = nn.embedding %{{.*}}, %{{.*}} from %{{.*}} : (tensor<8x8xf32>, tensor<2x4xi32>, i64) -> tensor<2x4x8xf32>
// SEQ-NEXT: %[[X:.*]] = nn.reduce_scatter %[[E]] {axis = 1 : i64, purpose = "embedding output"} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SEQ-NEXT: %[[LN:.*]] = nn.layernorm %[[X]], {{.*}} : tensor<2x2x8xf32>, tensor<8xf32>, tensor<8xf32>
// SEQ-NEXT: nn.all_gather %[[LN]] {axis = 1 : i64, purpose = "attention input"} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SEQ:      nn.reduce_scatter %{{.*}} {axis = 1 : i64, purpose = "attention output"} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SEQ:      nn.all_gather %{{.*}} {axis = 1 : i64, purpose = "column-parallel input"}
// SEQ:      nn.reduce_scatter %{{.*}} {axis = 1 : i64, purpose = "row-parallel output"}
// SEQ:      nn.all_gather %{{.*}} {axis = 1 : i64, purpose = "head input"} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SEQ:      nn.vocab_parallel_cross_entropy
// SEQ-NOT:  nn.all_reduce
// SEQ-LABEL: func.func @pos(
// SEQ:      nn.reduce_scatter %{{.*}} {axis = 1 : i64, purpose = "embedding output"}
// SEQ:      %[[POS:.*]] = nn.embedding %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// SEQ-NEXT: nn.sequence_slice %[[POS]] from %{{.*}} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>

// SEQGRAD-LABEL: func.func @m_grad(
// SEQGRAD:     nn.all_gather %{{.*}} {axis = 1 : i64, nn.recomputed, purpose = "head input"}
// SEQGRAD:     nn.matmul_wgrad
// SEQGRAD:     nn.reduce_scatter %{{.*}} {axis = 1 : i64, purpose = "head input"}
// SEQGRAD-LABEL: func.func @pos_grad(
// SEQGRAD:     nn.sequence_unslice %{{.*}} at %{{.*}} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>

// A group of one is the model as it was.
// ONE-NOT: nn.all_reduce
// ONE-NOT: nn.split

func.func @m(%tokens: tensor<2x4xi32> {nn.input = "tokens"}, %targets: tensor<2x4xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.dims = ["vocab", "embed"]},
             %ln_w: tensor<8xf32> {nn.param = "h.0.ln_1.weight", nn.dims = ["embed"]},
             %ln_b: tensor<8xf32> {nn.param = "h.0.ln_1.bias", nn.dims = ["embed"]},
             %qkv_w: tensor<8x24xf32> {nn.param = "h.0.attn.c_attn.weight", nn.dims = ["embed", "qkv"]},
             %qkv_b: tensor<24xf32> {nn.param = "h.0.attn.c_attn.bias", nn.dims = ["qkv"]},
             %o_w: tensor<8x8xf32> {nn.param = "h.0.attn.c_proj.weight", nn.dims = ["heads", "embed"]},
             %o_b: tensor<8xf32> {nn.param = "h.0.attn.c_proj.bias", nn.dims = ["embed"]},
             %fc_w: tensor<8x32xf32> {nn.param = "h.0.mlp.c_fc.weight", nn.dims = ["embed", "mlp"]},
             %pr_w: tensor<32x8xf32> {nn.param = "h.0.mlp.c_proj.weight", nn.dims = ["mlp", "embed"]})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %ln = nn.layernorm %x, %ln_w, %ln_b {eps = 1.0e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %qkv = nn.matmul %ln, %qkv_w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %qkvb = nn.bias_add %qkv, %qkv_b : tensor<2x4x24xf32>, tensor<24xf32>
  %a = nn.sdpa %qkvb {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %o = nn.matmul %a, %o_w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %ob = nn.bias_add %o, %o_b : tensor<2x4x8xf32>, tensor<8xf32>
  %r = nn.add %x, %ob : tensor<2x4x8xf32>
  %h = nn.matmul %r, %fc_w : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  %g = nn.gelu %h : tensor<2x4x32xf32>
  %d = nn.matmul %g, %pr_w : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
  %y = nn.add %r, %d : tensor<2x4x8xf32>
  %logits = nn.matmul %y, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Token and position embeddings, a tied head.
func.func @pos(%tokens: tensor<2x4xi32> {nn.input = "tokens"}, %targets: tensor<2x4xi32> {nn.input = "targets"},
               %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.dims = ["vocab", "embed"]},
               %wpe: tensor<4x8xf32> {nn.param = "wpe.weight", nn.dims = ["context", "embed"]})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %p = nn.positions %tokens : tensor<2x4xi32>
  %e = nn.embedding %wpe, %p : (tensor<4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %s = nn.add %x, %e : tensor<2x4x8xf32>
  %logits = nn.matmul %s, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
