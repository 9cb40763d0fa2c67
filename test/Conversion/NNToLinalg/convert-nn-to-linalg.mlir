// convert-nn-to-linalg: elementwise and reduction nn ops become linalg.generic on tensors;
// the ops with a library implementation stay for bufferization to turn into calls.
// (Where an op's operands are built in one C++ expression, their order follows argument
// evaluation: those bodies are checked with DAG groups.)
// RUN: planc-opt %s -convert-nn-to-linalg | FileCheck %s
// RUN: planc-opt %s -convert-nn-to-linalg | planc-opt -linalg-fuse-elementwise-ops > /dev/null

// CHECK-DAG: #[[ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[LAST:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[SCALAR2:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[ID1:.*]] = affine_map<(d0) -> (d0)>

// GPT-2's GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x4x8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<2x4x8xf32>) outs(%[[E]] : tensor<2x4x8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-DAG: %[[X2:.*]] = arith.mulf %[[IN]], %[[IN]] : f32
// CHECK-DAG: %[[X3:.*]] = arith.mulf %[[IN]], %[[X2]] : f32
// CHECK-DAG: %[[C1:.*]] = arith.constant 4.471500e-02 : f32
// CHECK-DAG: %[[T1:.*]] = arith.mulf %[[C1]], %[[X3]] : f32
// CHECK-DAG: %[[INNER:.*]] = arith.addf %[[IN]], %[[T1]] : f32
// CHECK-DAG: %[[C2:.*]] = arith.constant 0.797884583 : f32
// CHECK-DAG: %[[ARG:.*]] = arith.mulf %[[C2]], %[[INNER]] : f32
// CHECK-DAG: %[[TH:.*]] = math.tanh %[[ARG]] : f32
// CHECK-DAG: %[[HALFC:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[HALF:.*]] = arith.mulf %[[HALFC]], %[[IN]] : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[SUM:.*]] = arith.addf %[[ONE]], %[[TH]] : f32
// CHECK-DAG: %[[R:.*]] = arith.mulf %[[HALF]], %[[SUM]] : f32
// CHECK: linalg.yield %[[R]] : f32
// CHECK-NOT: nn.gelu
func.func @gelu(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.gelu %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// dy · gelu'(x): the same tanh, its square for sech².
// CHECK-LABEL: func.func @gelu_grad(
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[ID3]], #[[ID3]]]
// CHECK-NEXT: ^bb0(%[[DY:[^:]*]]: f32, %[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-DAG: %[[TH:.*]] = math.tanh
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[HALFC:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[TH2:.*]] = arith.mulf %[[TH]], %[[TH]] : f32
// CHECK-DAG: %[[SECH2:.*]] = arith.subf %[[ONE]], %[[TH2]] : f32
// CHECK-DAG: %[[K:.*]] = arith.constant 1.341450e-01 : f32
// CHECK-DAG: %[[KX:.*]] = arith.mulf %[[K]], %{{.*}} : f32
// CHECK-DAG: %[[POLY:.*]] = arith.addf %[[ONE]], %[[KX]] : f32
// CHECK-DAG: %[[DIN:.*]] = arith.mulf %{{.*}}, %[[POLY]] : f32
// CHECK-DAG: %[[T2:.*]] = arith.mulf %[[SECH2]], %[[DIN]] : f32
// CHECK-DAG: %[[HX:.*]] = arith.mulf %[[HALFC]], %[[IN]] : f32
// CHECK-DAG: %[[RHS:.*]] = arith.mulf %[[HX]], %[[T2]] : f32
// CHECK-DAG: %[[OPT:.*]] = arith.addf %[[ONE]], %[[TH]] : f32
// CHECK-DAG: %[[LHS:.*]] = arith.mulf %[[HALFC]], %[[OPT]] : f32
// CHECK-DAG: %[[D:.*]] = arith.addf %[[LHS]], %[[RHS]] : f32
// CHECK-DAG: %[[R:.*]] = arith.mulf %[[DY]], %[[D]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @gelu_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.gelu_grad %dy, %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// x · σ(x), σ(x) = 1 / (1 + exp(−x)).
// CHECK-LABEL: func.func @silu(
// CHECK: ^bb0(%[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK: %[[NEG:.*]] = arith.negf %[[IN]] : f32
// CHECK: %[[EXP:.*]] = math.exp %[[NEG]] : f32
// CHECK-DAG: %[[DEN:.*]] = arith.addf %{{.*}}, %[[EXP]] : f32
// CHECK-DAG: %[[SIG:.*]] = arith.divf %{{.*}}, %[[DEN]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[IN]], %[[SIG]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @silu(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.silu %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// dy · σ(x)·(1 + x·(1 − σ(x))).
// CHECK-LABEL: func.func @silu_grad(
// CHECK: ^bb0(%[[DY:[^:]*]]: f32, %[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK: %[[SIG:.*]] = arith.divf
// CHECK-DAG: %[[OMS:.*]] = arith.subf %{{.*}}, %[[SIG]] : f32
// CHECK-DAG: %[[XO:.*]] = arith.mulf %[[IN]], %[[OMS]] : f32
// CHECK-DAG: %[[P:.*]] = arith.addf %{{.*}}, %[[XO]] : f32
// CHECK-DAG: %[[D:.*]] = arith.mulf %[[SIG]], %[[P]] : f32
// CHECK: %[[R:.*]] = arith.mulf %[[DY]], %[[D]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @silu_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.silu_grad %dy, %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @relu(
// CHECK: ^bb0(%[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[R:.*]] = arith.maximumf %[[IN]], %[[Z]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @relu(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.relu %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// dy where x > 0, else 0.
// CHECK-LABEL: func.func @relu_grad(
// CHECK: ^bb0(%[[DY:[^:]*]]: f32, %[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ogt, %[[IN]], %[[Z]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %[[POS]], %[[DY]], %[[Z]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @relu_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.relu_grad %dy, %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// The bias is read through the last dim.
// CHECK-LABEL: func.func @bias_add(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[LAST]], #[[ID3]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], %[[B]] : tensor<2x4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: f32, %[[C:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[A]], %[[C]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @bias_add(%x: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.bias_add %x, %b : tensor<2x4x8xf32>, tensor<8xf32>
  return %y : tensor<2x4x8xf32>
}

