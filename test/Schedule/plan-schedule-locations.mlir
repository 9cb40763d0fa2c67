// plan-schedule: every collective is located at the train declaration that causes it,
// named by the layout rule and the purpose ("ZeRO-1 over [dp]: gradients"), so that
// diagnostics and --mlir-print-debuginfo say where and why each one is issued.
// RUN: planc emit %examples/licenses_zero1.plan --stage grad | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest --mlir-print-debuginfo | FileCheck %s

// The train declaration (here the line of plan.train in the piped --stage grad text).
// CHECK: llvm.mlir.global internal constant @planc_manifest({{.*}} loc(#[[TRAIN:loc[0-9]+]])
// CHECK: sched.reduce_scatter @grads[0, 417792] {{.*}} loc(#[[RS:loc[0-9]+]])
// CHECK: sched.all_reduce @state[7, 1] {{.*}} loc(#[[LOSS:loc[0-9]+]])
// CHECK: sched.all_reduce @state[6, 1] {{.*}} loc(#[[NORM:loc[0-9]+]])
// CHECK: sched.all_gather @param_shard[0, 417792] {{.*}} loc(#[[AG:loc[0-9]+]])
// CHECK-DAG: #[[RS]] = loc("ZeRO-1 over [dp]: gradients"(#[[TRAIN]]))
// CHECK-DAG: #[[LOSS]] = loc("ZeRO-1 over [dp]: loss"(#[[TRAIN]]))
// CHECK-DAG: #[[NORM]] = loc("ZeRO-1 over [dp]: gradient norm"(#[[TRAIN]]))
// CHECK-DAG: #[[AG]] = loc("ZeRO-1 over [dp]: updated parameters"(#[[TRAIN]]))
