// plan-gpu-map-loops: each outermost scf.parallel becomes a gpu.launch of ⌈n / 256⌉
// blocks of 256 threads, n the product of its trip counts, the thread's linear id
// delinearised row-major (last dimension fastest) and guarded by id < n; a memref.copy
// becomes a launch of one thread per element; a sum into one element with a reassociable
// addition (a sum of squares) becomes 32768 threads of strided partial sums, 128 threads
// each adding 256 of them, then one thread adding those; any other serial loop nest that stores becomes a launch of one thread; loops that call or allocate stay on the
// host, with the parallel loops inside them launched. Kernels are named
// <function>_<loop|copy|serial><n> in the gpu.module @planc_kernels.
// RUN: planc-opt %s -split-input-file -plan-gpu-map-loops=elements-per-thread=1 -verify-diagnostics | FileCheck %s
// RUN: planc-opt %s -split-input-file -plan-gpu-map-loops=chunk-sums=false -verify-diagnostics | FileCheck %s --check-prefix=WHOLE
// RUN: planc-opt %s -split-input-file -plan-gpu-map-loops -verify-diagnostics | FileCheck %s --check-prefix=FOUR

// CHECK-LABEL: func.func @two_d(
// CHECK-SAME: %[[A:.*]]: memref<64x100xf32>, %[[B:.*]]: memref<64x100xf32>)
// CHECK: arith.muli
// CHECK-NEXT: %[[N:.*]] = arith.muli
// CHECK: %[[BLOCKS:.*]] = arith.ceildivsi %[[N]], %[[C256:.*]] : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], {{.*}}) module(@planc_kernels) function(@two_d_loop0)
// CHECK: %[[ID0:.*]] = arith.muli %[[BX]], %{{.*}} : index
// CHECK: %[[ID:.*]] = arith.addi %[[ID0]], %[[TX]] : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[ID]], %[[N]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: %[[J:.*]] = arith.remui %[[ID]], %{{.*}} : index
// CHECK: %[[I:.*]] = arith.divui %[[ID]], %{{.*}} : index
// CHECK: %[[V:.*]] = memref.load %[[A]][%{{.*}}, %{{.*}}] : memref<64x100xf32>
// CHECK: math.tanh %[[V]]
// CHECK: memref.store
// CHECK: }
// CHECK: gpu.terminator
// CHECK-NOT: scf.parallel
func.func @two_d(%a: memref<64x100xf32>, %b: memref<64x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c100) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<64x100xf32>
    %t = math.tanh %v : f32
    memref.store %t, %b[%i, %j] : memref<64x100xf32>
    scf.reduce
  }
  return
}

// -----

// A copy: one thread per element, and a full reduction: one thread.
// CHECK-LABEL: func.func @copy_and_sum(
// CHECK: gpu.launch {{.*}} module(@planc_kernels) function(@copy_and_sum_copy0)
// CHECK: memref.load %{{.*}} : memref<8x?xf32, strided<[?, 1], offset: ?>>
// CHECK: memref.store %{{.*}} : memref<8x?xf32>
// CHECK: gpu.launch {{.*}} module(@planc_kernels) function(@copy_and_sum_serial1)
// CHECK: scf.if
// CHECK: scf.for
// CHECK-NOT: memref.copy
func.func @copy_and_sum(%src: memref<8x?xf32, strided<[?, 1], offset: ?>>, %dst: memref<8x?xf32>,
                        %x: memref<1000xf32>, %sum: memref<f32>) {
  memref.copy %src, %dst : memref<8x?xf32, strided<[?, 1], offset: ?>> to memref<8x?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  scf.for %i = %c0 to %c1000 step %c1 {
    %v = memref.load %x[%i] : memref<1000xf32>
    %s = memref.load %sum[] : memref<f32>
    %t = arith.addf %s, %v : f32
    memref.store %t, %sum[] : memref<f32>
  }
  return
}

// -----

