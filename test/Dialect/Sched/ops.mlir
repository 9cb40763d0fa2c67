// Round trip of every sched op: print, parse, print again. A 2 × 2 mesh ("dp" × "pp") so that
// collectives can name one axis or both and point-to-point ops have a peer; every buffer
// lifetime; the micro-batch loop with its index, and a region for one coordinate.
// RUN: planc-opt %s | planc-opt | FileCheck %s
// The generic form parses back to the same ops.
// RUN: planc-opt %s -mlir-print-op-generic | planc-opt | FileCheck %s

// CHECK-LABEL: sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
// The manifest: a dictionary of JSON values (keys sorted when printed).
// CHECK-NEXT: sched.manifest @planc_manifest {format = "planc-train-1", groups = {{\[\[}}0, 48], [48, 64]], num_floats = 64 : i64, train = {lr = 1.000000e-03 : f64, sequence_parallel = false}}
sched.manifest @planc_manifest {num_floats = 64, format = "planc-train-1", groups = [[0, 48], [48, 64]], train = {sequence_parallel = false, lr = 1.0e-03}}
// CHECK-NEXT: sched.buffer @params {floats = 64 : i64, lifetime = "persistent"}
// CHECK-NEXT: sched.buffer @grads {floats = 64 : i64, lifetime = "step"}
// CHECK-NEXT: sched.buffer @tmp {floats = 64 : i64, lifetime = "transient"}
// CHECK-NEXT: sched.buffer @shard {floats = 32 : i64, lifetime = "step"}
// CHECK-NEXT: sched.buffer @m {floats = 32 : i64, lifetime = "persistent"}
// CHECK-NEXT: sched.buffer @v {floats = 32 : i64, lifetime = "persistent"}
// CHECK-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 64 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 64 : i64, lifetime = "step"}
sched.buffer @tmp {floats = 64 : i64, lifetime = "transient"}
sched.buffer @shard {floats = 32 : i64, lifetime = "step"}
sched.buffer @m {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @v {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}

// CHECK-LABEL: func.func @planc_step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // CHECK-NEXT: sched.fill @state[7, 1] = 0.000000e+00
  sched.fill @state[7, 1] = 0.0
  // CHECK-NEXT: sched.fill @grads[0, 64] = -1.500000e+00
  sched.fill @grads[0, 64] = -1.5
  // CHECK-NEXT: sched.micro_loop 3 {
  // CHECK-NEXT: ^bb0(%[[MICRO:[^:]*]]: i64):
  sched.micro_loop 3 {
  ^bb0(%i: i64):
    // CHECK-NEXT: sched.alloc @tmp
    sched.alloc @tmp
    // CHECK-NEXT: sched.grad %[[STEP]], %[[MICRO]] params @params grads @grads state @state
    sched.grad %step, %i params @params grads @grads state @state
    // CHECK-NEXT: sched.reduce_scatter @grads[0, 32] -> @shard[0] over ["dp"] {accumulate, purpose = "gradients"}
    sched.reduce_scatter @grads[0, 32] -> @shard[0] over ["dp"] {accumulate, purpose = "gradients"}
    // CHECK-NEXT: sched.free @tmp
    sched.free @tmp
    // Held by parts (ZeRO-3's gathered parameters with buckets).
    // CHECK-NEXT: sched.alloc @tmp parts
    sched.alloc @tmp parts
    // CHECK-NEXT: sched.free @tmp
    sched.free @tmp
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: sched.reduce_scatter @tmp[0, 16] -> @shard[16] over ["dp", "pp"] {purpose = "no accumulate"}
  sched.reduce_scatter @tmp[0, 16] -> @shard[16] over ["dp", "pp"] {purpose = "no accumulate"}
  // CHECK-NEXT: sched.all_reduce @grads[0, 64] over ["dp"] {purpose = "gradients", reduce = "sum"}
  sched.all_reduce @grads[0, 64] over ["dp"] {purpose = "gradients", reduce = "sum"}
  // CHECK-NEXT: sched.all_reduce @state[7, 1] over ["dp", "pp"] {purpose = "loss", reduce = "mean"}
  sched.all_reduce @state[7, 1] over ["dp", "pp"] {purpose = "loss", reduce = "mean"}
  // CHECK-NEXT: sched.all_reduce @state[0, 1] over ["pp"] {purpose = "max", reduce = "max"}
  sched.all_reduce @state[0, 1] over ["pp"] {purpose = "max", reduce = "max"}
  // CHECK-NEXT: sched.sumsq [@shard, @shard] [0, 16] state @state
  sched.sumsq [@shard, @shard] [0, 16] state @state
  // CHECK-NEXT: sched.update %[[STEP]] [@params, @params, @shard, @shard, @m, @m, @v, @v] [0, 48, 0, 16, 0, 16, 0, 16] state @state
  sched.update %step [@params, @params, @shard, @shard, @m, @m, @v, @v] [0, 48, 0, 16, 0, 16, 0, 16] state @state
  // CHECK-NEXT: sched.all_gather @params[0, 16] -> @tmp[0] over ["pp"] {purpose = "updated parameters"}
  sched.all_gather @params[0, 16] -> @tmp[0] over ["pp"] {purpose = "updated parameters"}
  // CHECK-NEXT: sched.on "pp" = 0 {
  // CHECK-NEXT: sched.send @params[0, 8] to 1 along "pp" {purpose = "activations"}
  // CHECK-NEXT: }
  sched.on "pp" = 0 {
    sched.send @params[0, 8] to 1 along "pp" {purpose = "activations"}
  }
  // CHECK-NEXT: sched.on "pp" = 1 {
  // CHECK-NEXT: sched.recv @params[8, 8] from 0 along "pp" {purpose = "activations"}
  // CHECK-NEXT: }
  sched.on "pp" = 1 {
    sched.recv @params[8, 8] from 0 along "pp" {purpose = "activations"}
  }
  // CHECK-NEXT: return
  return
}

// Pipeline stages: a stage's buffer, its forward and backward (with and without the optional
// ranges), the zero-bubble schedule's input pass and weight pass, and an exchange with a
// neighbour.
// CHECK-LABEL: func.func @stage(
// CHECK-SAME: %[[S:[^:]*]]: i64
func.func @stage(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  sched.on "pp" = 1 {
    // CHECK: sched.forward %[[S]], %[[S]] stage 1 params @params out @grads[0]
    sched.forward %s, %s stage 1 params @params out @grads[0]
    // CHECK-NEXT: sched.forward %[[S]], %[[S]] stage 1 params @params in @shard[8] out @grads[0] {collectives = [{axis = "dp", collective = "all_reduce", floats = 8 : i64, purpose = "x"}]}
    sched.forward %s, %s stage 1 params @params in @shard[8] out @grads[0] {collectives = [{axis = "dp", collective = "all_reduce", floats = 8 : i64, purpose = "x"}]}
    // CHECK-NEXT: sched.backward %[[S]], %[[S]] stage 1 params @params grads @grads state @state in @shard[8] cotangent @m[0] dinput @v[0]
    sched.backward %s, %s stage 1 params @params grads @grads state @state in @shard[8] cotangent @m[0] dinput @v[0]
    // CHECK-NEXT: sched.backward %[[S]], %[[S]] stage 1 params @params grads @grads state @state
    sched.backward %s, %s stage 1 params @params grads @grads state @state
    // CHECK-NEXT: sched.backward %[[S]], %[[S]] stage 1 params @params grads @grads state @state in @shard[8] dinput @v[0] wsaved @m[0]
    sched.backward %s, %s stage 1 params @params grads @grads state @state in @shard[8] dinput @v[0] wsaved @m[0]
    // CHECK-NEXT: sched.wgrad %[[S]], %[[S]] stage 1 params @params grads @grads state @state wsaved @m[0]
    sched.wgrad %s, %s stage 1 params @params grads @grads state @state wsaved @m[0]
    // CHECK-NEXT: sched.send_recv @m[0, 8] to 0, @v[0, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
    sched.send_recv @m[0, 8] to 0, @v[0, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
  }
  return
}

// DDP gradient buckets: sched.grad with an event per bucket, the all-reduces that start on
// them, and the wait for their events.
// CHECK-LABEL: func.func @buckets(
// CHECK-SAME: %[[S:[^:]*]]: i64
func.func @buckets(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  // CHECK-NEXT: %[[B:.*]]:2 = sched.grad %[[S]], %[[S]] params @params grads @grads state @state -> !sched.event, !sched.event
  %b:2 = sched.grad %s, %s params @params grads @grads state @state -> !sched.event, !sched.event
  // CHECK-NEXT: %[[R0:.*]] = sched.all_reduce_start @grads[32, 32] over ["dp"] after %[[B]]#0 {purpose = "gradients", reduce = "sum"}
  %r0 = sched.all_reduce_start @grads[32, 32] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
  // CHECK-NEXT: %[[R1:.*]] = sched.all_reduce_start @grads[0, 32] over ["dp", "pp"] after %[[B]]#1 {purpose = "gradients", reduce = "max"}
  %r1 = sched.all_reduce_start @grads[0, 32] over ["dp", "pp"] after %b#1 {purpose = "gradients", reduce = "max"}
  // CHECK-NEXT: sched.wait %[[R0]], %[[R1]]
  sched.wait %r0, %r1
  // CHECK-NEXT: return
  return
}

// ZeRO-3 parameter buckets: slices of the all-gathers started ahead of sched.grad, which
// waits for them (the generic form keeps every attribute).
// CHECK-LABEL: func.func @prefetch(
// CHECK-SAME: %[[S:[^:]*]]: i64
func.func @prefetch(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  // CHECK-NEXT: %[[P0:.*]] = sched.all_gather_start @grads[0, 16] -> @tmp[0] over ["dp"] slice [8, 24] for bucket 0 {purpose = "parameters"}
  %p0 = sched.all_gather_start @grads[0, 16] -> @tmp[0] over ["dp"] slice [8, 24] for bucket 0 {purpose = "parameters"}
  // CHECK-NEXT: %[[P1:.*]] = sched.all_gather_start @grads[0, 16] -> @tmp[0] over ["dp"] slice [0, 8] for bucket 1 {purpose = "parameters"}
  %p1 = sched.all_gather_start @grads[0, 16] -> @tmp[0] over ["dp"] slice [0, 8] for bucket 1 {purpose = "parameters"}
  // CHECK-NEXT: sched.grad %[[S]], %[[S]] params @tmp grads @params state @params gathered %[[P0]], %[[P1]]{{$}}
  sched.grad %s, %s params @tmp grads @params state @params gathered %p0, %p1
  // CHECK-NEXT: return
  return
}

// ZeRO-1 gradient buckets: slices of a reduce-scatter started on sched.grad's events.
// CHECK-LABEL: func.func @scatter_buckets(
func.func @scatter_buckets(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  // CHECK-NEXT: %[[B:.*]]:2 = sched.grad
  %b:2 = sched.grad %s, %s params @params grads @grads state @state -> !sched.event, !sched.event
  // CHECK-NEXT: %[[R0:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @tmp[0] over ["dp"] slice [40, 24] after %[[B]]#0 {purpose = "gradients"}
  %r0 = sched.reduce_scatter_start @grads[0, 32] -> @tmp[0] over ["dp"] slice [40, 24] after %b#0 {purpose = "gradients"}
  // CHECK-NEXT: %[[R1:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @tmp[0] over ["dp"] slice [0, 40] after %[[B]]#1 {purpose = "gradients"}
  %r1 = sched.reduce_scatter_start @grads[0, 32] -> @tmp[0] over ["dp"] slice [0, 40] after %b#1 {purpose = "gradients"}
  // CHECK-NEXT: sched.wait %[[R0]], %[[R1]]
  sched.wait %r0, %r1
  return
}
