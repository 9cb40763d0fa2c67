// plan-emulated-device (--target cuda-host): each piece of device work of a host function
// — a gpu.launch (its body left alone), a call the CUDA target makes a device call
// (cblas_sgemm, planrt_k_layernorm) — is bracketed by planrt_emu_begin(what) and
// planrt_emu_end(), `what` a constant string naming it and its place; host calls
// (planrt_k_embedding_slice stays on the host on the CUDA target), loads and stores are not.
// RUN: planc-opt %s -plan-emulated-device | FileCheck %s
// With plan-cuda-host-sync{emulated} first (the cuda-host pipeline's order), the waits are
// the emulated device's planrt_emu_sync, before each host op that device work precedes.
// RUN: planc-opt %s -plan-cuda-host-sync=emulated=1 -plan-emulated-device | FileCheck %s --check-prefix=SYNC

// CHECK-LABEL: func.func @step(
// CHECK: %[[W0:.*]] = llvm.mlir.addressof @planrt_emu_what_0 : !llvm.ptr
// CHECK-NEXT: call @planrt_emu_begin(%[[W0]]) : (!llvm.ptr) -> ()
// CHECK-NEXT: gpu.launch
// CHECK-NOT: planrt_emu
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: call @planrt_emu_end() : () -> ()
// CHECK-NEXT: %[[W1:.*]] = llvm.mlir.addressof @planrt_emu_what_1 : !llvm.ptr
// CHECK-NEXT: call @planrt_emu_begin(%[[W1]])
// CHECK-NEXT: call @cblas_sgemm
// CHECK-NEXT: call @planrt_emu_end()
// CHECK-NEXT: call @planrt_k_embedding_slice
// CHECK-NEXT: %[[W2:.*]] = llvm.mlir.addressof @planrt_emu_what_2 : !llvm.ptr
// CHECK-NEXT: call @planrt_emu_begin(%[[W2]])
// CHECK-NEXT: call @planrt_k_layernorm
// CHECK-NEXT: call @planrt_emu_end()
// CHECK-NEXT: memref.load
// CHECK-NEXT: return
// CHECK: llvm.mlir.global internal constant @planrt_emu_what_0("generated kernel 0 at t.plan:3\00")
// CHECK: llvm.mlir.global internal constant @planrt_emu_what_1("cblas_sgemm at t.plan:4\00")
// CHECK: llvm.mlir.global internal constant @planrt_emu_what_2("planrt_k_layernorm\00")

// SYNC-LABEL: func.func @step(
// SYNC: gpu.launch
// SYNC: call @planrt_emu_end()
// SYNC: call @cblas_sgemm
// SYNC-NEXT: call @planrt_emu_end()
// SYNC-NEXT: call @planrt_emu_sync()
// SYNC-NEXT: call @planrt_k_embedding_slice
// SYNC: call @planrt_k_layernorm
// SYNC-NEXT: call @planrt_emu_end()
// SYNC-NEXT: call @planrt_emu_sync()
// SYNC-NEXT: memref.load
// SYNC-NEXT: return

module {
  func.func private @cblas_sgemm(i32)
  func.func private @planrt_k_layernorm(i32)
  func.func private @planrt_k_embedding_slice(i32)

  func.func @step(%m: memref<4xf32>, %i: i32) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      memref.store %one, %m[%tx] : memref<4xf32>
      gpu.terminator
    } loc("t.plan":3:5)
    func.call @cblas_sgemm(%i) : (i32) -> () loc("t.plan":4:1)
    func.call @planrt_k_embedding_slice(%i) : (i32) -> ()
    func.call @planrt_k_layernorm(%i) : (i32) -> () loc(unknown)
    %v = memref.load %m[%c0] : memref<4xf32>
    return %v : f32
  }
}