// A host loop that calls a library function stays on the host; its parallel loop is
// launched inside it. A loop that only reads stays too (nothing to keep on the device).
// CHECK-LABEL: func.func @host_loop(
// CHECK: scf.for
// CHECK: func.call @lib
// CHECK: gpu.launch {{.*}} function(@host_loop_loop0)
// CHECK: scf.for
// CHECK-NOT: gpu.launch
// CHECK: return
func.func private @lib(memref<16xf32>)
func.func @host_loop(%x: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.for %k = %c0 to %c4 step %c1 {
    func.call @lib(%x) : (memref<16xf32>) -> ()
    scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
      memref.store %one, %x[%i] : memref<16xf32>
      scf.reduce
    }
  }
  %zero = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%acc = %zero) -> f32 {
    %v = memref.load %x[%i] : memref<16xf32>
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  return %r : f32
}

// -----

func.func @reduction(%x: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{'scf.parallel' op with reductions: plan-gpu-map-loops launches parallel loops without results}}
  %r = scf.parallel (%i) = (%c0) to (%c16) step (%c1) init (%zero) -> f32 {
    %v = memref.load %x[%i] : memref<16xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}

// -----

// A bias gradient: for each row, for all columns, out[c] += x[r, c]: one kernel of a thread
// per column, each running the row loop.
// CHECK-LABEL: func.func @bias_grad(
// CHECK-SAME: %[[X:.*]]: memref<16x8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK: gpu.launch {{.*}} function(@bias_grad_loop0)
// CHECK: scf.if
// CHECK: scf.for %[[R:.*]] =
// CHECK: memref.load %[[X]][%[[R]], %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[OUT]][%{{.*}}]
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @bias_grad(%x: memref<16x8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %r = %c0 to %c16 step %c1 {
    scf.parallel (%c) = (%c0) to (%c8) step (%c1) {
      %v = memref.load %x[%r, %c] : memref<16x8xf32>
      %o = memref.load %out[%c] : memref<8xf32>
      %s = arith.addf %o, %v : f32
      memref.store %s, %out[%c] : memref<8xf32>
      scf.reduce
    }
  }
  return
}

// -----

// The same over 4 x 50 rows (more than one chunk of 64): each (column, chunk) sums its
// rows from zero, in the nest's order (the serial indices delinearised from one linear
// index), into partials[chunk * 8 + column]; then each column adds its four partials, in
// order, to its element. With chunk-sums=false: one thread per column over every row.
// CHECK-LABEL: func.func @bias_grad_chunked(
// CHECK-SAME: %[[X:.*]]: memref<4x50x8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK: %[[PART:.*]] = memref.alloc() : memref<32xf32>
// CHECK: gpu.launch {{.*}} function(@bias_grad_chunked_partial0)
// CHECK: %[[ID:.*]] = arith.addi
// CHECK: arith.cmpi ult, %[[ID]], %c32 : index
// CHECK: arith.remui %[[ID]], %[[N:.*]] : index
// CHECK: %[[CHUNK:.*]] = arith.divui %[[ID]], %[[N]] : index
// CHECK: %[[BEGIN:.*]] = arith.muli %[[CHUNK]], %c64 : index
// CHECK: %[[END0:.*]] = arith.addi %[[BEGIN]], %c64 : index
// CHECK: %[[END:.*]] = arith.minui %[[END0]], %c200 : index
// CHECK: %[[SUM:.*]] = scf.for %[[Q:.*]] = %[[BEGIN]] to %[[END]] step %{{.*}} iter_args(%[[S:.*]] = %{{.*}}) -> (f32)
// CHECK: arith.remui %[[Q]], %[[C50:.*]] : index
// CHECK: arith.divui %[[Q]], %[[C50]] : index
// CHECK: memref.load %[[X]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x50x8xf32>
// CHECK: %[[W:.*]] = arith.mulf
// CHECK: arith.addf %[[S]], %[[W]] : f32
// CHECK: memref.store %[[SUM]], %[[PART]][%[[ID]]]
// CHECK: gpu.launch {{.*}} function(@bias_grad_chunked_loop1)
// CHECK: %[[ACC0:.*]] = memref.load %[[OUT]]
// CHECK: %[[TOTAL:.*]] = scf.for %{{.*}} = %{{.*}} to %c4{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[ACC0]])
// CHECK: memref.load %[[PART]]
// CHECK: memref.store %[[TOTAL]], %[[OUT]]
// CHECK: memref.dealloc %[[PART]]
// WHOLE-LABEL: func.func @bias_grad_chunked(
// WHOLE: gpu.launch {{.*}} function(@bias_grad_chunked_loop0)
// WHOLE-NOT: partial
// WHOLE: return
func.func @bias_grad_chunked(%x: memref<4x50x8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c50 = arith.constant 50 : index
  scf.for %b = %c0 to %c4 step %c1 {
    scf.for %r = %c0 to %c50 step %c1 {
      %k = arith.constant 2.0 : f32
      scf.parallel (%c) = (%c0) to (%c8) step (%c1) {
        %v = memref.load %x[%b, %r, %c] : memref<4x50x8xf32>
        %w = arith.mulf %v, %k : f32
        %o = memref.load %out[%c] : memref<8xf32>
        %s = arith.addf %o, %w : f32
        memref.store %s, %out[%c] : memref<8xf32>
        scf.reduce
      }
    }
  }
  return
}

