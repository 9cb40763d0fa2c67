// plan-approximate-tanh on vectors: the approximation is built in vector arithmetic (the
// pass declares the vector dialect as a dependency).
// RUN: planc-opt %s -plan-approximate-tanh | FileCheck %s

// CHECK-LABEL: func.func @vec(
// CHECK: return
func.func @vec(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.tanh %x : vector<8xf32>
  %z = arith.addf %y, %x : vector<8xf32>
  return %z : vector<8xf32>
}
