// sched-check-deadlock simulates every rank of the mesh through each sched program (the
// functions whose first argument is the sched.context; micro-batch loops unrolled, sched.on
// regions taken where the rank's coordinate matches): a collective completes when every rank
// of its communicator (the ranks that share the coordinates outside its axes) is at a
// collective on it of the same kind and size (those a step function issues itself, listed
// on the op that calls it, included); a send when its peer is at the matching receive. A
// rank that would wait for ever is a located error naming the rank, with notes at what the
// others do; ranks of one communicator that disagree about a collective are an error
// at one and a note at the other. Balanced programs pass through unchanged.
// RUN: planc-opt %s -split-input-file -sched-check-deadlock -verify-diagnostics
// The programs after the "pass" marker, without -verify-diagnostics: printed unchanged.
// RUN: sed -n '/^\/\/ ===== programs that pass/,$p' %s | planc-opt -split-input-file -sched-check-deadlock | FileCheck %s

// (a) A collective only the ranks at dp = 0 issue: rank 0 waits at it for ever, and rank 1,
// its only partner, has finished.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// expected-note @+1 {{rank 1 (dp 1) has finished the function}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  sched.on "dp" = 0 {
    // expected-error @+1 {{deadlock in @planc_step: rank 0 (dp 0) waits here forever (all_reduce (sum) of 16 floats)}}
    sched.all_reduce @grads[0, 16] over ["dp"] {purpose = "gradients", reduce = "sum"}
  }
  return
}

// -----

// (a') The same inside the micro-batch loop on 4 ranks: only dp = 2 gathers; the three
// other ranks finish (a note for each).
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
sched.buffer @shard {floats = 4 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
// expected-note @+3 {{rank 0 (dp 0) has finished the function}}
// expected-note @+2 {{rank 1 (dp 1) has finished the function}}
// expected-note @+1 {{rank 3 (dp 3) has finished the function}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.micro_loop 2 {
  ^bb0(%i: i64):
    sched.on "dp" = 2 {
      // expected-error @+1 {{deadlock in @planc_step: rank 2 (dp 2) waits here forever (all_gather of 4 floats)}}
      sched.all_gather @shard[0, 4] -> @params[0] over ["dp"] {purpose = "parameters"}
    }
  }
  return
}

// -----

// (a'') Every rank issues the collective, but one rank issues another one first: the
// communicator disagrees about its first collective.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
sched.buffer @shard {floats = 4 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 2 {
    // expected-note @+1 {{rank 2 (dp 2)'s all_gather of 4 floats}}
    sched.all_gather @shard[0, 4] -> @params[0] over ["dp"] {purpose = "parameters"}
  }
  // expected-error @+1 {{collectives do not match: rank 0 (dp 0) issues all_reduce (mean) of 1 float here as its collective #1 while rank 2 (dp 2) issues all_gather of 4 floats}}
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  return
}

// -----

// (b) The two ranks of "dp" issue all-reduces of different sizes as their first collective.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 0 {
    // expected-error @+1 {{collectives do not match: rank 0 (dp 0) issues all_reduce (sum) of 16 floats here as its collective #1 while rank 1 (dp 1) issues all_reduce (sum) of 8 floats; the ranks would hang or exchange garbage}}
    sched.all_reduce @grads[0, 16] over ["dp"] {purpose = "gradients", reduce = "sum"}
  }
  sched.on "dp" = 1 {
    // expected-note @+1 {{rank 1 (dp 1)'s all_reduce (sum) of 8 floats}}
    sched.all_reduce @grads[0, 8] over ["dp"] {purpose = "gradients", reduce = "sum"}
  }
  return
}

// -----

