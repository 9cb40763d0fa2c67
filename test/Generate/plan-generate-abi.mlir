// plan-generate-abi: a generate declaration becomes two decoding entries on flat buffers —
// planc_prefill (a chunk of min(window, 64) positions) and planc_step (one) — in which
// every nn.sdpa is an nn.sdpa_cached over its layer's slice of one cache array, written
// in place, nn.positions counts from the offset, and the logits replace the loss; the
// manifest, and for a context graph its retrieval manifest, become constants.
// RUN: planc emit %examples/rag.plan --entry answer --stage sched | FileCheck %s
// RUN: planc emit %S/Inputs/rope.plan --stage sched | FileCheck %s --check-prefix=ROPE

// CHECK-NOT: plan.
// CHECK-LABEL: func.func @planc_prefill(
// CHECK-SAME: %[[P:[^:]*]]: memref<120576xf32>, %[[TOK:[^:]*]]: memref<1x64xi32>, %[[OFF:[^:]*]]: i64, %[[C:[^:]*]]: memref<16384xf32>, %[[L:[^:]*]]: memref<1x64x256xf32>)
// CHECK: %[[C0:.*]] = memref.subview %[[C]][0] [8192] [1]
// CHECK: %[[T0:.*]] = bufferization.to_tensor %[[C0]] restrict writable
// CHECK: %[[CACHE0:.*]] = tensor.expand_shape %[[T0]] {{.*}} into tensor<1x64x128xf32>
// CHECK: %[[C1:.*]] = memref.subview %[[C]][8192] [8192] [1]
// CHECK: nn.positions %{{.*}} from %[[OFF]] : tensor<1x64xi32>
// CHECK: %{{.*}}, %[[NEW0:.*]] = nn.sdpa_cached %{{.*}}, %[[CACHE0]], %[[OFF]] {heads = 4 : i64, kv_heads = 4 : i64} : tensor<1x64x192xf32>, tensor<1x64x128xf32> -> tensor<1x64x64xf32>
// CHECK: nn.sdpa_cached
// CHECK-NOT: nn.cross_entropy
// CHECK: %[[LOGITS:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_w} : (tensor<1x64x64xf32>, tensor<256x64xf32>) -> tensor<1x64x256xf32>
// CHECK: bufferization.materialize_in_destination %[[LOGITS]] in restrict writable %[[L]]
// CHECK: %[[FLAT0:.*]] = tensor.collapse_shape %[[NEW0]]
// CHECK: %[[W0:.*]] = memref.subview %[[C]][0] [8192] [1]
// CHECK: bufferization.materialize_in_destination %[[FLAT0]] in restrict writable %[[W0]]
// CHECK-LABEL: func.func @planc_step(
// CHECK-SAME: memref<120576xf32>, %{{[^:]*}}: memref<1x1xi32>, %{{[^:]*}}: i64, %{{[^:]*}}: memref<16384xf32>, %{{[^:]*}}: memref<1x1x256xf32>)
// CHECK: nn.sdpa_cached {{.*}} : tensor<1x1x192xf32>, tensor<1x64x128xf32> -> tensor<1x1x64xf32>
// CHECK: llvm.mlir.global internal constant @planc_generate_manifest("{
// CHECK-SAME: \22cache_floats\22:16384,\22checkpoint\22:\22{{.*}}/examples/ckpt/tiny\22,\22chunk\22:64,\22context\22:\22docs\22,\22format\22:\22planc-generate-1\22,\22generate\22:\22answer\22,\22layers\22:2,\22max_tokens\22:200,\22model\22:\22tiny\22,\22num_floats\22:120576,
// CHECK-SAME: {\22count\22:16384,\22name\22:\22wte.weight\22,\22offset\22:0,\22shape\22:[256,64]}
// CHECK-SAME: \22seed\22:7,\22temperature\22:0.80000000000000004,\22top_k\22:0,\22vocab\22:256,\22width\22:256,\22window\22:64}\00")
// CHECK: llvm.mlir.global internal constant @planc_retrieval_manifest("{{.*}}\22graph\22:\22docs\22
// CHECK-NOT: func.func @tiny

// A Llama (rope, grouped-query attention, no positional table): the window is the plan's
// (100), the prefill chunk 64, the one layer's cache 100 rows of 2 kv heads × 16 × 2 (keys, values).
// ROPE-LABEL: func.func @planc_prefill(
// ROPE-SAME: memref<1x64xi32>, %{{[^:]*}}: i64, %{{[^:]*}}: memref<6400xf32>
// ROPE-NOT: nn.positions
// ROPE: nn.sdpa_cached {{.*}} {heads = 4 : i64, kv_heads = 2 : i64, rope, rope_theta = 5.000000e+05 : f64} : tensor<1x64x128xf32>, tensor<1x100x64xf32> -> tensor<1x64x64xf32>
// ROPE: \22chunk\22:64,\22context\22:null,
// ROPE-SAME: \22window\22:100}
