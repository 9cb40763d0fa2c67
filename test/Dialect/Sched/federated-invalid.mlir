// The verifiers of a federated round's ops (sched.fed_*, SchedOps.cpp): the client axis
// is an axis of the mesh and samples at least one and at most all of its clients, every
// buffer holds what the op reads or writes (the update count + 1 words of two floats),
// the local steps run at least once with the step as their argument, the weighting, the
// fixed-point fraction and the server optimizer are known, Adam has its two moments,
// and a 64-bit sum covers whole words.
// RUN: planc-opt %s -split-input-file -verify-diagnostics

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @m {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_begin' op samples 5 of the 4 clients on 'clients'}}
  sched.fed_begin %r sample 5 of "clients" global @global params @params moments [@m, @m]
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_begin' op names axis 'sites', which the mesh lacks}}
  sched.fed_begin %r sample 2 of "sites" global @global params @params moments []
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 4 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_begin' op range [0, 8) lies outside @params of 4 floats}}
  sched.fed_begin %r sample 2 of "clients" global @global params @params moments []
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_local' op runs at least one local step}}
  sched.fed_local 0 {
  ^bb0(%i: i64):
  }
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_local' op body takes one i64 argument, the local step}}
  sched.fed_local 2 {
  ^bb0(%i: i32):
  }
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @update {floats = 16 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_encode' op range [0, 18) lies outside @update of 16 floats}}
  sched.fed_encode @update = delta(@params, @global) [8] {clip = 0.0, fraction_bits = 40, weighting = "uniform"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_encode' op weighting must be tokens or uniform, not 'size'}}
  sched.fed_encode @update = delta(@params, @global) [8] {clip = 0.0, fraction_bits = 40, weighting = "size"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_encode' op fraction_bits must lie in [1, 52]}}
  sched.fed_encode @update = delta(@params, @global) [8] {clip = 0.0, fraction_bits = 60, weighting = "tokens"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_mask' op masks 64-bit integers: count must be even, not 17}}
  sched.fed_mask %r @update[17] over "clients"
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.all_reduce' op sums 64-bit integers: offset and count must be even}}
  sched.all_reduce @update[0, 17] over ["clients"] {purpose = "client updates", reduce = "sum_u64"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_server' op adam needs its two moment buffers}}
  sched.fed_server %r global @global update @update params @params state @state {beta1 = 0.9, beta2 = 0.99, eps = 1.0e-3, fraction_bits = 40, lr = 1.0e-2, noise = 0.0, optimizer = "adam"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @global {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_server' op optimizer must be sgd or adam, not 'lamb'}}
  sched.fed_server %r global @global update @update params @params state @state {beta1 = 0.9, beta2 = 0.99, eps = 1.0e-3, fraction_bits = 40, lr = 1.0e-2, noise = 0.0, optimizer = "lamb"}
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @grads {floats = 8 : i64, lifetime = "step"}
sched.buffer @global {floats = 4 : i64, lifetime = "persistent"}
sched.buffer @params {floats = 8 : i64, lifetime = "persistent"}
func.func @f(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  // expected-error @+1 {{'sched.fed_prox' op range [0, 8) lies outside @global of 4 floats}}
  sched.fed_prox @grads[8] mu 0.01 params @params global @global
  return
}