// (b') The same size but different kinds, after one collective they agree on: a
// reduce-scatter on dp = 0 against an all-gather on dp = 1. (Both ranks pass the loss
// together; rank 1, simulated after rank 0 in the same round, is the first to find the
// disagreement.)
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @full {floats = 16 : i64, lifetime = "step"}
sched.buffer @shard {floats = 8 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  sched.on "dp" = 0 {
    // expected-note @+1 {{rank 0 (dp 0)'s reduce_scatter of 8 floats}}
    sched.reduce_scatter @full[0, 8] -> @shard[0] over ["dp"] {purpose = "gradients"}
  }
  sched.on "dp" = 1 {
    // expected-error @+1 {{collectives do not match: rank 1 (dp 1) issues all_gather of 8 floats here as its collective #2 while rank 0 (dp 0) issues reduce_scatter of 8 floats}}
    sched.all_gather @shard[0, 8] -> @full[0] over ["dp"] {purpose = "parameters"}
  }
  return
}

// -----

// (c) A send without a matching receive: rank 0 waits to send to rank 1, which has finished.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
// expected-note @+1 {{rank 1 (pp 1) has finished the function}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    // expected-error @+1 {{deadlock in @planc_step: rank 0 (pp 0) waits here forever (send of 16 floats)}}
    sched.send @act[0, 16] to 1 along "pp" {purpose = "activations"}
  }
  return
}

// -----

// (c') Both stages send first (sends block until received): each waits for the other.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    // expected-error @+1 {{deadlock in @planc_step: rank 0 (pp 0) waits here forever (send of 8 floats)}}
    sched.send @act[0, 8] to 1 along "pp" {purpose = "activations"}
    sched.recv @act[8, 8] from 1 along "pp" {purpose = "gradients"}
  }
  sched.on "pp" = 1 {
    // expected-note @+1 {{rank 1 (pp 1) waits here}}
    sched.send @act[8, 8] to 0 along "pp" {purpose = "gradients"}
    sched.recv @act[0, 8] from 0 along "pp" {purpose = "activations"}
  }
  return
}

// -----

// (c'') A receive of a different size than the send.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    // expected-error @+1 {{rank 0 (pp 0) sends 16 floats but rank 1 (pp 1) receives 8 floats}}
    sched.send @act[0, 16] to 1 along "pp" {purpose = "activations"}
  }
  sched.on "pp" = 1 {
    // expected-note @+1 {{the receive}}
    sched.recv @act[0, 8] from 0 along "pp" {purpose = "activations"}
  }
  return
}

// -----

// (f) 1F1B's steady state on three stages: the middle stage exchanges with both
// neighbours (sched.send_recv: each half matches a peer's send or receive on its own). Stage
// 2 receives 8 floats where stage 1's exchange sends it 16.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 3>}
sched.buffer @act {floats = 32 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    sched.send_recv @act[0, 8] to 1, @act[8, 8] from 1 along "pp" {purpose = "activations / activation gradients"}
  }
  sched.on "pp" = 1 {
    sched.send_recv @act[0, 8] to 0, @act[8, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
    // expected-error @+1 {{rank 1 (pp 1) sends 16 floats but rank 2 (pp 2) receives 8 floats}}
    sched.send_recv @act[0, 16] to 2, @act[16, 8] from 2 along "pp" {purpose = "activations / activation gradients"}
  }
  sched.on "pp" = 2 {
    // expected-note @+1 {{the receive}}
    sched.send_recv @act[0, 8] to 1, @act[8, 8] from 1 along "pp" {purpose = "activation gradients / activations"}
  }
  return
}

// -----

// (g) A send-receive whose peer only sends: the receive half completes, the send half
// never does.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
// expected-note @+1 {{rank 1 (pp 1) has finished the function}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    // expected-error @+1 {{deadlock in @planc_step: rank 0 (pp 0) waits here forever (send of 8 floats and receive of 8 floats)}}
    sched.send_recv @act[0, 8] to 1, @act[8, 8] from 1 along "pp" {purpose = "activations / activation gradients"}
  }
  sched.on "pp" = 1 {
    sched.send @act[8, 8] to 0 along "pp" {purpose = "activation gradients"}
  }
  return
}

// -----

