// convert-sched-to-runtime refuses what it cannot lower, located: a sched program in a
// module without a mesh (no axis masks), a sched.on on an axis the mesh lacks.
// RUN: planc-opt %s -split-input-file -convert-sched-to-runtime -verify-diagnostics

// expected-error @+1 {{'func.func' op is a sched program but the module has no sched.mesh}}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  return
}

// -----

sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @x {floats = 4 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  // expected-error @+1 {{'sched.on' op names axis 'pp', which mesh @mesh lacks}}
  sched.on "pp" = 0 {
    sched.fill @x[0, 4] = 0.0
  }
  return
}
