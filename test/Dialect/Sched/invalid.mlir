// Every verifier of the sched dialect (dialects/sched/lib/IR/SchedOps.cpp) rejects what it
// should, with its message: the mesh's axes and sizes, a buffer's size and lifetime, the
// micro-batch loop's count and index, every buffer range an op touches lying inside its
// buffer (collectives: n × count on the side that holds every rank's block), every axis
// being an axis of the mesh, point-to-point peers on their axis, the piece counts of sumsq
// and update, the reduction kind, alloc/free on transient buffers only. (A negative buffer
// size or micro-batch count is not rejected yet: invalid-negative-sizes.mlir, XFAIL.)
// RUN: planc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'sched.mesh' op needs one size per axis, and at least one axis}}
sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2>}

// -----

// expected-error @+1 {{'sched.mesh' op needs one size per axis, and at least one axis}}
sched.mesh @mesh {axes = [], sizes = array<i64>}

// -----

// expected-error @+1 {{'sched.mesh' op axis sizes must be at least 1}}
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 0>}

// -----

// expected-error @+1 {{'sched.buffer' op lifetime must be persistent, step or transient, not 'forever'}}
sched.buffer @b {floats = 4 : i64, lifetime = "forever"}

// -----

func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.micro_loop' op runs at least once}}
  sched.micro_loop 0 {
  ^bb0(%i: i64):
  }
  return
}

// -----

func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.micro_loop' op body takes one i64 argument, the micro-batch index}}
  sched.micro_loop 2 {
  ^bb0(%i: i32):
  }
  return
}

// -----

func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.micro_loop' op body takes one i64 argument, the micro-batch index}}
  sched.micro_loop 2 {
  }
  return
}

// -----

// A range past the end of its buffer.
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.fill' op range [7, 9) lies outside @state of 8 floats}}
  sched.fill @state[7, 2] = 0.0
  return
}

// -----

// A negative offset.
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.fill' op range [-1, 0) lies outside @state of 8 floats}}
  sched.fill @state[-1, 1] = 0.0
  return
}

// -----

// A symbol that is not a buffer.
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.fill' op uses @f, which is not a sched.buffer}}
  sched.fill @f[0, 1] = 0.0
  return
}

// -----

func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.alloc' op uses @nothing, which is not a sched.buffer}}
  sched.alloc @nothing
  return
}

// -----

sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.alloc' op needs a transient buffer; @grads is step}}
  sched.alloc @grads
  return
}

// -----

sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.free' op needs a transient buffer; @params is persistent}}
  sched.free @params
  return
}

// -----

// sched.grad adds the loss to state[7]: the state buffer holds 8 floats.
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 4 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.micro_loop 1 {
  ^bb0(%i: i64):
    // expected-error @+1 {{'sched.grad' op range [0, 8) lies outside @state of 4 floats}}
    sched.grad %step, %i params @params grads @grads state @state
  }
  return
}

// -----

sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.micro_loop 1 {
  ^bb0(%i: i64):
    // expected-error @+1 {{'sched.grad' op uses @params, which is not a sched.buffer}}
    sched.grad %step, %i params @params grads @grads state @state
  }
  return
}

// -----

sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.sumsq' op reads two gradient pieces, one per optimizer group}}
  sched.sumsq [@g] [0] state @state
  return
}

// -----

sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.sumsq' op reads two gradient pieces, one per optimizer group}}
  sched.sumsq [@g, @g] [0, 8, 12] state @state
  return
}

// -----

// A piece that starts past the end of its buffer.
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.sumsq' op range [17, 17) lies outside @g of 16 floats}}
  sched.sumsq [@g, @g] [0, 17] state @state
  return
}

// -----

sched.buffer @p {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.update' op takes eight buffer pieces: parameters, gradients, and both moments, per group}}
  sched.update %step [@p, @p, @p, @p] [0, 8, 0, 8] state @state
  return
}

// -----

sched.buffer @p {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.update' op uses @m, which is not a sched.buffer}}
  sched.update %step [@p, @p, @p, @p, @m, @m, @p, @p] [0, 8, 0, 8, 0, 8, 0, 8] state @state
  return
}