// A sum over batch and sequence into a zero-filled vector.
// CHECK-LABEL: func.func @sum_rows(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<24xf32>
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[F:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<24xf32>) -> tensor<24xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[LAST]]], iterator_types = ["reduction", "reduction", "parallel"]} ins(%{{.*}} : tensor<2x4x24xf32>) outs(%[[F]] : tensor<24xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]*]]: f32, %[[ACC:[^:]*]]: f32):
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @sum_rows(%x: tensor<2x4x24xf32>) -> tensor<24xf32> {
  %y = nn.sum_rows %x : tensor<2x4x24xf32> -> tensor<24xf32>
  return %y : tensor<24xf32>
}

// Every dim reduced into a 0-d accumulator of f64 (an f32 running sum over millions of
// squares stops growing), reassociable so that it vectorises; the sum is truncated to the
// f32 result.
// CHECK-LABEL: func.func @sumsq(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x24xf32>, %[[V:[^:]*]]: tensor<24xf32>)
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%[[Z]] : f64) outs(%{{.*}} : tensor<f64>) -> tensor<f64>
// CHECK-NEXT: %[[S:.*]] = linalg.generic {indexing_maps = [#[[ID2]], #[[SCALAR2]]], iterator_types = ["reduction", "reduction"]} ins(%[[X]] : tensor<8x24xf32>) outs(%[[F]] : tensor<f64>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]*]]: f32, %[[ACC:[^:]*]]: f64):
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[IN]] : f32 to f64
// CHECK-NEXT: %[[SQ:.*]] = arith.mulf %[[W]], %[[W]] : f64
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[ACC]], %[[SQ]] fastmath<reassoc> : f64
// CHECK-NEXT: linalg.yield %[[R]] : f64
// CHECK-NEXT: } -> tensor<f64>
// CHECK-NEXT: %[[E:.*]] = tensor.extract %[[S]][] : tensor<f64>
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[E]] : f64 to f32
// CHECK-NEXT: %[[Y:.*]] = tensor.from_elements %[[N]] : tensor<f32>
// CHECK: iterator_types = ["reduction"]} ins(%[[V]] : tensor<24xf32>) outs(%{{.*}} : tensor<f64>)
// CHECK: %[[Y2:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// CHECK-NEXT: return %[[Y]], %[[Y2]] : tensor<f32>, tensor<f32>
func.func @sumsq(%x: tensor<8x24xf32>, %v: tensor<24xf32>) -> (tensor<f32>, tensor<f32>) {
  %y = nn.sumsq %x : tensor<8x24xf32> -> tensor<f32>
  %z = nn.sumsq %v : tensor<24xf32> -> tensor<f32>
  return %y, %z : tensor<f32>, tensor<f32>
}

