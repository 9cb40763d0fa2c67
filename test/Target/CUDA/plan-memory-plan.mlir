// plan-memory-plan: a straight-line function's own buffers (allocated and freed in its
// entry block) become views of one arena at offsets fixed at compile time, largest first,
// each at the lowest offset clear of the buffers it is live with (256-byte granules); the
// arena is allocated on entry, freed before the return, and its size recorded as
// plan.arena_bytes. A returned buffer and a buffer freed twice or elsewhere stay allocations.
// In a training executable (a module with planc_manifest) the executable's memory is one
// arena: the manifest's schedule buffers get offsets in its state part (each pipeline
// stage's from the same base), every function's arena is the one step region that
// planrt_step_arena returns (never freed), and the manifest records the sizes.
// RUN: planc-opt %s -split-input-file -plan-memory-plan -plan-emit-manifest | FileCheck %s

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

// -----

// Buffers of every stage first (state: 32 B in 256, x: 256 B), then each stage's from
// offset 512 (params_s0: 400 B in 512, params_s1: 1200 B in 1280): state part 1792 bytes,
// 1024 for stage 0's ranks. Step region: the largest arena, 4096 (planc_fwd_s0); stage 1's
// ranks call planc_fwd_s1 (1024) and planc_update (256) only.
// CHECK: func.func private @planrt_step_arena(i64) -> memref<4096xi8>
// CHECK: llvm.mlir.global internal constant @planc_manifest("{
// CHECK-SAME: \22memory\22:{\22alignment\22:256,\22arenas\22:{\22planc_fwd_s0\22:4096,\22planc_fwd_s1\22:1024,\22planc_update\22:256},
// CHECK-SAME: \22stage_state_bytes\22:[1024,1792],\22stage_step_bytes\22:[4096,1024],\22state_bytes\22:1792,\22step_bytes\22:4096}
// CHECK-SAME: {\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22,\22offset\22:0}
// CHECK-SAME: {\22floats\22:100,\22lifetime\22:\22persistent\22,\22name\22:\22params_s0\22,\22offset\22:512,\22stage\22:0}
// CHECK-SAME: {\22floats\22:300,\22lifetime\22:\22persistent\22,\22name\22:\22params_s1\22,\22offset\22:512,\22stage\22:1}
// CHECK-SAME: {\22floats\22:64,\22lifetime\22:\22transient\22,\22name\22:\22x\22,\22offset\22:256}
// CHECK-LABEL: func.func @planc_fwd_s0(
// CHECK-SAME: attributes {plan.arena_bytes = 4096 : i64}
// CHECK: %[[BYTES:.*]] = arith.constant 4096 : i64
// CHECK: %[[REGION:.*]] = call @planrt_step_arena(%[[BYTES]]) : (i64) -> memref<4096xi8>
// CHECK: memref.view %[[REGION]][%c0{{.*}}][] : memref<4096xi8> to memref<1024xf32>
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK-LABEL: func.func @planc_fwd_s1(
// CHECK-SAME: attributes {plan.arena_bytes = 1024 : i64}
// CHECK: %[[BYTES1:.*]] = arith.constant 1024 : i64
// CHECK: call @planrt_step_arena(%[[BYTES1]]) : (i64) -> memref<4096xi8>
// CHECK-NOT: memref.dealloc
// CHECK: return
sched.manifest @planc_manifest {schedule = {buffers = [{name = "state", floats = 8, lifetime = "persistent"}, {name = "params_s0", floats = 100, lifetime = "persistent", stage = 0}, {name = "params_s1", floats = 300, lifetime = "persistent", stage = 1}, {name = "x", floats = 64, lifetime = "transient"}]}}
func.func private @use(memref<1024xf32>)
func.func private @use2(memref<256xf32>)
func.func private @use3(memref<64xf32>)
func.func @planc_fwd_s0() {
  %a = memref.alloc() : memref<1024xf32>
  call @use(%a) : (memref<1024xf32>) -> ()
  memref.dealloc %a : memref<1024xf32>
  return
}
func.func @planc_fwd_s1() {
  %a = memref.alloc() : memref<256xf32>
  call @use2(%a) : (memref<256xf32>) -> ()
  memref.dealloc %a : memref<256xf32>
  return
}
func.func @planc_update() {
  %a = memref.alloc() : memref<64xf32>
  call @use3(%a) : (memref<64xf32>) -> ()
  memref.dealloc %a : memref<64xf32>
  return
}

// -----

// Offloaded moments (`offload { optimizer = nvme(…) }`) live in files: exp_avg and
// exp_avg_sq, a pipeline stage's too, get no offset, and the state part holds the rest
// (the state at 0, the parameters at 256, 100 floats: 256 + 512 bytes).
// CHECK: \22state_bytes\22:768
// CHECK-SAME: {\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22,\22offset\22:0}
// CHECK-SAME: {\22floats\22:100,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22}
// CHECK-SAME: {\22floats\22:100,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq_s0\22}
// CHECK-SAME: {\22floats\22:100,\22lifetime\22:\22persistent\22,\22name\22:\22params\22,\22offset\22:256}
func.func @planc_update(%p: memref<100xf32>) {
  return
}
sched.manifest @planc_manifest {offload = {optimizer = {target = "nvme", dir = "/nvme", buffer = 4096}}, schedule = {buffers = [{name = "state", floats = 8, lifetime = "persistent"}, {name = "exp_avg", floats = 100, lifetime = "persistent"}, {name = "exp_avg_sq_s0", floats = 100, lifetime = "persistent"}, {name = "params", floats = 100, lifetime = "persistent"}]}}
