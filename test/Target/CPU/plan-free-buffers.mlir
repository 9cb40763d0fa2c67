// plan-free-buffers: every buffer allocated at the top level of a straight-line function
// is freed right after its last use — the last top-level op that uses it, a view of it, or
// its address (what a library call receives) — except the ones it returns; nested
// allocations and declarations are left alone.
// RUN: planc-opt %s -pass-pipeline='builtin.module(func.func(plan-free-buffers))' | FileCheck %s

// CHECK-LABEL: func.func @straight(
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
// CHECK: %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK-NEXT: memref.dealloc %[[B]] : memref<8xf32>
// CHECK-NEXT: memref.copy %[[A]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[A]] : memref<2x3x8xf32>
// CHECK-NEXT: return
// CHECK-NOT: memref.dealloc
// CHECK: }
func.func @straight(%out: memref<2x3x8xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<2x3x8xf32>
  %b = memref.alloc() : memref<8xf32>
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  memref.store %f, %b[%c0] : memref<8xf32>
  memref.copy %a, %out : memref<2x3x8xf32> to memref<2x3x8xf32>
  return
}

// A buffer lives until the last use of a view of it, and of its address: the pointer a
// library call takes, derived through memref.extract_aligned_pointer_as_index and casts,
// keeps it alive up to that call, however much later.
// CHECK-LABEL: func.func @address(
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[V:.*]] = memref.expand_shape %[[A]]
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[V]]
// CHECK: %[[T:.*]] = memref.alloc() : memref<2xf32>
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: call @kernel(%{{.*}})
// CHECK-NEXT: memref.dealloc %[[A]] : memref<4xf32>
// CHECK-NEXT: return
func.func private @kernel(!llvm.ptr)
func.func @address() {
  %a = memref.alloc() : memref<4xf32>
  %v = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  %p = memref.extract_aligned_pointer_as_index %v : memref<2x2xf32> -> index
  %i = arith.index_cast %p : index to i64
  %q = llvm.inttoptr %i : i64 to !llvm.ptr
  %t = memref.alloc() : memref<2xf32>
  call @kernel(%q) : (!llvm.ptr) -> ()
  return
}

// An allocation inside a loop is not at the top level; the loop is the use of one made
// outside it.
// CHECK-LABEL: func.func @nested(
// CHECK: %[[T:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for
// CHECK: memref.alloc() : memref<2xf32>
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK-NOT: memref.dealloc
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[T]] : memref<4xf32>
// CHECK-NEXT: return
func.func @nested(%n: index) {
  %t = memref.alloc() : memref<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %inner = memref.alloc() : memref<2xf32>
    memref.store %f, %t[%c0] : memref<4xf32>
  }
  return
}

// A returned buffer belongs to the caller: only the others are freed, each after its
// last use.
// CHECK-LABEL: func.func @returned(
// CHECK-SAME: %[[X:[^:]*]]: memref<4xf32>)
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT: %[[T:.*]] = memref.alloc() : memref<2xf32>
// CHECK-NEXT: memref.dealloc %[[T]] : memref<2xf32>
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.copy %[[X]], %[[A]]
// CHECK-NEXT: memref.copy %[[X]], %[[B]]
// CHECK-NEXT: memref.dealloc %[[B]] : memref<4xf32>
// CHECK-NEXT: return %[[A]], %[[X]] : memref<4xf32>, memref<4xf32>
func.func @returned(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  %t = memref.alloc() : memref<2xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  memref.copy %x, %b : memref<4xf32> to memref<4xf32>
  return %a, %x : memref<4xf32>, memref<4xf32>
}

// The same buffer returned twice is not freed either.
// CHECK-LABEL: func.func @twice(
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NOT: memref.dealloc
// CHECK: return %[[A]], %[[A]]
func.func @twice() -> (memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  return %a, %a : memref<4xf32>, memref<4xf32>
}

// Nothing to free, nothing added; a declaration has no body.
// CHECK-LABEL: func.func @none(
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @none(%x: memref<4xf32>) {
  return
}
// CHECK-LABEL: func.func private @external(memref<4xf32>)
func.func private @external(memref<4xf32>)