// The sequence index, as i32, with no input.
// CHECK-LABEL: func.func @positions(
// CHECK: linalg.generic {indexing_maps = [#[[ID2]]], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<2x4xi32>)
// CHECK-NEXT: ^bb0(%{{[^:]*}}: i32):
// CHECK-NEXT: %[[I:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT: %[[R:.*]] = arith.trunci %[[I64]] : i64 to i32
// CHECK-NEXT: linalg.yield %[[R]] : i32
func.func @positions(%t: tensor<2x4xi32>) -> tensor<2x4xi32> {
  %y = nn.positions %t : tensor<2x4xi32>
  return %y : tensor<2x4xi32>
}

// With an offset (decoding after cached positions): offset + s.
// CHECK-LABEL: func.func @positions_from(
// CHECK-SAME: %{{[^:]*}}: tensor<1x3xi32>, %[[OFF:[^:]*]]: i64
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT: %[[S:.*]] = arith.addi %[[I64]], %[[OFF]] : i64
// CHECK-NEXT: %[[R:.*]] = arith.trunci %[[S]] : i64 to i32
// CHECK-NEXT: linalg.yield %[[R]] : i32
func.func @positions_from(%t: tensor<1x3xi32>, %off: i64) -> tensor<1x3xi32> {
  %y = nn.positions %t from %off : tensor<1x3xi32>
  return %y : tensor<1x3xi32>
}

// add/sub/mul at any rank, scale by its constant, dropout with p = 0 is the identity.
// CHECK-LABEL: func.func @arith(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x24xf32>, %[[V:[^:]*]]: tensor<24xf32>, %[[H:[^:]*]]: tensor<2x4x8xf32>
// CHECK: ins(%[[A]], %[[A]] : tensor<8x24xf32>, tensor<8x24xf32>)
// CHECK: arith.addf
// CHECK: ins(%[[V]], %[[V]] : tensor<24xf32>, tensor<24xf32>)
// CHECK: arith.subf
// CHECK: ins(%[[H]], %[[H]] : tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK: arith.mulf
// CHECK: %[[S:.*]] = linalg.generic {indexing_maps = [#[[ID1]], #[[ID1]]], iterator_types = ["parallel"]} ins(%{{.*}} : tensor<24xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[K:.*]] = arith.constant -2.500000e-01 : f32
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[IN]], %[[K]] : f32
// CHECK-NOT: nn.
// CHECK: return %{{.*}}, %[[S]], %[[H]] :
func.func @arith(%a: tensor<8x24xf32>, %v: tensor<24xf32>, %h: tensor<2x4x8xf32>)
    -> (tensor<8x24xf32>, tensor<24xf32>, tensor<2x4x8xf32>, tensor<24xf32>, tensor<2x4x8xf32>) {
  %0 = nn.add %a, %a : tensor<8x24xf32>
  %1 = nn.sub %v, %v : tensor<24xf32>
  %2 = nn.mul %h, %h : tensor<2x4x8xf32>
  %3 = nn.scale %1 {factor = -0.25 : f64} : tensor<24xf32>
  %4 = nn.dropout %h {p = 0.0 : f64} : tensor<2x4x8xf32>
  return %0, %1, %2, %3, %4 : tensor<8x24xf32>, tensor<24xf32>, tensor<2x4x8xf32>, tensor<24xf32>, tensor<2x4x8xf32>
}

