// plan-gpu-launch-to-loops (--target cuda-host): a launch becomes loops over its blocks and
// threads on the host, the body inlined with the x ids bound to the loop variables, y and
// z to 0 and the grid and block sizes to the launch's operands; a launch with a barrier is
// refused (its threads would not meet).
// RUN: planc-opt %s -split-input-file -plan-gpu-launch-to-loops -verify-diagnostics | FileCheck %s
// order=reverse (the race audit): iteration i of each loop runs block / thread n - 1 - i.
// RUN: planc-opt %s -split-input-file -plan-gpu-launch-to-loops=order=reverse -verify-diagnostics | FileCheck %s --check-prefix=REV
// RUN: not planc-opt %s -split-input-file -plan-gpu-launch-to-loops=order=sideways 2>&1 | FileCheck %s --check-prefix=ORDER
// order=shuffle seed=7: iteration i runs (a i + 7) mod n, a = 1073741831 (a prime the seed picks).
// RUN: planc-opt %s -split-input-file -plan-gpu-launch-to-loops="order=shuffle seed=7" -verify-diagnostics | FileCheck %s --check-prefix=SHUF
// RUN: not planc-opt %s -split-input-file -plan-gpu-launch-to-loops="order=shuffle seed=-1" 2>&1 | FileCheck %s --check-prefix=SEED

// SHUF-LABEL: func.func @launch(
// SHUF-SAME: %[[X:.*]]: memref<1000xf32>, %[[G:.*]]: index)
// SHUF: %[[C256:.*]] = arith.constant 256 : index
// SHUF: scf.for %[[BI:.*]] = %{{.*}} to %[[G]] step %{{.*}} {
// SHUF-NEXT: scf.for %[[TI:.*]] = %{{.*}} to %[[C256]] step %{{.*}} {
// SHUF-NEXT: %[[A:.*]] = arith.constant 1073741831 : index
// SHUF-NEXT: %[[C:.*]] = arith.constant 7 : index
// SHUF-NEXT: %[[AI:.*]] = arith.muli %[[A]], %[[BI]] : index
// SHUF-NEXT: %[[AIC:.*]] = arith.addi %[[AI]], %[[C]] : index
// SHUF-NEXT: %[[BX:.*]] = arith.remui %[[AIC]], %[[G]] : index
// SHUF: %[[TX:.*]] = arith.remui %{{.*}}, %[[C256]] : index
// SHUF-NEXT: %[[B:.*]] = arith.muli %[[BX]], %[[C256]] : index
// SHUF-NEXT: %[[I:.*]] = arith.addi %[[B]], %[[TX]] : index
// SEED: plan-gpu-launch-to-loops: seed -1 is negative

// REV-LABEL: func.func @launch(
// REV-SAME: %[[X:.*]]: memref<1000xf32>, %[[G:.*]]: index)
// REV: %[[C256:.*]] = arith.constant 256 : index
// REV: %[[ONE:.*]] = arith.constant 1 : index
// REV: scf.for %[[BI:.*]] = %{{.*}} to %[[G]] step %[[ONE]] {
// REV-NEXT: scf.for %[[TI:.*]] = %{{.*}} to %[[C256]] step %[[ONE]] {
// REV-NEXT: %[[BLAST:.*]] = arith.subi %[[G]], %[[ONE]] : index
// REV-NEXT: %[[BX:.*]] = arith.subi %[[BLAST]], %[[BI]] : index
// REV-NEXT: %[[TLAST:.*]] = arith.subi %[[C256]], %[[ONE]] : index
// REV-NEXT: %[[TX:.*]] = arith.subi %[[TLAST]], %[[TI]] : index
// REV-NEXT: %[[B:.*]] = arith.muli %[[BX]], %[[C256]] : index
// REV-NEXT: %[[I:.*]] = arith.addi %[[B]], %[[TX]] : index
// ORDER: plan-gpu-launch-to-loops: order 'sideways' is neither forward, reverse nor shuffle

// CHECK-LABEL: func.func @launch(
// CHECK-SAME: %[[X:.*]]: memref<1000xf32>, %[[G:.*]]: index)
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: scf.for %[[BX:.*]] = %{{.*}} to %[[G]] step %{{.*}} {
// CHECK-NEXT: scf.for %[[TX:.*]] = %{{.*}} to %[[C256]] step %{{.*}} {
// CHECK-NEXT: %[[B:.*]] = arith.muli %[[BX]], %[[C256]] : index
// CHECK-NEXT: %[[I:.*]] = arith.addi %[[B]], %[[TX]] : index
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[I]], %{{.*}} : index
// CHECK-NEXT: scf.if %[[OK]] {
// CHECK-NEXT: memref.load %[[X]][%[[I]]]
// CHECK-NOT: gpu.
func.func @launch(%x: memref<1000xf32>, %g: index) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %n = arith.constant 1000 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %g, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %i = arith.addi %b, %tx : index
    %ok = arith.cmpi ult, %i, %n : index
    scf.if %ok {
      %v = memref.load %x[%i] : memref<1000xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %x[%i] : memref<1000xf32>
    }
    gpu.terminator
  }
  return
}

// -----

func.func @barrier(%x: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'gpu.launch' op plan-gpu-launch-to-loops runs single-block launches without barriers}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    gpu.barrier
    gpu.terminator
  }
  return
}