// -----

sched.buffer @p {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 7 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.update' op range [0, 8) lies outside @state of 7 floats}}
  sched.update %step [@p, @p, @p, @p, @p, @p, @p, @p] [0, 8, 0, 8, 0, 8, 0, 8] state @state
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_reduce' op reduce must be sum, mean, max or sum_u64, not 'prod'}}
  sched.all_reduce @g[0, 16] over ["dp"] {purpose = "gradients", reduce = "prod"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_reduce' op names axis 'tp', which mesh @mesh lacks}}
  sched.all_reduce @g[0, 16] over ["dp", "tp"] {purpose = "gradients", reduce = "sum"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_reduce' op spans no axis}}
  sched.all_reduce @g[0, 16] over [] {purpose = "gradients", reduce = "sum"}
  return
}

// -----

// Collectives need the module's mesh to know their communicator.
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_reduce' op needs a sched.mesh in its module}}
  sched.all_reduce @g[0, 16] over ["dp"] {purpose = "gradients", reduce = "sum"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_reduce' op range [8, 24) lies outside @g of 16 floats}}
  sched.all_reduce @g[8, 16] over ["dp"] {purpose = "gradients", reduce = "sum"}
  return
}

// -----

// all_gather: the destination receives n × count floats (n = 4 ranks over "dp" and "tp").
sched.mesh @mesh {axes = ["dp", "tp"], sizes = array<i64: 2, 2>}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @full {floats = 16 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_gather' op range [0, 32) lies outside @full of 16 floats}}
  sched.all_gather @shard[0, 8] -> @full[0] over ["dp", "tp"] {purpose = "parameters"}
  return
}

// -----

// Over "dp" alone (2 ranks) the same gather fits.
sched.mesh @mesh {axes = ["dp", "tp"], sizes = array<i64: 2, 2>}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @full {floats = 16 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  sched.all_gather @shard[0, 8] -> @full[0] over ["dp"] {purpose = "parameters"}
  // expected-error @+1 {{'sched.all_gather' op range [4, 12) lies outside @shard of 8 floats}}
  sched.all_gather @shard[4, 8] -> @full[0] over ["dp"] {purpose = "parameters"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @full {floats = 16 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.all_gather' op names axis 'pp', which mesh @mesh lacks}}
  sched.all_gather @shard[0, 8] -> @full[0] over ["pp"] {purpose = "parameters"}
  return
}

// -----

// reduce_scatter: the source holds n × count floats (n = 2).
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @full {floats = 16 : i64, lifetime = "step"}
sched.buffer @shard {floats = 8 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.reduce_scatter' op range [8, 24) lies outside @full of 16 floats}}
  sched.reduce_scatter @full[8, 8] -> @shard[0] over ["dp"] {purpose = "gradients"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @full {floats = 16 : i64, lifetime = "step"}
sched.buffer @shard {floats = 8 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.reduce_scatter' op range [4, 12) lies outside @shard of 8 floats}}
  sched.reduce_scatter @full[0, 8] -> @shard[4] over ["dp"] {accumulate, purpose = "gradients"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 1, 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.send' op peer 2 lies outside axis 'pp' of size 2}}
  sched.send @act[0, 16] to 2 along "pp" {purpose = "activations"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 1, 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.recv' op peer -1 lies outside axis 'pp' of size 2}}
  sched.recv @act[0, 16] from -1 along "pp" {purpose = "activations"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 1, 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.send' op names axis 'tp', which mesh @mesh lacks}}
  sched.send @act[0, 16] to 1 along "tp" {purpose = "activations"}
  return
}

// -----

sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.recv' op needs a sched.mesh in its module}}
  sched.recv @act[0, 16] from 1 along "pp" {purpose = "activations"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 1, 2>}
sched.buffer @act {floats = 16 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.recv' op range [8, 24) lies outside @act of 16 floats}}
  sched.recv @act[8, 16] from 1 along "pp" {purpose = "activations"}
  return
}

// -----

// expected-error @+1 {{'sched.mesh' op names axis 'dp' twice}}
sched.mesh @mesh {axes = ["dp", "dp"], sizes = array<i64: 2, 2>}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
func.func @f(%ctx: !llvm.ptr {sched.context}) {
  // expected-error @+1 {{'sched.on' op coordinate 5 lies outside axis 'dp' of size 2}}
  sched.on "dp" = 5 {
  }
  return
}

// -----

// A pipeline stage's buffer exists on that stage's ranks only.
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @grads_s1 {floats = 8 : i64, lifetime = "step", stage = 1 : i64}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.on "pp" = 0 {
    // expected-error @+1 {{'sched.fill' op uses @grads_s1, a buffer of pipeline stage 1 only, outside a sched.on region of that stage}}
    sched.fill @grads_s1[0, 8] = 0.0
  }
  return
}

// -----

sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @a {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.forward' op range [9, 9) lies outside @a of 8 floats}}
  sched.forward %step, %step stage 0 params @p in @a[9] out @a[0]
  return
}

// -----

sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @a {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.wgrad' op range [9, 9) lies outside @a of 8 floats}}
  sched.wgrad %step, %step stage 1 params @p grads @a state @a wsaved @a[9]
  return
}

// -----

sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @a {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.wgrad' op names a negative stage}}
  sched.wgrad %step, %step stage -1 params @p grads @a state @a wsaved @a[0]
  return
}

// -----

sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @a {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.backward' op range [9, 9) lies outside @a of 8 floats}}
  sched.backward %step, %step stage 1 params @p grads @a state @a wsaved @a[9]
  return
}

// -----

sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @a {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.send_recv' op peer 2 lies outside axis 'pp' of size 2}}
  sched.send_recv @a[0, 4] to 2, @a[4, 4] from 0 along "pp" {purpose = "x"}
  return
}

// -----

// A bucket's all-reduce starts on an event of sched.grad, nothing else.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64, %e: !sched.event) {
  // expected-error @+1 {{'sched.all_reduce_start' op starts after an event of a sched.grad (a bucket of gradients), not of a block argument}}
  %r = sched.all_reduce_start @g[4, 4] over ["dp"] after %e {purpose = "gradients", reduce = "sum"}
  sched.wait %r
  return
}

// -----

// Every started all-reduce is waited for, once.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.all_reduce_start' op must be waited for once, by a sched.wait in the same block}}
  %r0 = sched.all_reduce_start @g[0, 8] over ["dp"] after %b {purpose = "gradients", reduce = "sum"}
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.all_reduce_start' op reduce must be sum or max, not 'mean'}}
  %r0 = sched.all_reduce_start @g[0, 8] over ["dp"] after %b {purpose = "gradients", reduce = "mean"}
  sched.wait %r0
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.all_reduce_start' op range [4, 12) lies outside @g of 8 floats}}
  %r0 = sched.all_reduce_start @g[4, 8] over ["dp"] after %b {purpose = "gradients", reduce = "sum"}
  sched.wait %r0
  return
}

// -----

// Its sched.grad's block, not a nested one.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  sched.on "dp" = 0 {
    // expected-error @+1 {{'sched.all_reduce_start' op must be in the block of its sched.grad}}
    %r = sched.all_reduce_start @g[0, 8] over ["dp"] after %b {purpose = "gradients", reduce = "sum"}
    sched.wait %r
  }
  return
}

// -----

// One sched.grad's buckets in flight at a time: the runtime knows them by number.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 8 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %a = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.all_reduce_start' op is in flight across another sched.grad with buckets; wait for it first}}
  %r = sched.all_reduce_start @g[0, 8] over ["dp"] after %a {purpose = "gradients", reduce = "sum"}
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  %q = sched.all_reduce_start @g[0, 8] over ["dp"] after %b {purpose = "gradients", reduce = "sum"}
  sched.wait %r, %q
  return
}

// -----

// A slice of an all-gather must be fed to a sched.grad, which waits for it.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.all_gather_start' op must be waited for once, by a sched.grad in the same block}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[0] over ["dp"] slice [0, 16] for bucket 0 {purpose = "parameters"}
  return
}

// -----

// The slice lies in what the whole all-gather writes: 2 ranks × 8 floats from offset 0.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 32 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.all_gather_start' op slice [8, 12] ends past the gathered range [0, 16]}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[0] over ["dp"] slice [8, 12] for bucket 0 {purpose = "parameters"}
  sched.grad %step, %step params @p grads @p state @s gathered %p
  return
}

// -----

// An empty slice, or one before the destination offset, is refused.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 32 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.all_gather_start' op needs a non-empty slice [4, 8] at or after the destination offset 8}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[8] over ["dp"] slice [4, 8] for bucket 0 {purpose = "parameters"}
  sched.grad %step, %step params @p grads @p state @s gathered %p
  return
}