// AdamW: the f64 scalars folded into f32 factors outside the loop, then one generic of
// 4 inputs (p, g, m, v) and 3 outputs (p, m, v).
// CHECK-LABEL: func.func @adamw(
// CHECK-SAME: %[[P:[^:]*]]: tensor<8x24xf32>, %[[G:[^:]*]]: tensor<8x24xf32>, %[[M:[^:]*]]: tensor<8x24xf32>, %[[V:[^:]*]]: tensor<8x24xf32>, %[[LR:[^:]*]]: f64, %[[SCALE:[^:]*]]: f32, %[[BC1:[^:]*]]: f64, %[[BC2:[^:]*]]: f64)
// CHECK-DAG: %[[WD:.*]] = arith.constant 1.000000e-01 : f64
// CHECK-DAG: %[[LRWD:.*]] = arith.mulf %[[LR]], %[[WD]] : f64
// CHECK-DAG: %[[DECAY64:.*]] = arith.subf %{{.*}}, %[[LRWD]] : f64
// CHECK-DAG: %[[DECAY:.*]] = arith.truncf %[[DECAY64]] : f64 to f32
// CHECK-DAG: %[[STEP64:.*]] = arith.divf %[[LR]], %[[BC1]] : f64
// CHECK-DAG: %[[STEP:.*]] = arith.truncf %[[STEP64]] : f64 to f32
// CHECK-DAG: %[[BC2SQ64:.*]] = math.sqrt %[[BC2]] : f64
// CHECK-DAG: %[[BC2SQ:.*]] = arith.truncf %[[BC2SQ64]] : f64 to f32
// CHECK: %[[R:.*]]:3 = linalg.generic {indexing_maps = [#[[ID2]], #[[ID2]], #[[ID2]], #[[ID2]], #[[ID2]], #[[ID2]], #[[ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[P]], %[[G]], %[[M]], %[[V]] : tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>)
// CHECK-SAME: outs(%{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} : tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>)
// CHECK-NEXT: ^bb0(%[[IP:[^:]*]]: f32, %[[IG:[^:]*]]: f32, %[[IM:[^:]*]]: f32, %[[IV:[^:]*]]: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32):
// CHECK-DAG: %[[GS:.*]] = arith.mulf %[[IG]], %[[SCALE]] : f32
// CHECK-DAG: %[[PD:.*]] = arith.mulf %[[IP]], %[[DECAY]] : f32
// CHECK-DAG: %[[B1:.*]] = arith.constant 0.899999976 : f32
// CHECK-DAG: %[[MB:.*]] = arith.mulf %[[IM]], %[[B1]] : f32
// CHECK-DAG: %[[OMB1:.*]] = arith.constant 1.000000e-01 : f32
// CHECK-DAG: %[[GB:.*]] = arith.mulf %[[GS]], %[[OMB1]] : f32
// CHECK-DAG: %[[NM:.*]] = arith.addf %[[MB]], %[[GB]] : f32
// CHECK-DAG: %[[B2:.*]] = arith.constant 0.949999988 : f32
// CHECK-DAG: %[[VB:.*]] = arith.mulf %[[IV]], %[[B2]] : f32
// CHECK-DAG: %[[G2:.*]] = arith.mulf %[[GS]], %[[GS]] : f32
// CHECK-DAG: %[[OMB2:.*]] = arith.constant 5.000000e-02 : f32
// CHECK-DAG: %[[G2B:.*]] = arith.mulf %[[G2]], %[[OMB2]] : f32
// CHECK-DAG: %[[NV:.*]] = arith.addf %[[VB]], %[[G2B]] : f32
// CHECK-DAG: %[[SQ:.*]] = math.sqrt %[[NV]] : f32
// CHECK-DAG: %[[SQC:.*]] = arith.divf %[[SQ]], %[[BC2SQ]] : f32
// CHECK-DAG: %[[EPS:.*]] = arith.constant 9.99999993E-9 : f32
// CHECK-DAG: %[[DEN:.*]] = arith.addf %[[SQC]], %[[EPS]] : f32
// CHECK-DAG: %[[Q:.*]] = arith.divf %[[NM]], %[[DEN]] : f32
// CHECK-DAG: %[[UPD:.*]] = arith.mulf %[[STEP]], %[[Q]] : f32
// CHECK-DAG: %[[NP:.*]] = arith.subf %[[PD]], %[[UPD]] : f32
// CHECK: linalg.yield %[[NP]], %[[NM]], %[[NV]] : f32, f32, f32
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @adamw(%p: tensor<8x24xf32>, %g: tensor<8x24xf32>, %m: tensor<8x24xf32>, %v: tensor<8x24xf32>,
                 %lr: f64, %s: f32, %bc1: f64, %bc2: f64) -> (tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>) {
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %lr, %s, %bc1, %bc2
      {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64} : tensor<8x24xf32>
  return %p2, %m2, %v2 : tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>
}

