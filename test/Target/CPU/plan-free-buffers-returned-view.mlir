// plan-free-buffers keeps a buffer the caller receives through a view (memref.expand_shape,
// subview, cast, ...), as well as one returned directly.
// RUN: planc-opt %s -pass-pipeline='builtin.module(func.func(plan-free-buffers))' | FileCheck %s

// CHECK-LABEL: func.func @view(
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: %[[V:.*]] = memref.expand_shape %[[A]]
// CHECK-NOT: memref.dealloc
// CHECK: return %[[V]]
func.func @view() -> memref<2x2xf32> {
  %a = memref.alloc() : memref<4xf32>
  %v = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  return %v : memref<2x2xf32>
}
