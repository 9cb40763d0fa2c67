// sched-check-deadlock on a federated round: only the round's sampled clients run
// sched.fed_local, so a collective inside it, directly or in the step program it calls,
// would leave the others behind; the round's one all-reduce over the client axis passes.
// RUN: planc-opt %s -split-input-file -sched-check-deadlock -verify-diagnostics

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @grads {floats = 8 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  // expected-error @+1 {{'sched.all_reduce' op communicates inside sched.fed_local, which only the round's sampled clients run: the clients not sampled would never join it}}
  sched.all_reduce @grads[0, 8] over ["clients"] {purpose = "gradients", reduce = "sum"}
  return
}
func.func @planc_round(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  sched.fed_local 2 {
  ^bb0(%i: i64):
    func.call @planc_step(%ctx, %i) : (!llvm.ptr, i64) -> ()
  }
  return
}

// -----

sched.mesh @mesh {axes = ["clients"], sizes = array<i64: 4>}
sched.buffer @update {floats = 18 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %s: i64) {
  return
}
func.func @planc_round(%ctx: !llvm.ptr {sched.context}, %r: i64) {
  sched.fed_local 2 {
  ^bb0(%i: i64):
    func.call @planc_step(%ctx, %i) : (!llvm.ptr, i64) -> ()
  }
  sched.all_reduce @update[0, 18] over ["clients"] {purpose = "client updates", reduce = "sum_u64"}
  return
}