// SGD with momentum and weight decay: lr narrowed to f32 outside the loop, then one
// generic of 3 inputs (p, g, buf) and 2 outputs (p, buf): g·scale + wd·p, buf = μ·buf + g,
// p − lr·buf.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: %[[P:[^:]*]]: tensor<8x24xf32>, %[[G:[^:]*]]: tensor<8x24xf32>, %[[B:[^:]*]]: tensor<8x24xf32>, %[[LR:[^:]*]]: f64, %[[SCALE:[^:]*]]: f32)
// CHECK: %[[LR32:.*]] = arith.truncf %[[LR]] : f64 to f32
// CHECK: %[[R:.*]]:2 = linalg.generic
// CHECK-SAME: ins(%[[P]], %[[G]], %[[B]] : tensor<8x24xf32>, tensor<8x24xf32>, tensor<8x24xf32>)
// CHECK-NEXT: ^bb0(%[[IP:[^:]*]]: f32, %[[IG:[^:]*]]: f32, %[[IB:[^:]*]]: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32):
// CHECK-DAG: %[[GS:.*]] = arith.mulf %[[IG]], %[[SCALE]] : f32
// CHECK-DAG: %[[WD:.*]] = arith.constant 0.00999999977 : f32
// CHECK-DAG: %[[PW:.*]] = arith.mulf %[[IP]], %[[WD]] : f32
// CHECK-DAG: %[[GW:.*]] = arith.addf %[[GS]], %[[PW]] : f32
// CHECK-DAG: %[[MU:.*]] = arith.constant 0.899999976 : f32
// CHECK-DAG: %[[BM:.*]] = arith.mulf %[[IB]], %[[MU]] : f32
// CHECK-DAG: %[[NB:.*]] = arith.addf %[[BM]], %[[GW]] : f32
// CHECK-DAG: %[[STEP:.*]] = arith.mulf %[[LR32]], %[[NB]] : f32
// CHECK-DAG: %[[NP:.*]] = arith.subf %[[IP]], %[[STEP]] : f32
// CHECK: linalg.yield %[[NP]], %[[NB]] : f32, f32
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @sgd(%p: tensor<8x24xf32>, %g: tensor<8x24xf32>, %b: tensor<8x24xf32>, %lr: f64, %s: f32)
    -> (tensor<8x24xf32>, tensor<8x24xf32>) {
  %p2, %b2 = nn.sgd %p, %g, %b, %lr, %s {momentum = 0.9 : f64, weight_decay = 0.01 : f64} : tensor<8x24xf32>
  return %p2, %b2 : tensor<8x24xf32>, tensor<8x24xf32>
}

