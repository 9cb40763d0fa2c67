// nn-autodiff: @<model>_grad returns the loss and one gradient per parameter, built from
// the forward ops' VJPs in reverse order; a value used twice gets the nn.add of its
// gradients, a parameter the loss does not read gets zeros.
// RUN: planc-opt %s -nn-autodiff | FileCheck %s
// RUN: planc-opt %s -nn-autodiff | planc-opt > /dev/null

// The forward function stays as it was.
// CHECK-LABEL: func.func @m(
// CHECK-NOT: _grad
// CHECK: return

// CHECK-LABEL: func.func @m_grad(
// CHECK-SAME: %[[TOK:[^:]*]]: tensor<?x?xi32> {nn.input = "tokens"}, %[[TGT:[^:]*]]: tensor<?x?xi32> {nn.input = "targets"},
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {nn.param = "wte.weight"}, %[[WPE:[^:]*]]: tensor<8x8xf32> {nn.param = "wpe.weight"},
// CHECK-SAME: %[[G:[^:]*]]: tensor<8xf32> {nn.param = "ln.weight"}, %[[W:[^:]*]]: tensor<8x24xf32> {nn.param = "attn.weight"},
// CHECK-SAME: %[[B:[^:]*]]: tensor<24xf32> {nn.param = "attn.bias"}, %{{[^:]*}}: tensor<4x4xf32> {nn.param = "unused.weight"})
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {nn.grad = "wte.weight"}, tensor<8x8xf32> {nn.grad = "wpe.weight"},
// CHECK-SAME: tensor<8xf32> {nn.grad = "ln.weight"}, tensor<8x24xf32> {nn.grad = "attn.weight"},
// CHECK-SAME: tensor<24xf32> {nn.grad = "attn.bias"}, tensor<4x4xf32> {nn.grad = "unused.weight"})
// CHECK-SAME: attributes {nn.train_grad}
// The forward pass, cloned.
// CHECK: %[[X:.*]] = nn.embedding %[[WTE]], %[[TOK]]
// CHECK: %[[P:.*]] = nn.positions %[[TOK]]
// CHECK: %[[PE:.*]] = nn.embedding %[[WPE]], %[[P]]
// CHECK: %[[H:.*]] = nn.add %[[X]], %[[PE]]
// CHECK: %[[N:.*]] = nn.layernorm %[[H]], %[[G]] {eps
// CHECK: %[[Q0:.*]] = nn.matmul %[[N]], %[[W]]
// CHECK: %[[Q:.*]] = nn.bias_add %[[Q0]], %[[B]]
// CHECK: %[[O:.*]] = nn.sdpa %[[Q]]
// CHECK: %[[A:.*]] = nn.gelu %[[O]]
// CHECK: %[[D:.*]] = nn.dropout %[[A]]
// CHECK: %[[R:.*]] = nn.add %[[H]], %[[D]]
// CHECK: %[[LOGITS:.*]] = nn.matmul %[[R]], %[[WTE]] {transpose_w}
// CHECK: %[[LOSS:.*]] = nn.cross_entropy %[[LOGITS]], %[[TGT]]
// The backward pass: dloss = 1, then the VJPs from the loss back to the tokens.
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DL:.*]] = nn.cross_entropy_grad %[[ONE]], %[[LOGITS]], %[[TGT]] : tensor<f32>, tensor<?x?x16xf32>, tensor<?x?xi32>
// The tied head: dx through the untransposed table, dw in the table's layout.
// CHECK: %[[DR:.*]] = nn.matmul %[[DL]], %[[WTE]] : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[DWTE1:.*]] = nn.matmul_wgrad %[[R]], %[[DL]] {transpose_w} : (tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> tensor<16x8xf32>
// The residual add and the p = 0 dropout pass dr through unchanged.
// CHECK-NEXT: %[[DO:.*]] = nn.gelu_grad %[[DR]], %[[O]]
// CHECK-NEXT: %[[DQ:.*]] = nn.sdpa_grad %[[DO]], %[[Q]] {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<?x?x8xf32>, tensor<?x?x24xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.sum_rows %[[DQ]] : tensor<?x?x24xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[DN:.*]] = nn.matmul %[[DQ]], %[[W]] {transpose_w} : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.matmul_wgrad %[[N]], %[[DQ]] : (tensor<?x?x8xf32>, tensor<?x?x24xf32>) -> tensor<8x24xf32>
// CHECK-NEXT: %[[DH:.*]], %[[DG:.*]], %{{.*}} = nn.layernorm_grad %[[DN]], %[[H]], %[[G]] {eps = 1.000000e-05 : f64}
// The residual stream %h feeds the layernorm and the add: its gradients are summed.
// CHECK-NEXT: %[[DHSUM:.*]] = nn.add %[[DR]], %[[DH]] : tensor<?x?x8xf32>
// CHECK-NEXT: %[[DWPE:.*]] = nn.embedding_grad %[[DHSUM]], %[[P]] : (tensor<?x?x8xf32>, tensor<?x?xi32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[DWTE2:.*]] = nn.embedding_grad %[[DHSUM]], %[[TOK]] : (tensor<?x?x8xf32>, tensor<?x?xi32>) -> tensor<16x8xf32>
// The tied table: head gradient + embedding gradient.
// CHECK-NEXT: %[[DWTE:.*]] = nn.add %[[DWTE1]], %[[DWTE2]] : tensor<16x8xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DWTE]], %[[DWPE]], %[[DG]], %[[DW]], %[[DB]], %[[ZERO]]
func.func @m(%tok: tensor<?x?xi32> {nn.input = "tokens"}, %tgt: tensor<?x?xi32> {nn.input = "targets"},
             %wte: tensor<16x8xf32> {nn.param = "wte.weight"}, %wpe: tensor<8x8xf32> {nn.param = "wpe.weight"},
             %g: tensor<8xf32> {nn.param = "ln.weight"}, %w: tensor<8x24xf32> {nn.param = "attn.weight"},
             %b: tensor<24xf32> {nn.param = "attn.bias"}, %unused: tensor<4x4xf32> {nn.param = "unused.weight"})
    -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %p = nn.positions %tok : tensor<?x?xi32>
  %pe = nn.embedding %wpe, %p : (tensor<8x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %h = nn.add %x, %pe : tensor<?x?x8xf32>
  %n = nn.layernorm %h, %g {eps = 1.0e-05 : f64} : tensor<?x?x8xf32>, tensor<8xf32>
  %q0 = nn.matmul %n, %w : (tensor<?x?x8xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
  %q = nn.bias_add %q0, %b : tensor<?x?x24xf32>, tensor<24xf32>
  %o = nn.sdpa %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  %a = nn.gelu %o : tensor<?x?x8xf32>
  %d = nn.dropout %a {p = 0.0 : f64} : tensor<?x?x8xf32>
  %r = nn.add %h, %d : tensor<?x?x8xf32>
  %logits = nn.matmul %r, %wte {transpose_w} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %tgt : (tensor<?x?x16xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// sub, mul, rmsnorm, silu and relu; an argument without nn.param gets no gradient.
// CHECK-LABEL: func.func @m2_grad(
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {nn.grad = "wte.weight"}, tensor<8xf32> {nn.grad = "norm.weight"}, tensor<8x16xf32> {nn.grad = "head.weight"})
// CHECK: %[[DL:.*]] = nn.cross_entropy_grad
// CHECK-NEXT: %[[DM:.*]] = nn.matmul %[[DL]], %{{.*}} {transpose_w} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[DHEAD:.*]] = nn.matmul_wgrad
// d(d · x): dd = dm · x, dx = dm · d.
// CHECK-NEXT: %[[DD:.*]] = nn.mul %[[DM]], %[[X:[^ ]*]] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[DX1:.*]] = nn.mul %[[DM]], %[[DIFF:[^ ]*]] : tensor<2x4x8xf32>
// d(s − r): ds = dd, dr = −dd.
// CHECK-NEXT: %[[NEG:.*]] = nn.scale %[[DD]] {factor = -1.000000e+00 : f64} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[DX2:.*]] = nn.relu_grad %[[NEG]], %[[X]]
// CHECK-NEXT: %[[SUM1:.*]] = nn.add %[[DX1]], %[[DX2]]
// CHECK-NEXT: %[[DN:.*]] = nn.silu_grad %[[DD]], %[[N:[^ ]*]]
// CHECK-NEXT: %[[DX3:.*]], %[[DNORM:.*]] = nn.rmsnorm_grad %[[DN]], %[[X]], %{{.*}} {eps = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: %[[SUM2:.*]] = nn.add %[[SUM1]], %[[DX3]]
// CHECK-NEXT: %[[DWTE:.*]] = nn.embedding_grad %[[SUM2]]
// CHECK-NEXT: return %{{.*}}, %[[DWTE]], %[[DNORM]], %[[DHEAD]]
func.func @m2(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>, %wte: tensor<16x8xf32> {nn.param = "wte.weight"},
              %g: tensor<8xf32> {nn.param = "norm.weight"}, %w: tensor<8x16xf32> {nn.param = "head.weight"},
              %frozen: tensor<8xf32>) -> tensor<f32> attributes {nn.model} {
  %x = nn.embedding %wte, %tok : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %n = nn.rmsnorm %x, %g {eps = 1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %s = nn.silu %n : tensor<2x4x8xf32>
  %r = nn.relu %x : tensor<2x4x8xf32>
  %d = nn.sub %s, %r : tensor<2x4x8xf32>
  %m = nn.mul %d, %x : tensor<2x4x8xf32>
  %l = nn.matmul %m, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A function without nn.model is not differentiated.
// CHECK-NOT: func.func @helper_grad
func.func @helper(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.gelu %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

