// plan-gpu-host-scalars: a function that launches kernels reads and writes no device
// memory on the host. A host load becomes a one-thread kernel copying the element into a
// one-element buffer (allocated on entry, freed before the return); a kernel or a moved
// store that uses the value (or a pure op of it) reads the buffer and computes the op
// itself; a host store becomes a one-thread kernel. A load whose value the host needs (a
// return) stays, and a kernel takes what is computed from it as an argument; functions
// without kernels are left alone.
// RUN: planc-opt %s -plan-gpu-host-scalars | FileCheck %s

module {
  // CHECK-LABEL: func.func @loss(
  // CHECK-SAME: %[[MEAN:.*]]: memref<f32>, %[[ACC:.*]]: memref<1xf32>, %[[OUT:.*]]: memref<4xf32>)
  // CHECK-DAG: %[[B0:.*]] = memref.alloc() : memref<f32>
  // CHECK-DAG: %[[B1:.*]] = memref.alloc() : memref<f32>
  // CHECK: gpu.launch
  // CHECK: gpu.launch
  // CHECK-SAME: module(@planc_kernels) function(@loss_scalar0
  // CHECK-NEXT: %[[L0:.*]] = memref.load %[[MEAN]][] : memref<f32>
  // CHECK-NEXT: memref.store %[[L0]], %[[B1]][] : memref<f32>
  // CHECK: gpu.launch
  // CHECK-SAME: module(@planc_kernels) function(@loss_scalar1
  // CHECK: %[[L1:.*]] = memref.load %[[ACC]][%{{.*}}] : memref<1xf32>
  // CHECK-NEXT: memref.store %[[L1]], %[[B0]][] : memref<f32>
  // CHECK: gpu.launch
  // CHECK-SAME: module(@planc_kernels) function(@loss_scalar2
  // CHECK: %[[A:.*]] = memref.load %[[B0]][] : memref<f32>
  // CHECK-NEXT: %[[M:.*]] = memref.load %[[B1]][] : memref<f32>
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[M]] : f32
  // CHECK-NEXT: memref.store %[[S]], %[[ACC]][%{{.*}}] : memref<1xf32>
  // The kernel that used the sum computes it from the buffers.
  // CHECK: gpu.launch
  // CHECK: memref.load %[[B0]][] : memref<f32>
  // CHECK-NEXT: memref.load %[[B1]][] : memref<f32>
  // CHECK-NEXT: arith.addf
  // No host load or store of them is left.
  // CHECK-NOT: memref.load %[[MEAN]]
  // CHECK-NOT: memref.store %{{.*}}, %[[ACC]]
  // CHECK: memref.dealloc
  // CHECK-NEXT: memref.dealloc
  // CHECK-NEXT: return
  func.func @loss(%mean: memref<f32>, %acc: memref<1xf32>, %out: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@loss_k0) {
      %z = arith.constant 0.0 : f32
      memref.store %z, %mean[] : memref<f32>
      gpu.terminator
    }
    %l = memref.load %mean[] : memref<f32>
    %a = memref.load %acc[%c0] : memref<1xf32>
    %s = arith.addf %a, %l : f32
    memref.store %s, %acc[%c0] : memref<1xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@loss_k1) {
      memref.store %s, %out[%tx] : memref<4xf32>
      gpu.terminator
    }
    return
  }

  // The host returns the value: the load stays (the host waits for it there); the store
  // of a value computed from it runs as a kernel that takes the value as its argument.
  // CHECK-LABEL: func.func @returned(
  // CHECK-NOT: memref.alloc
  // CHECK: gpu.launch
  // CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<4xf32>
  // CHECK: gpu.launch
  // CHECK-SAME: function(@returned_scalar0)
  // CHECK-NEXT: %[[W:.*]] = arith.mulf %[[V]], %[[V]]
  // CHECK-NEXT: memref.store %[[W]]
  // CHECK: return %[[V]]
  func.func @returned(%m: memref<4xf32>) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@returned_k0) {
      %z = arith.constant 2.0 : f32
      memref.store %z, %m[%tx] : memref<4xf32>
      gpu.terminator
    }
    %v = memref.load %m[%c0] : memref<4xf32>
    %w = arith.mulf %v, %v : f32
    memref.store %w, %m[%c1] : memref<4xf32>
    return %v : f32
  }

  // A loaded index: the second load's kernel reads the first one's buffer for it. A
  // value a host call takes stays a host load.
  // CHECK-LABEL: func.func @indexed(
  // CHECK: gpu.launch
  // CHECK: gpu.launch
  // CHECK-SAME: function(@indexed_scalar0)
  // CHECK-NEXT: %[[I:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<2xindex>
  // CHECK-NEXT: memref.store %[[I]], %[[BI:.*]][] : memref<index>
  // CHECK: gpu.launch
  // CHECK-SAME: function(@indexed_scalar1)
  // CHECK-NEXT: %[[J:.*]] = memref.load %[[BI]][] : memref<index>
  // CHECK-NEXT: %[[X:.*]] = memref.load %{{.*}}[%[[J]]] : memref<4xf32>
  // CHECK-NEXT: memref.store %[[X]], %{{.*}}[] : memref<f32>
  // CHECK: %[[H:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<4xf32>
  // CHECK-NEXT: call @use(%[[H]])
  func.func private @use(f32)
  func.func @indexed(%idx: memref<2xindex>, %m: memref<4xf32>, %out: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@indexed_k0) {
      memref.store %c1, %idx[%tx] : memref<2xindex>
      gpu.terminator
    }
    %i = memref.load %idx[%c0] : memref<2xindex>
    %x = memref.load %m[%i] : memref<4xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@indexed_k1) {
      memref.store %x, %out[%tx] : memref<4xf32>
      gpu.terminator
    }
    %h = memref.load %m[%c1] : memref<4xf32>
    func.call @use(%h) : (f32) -> ()
    return
  }

  // A load through a view of a constant global: its kernel fetches the global and the
  // view itself (the host's address is no kernel's).
  // CHECK-LABEL: func.func @global(
  // CHECK: gpu.launch
  // CHECK: gpu.launch
  // CHECK-SAME: function(@global_scalar0)
  // CHECK-NEXT: %[[G:.*]] = memref.get_global @table : memref<4xf32>
  // CHECK-NEXT: %[[V:.*]] = memref.subview %[[G]][1] [2] [1]
  // CHECK-NEXT: %[[X:.*]] = memref.load %[[V]][%{{.*}}]
  // CHECK-NEXT: memref.store %[[X]]
  memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  func.func @global(%out: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@global_k0) {
      %z = arith.constant 0.0 : f32
      memref.store %z, %out[%tx] : memref<4xf32>
      gpu.terminator
    }
    %g = memref.get_global @table : memref<4xf32>
    %v = memref.subview %g[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
    %x = memref.load %v[%c0] : memref<2xf32, strided<[1], offset: 1>>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               module(@planc_kernels) function(@global_k1) {
      memref.store %x, %out[%tx] : memref<4xf32>
      gpu.terminator
    }
    return
  }

  // No kernel: host code throughout.
  // CHECK-LABEL: func.func @host(
  // CHECK-NOT: gpu.launch
  // CHECK: return
  func.func @host(%m: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %v = memref.load %m[%c0] : memref<4xf32>
    memref.store %v, %m[%c0] : memref<4xf32>
    return
  }
}
