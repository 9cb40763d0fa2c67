// plan-emit-main: an executable's main(argc, argv) hands the manifest, the four
// entry points on flat buffers (grad, sumsq, update, eval), the three step
// programs of plan-schedule (step, gather, release), the pipeline stages' table
// (none here: null, 0) and a federated plan's round program (none: null) to the
// runtime's planrt_train_main, in the order of its C
// signature (runtime/include/planrt.h); a module without a manifest gets none.
// RUN: planc-opt %s -split-input-file -plan-emit-main | FileCheck %s

// CHECK-LABEL: llvm.func @planc_grad(
// CHECK: llvm.func @planrt_train_main(i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @main(
// CHECK-SAME: %[[ARGC:[^:]*]]: i32, %[[ARGV:[^:]*]]: !llvm.ptr) -> i32 {
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.addressof @planc_manifest : !llvm.ptr
// CHECK-NEXT: %[[G:.*]] = llvm.mlir.addressof @planc_grad : !llvm.ptr
// CHECK-NEXT: %[[S:.*]] = llvm.mlir.addressof @planc_sumsq : !llvm.ptr
// CHECK-NEXT: %[[U:.*]] = llvm.mlir.addressof @planc_update : !llvm.ptr
// CHECK-NEXT: %[[E:.*]] = llvm.mlir.addressof @planc_eval : !llvm.ptr
// CHECK-NEXT: %[[ST:.*]] = llvm.mlir.addressof @planc_step : !llvm.ptr
// CHECK-NEXT: %[[GA:.*]] = llvm.mlir.addressof @planc_gather : !llvm.ptr
// CHECK-NEXT: %[[R:.*]] = llvm.mlir.addressof @planc_release : !llvm.ptr
// CHECK-NEXT: %[[C0:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[C1:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[NO:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[NR:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[RC:.*]] = llvm.call @planrt_train_main(%[[ARGC]], %[[ARGV]], %[[M]], %[[G]], %[[S]], %[[U]], %[[E]], %[[ST]], %[[GA]], %[[R]], %[[C0]], %[[C1]], %[[NO]], %[[N]], %[[NR]]) : (i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-NEXT: llvm.return %[[RC]] : i32
// CHECK-NEXT: }
llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22}\00") {addr_space = 0 : i32}
llvm.func @planc_grad(%p: !llvm.ptr, %g: !llvm.ptr, %t: !llvm.ptr, %y: !llvm.ptr, %l: !llvm.ptr, %st: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_sumsq(%g0: !llvm.ptr, %g1: !llvm.ptr, %st: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_update(%p0: !llvm.ptr, %p1: !llvm.ptr, %g0: !llvm.ptr, %g1: !llvm.ptr, %m0: !llvm.ptr, %m1: !llvm.ptr,
                        %v0: !llvm.ptr, %v1: !llvm.ptr, %s: i64, %st: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_eval(%p: !llvm.ptr, %t: !llvm.ptr, %y: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_step(%ctx: !llvm.ptr, %step: i64) {
  llvm.return
}
llvm.func @planc_gather(%ctx: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_release(%ctx: !llvm.ptr) {
  llvm.return
}

// -----

// CHECK-LABEL: llvm.func @helper(
// CHECK-NOT: @main
// CHECK-NOT: planrt_train_main
llvm.func @helper() {
  llvm.return
}

// -----

// A generation executable: planrt_generate_main(argc, argv, manifest, prefill, step,
// retrieval manifest, models, ground), the last three the graph's manifest, its
// compiled models (planrt_retrieval_models: null entries where it has none) and
// planrt_retrieval_ground when the plan names a context.
// CHECK: llvm.func @planrt_generate_main(i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.mlir.global internal constant @planc_retrieval_models() {{.*}} : !llvm.struct<(ptr, ptr, ptr, ptr)> {
// CHECK-NEXT: %[[U:.*]] = llvm.mlir.undef : !llvm.struct<(ptr, ptr, ptr, ptr)>
// CHECK-NEXT: %[[EM:.*]] = llvm.mlir.addressof @planc_embed_manifest : !llvm.ptr
// CHECK-NEXT: %[[S0:.*]] = llvm.insertvalue %[[EM]], %[[U]][0]
// CHECK-NEXT: %[[E:.*]] = llvm.mlir.addressof @planc_embed : !llvm.ptr
// CHECK-NEXT: %[[S1:.*]] = llvm.insertvalue %[[E]], %[[S0]][1]
// CHECK-NEXT: %[[Z:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[S2:.*]] = llvm.insertvalue %[[Z]], %[[S1]][2]
// CHECK-NEXT: %[[Z2:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[S3:.*]] = llvm.insertvalue %[[Z2]], %[[S2]][3]
// CHECK-NEXT: llvm.return %[[S3]]
// CHECK: llvm.func @planrt_retrieval_ground(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @main(
// CHECK-SAME: %[[ARGC:[^:]*]]: i32, %[[ARGV:[^:]*]]: !llvm.ptr) -> i32 {
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.addressof @planc_generate_manifest : !llvm.ptr
// CHECK-NEXT: %[[P:.*]] = llvm.mlir.addressof @planc_prefill : !llvm.ptr
// CHECK-NEXT: %[[S:.*]] = llvm.mlir.addressof @planc_step : !llvm.ptr
// CHECK-NEXT: %[[R:.*]] = llvm.mlir.addressof @planc_retrieval_manifest : !llvm.ptr
// CHECK-NEXT: %[[MO:.*]] = llvm.mlir.addressof @planc_retrieval_models : !llvm.ptr
// CHECK-NEXT: %[[G:.*]] = llvm.mlir.addressof @planrt_retrieval_ground : !llvm.ptr
// CHECK-NEXT: %[[RC:.*]] = llvm.call @planrt_generate_main(%[[ARGC]], %[[ARGV]], %[[M]], %[[P]], %[[S]], %[[R]], %[[MO]], %[[G]])
// CHECK-NEXT: llvm.return %[[RC]] : i32
llvm.mlir.global internal constant @planc_generate_manifest("{}\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @planc_retrieval_manifest("{}\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @planc_embed_manifest("{}\00") {addr_space = 0 : i32}
llvm.func @planc_prefill(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_step(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_embed(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}

// -----

// Without a context graph, null pointers in their place.
// CHECK-LABEL: llvm.func @main(
// CHECK: %[[Z1:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[Z2:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: %[[Z3:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @planrt_generate_main(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[Z1]], %[[Z2]], %[[Z3]])
llvm.mlir.global internal constant @planc_generate_manifest("{}\00") {addr_space = 0 : i32}
llvm.func @planc_prefill(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_step(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}

// -----

// A retrieval executable: planrt_retrieval_main_manifest(argc, argv, manifest, models),
// the re-ranker's entry in the models (no embedder: hashing).
// CHECK: llvm.mlir.global internal constant @planc_retrieval_models()
// CHECK: llvm.mlir.zero
// CHECK: llvm.mlir.zero
// CHECK: llvm.mlir.addressof @planc_rerank_manifest
// CHECK: llvm.mlir.addressof @planc_rerank :
// CHECK: llvm.func @planrt_retrieval_main_manifest(i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @main(
// CHECK-SAME: %[[ARGC:[^:]*]]: i32, %[[ARGV:[^:]*]]: !llvm.ptr) -> i32 {
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.addressof @planc_retrieval_manifest : !llvm.ptr
// CHECK-NEXT: %[[MO:.*]] = llvm.mlir.addressof @planc_retrieval_models : !llvm.ptr
// CHECK-NEXT: %[[RC:.*]] = llvm.call @planrt_retrieval_main_manifest(%[[ARGC]], %[[ARGV]], %[[M]], %[[MO]])
// CHECK-NEXT: llvm.return %[[RC]] : i32
llvm.mlir.global internal constant @planc_retrieval_manifest("{}\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @planc_rerank_manifest("{}\00") {addr_space = 0 : i32}
llvm.func @planc_rerank(%p: !llvm.ptr, %t: !llvm.ptr, %o: i64, %c: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
