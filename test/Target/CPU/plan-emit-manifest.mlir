// plan-emit-manifest writes each sched.manifest, once, as the NUL-terminated JSON string
// constant of the same name (keys sorted; integers, f64 numbers, strings, booleans, unit as
// null, nested arrays and dictionaries), in the op's place; and refuses a value JSON cannot
// hold.
// RUN: planc-opt %s -split-input-file -plan-emit-manifest -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func private @before()
// CHECK-NEXT: llvm.mlir.global internal constant @planc_manifest("{\22context\22:null,\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,16],[16,24]],\22mesh\22:{\22axes\22:[\22dp\22],\22sizes\22:[2]},\22num_floats\22:24,\22train\22:{\22lr\22:0.001,\22sequence_parallel\22:false,\22std\22:0}}\00") {addr_space = 0 : i32}
// CHECK-NEXT: func.func private @after()
// CHECK-NOT: sched.manifest
func.func private @before()
sched.manifest @planc_manifest {format = "planc-train-1", num_floats = 24, groups = [[0, 16], [16, 24]],
                                mesh = {sizes = [2], axes = ["dp"]}, context = unit,
                                train = {lr = 1.0e-03, sequence_parallel = false, std = 0}}
func.func private @after()

// -----

// expected-error @+1 {{'sched.manifest' op planc_manifest holds an attribute that is not a JSON value}}
sched.manifest @planc_manifest {num_floats = 24 : i32}