// (h) The collectives a step function issues itself (tensor parallelism, listed on sched.grad)
// are simulated too: a gradient call that only the tp = 0 rank makes leaves it waiting in the
// all-reduce inside it.
sched.mesh @mesh {axes = ["tp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
// expected-note @+1 {{rank 1 (tp 1) has finished the function}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %c0 = arith.constant 0 : i64
  sched.on "tp" = 0 {
    // expected-error @+1 {{deadlock in @planc_step: rank 0 (tp 0) waits here forever (all_reduce (inside the step function) of 16 floats)}}
    sched.grad %step, %c0 params @p grads @g state @s {collectives = [{axis = "tp", collective = "all_reduce", floats = 16 : i64, purpose = "row-parallel output"}]}
  }
  return
}

// -----

// Collectives on two communicators in a cyclic order on a 2 × 2 mesh: ranks 0 and 3
// all-reduce over "dp" first, ranks 1 and 2 over "pp" first. Rank 0 waits for its "dp"
// partner rank 2, which waits for its "pp" partner rank 3, which waits for rank 1 over
// "dp", which waits for rank 0 over "pp". Each communicator on its own is consistent.
sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 0 {
    sched.on "pp" = 0 {
      // expected-error @+1 {{deadlock in @planc_step: rank 0 (dp 0, pp 0) waits here forever (all_reduce (sum) of 8 floats)}}
      sched.all_reduce @g[0, 8] over ["dp"] {purpose = "gradients", reduce = "sum"}
      sched.all_reduce @g[8, 8] over ["pp"] {purpose = "stage", reduce = "sum"}
    }
    sched.on "pp" = 1 {
      // expected-note @+1 {{rank 1 (dp 0, pp 1) waits here}}
      sched.all_reduce @g[8, 8] over ["pp"] {purpose = "stage", reduce = "sum"}
      sched.all_reduce @g[0, 8] over ["dp"] {purpose = "gradients", reduce = "sum"}
    }
  }
  sched.on "dp" = 1 {
    sched.on "pp" = 0 {
      // expected-note @+1 {{rank 2 (dp 1, pp 0) waits here}}
      sched.all_reduce @g[8, 8] over ["pp"] {purpose = "stage", reduce = "sum"}
      sched.all_reduce @g[0, 8] over ["dp"] {purpose = "gradients", reduce = "sum"}
    }
    sched.on "pp" = 1 {
      // expected-note @+1 {{rank 3 (dp 1, pp 1) waits here}}
      sched.all_reduce @g[0, 8] over ["dp"] {purpose = "gradients", reduce = "sum"}
      sched.all_reduce @g[8, 8] over ["pp"] {purpose = "stage", reduce = "sum"}
    }
  }
  return
}

// -----

// sched.on names an axis the mesh lacks.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.on' op names axis 'pp', which mesh @mesh lacks}}
  sched.on "pp" = 0 {
  }
  return
}

// -----

// A sched program in a module without a mesh.
// expected-error @+1 {{'func.func' op is a sched program but the module has no sched.mesh}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  return
}

// -----

// The simulation is bounded: at most 4096 ranks.
// expected-error @+1 {{'sched.mesh' op has 4100 ranks; the deadlock check simulates at most 4096}}
sched.mesh @mesh {axes = ["dp", "tp"], sizes = array<i64: 1025, 4>}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  return
}

// -----

// Same kind and size, different reductions: rank 0 sums what rank 1 takes the maximum of.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 4 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 0 {
    // expected-error @+1 {{collectives do not match: rank 0 (dp 0) issues all_reduce (sum) of 4 floats here as its collective #1 while rank 1 (dp 1) issues all_reduce (max) of 4 floats}}
    sched.all_reduce @g[0, 4] over ["dp"] {purpose = "gradients", reduce = "sum"}
  }
  sched.on "dp" = 1 {
    // expected-note @+1 {{rank 1 (dp 1)'s all_reduce (max) of 4 floats}}
    sched.all_reduce @g[0, 4] over ["dp"] {purpose = "gradients", reduce = "max"}
  }
  return
}

// -----

