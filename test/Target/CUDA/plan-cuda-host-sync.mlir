// plan-cuda-host-sync: launches and libplanrt_cuda's device calls are queued; the host
// waits (planrt_cuda_sync) before host code that may touch their memory — a host call,
// a host load or store, the return to a host caller — unless nothing was queued since
// the last wait in the same block; at a block's start it assumes something was, a
// function's entry block included (the runtime queues fills and token copies before it
// calls one). planrt_step_arena touches no memory. A function without device work is
// left alone (cuda-host's emulated device audits what it touches).
// RUN: planc-opt %s -plan-cuda-host-sync | FileCheck %s

module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%p: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func private @planrt_cuda_gemm(i32)
  func.func private @planrt_step_arena(i64) -> !llvm.ptr
  func.func private @planrt_k_all_reduce(i32)
  llvm.func @planrt_sched_sumsq(i32)

  // CHECK-LABEL: func.func @step(
  func.func @step(%m: memref<4xf32>, %i: i32, %n: i64, %c: index) -> f32 {
    %c1 = arith.constant 1 : index
    // CHECK: call @planrt_step_arena
    // CHECK-NEXT: gpu.launch_func
    %a = func.call @planrt_step_arena(%n) : (i64) -> !llvm.ptr
    gpu.launch_func @k::@f blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    // CHECK-NEXT: call @planrt_cuda_gemm
    // CHECK-NEXT: call @planrt_cuda_sync()
    // CHECK-NEXT: call @planrt_k_all_reduce
    // Nothing queued since: no second wait.
    // CHECK-NEXT: call @planrt_k_all_reduce
    // An llvm.call (how the sched program calls the runtime) is a host call too.
    // CHECK-NEXT: gpu.launch_func
    // CHECK-NEXT: call @planrt_cuda_sync()
    // CHECK-NEXT: llvm.call @planrt_sched_sumsq
    func.call @planrt_cuda_gemm(%i) : (i32) -> ()
    func.call @planrt_k_all_reduce(%i) : (i32) -> ()
    func.call @planrt_k_all_reduce(%i) : (i32) -> ()
    gpu.launch_func @k::@f blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    llvm.call @planrt_sched_sumsq(%i) : (i32) -> ()
    // A loop with a launch: its body's host call waits (the block's start), and so does
    // the load after the loop.
    // CHECK: scf.for
    // CHECK-NEXT: gpu.launch_func
    // CHECK-NEXT: call @planrt_cuda_sync()
    // CHECK-NEXT: call @planrt_k_all_reduce
    // CHECK: }
    // CHECK-NEXT: call @planrt_cuda_sync()
    // CHECK-NEXT: memref.load
    scf.for %j = %c1 to %c step %c1 {
      gpu.launch_func @k::@f blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
      func.call @planrt_k_all_reduce(%i) : (i32) -> ()
    }
    %v = memref.load %m[%c1] : memref<4xf32>
    // The load waited: the return needs no wait; a launch before it does.
    // CHECK-NEXT: gpu.launch_func
    // CHECK-NEXT: call @planrt_cuda_sync()
    // CHECK-NEXT: return
    gpu.launch_func @k::@f blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    return %v : f32
  }

  // Host code first: the caller may have queued work, so a wait before it.
  // CHECK-LABEL: func.func @host_first(
  // CHECK-NEXT: arith.constant
  // CHECK-NEXT: call @planrt_cuda_sync()
  // CHECK-NEXT: call @planrt_k_all_reduce
  // CHECK-NEXT: gpu.launch_func
  // CHECK-NEXT: call @planrt_cuda_sync()
  // CHECK-NEXT: return
  func.func @host_first(%m: memref<4xf32>, %i: i32) {
    %c1 = arith.constant 1 : index
    func.call @planrt_k_all_reduce(%i) : (i32) -> ()
    gpu.launch_func @k::@f blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    return
  }

  // No device work: no wait.
  // CHECK-LABEL: func.func @host_only(
  // CHECK-NOT: planrt_cuda_sync
  // CHECK: return
  func.func @host_only(%i: i32) {
    func.call @planrt_k_all_reduce(%i) : (i32) -> ()
    return
  }
}
