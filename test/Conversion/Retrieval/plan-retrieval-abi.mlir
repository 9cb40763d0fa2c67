// plan-retrieval-abi: a retrieval declaration becomes the manifest constant
// planc_retrieval_manifest (every parameter of the graph, paths resolved against the plan's
// directory, enums by their language names) and a main that hands it to
// planrt_retrieval_main_manifest. Nothing of the plan is left.
// RUN: planc emit %examples/rag.plan --entry docs --stage sched | FileCheck %s
// RUN: planc emit %S/Inputs/small.plan --stage sched 2>&1 | FileCheck %s --check-prefix=SMALL

// CHECK-NOT: plan.
// CHECK: llvm.mlir.global internal constant @planc_retrieval_manifest("{
// CHECK-SAME: \22chunk\22:\22tokens\22,\22chunk_overlap\22:32,\22chunk_size\22:256,
// CHECK-SAME: \22corpus\22:[\22{{.*}}/examples/docs/**/*.md\22]
// CHECK-SAME: \22embed\22:\22hashing\22
// CHECK-SAME: \22embed_dim\22:384
// CHECK-SAME: \22format\22:\22planc-retrieval-1\22,\22fusion\22:\22weighted\22,\22graph\22:\22docs\22,\22guard\22:\22quarantine\22,\22index\22:\22IVF64,Flat\22,\22keyword_weight\22:0.29999999999999999,
// CHECK-SAME: \22manifest\22:\22{{.*}}/examples/docs/MANIFEST.sha256\22,\22metric\22:\22ip\22,\22nprobe\22:8,
// CHECK-SAME: \22rerank\22:\22none\22,
// CHECK-SAME: \22search\22:\22hybrid\22,\22store\22:\22{{.*}}/examples/index/docs\22,\22top\22:20,\22vector_weight\22:0.69999999999999996}\00")
// CHECK: llvm.func @planrt_retrieval_main_manifest(i32, !llvm.ptr, !llvm.ptr) -> i32
// CHECK: llvm.func @main(%[[ARGC:.*]]: i32, %[[ARGV:.*]]: !llvm.ptr) -> i32 {
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.addressof @planc_retrieval_manifest : !llvm.ptr
// CHECK-NEXT: %[[RC:.*]] = llvm.call @planrt_retrieval_main_manifest(%[[ARGC]], %[[ARGV]], %[[M]])
// CHECK-NEXT: llvm.return %[[RC]] : i32
// CHECK-NOT: func.func

// A graph with reciprocal-rank fusion (k 30), sentences, L2 and the guard off.
// SMALL: \22chunk\22:\22sentences\22
// SMALL-SAME: \22fusion\22:\22rrf\22
// SMALL-SAME: \22guard\22:\22off\22
// SMALL-SAME: \22manifest\22:\22{{.*}}notes/SHA256SUMS\22
// SMALL-SAME: \22metric\22:\22l2\22
// SMALL-SAME: \22rrf_k\22:30,\22search\22:\22hybrid\22