// (g) DDP gradient buckets whose ranges differ between the ranks: the all-reduces a
// sched.grad's buckets start are matched between the ranks in IR order, as the runtime
// starts them.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 0 {
    %b:2 = sched.grad %step, %step params @params grads @grads state @state -> !sched.event, !sched.event
    // expected-error @+1 {{collectives do not match: rank 0 (dp 0) issues all_reduce (sum) of 8 floats here as its collective #1 while rank 1 (dp 1) issues all_reduce (sum) of 12 floats}}
    %r0 = sched.all_reduce_start @grads[8, 8] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
    %r1 = sched.all_reduce_start @grads[0, 8] over ["dp"] after %b#1 {purpose = "gradients", reduce = "sum"}
    sched.wait %r0, %r1
  }
  sched.on "dp" = 1 {
    %b:2 = sched.grad %step, %step params @params grads @grads state @state -> !sched.event, !sched.event
    // expected-note @+1 {{rank 1 (dp 1)'s all_reduce (sum) of 12 floats}}
    %r0 = sched.all_reduce_start @grads[4, 12] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
    %r1 = sched.all_reduce_start @grads[0, 4] over ["dp"] after %b#1 {purpose = "gradients", reduce = "sum"}
    sched.wait %r0, %r1
  }
  return
}

// -----

// (i) ZeRO-3 parameter buckets cut differently on the ranks: the slices of the all-gather
// are matched between the ranks in IR order, as the runtime starts them.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "transient"}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "dp" = 0 {
    // expected-error @+1 {{collectives do not match: rank 0 (dp 0) issues all_gather (slice [0, 8)) of 8 floats here as its collective #1 while rank 1 (dp 1) issues all_gather (slice [0, 4)) of 8 floats}}
    %p0 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [0, 8] for bucket 0 {purpose = "parameters"}
    %p1 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [8, 8] for bucket 1 {purpose = "parameters"}
    sched.grad %step, %step params @params grads @grads state @state gathered %p0, %p1
  }
  sched.on "dp" = 1 {
    // expected-note @+1 {{rank 1 (dp 1)'s all_gather (slice [0, 4)) of 8 floats}}
    %p0 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [0, 4] for bucket 0 {purpose = "parameters"}
    %p1 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [4, 12] for bucket 1 {purpose = "parameters"}
    sched.grad %step, %step params @params grads @grads state @state gathered %p0, %p1
  }
  return
}

// -----

// ===== programs that pass =====

// (d) A two-stage pipeline on a 2 × 2 mesh: on every micro-batch stage 0 sends activations
// to stage 1 along "pp" and receives their gradients back (stage 1 receives first, then
// sends), then the gradients are all-reduced over "dp" (two communicators: one per stage)
// and the loss over both axes. An all-reduce over "dp" issued by the pp = 1 ranks only is
// balanced too: its communicators are exactly those ranks.
// CHECK-LABEL: sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
// CHECK-NEXT: sched.buffer @act {floats = 16 : i64, lifetime = "step"}
// CHECK-NEXT: sched.buffer @grads {floats = 32 : i64, lifetime = "step"}
// CHECK-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// CHECK-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %{{[^:]*}}: i64) {
// CHECK-NEXT: sched.micro_loop 2 {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: i64):
// CHECK-NEXT: sched.on "pp" = 0 {
// CHECK-NEXT: sched.send @act[0, 8] to 1 along "pp" {purpose = "activations"}
// CHECK-NEXT: sched.recv @act[8, 8] from 1 along "pp" {purpose = "activation gradients"}
// CHECK-NEXT: }
// CHECK-NEXT: sched.on "pp" = 1 {
// CHECK-NEXT: sched.recv @act[0, 8] from 0 along "pp" {purpose = "activations"}
// CHECK-NEXT: sched.send @act[8, 8] to 0 along "pp" {purpose = "activation gradients"}
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: sched.all_reduce @grads[0, 32] over ["dp"] {purpose = "gradients", reduce = "sum"}
// CHECK-NEXT: sched.on "pp" = 1 {
// CHECK-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "last stage loss", reduce = "mean"}
// CHECK-NEXT: }
// CHECK-NEXT: sched.all_reduce @state[7, 1] over ["dp", "pp"] {purpose = "loss", reduce = "max"}
// CHECK-NEXT: return
// CHECK-NEXT: }
sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
sched.buffer @grads {floats = 32 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.micro_loop 2 {
  ^bb0(%i: i64):
    sched.on "pp" = 0 {
      sched.send @act[0, 8] to 1 along "pp" {purpose = "activations"}
      sched.recv @act[8, 8] from 1 along "pp" {purpose = "activation gradients"}
    }
    sched.on "pp" = 1 {
      sched.recv @act[0, 8] from 0 along "pp" {purpose = "activations"}
      sched.send @act[8, 8] to 0 along "pp" {purpose = "activation gradients"}
    }
  }
  sched.all_reduce @grads[0, 32] over ["dp"] {purpose = "gradients", reduce = "sum"}
  sched.on "pp" = 1 {
    sched.all_reduce @state[7, 1] over ["dp"] {purpose = "last stage loss", reduce = "mean"}
  }
  sched.all_reduce @state[7, 1] over ["dp", "pp"] {purpose = "loss", reduce = "max"}
  return
}

