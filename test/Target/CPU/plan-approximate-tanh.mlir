// plan-approximate-tanh: math.tanh on f32 (GELU and its gradient after
// convert-linalg-to-loops) becomes MLIR's polynomial approximation, plain arithmetic that
// LLVM vectorises, instead of one libm call per element. Other math ops, and tanh on f64,
// are left to convert-math-to-llvm / convert-math-to-libm.
// RUN: planc-opt %s -plan-approximate-tanh | FileCheck %s

// GELU's loop as convert-linalg-to-loops leaves it.
// CHECK-LABEL: func.func @gelu(
// CHECK-DAG: %[[HI:.*]] = arith.constant 7.99881172 : f32
// CHECK-DAG: %[[LO:.*]] = arith.constant -7.99881172 : f32
// CHECK-DAG: %[[SMALL:.*]] = arith.constant 4.000000e-04 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT: math.tanh
// CHECK: scf.for
// CHECK: %[[S:.*]] = arith.addf
// CHECK-NEXT: %[[U:.*]] = arith.mulf %[[S]], %{{.*}} : f32
// The argument clamped to ±7.99881172, where tanh is ±1 in f32,
// CHECK-NEXT: %[[C1:.*]] = arith.cmpf ult, %[[U]], %[[HI]] : f32
// CHECK-NEXT: %[[U1:.*]] = arith.select %[[C1]], %[[U]], %[[HI]] : f32
// CHECK-NEXT: %[[C2:.*]] = arith.cmpf ugt, %[[U1]], %[[LO]] : f32
// CHECK-NEXT: %[[X:.*]] = arith.select %[[C2]], %[[U1]], %[[LO]] : f32
// tanh(x) ≈ x below 4e-4,
// CHECK-NEXT: %[[ABS:.*]] = math.absf %[[U]] : f32
// CHECK-NEXT: %[[TINY:.*]] = arith.cmpf olt, %[[ABS]], %[[SMALL]] : f32
// else a rational function of x²: x · p(x²) / q(x²), both by Horner's rule in fma.
// CHECK-NEXT: %[[X2:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-COUNT-6: math.fma %[[X2]],
// CHECK-NEXT: %[[NUM:.*]] = arith.mulf %[[X]], %{{.*}} : f32
// CHECK-COUNT-3: math.fma %[[X2]],
// CHECK-NEXT: %[[Q:.*]] = arith.divf %[[NUM]], %{{.*}} : f32
// CHECK-NEXT: %[[T:.*]] = arith.select %[[TINY]], %[[X]], %[[Q]] : f32
// The rest of GELU uses the approximation: 0.5·x·(1 + tanh(u)).
// CHECK-NEXT: %[[HX:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[T1:.*]] = arith.addf %[[T]], %[[ONE]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[HX]], %[[T1]] : f32
// CHECK-NEXT: memref.store %[[Y]], %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK-NOT: math.tanh
// CHECK: return
func.func @gelu(%in: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %in[%i] : memref<8xf32>
    %x2 = arith.mulf %x, %x : f32
    %x3 = arith.mulf %x, %x2 : f32
    %k = arith.constant 4.471500e-02 : f32
    %kx3 = arith.mulf %k, %x3 : f32
    %s = arith.addf %x, %kx3 : f32
    %c = arith.constant 0.797884583 : f32
    %u = arith.mulf %c, %s : f32
    %t = math.tanh %u : f32
    %half = arith.constant 5.000000e-01 : f32
    %hx = arith.mulf %half, %x : f32
    %one = arith.constant 1.000000e+00 : f32
    %t1 = arith.addf %one, %t : f32
    %y = arith.mulf %hx, %t1 : f32
    memref.store %y, %out[%i] : memref<8xf32>
  }
  return
}

// Every f32 tanh of a function is rewritten; other math ops stay.
// CHECK-LABEL: func.func @several(
// CHECK-NOT: math.tanh
// CHECK: math.exp %{{.*}} : f32
// CHECK-NOT: math.tanh
// CHECK: math.sqrt %{{.*}} : f32
// CHECK-NOT: math.tanh
// CHECK-COUNT-2: arith.divf
// CHECK-NOT: math.tanh
// CHECK: return
func.func @several(%a: f32, %b: f32) -> f32 {
  %e = math.exp %a : f32
  %r = math.sqrt %b : f32
  %ta = math.tanh %e : f32
  %tb = math.tanh %r : f32
  %s = arith.addf %ta, %tb : f32
  return %s : f32
}

// f64 keeps its tanh (convert-math-to-libm makes it a call to tanh).
// CHECK-LABEL: func.func @double(
// CHECK: %[[T:.*]] = math.tanh %{{.*}} : f64
// CHECK-NEXT: arith.addf %[[T]], %{{.*}} : f64
func.func @double(%x: f64) -> f64 {
  %t = math.tanh %x : f64
  %y = arith.addf %t, %x : f64
  return %y : f64
}
