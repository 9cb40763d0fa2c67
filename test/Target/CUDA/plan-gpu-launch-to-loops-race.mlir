// The race audits of plan-gpu-launch-to-loops (order=reverse and order=shuffle,
// `--cuda-host-order reverse|shuffle:SEED`)
// catches a kernel whose result depends on the order of its threads: thread 0 writes
// x[0] = 42 and thread 1 copies x[0] to x[1] with no barrier between them, a race on a
// GPU. Run in order, thread 1 sees 42; run last first, it sees 0, so e2e-cuda-host's
// bitwise comparison against the CPU target would fail for such a kernel.
// RUN: planc-opt %s -plan-gpu-launch-to-loops | mlir-opt -convert-scf-to-cf -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils | FileCheck %s --check-prefix=FORWARD
// RUN: planc-opt %s -plan-gpu-launch-to-loops=order=reverse | mlir-opt -convert-scf-to-cf -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils | FileCheck %s --check-prefix=REVERSE
// A seeded shuffle of two threads runs them one way or the other by the seed: seed 1
// runs thread 1 first (0), seed 2 thread 0 first (42).
// RUN: planc-opt %s -plan-gpu-launch-to-loops="order=shuffle seed=1" | mlir-opt -convert-scf-to-cf -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils | FileCheck %s --check-prefix=REVERSE
// RUN: planc-opt %s -plan-gpu-launch-to-loops="order=shuffle seed=2" | mlir-opt -convert-scf-to-cf -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils | FileCheck %s --check-prefix=FORWARD
// FORWARD: {{^}}42{{$}}
// REVERSE: {{^}}0{{$}}
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %v42 = arith.constant 42.0 : f32
  %x = memref.alloca() : memref<2xf32>
  memref.store %zero, %x[%c0] : memref<2xf32>
  memref.store %zero, %x[%c1] : memref<2xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c2, %sy = %c1, %sz = %c1) {
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %v42, %x[%c0] : memref<2xf32>
    } else {
      %v = memref.load %x[%c0] : memref<2xf32>
      memref.store %v, %x[%c1] : memref<2xf32>
    }
    gpu.terminator
  }
  %r = memref.load %x[%c1] : memref<2xf32>
  func.call @printF32(%r) : (f32) -> ()
  func.call @printNewline() : () -> ()
  return
}
func.func private @printF32(f32)
func.func private @printNewline()