// -----

// (e) 1F1B's steady state, where plain sends would deadlock as in (c'): stage 0 sends its
// activation while receiving the gradient of an earlier micro-batch, and the last stage
// sends its input's gradient while receiving the next input, at once (sched.send_recv).
// CHECK-LABEL: sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
// CHECK:      sched.send_recv @act[0, 8] to 1, @act[8, 8] from 1 along "pp" {purpose = "activations / activation gradients"}
// CHECK:      sched.send_recv @act[8, 8] to 0, @act[0, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
// CHECK-NEXT: sched.send @act[8, 8] to 0 along "pp" {purpose = "activation gradients"}
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    sched.send @act[0, 8] to 1 along "pp" {purpose = "activations"}
    sched.send_recv @act[0, 8] to 1, @act[8, 8] from 1 along "pp" {purpose = "activations / activation gradients"}
    sched.recv @act[8, 8] from 1 along "pp" {purpose = "activation gradients"}
  }
  sched.on "pp" = 1 {
    sched.recv @act[0, 8] from 0 along "pp" {purpose = "activations"}
    sched.send_recv @act[8, 8] to 0, @act[0, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
    sched.send @act[8, 8] to 0 along "pp" {purpose = "activation gradients"}
  }
  return
}

// -----

// A ZeRO-2 step as plan-schedule builds it, on 4 ranks, and the functions without the
// sched.context (not programs: not simulated, whatever they hold).
// CHECK-LABEL: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
// CHECK: func.func @planc_step(
// CHECK-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// CHECK-NEXT: sched.fill @grad_shard[0, 8] = 0.000000e+00
// CHECK-NEXT: sched.micro_loop 2 {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: i64):
// CHECK-NEXT: sched.alloc @grads
// CHECK-NEXT: sched.fill @grads[0, 32] = 0.000000e+00
// CHECK-NEXT: sched.grad %{{[^,]*}}, %{{[^ ]*}} params @params grads @grads state @state
// CHECK-NEXT: sched.reduce_scatter @grads[0, 4] -> @grad_shard[0] over ["dp"] {accumulate, purpose = "gradients"}
// CHECK-NEXT: sched.reduce_scatter @grads[16, 4] -> @grad_shard[4] over ["dp"] {accumulate, purpose = "gradients"}
// CHECK-NEXT: sched.free @grads
// CHECK-NEXT: }
// CHECK-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// CHECK-NEXT: sched.sumsq [@grad_shard, @grad_shard] [0, 4] state @state
// CHECK-NEXT: sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// CHECK-NEXT: sched.update %{{[^ ]*}} [@param_shard, @param_shard, @grad_shard, @grad_shard, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 4, 0, 4, 0, 4, 0, 4] state @state
// CHECK-NEXT: sched.all_gather @param_shard[0, 4] -> @params[0] over ["dp"] {purpose = "updated parameters"}
// CHECK-NEXT: sched.all_gather @param_shard[4, 4] -> @params[16] over ["dp"] {purpose = "updated parameters"}
// CHECK-NEXT: return
// CHECK: func.func @not_a_program(
// CHECK-NEXT: sched.on "dp" = 0 {
// CHECK-NEXT: sched.all_reduce @state[7, 1] over ["dp"]
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
sched.buffer @params {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 32 : i64, lifetime = "transient"}
sched.buffer @param_shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @grad_shard {floats = 8 : i64, lifetime = "step"}
sched.buffer @exp_avg {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @exp_avg_sq {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.fill @state[7, 1] = 0.0
  sched.fill @grad_shard[0, 8] = 0.0
  sched.micro_loop 2 {
  ^bb0(%i: i64):
    sched.alloc @grads
    sched.fill @grads[0, 32] = 0.0
    sched.grad %step, %i params @params grads @grads state @state
    sched.reduce_scatter @grads[0, 4] -> @grad_shard[0] over ["dp"] {accumulate, purpose = "gradients"}
    sched.reduce_scatter @grads[16, 4] -> @grad_shard[4] over ["dp"] {accumulate, purpose = "gradients"}
    sched.free @grads
  }
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  sched.sumsq [@grad_shard, @grad_shard] [0, 4] state @state
  sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
  sched.update %step [@param_shard, @param_shard, @grad_shard, @grad_shard, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 4, 0, 4, 0, 4, 0, 4] state @state
  sched.all_gather @param_shard[0, 4] -> @params[0] over ["dp"] {purpose = "updated parameters"}
  sched.all_gather @param_shard[4, 4] -> @params[16] over ["dp"] {purpose = "updated parameters"}
  return
}
func.func @not_a_program(%ctx: !llvm.ptr) {
  sched.on "dp" = 0 {
    sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  }
  return
}

// -----

// (h) DDP gradient buckets on 2 ranks: the same starts in the same order everywhere.
// CHECK-LABEL: func.func @buckets(
// CHECK: sched.all_reduce_start @grads[8, 8] over ["dp"] after
// CHECK: sched.all_reduce_start @grads[0, 8] over ["dp"] after
// CHECK: sched.wait
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @buckets(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b:2 = sched.grad %step, %step params @params grads @grads state @state -> !sched.event, !sched.event
  %r0 = sched.all_reduce_start @grads[8, 8] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
  %r1 = sched.all_reduce_start @grads[0, 8] over ["dp"] after %b#1 {purpose = "gradients", reduce = "sum"}
  sched.wait %r0, %r1
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  return
}

// -----

// (j) ZeRO-3 parameter buckets on 2 ranks: the same slices in the same order everywhere.
// CHECK-LABEL: func.func @prefetch(
// CHECK: sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [8, 8] for bucket 0
// CHECK: sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [0, 8] for bucket 1
// CHECK: sched.grad
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "transient"}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @prefetch(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.alloc @params
  %p0 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [8, 8] for bucket 0 {purpose = "parameters"}
  %p1 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [0, 8] for bucket 1 {purpose = "parameters"}
  sched.grad %step, %step params @params grads @grads state @state gathered %p0, %p1
  sched.free @params
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  return
}

// -----

// (k) ZeRO-1 gradient buckets on 2 ranks: the same reduce-scatter slices in the same order
// everywhere.
// CHECK-LABEL: func.func @scatter_buckets(
// CHECK: sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [8, 8] after
// CHECK: sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [0, 8] after
// CHECK: sched.wait
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @shard {floats = 8 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @scatter_buckets(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b:2 = sched.grad %step, %step params @params grads @grads state @state -> !sched.event, !sched.event
  %r0 = sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [8, 8] after %b#0 {purpose = "gradients"}
  %r1 = sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [0, 8] after %b#1 {purpose = "gradients"}
  sched.wait %r0, %r1
  sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
  return
}
