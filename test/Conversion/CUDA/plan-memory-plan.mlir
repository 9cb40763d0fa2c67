// plan-memory-plan: a straight-line function's own buffers (allocated and freed in its
// entry block) become views of one arena at offsets fixed at compile time, largest first,
// each at the lowest offset clear of the buffers it is live with (256-byte granules); the
// arena is allocated on entry, freed before the return, and its size recorded as
// plan.arena_bytes. A returned buffer and a buffer freed twice or elsewhere stay allocations.
// RUN: planc-opt %s -split-input-file -plan-memory-plan | FileCheck %s

// a (4096 B) and b (1024 B) are live together; c (2048 B) only after both are freed: it
// reuses offset 0. The arena: 4096 + 1024 = 5120 bytes.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: attributes {plan.arena_bytes = 5120 : i64}
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 256 : i64} : memref<5120xi8>
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<5120xi8> to memref<1024xf32>
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%c4096{{.*}}][] : memref<5120xi8> to memref<256xf32>
// CHECK: %[[C:.*]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<5120xi8> to memref<512xf32>
// CHECK: %[[R:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NOT: memref.dealloc %[[A]]
// CHECK: memref.dealloc %[[ARENA]] : memref<5120xi8>
// CHECK-NEXT: return %[[R]]
func.func private @use(memref<1024xf32>, memref<256xf32>)
func.func private @use1(memref<512xf32>)
func.func @step() -> memref<8xf32> {
  %a = memref.alloc() : memref<1024xf32>
  %b = memref.alloc() : memref<256xf32>
  call @use(%a, %b) : (memref<1024xf32>, memref<256xf32>) -> ()
  memref.dealloc %a : memref<1024xf32>
  memref.dealloc %b : memref<256xf32>
  %c = memref.alloc() : memref<512xf32>
  call @use1(%c) : (memref<512xf32>) -> ()
  memref.dealloc %c : memref<512xf32>
  %r = memref.alloc() : memref<8xf32>
  return %r : memref<8xf32>
}

// -----

// A buffer freed inside a loop is left alone; nothing to plan, no arena.
// CHECK-LABEL: func.func @loop(
// CHECK-NOT: plan.arena_bytes
// CHECK: memref.alloc() : memref<16xf32>
// CHECK: scf.for
// CHECK: memref.dealloc
func.func @loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = memref.alloc() : memref<16xf32>
  scf.for %i = %c0 to %n step %c1 {
    memref.dealloc %x : memref<16xf32>
  }
  return
}
