// plan-schedule refuses a module it cannot schedule, located: no manifest (plan-train-abi
// has not run), a step program already there, a manifest that is not a JSON string, or one
// without the mesh, train, groups or num_floats that plan-train-abi writes.
// RUN: planc-opt %s -split-input-file -plan-schedule -verify-diagnostics

// expected-error @below {{plan-schedule needs the manifest of plan-train-abi (planc_manifest)}}
module {
  llvm.mlir.global internal constant @other("{}\00") {addr_space = 0 : i32}
}

// -----

// expected-error @below {{plan-schedule: the module already has a 'planc_gather'}}
module {
  llvm.mlir.global internal constant @planc_manifest("{}\00") {addr_space = 0 : i32}
  func.func @planc_gather() {
    return
  }
}

// -----

// expected-error @+1 {{'llvm.mlir.global' op planc_manifest holds no string}}
llvm.mlir.global internal constant @planc_manifest(7 : i64) {addr_space = 0 : i32} : i64

// -----

// expected-error @+1 {{'llvm.mlir.global' op planc_manifest is not JSON: }}
llvm.mlir.global internal constant @planc_manifest("{\22mesh\22: \00") {addr_space = 0 : i32}

// -----

// groups must hold the two optimizer groups.
// expected-error @+1 {{'llvm.mlir.global' op planc_manifest lacks groups, num_floats or params (plan-train-abi writes it)}}
llvm.mlir.global internal constant @planc_manifest("{\22mesh\22:{\22axes\22:[\22dp\22],\22sizes\22:[1],\22data\22:[\22dp\22]},\22train\22:{},\22groups\22:[[0,16]],\22num_floats\22:16}\00") {addr_space = 0 : i32}

// -----

// expected-error @+1 {{'llvm.mlir.global' op planc_manifest lacks mesh or train (plan-train-abi writes it)}}
llvm.mlir.global internal constant @planc_manifest("{\22format\22:\22planc-train-1\22,\22num_floats\22:16}\00") {addr_space = 0 : i32}
