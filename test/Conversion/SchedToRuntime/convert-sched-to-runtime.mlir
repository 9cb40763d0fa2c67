// convert-sched-to-runtime: every sched op of a sched program (a function whose first
// argument is the sched.context) becomes an llvm.call of its planrt_sched_* function
// (runtime/include/planrt.h) with the context first, buffers as i32 ids in declaration order,
// ranges as i64, mesh axes as an i32 bit mask (bit i = axis i) and the reduction as 0 sum,
// 1 max, 2 mean; sched.micro_loop becomes an scf.for whose index is the micro-batch, sched.on
// an scf.if on planrt_sched_coord. The mesh, the buffers and the sched.context attribute go
// (the manifest carries them); other functions are left alone.
// RUN: planc-opt %s -split-input-file -convert-sched-to-runtime | FileCheck %s

// Buffer ids: params 0, grads 1, shard 2, m 3, v 4, state 5. Axis masks: "dp" 1, "pp" 2,
// both 3.
// CHECK-NOT: sched.
// CHECK-LABEL: func.func @planc_step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[STEP:[^:]*]]: i64) {
// fill(state, 7, 1, 0.0)
// CHECK-NEXT: %[[V:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[B:.*]] = arith.constant 5 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 7 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 1 : i64
// CHECK-NEXT: llvm.call @planrt_sched_fill(%[[CTX]], %[[B]], %[[O]], %[[N]], %[[V]]) : (!llvm.ptr, i32, i64, i64, f32) -> ()
// fill(grads, 0, 64, 0.5)
// CHECK-NEXT: %[[V:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: %[[B:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 64 : i64
// CHECK-NEXT: llvm.call @planrt_sched_fill(%[[CTX]], %[[B]], %[[O]], %[[N]], %[[V]])
// The micro-batch loop: 3 iterations, the index as the i64 micro-batch.
// CHECK-NEXT: %[[LO:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[HI:.*]] = arith.constant 3 : index
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: scf.for %[[I:.*]] = %[[LO]] to %[[HI]] step %[[ONE]] {
// CHECK-NEXT: %[[MICRO:.*]] = arith.index_cast %[[I]] : index to i64
// alloc(params)
// CHECK-NEXT: %[[B:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[WHOLE:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @planrt_sched_alloc(%[[CTX]], %[[B]], %[[WHOLE]]) : (!llvm.ptr, i32, i32) -> ()
// all_gather(mask dp|pp, shard, 0, 16, params, 0)
// CHECK-NEXT: %[[M:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[S:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[SO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[D:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[DO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: llvm.call @planrt_sched_all_gather(%[[CTX]], %[[M]], %[[S]], %[[SO]], %[[N]], %[[D]], %[[DO]]) : (!llvm.ptr, i32, i32, i64, i64, i32, i64) -> ()
// grad(step, micro, params, grads, state)
// CHECK-NEXT: %[[P:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[G:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[ST:.*]] = arith.constant 5 : i32
// CHECK-NEXT: llvm.call @planrt_sched_grad(%[[CTX]], %[[STEP]], %[[MICRO]], %[[P]], %[[G]], %[[ST]]) : (!llvm.ptr, i64, i64, i32, i32, i32) -> ()
// free(params)
// CHECK-NEXT: %[[B:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @planrt_sched_free(%[[CTX]], %[[B]]) : (!llvm.ptr, i32) -> ()
// sched.on "pp" = 0: the coordinate on axis 1, compared with 0.
// CHECK-NEXT: %[[AX:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[C:.*]] = llvm.call @planrt_sched_coord(%[[CTX]], %[[AX]]) : (!llvm.ptr, i32) -> i64
// CHECK-NEXT: %[[K:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[EQ:.*]] = arith.cmpi eq, %[[C]], %[[K]] : i64
// CHECK-NEXT: scf.if %[[EQ]] {
// send(axis pp = 1, peer 1, grads, 0, 8)
// CHECK-NEXT: %[[AX:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[PEER:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[B:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 8 : i64
// CHECK-NEXT: llvm.call @planrt_sched_send(%[[CTX]], %[[AX]], %[[PEER]], %[[B]], %[[O]], %[[N]]) : (!llvm.ptr, i32, i64, i32, i64, i64) -> ()
// CHECK-NEXT: }
// sched.on "pp" = 1: recv(axis 1, peer 0, grads, 8, 8)
// CHECK-NEXT: %[[AX:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[C:.*]] = llvm.call @planrt_sched_coord(%[[CTX]], %[[AX]]) : (!llvm.ptr, i32) -> i64
// CHECK-NEXT: %[[K:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[EQ:.*]] = arith.cmpi eq, %[[C]], %[[K]] : i64
// CHECK-NEXT: scf.if %[[EQ]] {
// CHECK-NEXT: %[[AX:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[PEER:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[B:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 8 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 8 : i64
// CHECK-NEXT: llvm.call @planrt_sched_recv(%[[CTX]], %[[AX]], %[[PEER]], %[[B]], %[[O]], %[[N]]) : (!llvm.ptr, i32, i64, i32, i64, i64) -> ()
// CHECK-NEXT: }
// CHECK-NEXT: }
// reduce_scatter(mask dp, grads, 0, 16, shard, 0, accumulate 1)
// CHECK-NEXT: %[[M:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[S:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[SO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[D:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[DO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[ACC:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.call @planrt_sched_reduce_scatter(%[[CTX]], %[[M]], %[[S]], %[[SO]], %[[N]], %[[D]], %[[DO]], %[[ACC]]) : (!llvm.ptr, i32, i32, i64, i64, i32, i64, i32) -> ()
// reduce_scatter(mask pp, grads, 32, 8, shard, 16, accumulate 0)
// CHECK-NEXT: %[[M:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[S:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[SO:.*]] = arith.constant 32 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 8 : i64
// CHECK-NEXT: %[[D:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[DO:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[ACC:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @planrt_sched_reduce_scatter(%[[CTX]], %[[M]], %[[S]], %[[SO]], %[[N]], %[[D]], %[[DO]], %[[ACC]])
// all_reduce(mask dp, grads, 0, 64, sum = 0)
// CHECK-NEXT: %[[M:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[B:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 64 : i64
// CHECK-NEXT: %[[R:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @planrt_sched_all_reduce(%[[CTX]], %[[M]], %[[B]], %[[O]], %[[N]], %[[R]]) : (!llvm.ptr, i32, i32, i64, i64, i32) -> ()
// all_reduce(mask pp, state, 0, 1, max = 1)
// CHECK-NEXT: %[[M:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[B:.*]] = arith.constant 5 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[R:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.call @planrt_sched_all_reduce(%[[CTX]], %[[M]], %[[B]], %[[O]], %[[N]], %[[R]])
// all_reduce(mask dp|pp, state, 7, 1, mean = 2)
// CHECK-NEXT: %[[M:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[B:.*]] = arith.constant 5 : i32
// CHECK-NEXT: %[[O:.*]] = arith.constant 7 : i64
// CHECK-NEXT: %[[N:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[R:.*]] = arith.constant 2 : i32
// CHECK-NEXT: llvm.call @planrt_sched_all_reduce(%[[CTX]], %[[M]], %[[B]], %[[O]], %[[N]], %[[R]])
// sumsq(shard 0, shard 16, state)
// CHECK-NEXT: %[[B0:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[O0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[B1:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[O1:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[ST:.*]] = arith.constant 5 : i32
// CHECK-NEXT: llvm.call @planrt_sched_sumsq(%[[CTX]], %[[B0]], %[[O0]], %[[B1]], %[[O1]], %[[ST]]) : (!llvm.ptr, i32, i64, i32, i64, i32) -> ()
// update(step, P: params 0 / 32, G: shard 0 / 16, M: m 0 / 16, V: v 0 / 16, state)
// CHECK-NEXT: %[[PB0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[PO0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[PB1:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[PO1:.*]] = arith.constant 32 : i64
// CHECK-NEXT: %[[GB0:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[GO0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[GB1:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[GO1:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[MB0:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[MO0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[MB1:.*]] = arith.constant 3 : i32
// CHECK-NEXT: %[[MO1:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[VB0:.*]] = arith.constant 4 : i32
// CHECK-NEXT: %[[VO0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[VB1:.*]] = arith.constant 4 : i32
// CHECK-NEXT: %[[VO1:.*]] = arith.constant 16 : i64
// CHECK-NEXT: %[[ST:.*]] = arith.constant 5 : i32
// CHECK-NEXT: llvm.call @planrt_sched_update(%[[CTX]], %[[STEP]], %[[PB0]], %[[PO0]], %[[PB1]], %[[PO1]], %[[GB0]], %[[GO0]], %[[GB1]], %[[GO1]], %[[MB0]], %[[MO0]], %[[MB1]], %[[MO1]], %[[VB0]], %[[VO0]], %[[VB1]], %[[VO1]], %[[ST]]) : (!llvm.ptr, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32) -> ()
// CHECK-NEXT: return
// Every program of the module is lowered, with the same buffer ids.
// CHECK-LABEL: func.func @planc_gather(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr) {
// CHECK-NEXT: %[[B:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[WHOLE:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @planrt_sched_alloc(%[[CTX]], %[[B]], %[[WHOLE]])
// CHECK-NEXT: return
// A function that is not a program stays as it is.
// CHECK-LABEL: func.func @helper(
// CHECK-NEXT: return
// CHECK-NEXT: }
// One declaration per runtime function used, in order of first use.
// CHECK-NEXT: llvm.func @planrt_sched_fill(!llvm.ptr, i32, i64, i64, f32)
// CHECK-NEXT: llvm.func @planrt_sched_alloc(!llvm.ptr, i32, i32)
// CHECK-NEXT: llvm.func @planrt_sched_all_gather(!llvm.ptr, i32, i32, i64, i64, i32, i64)
// CHECK-NEXT: llvm.func @planrt_sched_grad(!llvm.ptr, i64, i64, i32, i32, i32)
// CHECK-NEXT: llvm.func @planrt_sched_free(!llvm.ptr, i32)
// CHECK-NEXT: llvm.func @planrt_sched_coord(!llvm.ptr, i32) -> i64
// CHECK-NEXT: llvm.func @planrt_sched_send(!llvm.ptr, i32, i64, i32, i64, i64)
// CHECK-NEXT: llvm.func @planrt_sched_recv(!llvm.ptr, i32, i64, i32, i64, i64)
// CHECK-NEXT: llvm.func @planrt_sched_reduce_scatter(!llvm.ptr, i32, i32, i64, i64, i32, i64, i32)
// CHECK-NEXT: llvm.func @planrt_sched_all_reduce(!llvm.ptr, i32, i32, i64, i64, i32)
// CHECK-NEXT: llvm.func @planrt_sched_sumsq(!llvm.ptr, i32, i64, i32, i64, i32)
// CHECK-NEXT: llvm.func @planrt_sched_update(!llvm.ptr, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64, i32)
// CHECK-NEXT: }
sched.mesh @mesh {axes = ["dp", "pp"], sizes = array<i64: 2, 2>}
sched.buffer @params {floats = 64 : i64, lifetime = "transient"}
sched.buffer @grads {floats = 64 : i64, lifetime = "step"}
sched.buffer @shard {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @m {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @v {floats = 32 : i64, lifetime = "persistent"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.fill @state[7, 1] = 0.0
  sched.fill @grads[0, 64] = 0.5
  sched.micro_loop 3 {
  ^bb0(%i: i64):
    sched.alloc @params
    sched.all_gather @shard[0, 16] -> @params[0] over ["dp", "pp"] {purpose = "parameters"}
    sched.grad %step, %i params @params grads @grads state @state
    sched.free @params
    sched.on "pp" = 0 {
      sched.send @grads[0, 8] to 1 along "pp" {purpose = "activations"}
    }
    sched.on "pp" = 1 {
      sched.recv @grads[8, 8] from 0 along "pp" {purpose = "activations"}
    }
  }
  sched.reduce_scatter @grads[0, 16] -> @shard[0] over ["dp"] {accumulate, purpose = "gradients"}
  sched.reduce_scatter @grads[32, 8] -> @shard[16] over ["pp"] {purpose = "gradients"}
  sched.all_reduce @grads[0, 64] over ["dp"] {purpose = "gradients", reduce = "sum"}
  sched.all_reduce @state[0, 1] over ["pp"] {purpose = "max", reduce = "max"}
  sched.all_reduce @state[7, 1] over ["dp", "pp"] {purpose = "loss", reduce = "mean"}
  sched.sumsq [@shard, @shard] [0, 16] state @state
  sched.update %step [@params, @params, @shard, @shard, @m, @m, @v, @v] [0, 32, 0, 16, 0, 16, 0, 16] state @state
  return
}
func.func @planc_gather(%ctx: !llvm.ptr {sched.context}) {
  sched.alloc @params
  return
}
func.func @helper(%x: i64) -> i64 {
  return %x : i64
}

// -----

// A sched.on nested in another, and inside the micro-batch loop: nested scf.if, each on its
// own axis's coordinate (mesh axes "dp" 0, "tp" 1, "pp" 2).
// CHECK-LABEL: func.func @planc_step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %{{[^:]*}}: i64) {
// CHECK: scf.for
// CHECK-NEXT: arith.index_cast
// CHECK-NEXT: %[[AX:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[C:.*]] = llvm.call @planrt_sched_coord(%[[CTX]], %[[AX]])
// CHECK-NEXT: %[[K:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[EQ:.*]] = arith.cmpi eq, %[[C]], %[[K]] : i64
// CHECK-NEXT: scf.if %[[EQ]] {
// CHECK-NEXT: %[[AX:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[C:.*]] = llvm.call @planrt_sched_coord(%[[CTX]], %[[AX]])
// CHECK-NEXT: %[[K:.*]] = arith.constant 3 : i64
// CHECK-NEXT: %[[EQ:.*]] = arith.cmpi eq, %[[C]], %[[K]] : i64
// CHECK-NEXT: scf.if %[[EQ]] {
// The all-reduce over "tp" (mask 2), buffer 0.
// CHECK-NEXT: %[[M:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[B:.*]] = arith.constant 0 : i32
// CHECK: llvm.call @planrt_sched_all_reduce(%[[CTX]], %[[M]], %[[B]],
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: sched.
sched.mesh @mesh {axes = ["dp", "tp", "pp"], sizes = array<i64: 4, 2, 2>}
sched.buffer @x {floats = 4 : i64, lifetime = "step"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.micro_loop 2 {
  ^bb0(%i: i64):
    sched.on "pp" = 1 {
      sched.on "dp" = 3 {
        sched.all_reduce @x[0, 4] over ["tp"] {purpose = "partial sums", reduce = "sum"}
      }
    }
  }
  return
}

// -----

// A module without sched programs is left as it is, sched ops and all.
// CHECK-LABEL: sched.mesh @mesh
// CHECK-NEXT: sched.buffer @x
// CHECK-NEXT: func.func @f(%{{[^:]*}}: !llvm.ptr) {
// CHECK-NEXT: sched.fill @x[0, 4] = 1.000000e+00
// CHECK-NEXT: return
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 1>}
sched.buffer @x {floats = 4 : i64, lifetime = "step"}
func.func @f(%ctx: !llvm.ptr) {
  sched.fill @x[0, 4] = 1.0
  return
}

// -----

// Pipeline stages: sched.forward and sched.backward become planrt_sched_forward and
// planrt_sched_backward with the stage and, for a range the stage lacks (stage 0 has no input,
// the last stage no cotangent), buffer id -1 at offset 0; sched.send_recv becomes
// planrt_sched_send_recv (axis, to, range sent, from, range received). Buffer ids: params 0,
// grads 1, cot 2, act 3, state 4, saved 5. The first forward and backward keep nothing
// (saved: -1 at 0); the second keep the values of their micro-batch in @saved at 16. The
// zero-bubble schedule's input pass (wsaved: @saved at 8, its last two arguments) and
// sched.wgrad (planrt_sched_wgrad: step, micro, stage, params, grads, state, wsaved).
// CHECK-LABEL: func.func @planc_step(
// CHECK:      %[[NONE:.*]] = arith.constant -1 : i32
// CHECK:      llvm.call @planrt_sched_forward(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[NONE]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, {{%c-1_i32[_0-9]*}}, %{{[^)]*}}) : (!llvm.ptr, i64, i64, i64, i32, i32, i64, i32, i64, i32, i64) -> ()
// CHECK:      llvm.call @planrt_sched_send_recv({{.*}}) : (!llvm.ptr, i32, i64, i32, i64, i64, i64, i32, i64, i64) -> ()
// CHECK:      llvm.call @planrt_sched_backward({{.*}}, {{%c-1_i32[_0-9]*}}, %{{[^,]*}}, {{%c-1_i32[_0-9]*}}, %{{[^)]*}}) : (!llvm.ptr, i64, i64, i64, i32, i32, i32, i32, i64, i32, i64, i32, i64, i32, i64, i32, i64) -> ()
// CHECK:      llvm.call @planrt_sched_forward({{.*}}, {{%c5_i32[_0-9]*}}, {{%c16_i64[_0-9]*}}) :
// CHECK:      llvm.call @planrt_sched_backward({{.*}}, {{%c5_i32[_0-9]*}}, {{%c16_i64[_0-9]*}}, {{%c-1_i32[_0-9]*}}, %{{[^)]*}}) :
// CHECK:      llvm.call @planrt_sched_backward({{.*}}, {{%c-1_i32[_0-9]*}}, %{{[^,]*}}, {{%c5_i32[_0-9]*}}, {{%c8_i64[_0-9]*}}) :
// CHECK:      llvm.call @planrt_sched_wgrad(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, {{%c0_i64[_0-9]*}}, {{%c0_i32[_0-9]*}}, {{%c1_i32[_0-9]*}}, {{%c4_i32[_0-9]*}}, {{%c5_i32[_0-9]*}}, {{%c8_i64[_0-9]*}}) : (!llvm.ptr, i64, i64, i64, i32, i32, i32, i32, i64) -> ()
sched.mesh @mesh {axes = ["pp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 64 : i64, lifetime = "persistent", stage = 0 : i64}
sched.buffer @grads {floats = 64 : i64, lifetime = "step", stage = 0 : i64}
sched.buffer @cot {floats = 8 : i64, lifetime = "step", stage = 0 : i64}
sched.buffer @act {floats = 8 : i64, lifetime = "step", stage = 0 : i64}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @saved {floats = 32 : i64, lifetime = "step", stage = 0 : i64}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %c0 = arith.constant 0 : i64
  sched.on "pp" = 0 {
    sched.forward %step, %c0 stage 0 params @params out @act[0]
    sched.send_recv @act[0, 8] to 1, @cot[0, 8] from 1 along "pp" {purpose = "activations / activation gradients"}
    sched.backward %step, %c0 stage 0 params @params grads @grads state @state cotangent @cot[0]
    sched.forward %step, %c0 stage 0 params @params out @act[0] saved @saved[16]
    sched.backward %step, %c0 stage 0 params @params grads @grads state @state cotangent @cot[0] saved @saved[16]
    sched.backward %step, %c0 stage 0 params @params grads @grads state @state cotangent @cot[0] wsaved @saved[8]
    sched.wgrad %step, %c0 stage 0 params @params grads @grads state @state wsaved @saved[8]
  }
  sched.on "pp" = 1 {
    sched.send_recv @state[0, 8] to 0, @state[0, 8] from 0 along "pp" {purpose = "activation gradients / activations"}
  }
  return
}

// -----

// DDP gradient buckets: each sched.all_reduce_start is handed to the runtime before its
// sched.grad (planrt_sched_bucket_all_reduce: bucket = the event's result number, axes mask,
// buffer, offset, count, 0 = sum), in the IR's order; the entry point then starts them
// (planrt_grad_ready), and sched.wait becomes planrt_sched_wait. Buffer ids: params 0,
// grads 1, state 2.
// CHECK-LABEL: func.func @planc_step(
// CHECK-DAG:  %[[B0:.*]] = arith.constant 0 : i64
// CHECK-DAG:  %[[MASK:.*]] = arith.constant 1 : i32
// CHECK-DAG:  %[[G:.*]] = arith.constant 1 : i32
// CHECK-DAG:  %[[O48:.*]] = arith.constant 48 : i64
// CHECK-DAG:  %[[C16:.*]] = arith.constant 16 : i64
// CHECK-DAG:  %[[SUM:.*]] = arith.constant 0 : i32
// CHECK:      llvm.call @planrt_sched_bucket_all_reduce(%{{[^,]*}}, %[[B0]], %[[MASK]], %[[G]], %[[O48]], %[[C16]], %[[SUM]])
// CHECK:      llvm.call @planrt_sched_bucket_all_reduce({{.*}}) : (!llvm.ptr, i64, i32, i32, i64, i64, i32) -> ()
// CHECK-NOT:  planrt_sched_bucket_all_reduce
// CHECK:      llvm.call @planrt_sched_grad(
// CHECK-NOT:  planrt_sched_all_reduce
// CHECK:      llvm.call @planrt_sched_wait(%{{[^)]*}}) : (!llvm.ptr) -> ()
// CHECK:      llvm.call @planrt_sched_sumsq(
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 64 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 64 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %c1 = arith.constant 1 : i64
  %b:2 = sched.grad %step, %c1 params @params grads @grads state @state -> !sched.event, !sched.event
  %r0 = sched.all_reduce_start @grads[48, 16] over ["dp"] after %b#0 {purpose = "gradients", reduce = "sum"}
  %r1 = sched.all_reduce_start @grads[0, 48] over ["dp"] after %b#1 {purpose = "gradients", reduce = "sum"}
  sched.wait %r0, %r1
  sched.sumsq [@grads, @grads] [0, 32] state @state
  return
}

// -----

// ZeRO-3 parameter buckets: each sched.all_gather_start becomes planrt_sched_bucket_all_gather
// where it stands (bucket, axes mask, source buffer, offset, count, destination buffer,
// offset, the slice's begin and size), started at once; the sched.grad they feed is the
// usual planrt_sched_grad (its entry point waits for bucket k: planrt_params_ready). Buffer
// ids: params 0, shard 1, grads 2, state 3.
// CHECK-LABEL: func.func @planc_step(
// CHECK:      llvm.call @planrt_sched_alloc(
// CHECK:      llvm.call @planrt_sched_bucket_all_gather({{.*}}) : (!llvm.ptr, i64, i32, i32, i64, i64, i32, i64, i64, i64) -> ()
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[B1:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[SH:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[SO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[CNT:.*]] = arith.constant 8 : i64
// CHECK-NEXT: %[[PAR:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[DO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[BEG:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[SZ:.*]] = arith.constant 8 : i64
// CHECK-NEXT: llvm.call @planrt_sched_bucket_all_gather(%{{[^,]*}}, %[[B1]], %[[MASK]], %[[SH]], %[[SO]], %[[CNT]], %[[PAR]], %[[DO]], %[[BEG]], %[[SZ]])
// CHECK:      llvm.call @planrt_sched_grad(
// CHECK-NOT:  planrt_sched_all_gather
// CHECK:      llvm.call @planrt_sched_free(
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "transient"}
sched.buffer @shard {floats = 8 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  sched.alloc @params
  %p0 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [8, 8] for bucket 0 {purpose = "parameters"}
  %p1 = sched.all_gather_start @shard[0, 8] -> @params[0] over ["dp"] slice [0, 8] for bucket 1 {purpose = "parameters"}
  sched.grad %step, %step params @params grads @grads state @state gathered %p0, %p1
  sched.free @params
  return
}

// -----

// ZeRO gradient buckets: each sched.reduce_scatter_start is handed to the runtime before
// its sched.grad (planrt_sched_bucket_reduce_scatter: bucket, axes mask, source buffer,
// offset, count per rank, destination buffer, offset, the slice's begin and size, and
// whether it adds to the destination: 0 for ZeRO-1's, 1 for ZeRO-2's `accumulate`).
// Buffer ids: params 0, grads 1, shard 2, state 3.
// CHECK-LABEL: func.func @planc_step(
// CHECK:      llvm.call @planrt_sched_bucket_reduce_scatter({{.*}}) : (!llvm.ptr, i64, i32, i32, i64, i64, i32, i64, i64, i64, i32) -> ()
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[B1:.*]] = arith.constant 1 : i64
// CHECK-NEXT: %[[G:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[SO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[CNT:.*]] = arith.constant 8 : i64
// CHECK-NEXT: %[[SH:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[DO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[BEG:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[SZ:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[ACC:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.call @planrt_sched_bucket_reduce_scatter(%{{[^,]*}}, %[[B1]], %[[MASK]], %[[G]], %[[SO]], %[[CNT]], %[[SH]], %[[DO]], %[[BEG]], %[[SZ]], %[[ACC]])
// CHECK:      llvm.call @planrt_sched_grad(
// CHECK-NOT:  planrt_sched_reduce_scatter
// CHECK:      llvm.call @planrt_sched_wait(
sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
sched.buffer @params {floats = 16 : i64, lifetime = "persistent"}
sched.buffer @grads {floats = 16 : i64, lifetime = "step"}
sched.buffer @shard {floats = 8 : i64, lifetime = "step"}
sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
func.func @planc_step(%ctx: !llvm.ptr {sched.context}, %step: i64) {
  %b:2 = sched.grad %step, %step params @params grads @grads state @state -> !sched.event, !sched.event
  %r0 = sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [4, 12] after %b#0 {purpose = "gradients"}
  %r1 = sched.reduce_scatter_start @grads[0, 8] -> @shard[0] over ["dp"] slice [0, 4] after %b#1 {accumulate, purpose = "gradients"}
  sched.wait %r0, %r1
  return
}