// -----

// An iteration that reads its neighbour's element: the serial loop stays on the host and
// each of its iterations launches the parallel loop.
// CHECK-LABEL: func.func @stencil(
// CHECK: scf.for
// CHECK: gpu.launch {{.*}} function(@stencil_loop0)
func.func @stencil(%a: memref<9xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %t = %c0 to %c4 step %c1 {
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      %j = arith.addi %i, %c1 : index
      %v = memref.load %a[%j] : memref<9xf32>
      memref.store %v, %a[%i] : memref<9xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A constant global read by a kernel is fetched inside it.
// CHECK-LABEL: func.func @global(
// CHECK: gpu.launch
// CHECK-NEXT: %[[G:.*]] = memref.get_global @ones : memref<8xf32>
// CHECK: memref.load %[[G]]
memref.global "private" constant @ones : memref<8xf32> = dense<1.0>
func.func @global(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %g = memref.get_global @ones : memref<8xf32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %g[%i] : memref<8xf32>
    memref.store %v, %out[%i] : memref<8xf32>
    scf.reduce
  }
  return
}

// -----

// A sum of squares with a reassociable addition: partial sums, then their total.
// CHECK-LABEL: func.func @sumsq(
// CHECK-SAME: %[[X:.*]]: memref<1000xf32>, %[[ACC:.*]]: memref<f64>)
// CHECK: %[[PARTS:.*]] = memref.alloc() : memref<32768xf64>
// CHECK: gpu.launch {{.*}} function(@sumsq_partial0)
// CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[P:.*]] = %{{.*}}) -> (f64) {
// CHECK: memref.load %[[X]]
// CHECK: arith.mulf
// CHECK: %[[NEXT:.*]] = arith.addf %[[P]], %{{.*}} fastmath<reassoc> : f64
// CHECK: scf.yield %[[NEXT]] : f64
// CHECK: memref.store %[[SUM]], %[[PARTS]][%{{.*}}] : memref<32768xf64>
// CHECK: %[[COMB:.*]] = memref.alloc() : memref<128xf64>
// CHECK: gpu.launch {{.*}} function(@sumsq_combine1)
// CHECK: %[[ID:.*]] = arith.addi
// CHECK: %[[BEGIN:.*]] = arith.muli %[[ID]], %c256
// CHECK: %[[END:.*]] = arith.addi %[[BEGIN]], %c256
// CHECK: %[[C:.*]] = scf.for %{{.*}} = %[[BEGIN]] to %[[END]] step %{{.*}} iter_args
// CHECK: memref.load %[[PARTS]]
// CHECK: memref.store %[[C]], %[[COMB]][%[[ID]]] : memref<128xf64>
// CHECK: gpu.launch {{.*}} function(@sumsq_serial2)
// CHECK: %[[A0:.*]] = memref.load %[[ACC]][] : memref<f64>
// CHECK: %[[T:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[A0]]) -> (f64) {
// CHECK: memref.load %[[COMB]]
// CHECK: memref.store %[[T]], %[[ACC]][] : memref<f64>
// CHECK: memref.dealloc %[[COMB]]
// CHECK: memref.dealloc %[[PARTS]]
func.func @sumsq(%x: memref<1000xf32>, %acc: memref<f64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  scf.for %i = %c0 to %c1000 step %c1 {
    %v = memref.load %x[%i] : memref<1000xf32>
    %a = memref.load %acc[] : memref<f64>
    %e = arith.extf %v : f32 to f64
    %s = arith.mulf %e, %e : f64
    %t = arith.addf %a, %s fastmath<reassoc> : f64
    memref.store %t, %acc[] : memref<f64>
  }
  return
}

// -----

// elements-per-thread (4 by default): a straight-line parallel loop of a multiple of 4
// iterations gives each thread 4 of them, 8 x 16 / 4 = 32 threads apart (each copy's
// accesses a warp's consecutive elements): the loads of the four (and their arithmetic)
// first, then the stores. Left at one a thread: 7 x 5 iterations, and a body that branches.
// FOUR-LABEL: func.func @four_a_thread(
// FOUR: %[[N:.*]] = arith.divui %{{.*}}, %c4{{.*}} : index
// FOUR: gpu.launch {{.*}} function(@four_a_thread_loop0)
// FOUR: %[[ID:.*]] = arith.addi
// FOUR: arith.cmpi ult, %[[ID]], %[[N]]
// FOUR: memref.load %{{.*}} : memref<8x16xf32>
// FOUR: %[[APART:.*]] = arith.muli %[[N]], %{{.*}} : index
// FOUR-NEXT: arith.addi %[[ID]], %[[APART]] : index
// FOUR-COUNT-3: memref.load %{{.*}} : memref<8x16xf32>
// FOUR-NOT: memref.store
// FOUR-COUNT-4: memref.store %{{.*}} : memref<8x16xf32>
// FOUR: gpu.terminator
// FOUR: gpu.launch {{.*}} function(@four_a_thread_loop1)
// FOUR: memref.load %{{.*}} : memref<7x5xf32>
// FOUR-NEXT: math.exp
// FOUR-NEXT: memref.store
// FOUR-NEXT: }
// FOUR: gpu.launch {{.*}} function(@four_a_thread_loop2)
// FOUR: memref.load %{{.*}} : memref<8x16xf32>
// FOUR-NEXT: arith.cmpf
// FOUR-NEXT: scf.if
// FOUR-NEXT: memref.store
// FOUR-NEXT: }
// FOUR-NEXT: }
// FOUR-NEXT: gpu.terminator
// CHECK-LABEL: func.func @four_a_thread(
// CHECK: function(@four_a_thread_loop0)
// CHECK: memref.load %{{.*}} : memref<8x16xf32>
// CHECK-NEXT: math.exp
// CHECK-NEXT: memref.store
// CHECK-NEXT: }
func.func @four_a_thread(%a: memref<8x16xf32>, %b: memref<8x16xf32>, %c: memref<7x5xf32>, %d: memref<7x5xf32>,
                         %f: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c16) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<8x16xf32>
    %e = math.exp %v : f32
    memref.store %e, %b[%i, %j] : memref<8x16xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c7, %c5) step (%c1, %c1) {
    %v = memref.load %c[%i, %j] : memref<7x5xf32>
    %e = math.exp %v : f32
    memref.store %e, %d[%i, %j] : memref<7x5xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c16) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<8x16xf32>
    %pos = arith.cmpf ogt, %v, %zero : f32
    scf.if %pos {
      memref.store %v, %f[%i, %j] : memref<8x16xf32>
    }
    scf.reduce
  }
  return
}