// -----

// The runtime knows a bucket by its number: a slice feeds the next sched.grad.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.all_gather_start' op is in flight across another sched.grad; feed it to the next one}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[0] over ["dp"] slice [0, 16] for bucket 0 {purpose = "parameters"}
  sched.grad %step, %step params @p grads @p state @s
  sched.grad %step, %step params @p grads @p state @s gathered %p
  return
}

// -----

// sched.grad waits for gathered parameters, not for other events.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "transient"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @p grads @p state @s -> !sched.event
  // expected-error @+1 {{'sched.grad' op waits for events of sched.all_gather_start only (gathered parameters)}}
  sched.grad %step, %step params @p grads @p state @s gathered %b
  %r = sched.all_reduce_start @p[0, 16] over ["dp"] after %b {purpose = "gradients", reduce = "sum"}
  sched.wait %r
  return
}

// -----

// Nothing may free (or allocate, or fill) the destination while a slice is in flight.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.alloc @p
  // expected-error @+1 {{'sched.all_gather_start' op writes @p while 'sched.free' touches it before the sched.grad}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[0] over ["dp"] slice [0, 16] for bucket 0 {purpose = "parameters"}
  // expected-note @+1 {{here}}
  sched.free @p
  sched.grad %step, %step params @p grads @s state @s gathered %p
  return
}