// The library ops stay, forward and backward.
// CHECK-LABEL: func.func @library(
// CHECK: nn.embedding
// CHECK: nn.layernorm
// CHECK: nn.rmsnorm
// CHECK: nn.matmul
// CHECK: nn.sdpa
// CHECK: nn.cross_entropy
// CHECK: nn.cross_entropy_grad
// CHECK: nn.sdpa_grad
// CHECK: nn.matmul_wgrad
// CHECK: nn.layernorm_grad
// CHECK: nn.rmsnorm_grad
// CHECK: nn.embedding_grad
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @library(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %g: tensor<8xf32>, %w: tensor<8x24xf32>) -> tensor<f32> {
  %x = nn.embedding %wte, %t : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %n = nn.layernorm %x, %g, %g {eps = 1.0e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %r = nn.rmsnorm %n, %g {eps = 1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %q = nn.matmul %r, %w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %o = nn.sdpa %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %l = nn.matmul %o, %wte {transpose_w} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %l, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dl = nn.cross_entropy_grad %loss, %l, %t : tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>
  %dq = nn.sdpa_grad %o, %q {causal, heads = 2 : i64, kv_heads = 2 : i64} : tensor<2x4x8xf32>, tensor<2x4x24xf32>
  %dw = nn.matmul_wgrad %r, %dq : (tensor<2x4x8xf32>, tensor<2x4x24xf32>) -> tensor<8x24xf32>
  %dx, %dg, %db = nn.layernorm_grad %x, %x, %g {eps = 1.0e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %rx, %rg = nn.rmsnorm_grad %x, %x, %g {eps = 1.0e-06 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %dt = nn.embedding_grad %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  return %loss : tensor<f32>
}

// -----

// nn.round: to the narrow type (to nearest even) and back, elementwise.
// CHECK-LABEL: func.func @round(
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[N]] : bf16 to f32
// CHECK-NEXT: linalg.yield %[[W]] : f32
func.func @round(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %y = nn.round %x {to = bf16} : tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// nn.flatten and its gradient are views: images [N, C, H, W] and features [N, 1, C·H·W]
// hold the same floats in the same order.
// CHECK-LABEL: func.func @flatten(
// CHECK: %[[R:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2, 3]] : tensor<4x16x2x2xf32> into tensor<4x64xf32>
// CHECK: %[[F:.*]] = tensor.expand_shape %[[R]] {{\[\[}}0], [1, 2]] output_shape [4, 1, 64] : tensor<4x64xf32> into tensor<4x1x64xf32>
// CHECK: %[[D:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2]] : tensor<4x1x64xf32> into tensor<4x64xf32>
// CHECK: tensor.expand_shape %[[D]] {{\[\[}}0], [1, 2, 3]] output_shape [4, 16, 2, 2] : tensor<4x64xf32> into tensor<4x16x2x2xf32>
func.func @flatten(%x: tensor<4x16x2x2xf32>, %dy: tensor<4x1x64xf32>) -> (tensor<4x1x64xf32>, tensor<4x16x2x2xf32>) {
  %f = nn.flatten %x : tensor<4x16x2x2xf32> -> tensor<4x1x64xf32>
  %d = nn.unflatten %dy : tensor<4x1x64xf32> -> tensor<4x16x2x2xf32>
  return %f, %d : tensor<4x1x64xf32>, tensor<4x16x2x2xf32>
}

// The elementwise ops are of any rank: ReLU of images.
// CHECK-LABEL: func.func @relu_images(
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]
func.func @relu_images(%x: tensor<4x16x2x2xf32>) -> tensor<4x16x2x2xf32> {
  %y = nn.relu %x : tensor<4x16x2x2xf32>
  return %y : tensor<4x16x2x2xf32>
}
