// plan-schedule refuses a module it cannot schedule, located: no manifest (plan-train-abi
// has not run), a step program already there, a manifest holding what is not a JSON value, or one
// without the mesh, train, groups or num_floats that plan-train-abi writes.
// RUN: planc-opt %s -split-input-file -plan-schedule -verify-diagnostics

// expected-error @below {{plan-schedule needs the manifest of plan-train-abi (planc_manifest)}}
module {
  llvm.mlir.global internal constant @other("{}\00") {addr_space = 0 : i32}
}

// -----

// expected-error @below {{plan-schedule: the module already has a 'planc_gather'}}
module {
  sched.manifest @planc_manifest {}
  func.func @planc_gather() {
    return
  }
}

// -----

// An i32 is not one of the manifest's JSON values (i64 integers, f64 numbers, ...).
// expected-error @+1 {{'sched.manifest' op planc_manifest holds an attribute that is not a JSON value}}
sched.manifest @planc_manifest {mesh = {axes = ["dp"], sizes = [1 : i32], data = ["dp"]}}

// -----

// groups must hold the two optimizer groups.
// expected-error @+1 {{'sched.manifest' op planc_manifest lacks groups, num_floats or params (plan-train-abi writes it)}}
sched.manifest @planc_manifest {mesh = {axes = ["dp"], sizes = [1], data = ["dp"]}, train = {}, groups = [[0, 16]], num_floats = 16}

// -----

// expected-error @+1 {{'sched.manifest' op planc_manifest lacks mesh or train (plan-train-abi writes it)}}
sched.manifest @planc_manifest {format = "planc-train-1", num_floats = 16}