// -----

// The slices gather the parameters the sched.grad reads.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @p {floats = 16 : i64, lifetime = "transient"}
sched.buffer @q {floats = 16 : i64, lifetime = "transient"}
sched.buffer @sh {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.all_gather_start' op gathers into @p, but its sched.grad reads its parameters from @q}}
  %p = sched.all_gather_start @sh[0, 8] -> @p[0] over ["dp"] slice [0, 16] for bucket 0 {purpose = "parameters"}
  sched.grad %step, %step params @q grads @q state @s gathered %p
  return
}

// -----

// A reduce-scatter slice lies in the scattered range: 2 ranks × 4 floats from offset 0.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @sh {floats = 4 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.reduce_scatter_start' op slice [4, 8] ends past the scattered range [0, 8]}}
  %r = sched.reduce_scatter_start @g[0, 4] -> @sh[0] over ["dp"] slice [4, 8] after %b {purpose = "gradients"}
  sched.wait %r
  return
}

// -----

// Like a bucket's all-reduce, a reduce-scatter slice is waited for in its block.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @sh {floats = 4 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.reduce_scatter_start' op must be waited for once, by a sched.wait in the same block}}
  %r = sched.reduce_scatter_start @g[0, 4] -> @sh[0] over ["dp"] slice [0, 8] after %b {purpose = "gradients"}
  return
}

// -----

// A reduce-scatter slice scatters the gradients of the sched.grad it starts after.
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @g {floats = 16 : i64, lifetime = "step"}
sched.buffer @h {floats = 16 : i64, lifetime = "step"}
sched.buffer @sh {floats = 4 : i64, lifetime = "step"}
sched.buffer @s {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b = sched.grad %step, %step params @g grads @g state @s -> !sched.event
  // expected-error @+1 {{'sched.reduce_scatter_start' op scatters @h, but its sched.grad computes its gradients in @g}}
  %r = sched.reduce_scatter_start @h[0, 4] -> @sh[0] over ["dp"] slice [0, 8] after %b {purpose = "gradients"}
  sched.wait %r
  return
}
