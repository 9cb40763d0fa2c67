// plan-emit-main: an executable's main(argc, argv) hands the manifest and the three
// entry points to the runtime's planrt_train_main; a module without a manifest gets none.
// RUN: planc-opt %s -split-input-file -plan-emit-main | FileCheck %s

// CHECK-LABEL: llvm.func @planc_grad(
// CHECK: llvm.func @planrt_train_main(i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @main(
// CHECK-SAME: %[[ARGC:[^:]*]]: i32, %[[ARGV:[^:]*]]: !llvm.ptr) -> i32 {
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.addressof @planc_manifest : !llvm.ptr
// CHECK-NEXT: %[[G:.*]] = llvm.mlir.addressof @planc_grad : !llvm.ptr
// CHECK-NEXT: %[[U:.*]] = llvm.mlir.addressof @planc_update : !llvm.ptr
// CHECK-NEXT: %[[E:.*]] = llvm.mlir.addressof @planc_eval : !llvm.ptr
// CHECK-NEXT: %[[RC:.*]] = llvm.call @planrt_train_main(%[[ARGC]], %[[ARGV]], %[[M]], %[[G]], %[[U]], %[[E]]) : (i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-NEXT: llvm.return %[[RC]] : i32
// CHECK-NEXT: }
llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22}\00") {addr_space = 0 : i32}
llvm.func @planc_grad(%p: !llvm.ptr, %g: !llvm.ptr, %t: !llvm.ptr, %y: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_update(%p: !llvm.ptr, %g: !llvm.ptr, %m: !llvm.ptr, %v: !llvm.ptr, %s: i64, %st: !llvm.ptr) {
  llvm.return
}
llvm.func @planc_eval(%p: !llvm.ptr, %t: !llvm.ptr, %y: !llvm.ptr, %l: !llvm.ptr) {
  llvm.return
}

// -----

// CHECK-LABEL: llvm.func @helper(
// CHECK-NOT: @main
// CHECK-NOT: planrt_train_main
llvm.func @helper() {
  llvm.return
}
