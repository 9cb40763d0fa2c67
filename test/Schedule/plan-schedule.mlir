// plan-schedule: from the manifest of plan-train-abi, the per-rank step program of each
// data-parallel layout: the mesh, the flat buffers with their sizes and lifetimes, and
// planc_step (the micro-batch loop around sched.grad, the ZeRO stage's collectives over the
// data axes with their ranges, the loss and gradient-norm all-reduces, the sum of squares
// and the update on this rank's pieces, the parameter gathers), planc_gather and
// planc_release (ZeRO-3 only: the full parameters for evaluation); the manifest gains the
// "schedule" section (the buffer table the runtime allocates, in declaration order = id).
// The plans are in Inputs/layouts.plan, every one with accumulation 2.
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry one | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=ONE
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry ddp | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=DDP
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry ddpb | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=DDPB
// RUN: planc emit %S/Inputs/layouts.plan --stage sched --entry ddpb | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=DDPB
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z3b | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z3B
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z2b | planc-opt -plan-train-abi -plan-schedule -sched-check-deadlock -plan-emit-manifest | FileCheck %s --check-prefix=Z2B
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z1b | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z1B
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z1 | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z1
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z2 | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z2
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z3 | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z3
// RUN: planc emit %S/Inputs/layouts.plan --stage grad --entry z1x2 | planc-opt -plan-train-abi -plan-schedule -plan-emit-manifest | FileCheck %s --check-prefix=Z1X2
// planc emit --stage sched runs the same passes (and sched-check-deadlock, which every
// layout passes).
// RUN: planc emit %S/Inputs/layouts.plan --stage sched --entry z3 | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=Z3
// RUN: planc emit %S/Inputs/layouts.plan --stage sched --entry z1x2 | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=Z1X2
// Tensor parallelism with sequence parallelism (Inputs/tensor.plan, data 2 × tensor 2,
// ZeRO-1): sched.grad lists the collectives planc_grad issues itself over "tp", in order;
// after the micro-batches the replicated parameters' gradients (wpe, norms, biases of
// row-parallel matmuls: each rank saw its half of the sequence) are summed over "tp", one
// collective per contiguous range of the flat layout; then ZeRO-1 over "dp" on this rank's
// pieces, and the gradient norm's partial sums over "dp" and then "tp".
// RUN: planc emit %S/Inputs/tensor.plan --stage sched | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=TP
// TP:      sched.micro_loop 1 {
// TP:      sched.grad %{{.*}}, %{{.*}} params @params grads @grads state @state {collectives = [{axis = "tp", collective = "reduce_scatter", floats = 128 : i64, purpose = "embedding output"}, {axis = "tp", collective = "all_gather", floats = 128 : i64, purpose = "attention input"}, {axis = "tp", collective = "reduce_scatter", floats = 128 : i64, purpose = "attention output"}, {axis = "tp", collective = "all_gather", floats = 128 : i64, purpose = "column-parallel input"}, {axis = "tp", collective = "reduce_scatter", floats = 128 : i64, purpose = "row-parallel output"}, {axis = "tp", collective = "all_gather", floats = 128 : i64, purpose = "head input"},
// TP-SAME: {axis = "tp", collective = "all_reduce", floats = 16 : i64, purpose = "cross-entropy max"}, {axis = "tp", collective = "all_reduce", floats = 16 : i64, purpose = "cross-entropy sum"}, {axis = "tp", collective = "all_reduce", floats = 16 : i64, purpose = "cross-entropy target"},
// TP:      sched.all_reduce @grads[64, 64] over ["tp"] {purpose = "replicated-parameter gradients", reduce = "sum"}
// TP-NEXT: sched.all_reduce @grads[512, 8] over ["tp"] {purpose = "replicated-parameter gradients", reduce = "sum"}
// TP:      sched.reduce_scatter @grads[0, 256] -> @grad_shard[0] over ["dp"] {purpose = "gradients"}
// TP:      sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// TP-NEXT: sched.all_reduce @state[6, 1] over ["tp"] {purpose = "gradient norm", reduce = "sum"}
// TP-NEXT: sched.update
// Pipeline parallelism (Inputs/pipeline.plan): each stage's ranks run their part in a
// sched.on region, on buffers of their stage only (`stage = k`). GPipe (data 2 × pipeline 2,
// 2 micro-batches per step): stage 0 runs every forward and sends each activation on, then
// every backward from the gradient the last stage sends back; the last stage keeps each
// micro-batch's input (stash: 2 × 64 floats) and runs its backward, which starts from the
// loss. The tied embedding's gradient (wte, 128 floats, at offset 0 of both stages) is summed
// over "pp" before the gradients over "dp"; the loss and the norm's partial sums over "pp".
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry gpipe | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=GPIPE
// GPIPE:      sched.buffer @params_s0 {floats = 1120 : i64, lifetime = "persistent", stage = 0 : i64}
// GPIPE:      sched.buffer @act_s0 {floats = 64 : i64, lifetime = "step", stage = 0 : i64}
// GPIPE:      sched.buffer @stash_s1 {floats = 128 : i64, lifetime = "step", stage = 1 : i64}
// GPIPE:      sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// GPIPE:      sched.on "pp" = 0 {
// GPIPE-NEXT:   sched.fill @grads_s0[0, 1120] = 0.000000e+00
// GPIPE-NEXT:   sched.forward %[[STEP:[^,]*]], %[[M0:[^ ]*]] stage 0 params @params_s0 out @act_s0[0]
// GPIPE-NEXT:   sched.send @act_s0[0, 64] to 1 along "pp" {purpose = "activations"}
// GPIPE-NEXT:   sched.forward %[[STEP]], %[[M1:[^ ]*]] stage 0 params @params_s0 out @act_s0[0]
// GPIPE-NEXT:   sched.send @act_s0[0, 64] to 1 along "pp" {purpose = "activations"}
// GPIPE-NEXT:   sched.recv @cot_s0[0, 64] from 1 along "pp" {purpose = "activation gradients"}
// GPIPE-NEXT:   sched.backward %[[STEP]], %[[M0]] stage 0 params @params_s0 grads @grads_s0 state @state cotangent @cot_s0[0]
// GPIPE-NEXT:   sched.recv @cot_s0[0, 64] from 1 along "pp" {purpose = "activation gradients"}
// GPIPE-NEXT:   sched.backward %[[STEP]], %[[M1]] stage 0 params @params_s0 grads @grads_s0 state @state cotangent @cot_s0[0]
// GPIPE-NEXT:   sched.all_reduce @grads_s0[0, 128] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// GPIPE-NEXT:   sched.all_reduce @grads_s0[0, 1120] over ["dp"] {purpose = "gradients", reduce = "sum"}
// GPIPE-NEXT: }
// GPIPE-NEXT: sched.on "pp" = 1 {
// GPIPE-NEXT:   sched.fill @grads_s1[0, 1088] = 0.000000e+00
// GPIPE-NEXT:   sched.recv @stash_s1[0, 64] from 0 along "pp" {purpose = "activations"}
// GPIPE-NEXT:   sched.recv @stash_s1[64, 64] from 0 along "pp" {purpose = "activations"}
// GPIPE-NEXT:   sched.backward %[[STEP]], %[[M0]] stage 1 params @params_s1 grads @grads_s1 state @state in @stash_s1[0] dinput @dinput_s1[0]
// GPIPE-NEXT:   sched.send @dinput_s1[0, 64] to 0 along "pp" {purpose = "activation gradients"}
// GPIPE-NEXT:   sched.backward %[[STEP]], %[[M1]] stage 1 params @params_s1 grads @grads_s1 state @state in @stash_s1[64] dinput @dinput_s1[0]
// GPIPE-NEXT:   sched.send @dinput_s1[0, 64] to 0 along "pp" {purpose = "activation gradients"}
// GPIPE-NEXT:   sched.all_reduce @grads_s1[0, 128] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// GPIPE-NEXT:   sched.all_reduce @grads_s1[0, 1088] over ["dp"] {purpose = "gradients", reduce = "sum"}
// GPIPE-NEXT: }
// GPIPE-NEXT: sched.all_reduce @state[7, 1] over ["pp"] {purpose = "loss", reduce = "sum"}
// GPIPE-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// GPIPE:      sched.all_reduce @state[6, 1] over ["pp"] {purpose = "gradient norm", reduce = "sum"}
// 1F1B over three stages (ZeRO-1 over "dp", 4 micro-batches): the middle stage fills the
// pipeline with one forward, then sends each activation while it receives the gradient of an
// earlier one (sched.send_recv) and sends each input gradient back while it receives the next
// input; it keeps at most 2 inputs (its stash: 2 × 64 floats, slots reused), and adds zeros to
// the tied embedding's all-reduce, which it does not hold.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry onef | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=ONEF
// ONEF:      sched.buffer @tied_s1 {floats = 128 : i64, lifetime = "step", stage = 1 : i64}
// ONEF:      sched.buffer @stash_s1 {floats = 128 : i64, lifetime = "step", stage = 1 : i64}
// ONEF:      sched.buffer @stash_s2 {floats = 64 : i64, lifetime = "step", stage = 2 : i64}
// ONEF:      sched.on "pp" = 1 {
// ONEF-NEXT:   sched.fill @grad_shard_s1[0, 464] = 0.000000e+00
// ONEF-NEXT:   sched.fill @grads_s1[0, 928] = 0.000000e+00
// ONEF-NEXT:   sched.recv @stash_s1[0, 64] from 0 along "pp" {purpose = "activations"}
// ONEF-NEXT:   sched.forward %[[STEP:[^,]*]], %[[M0:[^ ]*]] stage 1 params @params_s1 in @stash_s1[0] out @act_s1[0]
// ONEF-NEXT:   sched.send @act_s1[0, 64] to 2 along "pp" {purpose = "activations"}
// ONEF-NEXT:   sched.recv @stash_s1[64, 64] from 0 along "pp" {purpose = "activations"}
// ONEF-NEXT:   sched.forward %[[STEP]], %{{[^ ]*}} stage 1 params @params_s1 in @stash_s1[64] out @act_s1[0]
// ONEF-NEXT:   sched.send_recv @act_s1[0, 64] to 2, @cot_s1[0, 64] from 2 along "pp" {purpose = "activations / activation gradients"}
// ONEF-NEXT:   sched.backward %[[STEP]], %[[M0]] stage 1 params @params_s1 grads @grads_s1 state @state in @stash_s1[0] cotangent @cot_s1[0] dinput @dinput_s1[0]
// ONEF-NEXT:   sched.send_recv @dinput_s1[0, 64] to 0, @stash_s1[0, 64] from 0 along "pp" {purpose = "activation gradients / activations"}
// ONEF:        sched.send @dinput_s1[0, 64] to 0 along "pp" {purpose = "activation gradients"}
// ONEF-NEXT:   sched.recv @cot_s1[0, 64] from 2 along "pp" {purpose = "activation gradients"}
// ONEF-NEXT:   sched.backward
// ONEF-NEXT:   sched.send @dinput_s1[0, 64] to 0 along "pp" {purpose = "activation gradients"}
// ONEF-NEXT:   sched.fill @tied_s1[0, 128] = 0.000000e+00
// ONEF-NEXT:   sched.all_reduce @tied_s1[0, 128] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// ONEF-NEXT:   sched.reduce_scatter @grads_s1[0, 384] -> @grad_shard_s1[0] over ["dp"] {purpose = "gradients"}
// ONEF:      sched.on "pp" = 2 {
// ONEF-NEXT:   sched.fill
// ONEF-NEXT:   sched.fill
// ONEF-NEXT:   sched.recv @stash_s2[0, 64] from 1 along "pp" {purpose = "activations"}
// ONEF-NEXT:   sched.backward %{{.*}} stage 2 params @params_s2 grads @grads_s2 state @state in @stash_s2[0] dinput @dinput_s2[0]
// ONEF-NEXT:   sched.send_recv @dinput_s2[0, 64] to 1, @stash_s2[0, 64] from 1 along "pp" {purpose = "activation gradients / activations"}
// ONEF:      sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// ONEF-NEXT: sched.all_reduce @state[6, 1] over ["pp"] {purpose = "gradient norm", reduce = "sum"}
// ONEF-NEXT: sched.on "pp" = 0 {
// ONEF-NEXT:   sched.update
// ONEF-NEXT:   sched.all_gather @param_shard_s0[0, 480] -> @params_s0[0] over ["dp"] {purpose = "updated parameters"}
// ZeRO-3 with a pipeline (data 2 x pipeline 2, 1F1B), as FSDP under torchtitan's pipelines:
// each stage gathers its parameters once, before its first forward pass, and frees them after
// its last backward pass; its whole gradient accumulates over the micro-batches and, after the
// tied embedding's sum over "pp", is reduce-scattered once and freed. The update then reads
// only this rank's shards, and planc_gather gathers each stage's own for evaluation.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry zero3 | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=Z3PP
// Z3PP:      sched.buffer @params_s0 {floats = 1120 : i64, lifetime = "transient", stage = 0 : i64}
// Z3PP-NEXT: sched.buffer @grads_s0 {floats = 1120 : i64, lifetime = "transient", stage = 0 : i64}
// Z3PP:      sched.on "pp" = 0 {
// Z3PP-NEXT:   sched.fill @grad_shard_s0[0, 560] = 0.000000e+00
// Z3PP-NEXT:   sched.alloc @params_s0
// Z3PP-NEXT:   sched.all_gather @param_shard_s0[0, 480] -> @params_s0[0] over ["dp"] {purpose = "parameters"}
// Z3PP-NEXT:   sched.all_gather @param_shard_s0[480, 80] -> @params_s0[960] over ["dp"] {purpose = "parameters"}
// Z3PP-NEXT:   sched.alloc @grads_s0
// Z3PP-NEXT:   sched.fill @grads_s0[0, 1120] = 0.000000e+00
// Z3PP-NEXT:   sched.forward
// Z3PP:        sched.backward %{{.*}}, %{{.*}} stage 0
// Z3PP-NEXT:   sched.recv @cot_s0[0, 64] from 1 along "pp" {purpose = "activation gradients"}
// Z3PP-NEXT:   sched.backward %{{.*}}, %{{.*}} stage 0
// Z3PP-NEXT:   sched.free @params_s0
// Z3PP-NEXT:   sched.all_reduce @grads_s0[0, 128] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// Z3PP-NEXT:   sched.reduce_scatter @grads_s0[0, 480] -> @grad_shard_s0[0] over ["dp"] {purpose = "gradients"}
// Z3PP-NEXT:   sched.reduce_scatter @grads_s0[960, 80] -> @grad_shard_s0[480] over ["dp"] {purpose = "gradients"}
// Z3PP-NEXT:   sched.free @grads_s0
// Z3PP-NEXT: }
// Z3PP:      sched.on "pp" = 1 {
// Z3PP:        sched.update %{{.*}} [@param_shard_s1, @param_shard_s1, @grad_shard_s1
// Z3PP-NOT:    sched.all_gather
// Z3PP:      func.func @planc_gather
// Z3PP-NEXT:   sched.on "pp" = 0 {
// Z3PP-NEXT:     sched.alloc @params_s0
// Z3PP:        sched.on "pp" = 1 {
// Z3PP-NEXT:     sched.alloc @params_s1
// Z3PP:      func.func @planc_release
// Z3PP-NEXT:   sched.on "pp" = 0 {
// Z3PP-NEXT:     sched.free @params_s0
// Z3PP-NEXT:   }
// Z3PP-NEXT:   sched.on "pp" = 1 {
// Z3PP-NEXT:     sched.free @params_s1
// keep: activations (data 2 x pipeline 2, 1F1B, 2 micro-batches): stage 0's forward pass
// writes what its backward pass reads (1,024 floats a micro-batch: the manifest's `saved`)
// into the micro-batch's slot of @saved_s0, as many slots as micro-batches in flight, and
// its backward pass starts from the same slot; the last stage, whose backward pass follows
// its forward pass at once, keeps nothing.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry keep | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=KEEP
// KEEP:      sched.buffer @saved_s0 {floats = 2048 : i64, lifetime = "step", stage = 0 : i64}
// KEEP-NOT:  @saved_s1
// KEEP:      sched.forward %[[STEP:[^,]*]], %[[M0:[^ ]*]] stage 0 params @params_s0 out @act_s0[0] saved @saved_s0[0]
// KEEP:      sched.forward %[[STEP]], %[[M1:[^ ]*]] stage 0 params @params_s0 out @act_s0[0] saved @saved_s0[1024]
// KEEP:      sched.backward %[[STEP]], %[[M0]] stage 0 {{.*}} cotangent @cot_s0[0] saved @saved_s0[0]
// KEEP:      sched.backward %[[STEP]], %[[M1]] stage 0 {{.*}} cotangent @cot_s0[0] saved @saved_s0[1024]
// KEEP:      sched.backward %[[STEP]], %[[M0]] stage 1 {{.*}} dinput @dinput_s1[0]{{$}}
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry keep | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=KEEPM
// KEEPM:      \22saved\22:1024
// KEEPM-SAME: \22saved\22:0
// Parameters shared across stages (Inputs/shared-weights.mlir: "w" by stages 0 and 1, "e" by
// stages 0 and 2): one all-reduce over "pp" per shared parameter, in the same order on every
// stage; a stage that lacks one adds zeros from its `tied` buffer.
// RUN: planc-opt %S/Inputs/shared-weights.mlir -plan-schedule -sched-check-deadlock -plan-emit-manifest | FileCheck %s --check-prefix=SHARED
// SHARED:      sched.on "pp" = 0 {
// SHARED:        sched.all_reduce @grads_s0[16, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// SHARED-NEXT:   sched.all_reduce @grads_s0[0, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// SHARED:      sched.on "pp" = 1 {
// SHARED:        sched.fill @tied_s1[0, 16] = 0.000000e+00
// SHARED-NEXT:   sched.all_reduce @grads_s1[0, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// SHARED-NEXT:   sched.all_reduce @tied_s1[0, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// SHARED:      sched.on "pp" = 2 {
// SHARED:        sched.fill @tied_s2[0, 16] = 0.000000e+00
// SHARED-NEXT:   sched.all_reduce @tied_s2[0, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// SHARED-NEXT:   sched.all_reduce @grads_s2[16, 16] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// planc explain predicts the same collectives (training::dataCollectives): per step, the
// calls and the bytes one rank sends in a ring of 4 (all-gather and reduce-scatter 3/4 of the
// full buffer, all-reduce 2 × 3/4).
// RUN: planc explain %S/Inputs/layouts.plan --entry z2 | FileCheck %s --check-prefix=EXPLAIN2
// RUN: planc explain %S/Inputs/layouts.plan --entry z3 | FileCheck %s --check-prefix=EXPLAIN3

// The flat layout (training::flatLayout), parameters in argument order wte.weight [10, 4],
// ln.weight [4], ln.bias [4], head.weight [4, 10], head.bias [10]; each parameter starts at a
// multiple of 16 floats, each group's span is padded to a multiple of 16 × d floats (d the
// data-parallel size):
//   group 0 (matrices): wte.weight 40 at 0, head.weight 40 at 48, ending at 88 → 96;
//     d = 1: 96; d = 2: 96 (3 × 32); d = 4: 128 (2 × 64).
//   group 1 (vectors), from the end of group 0: ln.weight at +0, ln.bias at +16,
//     head.bias at +32, ending at +42 → +48; d = 1: 48; d = 2: 64; d = 4: 64.
// So d = 1: [0, 96) + [96, 144), 144 floats; d = 2: [0, 96) + [96, 160), 160 floats, pieces
// 48 + 32 = 80 per rank; d = 4: [0, 128) + [128, 192), 192 floats, pieces 32 + 16 = 48.

// One device: no collectives, no shards; the update's pieces are the whole groups of the
// full buffers (offsets 0 and 96).
// ONE: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,96],[96,144]],
// ONE-SAME: \22num_floats\22:144,
// ONE-SAME: \22schedule\22:{\22buffers\22:[{\22floats\22:144,\22lifetime\22:\22persistent\22,\22name\22:\22params\22},{\22floats\22:144,\22lifetime\22:\22step\22,\22name\22:\22grads\22},{\22floats\22:144,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22},{\22floats\22:144,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq\22},{\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22}],
// ONE-SAME: \22grad_grads\22:\22grads\22,\22grad_params\22:\22params\22,\22master\22:\22params\22,\22sharded\22:false},
// ONE-SAME: \22train\22:{\22accumulation\22:2,
// ONE-NEXT: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 1>}
// ONE-NEXT: sched.buffer @params {floats = 144 : i64, lifetime = "persistent"}
// ONE-NEXT: sched.buffer @grads {floats = 144 : i64, lifetime = "step"}
// ONE-NEXT: sched.buffer @exp_avg {floats = 144 : i64, lifetime = "persistent"}
// ONE-NEXT: sched.buffer @exp_avg_sq {floats = 144 : i64, lifetime = "persistent"}
// ONE-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// ONE-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
// ONE-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// ONE-NEXT: sched.fill @grads[0, 144] = 0.000000e+00
// ONE-NEXT: sched.micro_loop 2 {
// ONE-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// ONE-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// ONE-NEXT: }
// ONE-NEXT: sched.sumsq [@grads, @grads] [0, 96] state @state
// ONE-NEXT: sched.update %[[STEP]] [@params, @params, @grads, @grads, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 96, 0, 96, 0, 96, 0, 96] state @state
// ONE-NEXT: return
// ONE-NEXT: }
// ONE-NEXT: func.func @planc_gather(%{{[^:]*}}: !llvm.ptr {sched.context}) {
// ONE-NEXT: return
// ONE-NEXT: }
// ONE-NEXT: func.func @planc_release(%{{[^:]*}}: !llvm.ptr {sched.context}) {
// ONE-NEXT: return
// ONE-NEXT: }
// ONE-NEXT: }

// DDP on 4 ranks: full buffers on every rank; after the micro-batch loop one all-reduce (sum)
// of the whole gradient buffer (planc_grad pre-divided it by 2 × 4), the mean loss; every
// rank then holds the global gradients, so the sum of squares needs no reduction.
// DDP: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,128],[128,192]],
// DDP-SAME: \22num_floats\22:192,
// DDP-SAME: \22schedule\22:{\22buffers\22:[{\22floats\22:192,\22lifetime\22:\22persistent\22,\22name\22:\22params\22},{\22floats\22:192,\22lifetime\22:\22step\22,\22name\22:\22grads\22},{\22floats\22:192,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22},{\22floats\22:192,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq\22},{\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22}],
// DDP-SAME: \22master\22:\22params\22,\22sharded\22:false},
// DDP-NEXT: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
// DDP-NEXT: sched.buffer @params {floats = 192 : i64, lifetime = "persistent"}
// DDP-NEXT: sched.buffer @grads {floats = 192 : i64, lifetime = "step"}
// DDP-NEXT: sched.buffer @exp_avg {floats = 192 : i64, lifetime = "persistent"}
// DDP-NEXT: sched.buffer @exp_avg_sq {floats = 192 : i64, lifetime = "persistent"}
// DDP-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// DDP-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
// DDP-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// DDP-NEXT: sched.fill @grads[0, 192] = 0.000000e+00
// DDP-NEXT: sched.micro_loop 2 {
// DDP-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// DDP-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// DDP-NEXT: }
// DDP-NEXT: sched.all_reduce @grads[0, 192] over ["dp"] {purpose = "gradients", reduce = "sum"}
// DDP-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// DDP-NEXT: sched.sumsq [@grads, @grads] [0, 128] state @state
// DDP-NEXT: sched.update %[[STEP]] [@params, @params, @grads, @grads, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 128, 0, 128, 0, 128, 0, 128] state @state
// DDP-NEXT: return
// DDP-NEXT: }
// DDP-NEXT: func.func @planc_gather(
// DDP-NEXT: return
// DDP-NEXT: }
// DDP-NEXT: func.func @planc_release(
// DDP-NEXT: return

// ZeRO-1 on 2 ranks: the moments and the master parameters are this rank's pieces (48 floats
// of group 0 then 32 of group 1: shard buffers of 80); the full gradients accumulate over the
// micro-batches, then one reduce-scatter per group: group 0's [0, 96) as 2 blocks of 48 into
// grad_shard[0, 48), group 1's [96, 160) as 2 blocks of 32 into grad_shard[48, 80). The
// partial sums of squares are all-reduced (sum) for the global norm; after the update each
// group's piece is all-gathered back into the full parameters at the group's offset.
// Z1: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,96],[96,160]],
// Z1-SAME: \22num_floats\22:160,
// Z1-SAME: \22schedule\22:{\22buffers\22:[{\22floats\22:160,\22lifetime\22:\22persistent\22,\22name\22:\22params\22},{\22floats\22:160,\22lifetime\22:\22step\22,\22name\22:\22grads\22},{\22floats\22:80,\22lifetime\22:\22persistent\22,\22name\22:\22param_shard\22},{\22floats\22:80,\22lifetime\22:\22step\22,\22name\22:\22grad_shard\22},{\22floats\22:80,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22},{\22floats\22:80,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq\22},{\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22}],
// Z1-SAME: \22grad_grads\22:\22grads\22,\22grad_params\22:\22params\22,\22master\22:\22param_shard\22,\22sharded\22:true},
// Z1-NEXT: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 2>}
// Z1-NEXT: sched.buffer @params {floats = 160 : i64, lifetime = "persistent"}
// Z1-NEXT: sched.buffer @grads {floats = 160 : i64, lifetime = "step"}
// Z1-NEXT: sched.buffer @param_shard {floats = 80 : i64, lifetime = "persistent"}
// Z1-NEXT: sched.buffer @grad_shard {floats = 80 : i64, lifetime = "step"}
// Z1-NEXT: sched.buffer @exp_avg {floats = 80 : i64, lifetime = "persistent"}
// Z1-NEXT: sched.buffer @exp_avg_sq {floats = 80 : i64, lifetime = "persistent"}
// Z1-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// Z1-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
// Z1-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// Z1-NEXT: sched.fill @grad_shard[0, 80] = 0.000000e+00
// Z1-NEXT: sched.fill @grads[0, 160] = 0.000000e+00
// Z1-NEXT: sched.micro_loop 2 {
// Z1-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// Z1-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// Z1-NEXT: }
// Z1-NEXT: sched.reduce_scatter @grads[0, 48] -> @grad_shard[0] over ["dp"] {purpose = "gradients"}
// Z1-NEXT: sched.reduce_scatter @grads[96, 32] -> @grad_shard[48] over ["dp"] {purpose = "gradients"}
// Z1-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// Z1-NEXT: sched.sumsq [@grad_shard, @grad_shard] [0, 48] state @state
// Z1-NEXT: sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// Z1-NEXT: sched.update %[[STEP]] [@param_shard, @param_shard, @grad_shard, @grad_shard, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 48, 0, 48, 0, 48, 0, 48] state @state
// Z1-NEXT: sched.all_gather @param_shard[0, 48] -> @params[0] over ["dp"] {purpose = "updated parameters"}
// Z1-NEXT: sched.all_gather @param_shard[48, 32] -> @params[96] over ["dp"] {purpose = "updated parameters"}
// Z1-NEXT: return
// Z1-NEXT: }
// Z1-NEXT: func.func @planc_gather(
// Z1-NEXT: return
// Z1-NEXT: }
// Z1-NEXT: func.func @planc_release(
// Z1-NEXT: return

// ZeRO-2 on 4 ranks: the full gradients live only within a micro-step (transient): each
// micro-step allocates and zeroes them, runs the gradient function and reduce-scatters them,
// accumulating, into this rank's gradient shard (group 0's [0, 128) as 4 blocks of 32 into
// grad_shard[0, 32), group 1's [128, 192) as 4 blocks of 16 into grad_shard[32, 48)), then
// frees them. Shard buffers of 48.
// Z2: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,128],[128,192]],
// Z2-SAME: \22num_floats\22:192,
// Z2-SAME: \22schedule\22:{\22buffers\22:[{\22floats\22:192,\22lifetime\22:\22persistent\22,\22name\22:\22params\22},{\22floats\22:192,\22lifetime\22:\22transient\22,\22name\22:\22grads\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22param_shard\22},{\22floats\22:48,\22lifetime\22:\22step\22,\22name\22:\22grad_shard\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq\22},{\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22}],
// Z2-SAME: \22master\22:\22param_shard\22,\22sharded\22:true},
// Z2-NEXT: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
// Z2-NEXT: sched.buffer @params {floats = 192 : i64, lifetime = "persistent"}
// Z2-NEXT: sched.buffer @grads {floats = 192 : i64, lifetime = "transient"}
// Z2-NEXT: sched.buffer @param_shard {floats = 48 : i64, lifetime = "persistent"}
// Z2-NEXT: sched.buffer @grad_shard {floats = 48 : i64, lifetime = "step"}
// Z2-NEXT: sched.buffer @exp_avg {floats = 48 : i64, lifetime = "persistent"}
// Z2-NEXT: sched.buffer @exp_avg_sq {floats = 48 : i64, lifetime = "persistent"}
// Z2-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// Z2-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
// Z2-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// Z2-NEXT: sched.fill @grad_shard[0, 48] = 0.000000e+00
// Z2-NEXT: sched.micro_loop 2 {
// Z2-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// Z2-NEXT: sched.alloc @grads
// Z2-NEXT: sched.fill @grads[0, 192] = 0.000000e+00
// Z2-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// Z2-NEXT: sched.reduce_scatter @grads[0, 32] -> @grad_shard[0] over ["dp"] {accumulate, purpose = "gradients"}
// Z2-NEXT: sched.reduce_scatter @grads[128, 16] -> @grad_shard[32] over ["dp"] {accumulate, purpose = "gradients"}
// Z2-NEXT: sched.free @grads
// Z2-NEXT: }
// Z2-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// Z2-NEXT: sched.sumsq [@grad_shard, @grad_shard] [0, 32] state @state
// Z2-NEXT: sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// Z2-NEXT: sched.update %[[STEP]] [@param_shard, @param_shard, @grad_shard, @grad_shard, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 32, 0, 32, 0, 32, 0, 32] state @state
// Z2-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "updated parameters"}
// Z2-NEXT: sched.all_gather @param_shard[32, 16] -> @params[128] over ["dp"] {purpose = "updated parameters"}
// Z2-NEXT: return
// Z2-NEXT: }
// Z2-NEXT: func.func @planc_gather(
// Z2-NEXT: return
// Z2-NEXT: }
// Z2-NEXT: func.func @planc_release(
// Z2-NEXT: return

// ZeRO-3 on 4 ranks: the full parameters are transient too: each micro-step gathers them from
// the shards before the gradient function and frees them after it; nothing is gathered after
// the update. planc_gather / planc_release bracket evaluation with the same gathers.
// Z3: @planc_manifest("{\22format\22:\22planc-train-1\22,\22groups\22:{{\[\[}}0,128],[128,192]],
// Z3-SAME: \22num_floats\22:192,
// Z3-SAME: \22schedule\22:{\22buffers\22:[{\22floats\22:192,\22lifetime\22:\22transient\22,\22name\22:\22params\22},{\22floats\22:192,\22lifetime\22:\22transient\22,\22name\22:\22grads\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22param_shard\22},{\22floats\22:48,\22lifetime\22:\22step\22,\22name\22:\22grad_shard\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg\22},{\22floats\22:48,\22lifetime\22:\22persistent\22,\22name\22:\22exp_avg_sq\22},{\22floats\22:8,\22lifetime\22:\22persistent\22,\22name\22:\22state\22}],
// Z3-SAME: \22grad_grads\22:\22grads\22,\22grad_params\22:\22params\22,\22master\22:\22param_shard\22,\22sharded\22:true},
// Z3-SAME: \22zero\22:3}}\00")
// Z3-NEXT: sched.mesh @mesh {axes = ["dp"], sizes = array<i64: 4>}
// Z3-NEXT: sched.buffer @params {floats = 192 : i64, lifetime = "transient"}
// Z3-NEXT: sched.buffer @grads {floats = 192 : i64, lifetime = "transient"}
// Z3-NEXT: sched.buffer @param_shard {floats = 48 : i64, lifetime = "persistent"}
// Z3-NEXT: sched.buffer @grad_shard {floats = 48 : i64, lifetime = "step"}
// Z3-NEXT: sched.buffer @exp_avg {floats = 48 : i64, lifetime = "persistent"}
// Z3-NEXT: sched.buffer @exp_avg_sq {floats = 48 : i64, lifetime = "persistent"}
// Z3-NEXT: sched.buffer @state {floats = 8 : i64, lifetime = "persistent"}
// Z3-NEXT: func.func @planc_step(%{{[^:]*}}: !llvm.ptr {sched.context}, %[[STEP:[^:]*]]: i64) {
// Z3-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// Z3-NEXT: sched.fill @grad_shard[0, 48] = 0.000000e+00
// Z3-NEXT: sched.micro_loop 2 {
// Z3-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// Z3-NEXT: sched.alloc @params
// Z3-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "parameters"}
// Z3-NEXT: sched.all_gather @param_shard[32, 16] -> @params[128] over ["dp"] {purpose = "parameters"}
// Z3-NEXT: sched.alloc @grads
// Z3-NEXT: sched.fill @grads[0, 192] = 0.000000e+00
// Z3-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// Z3-NEXT: sched.free @params
// Z3-NEXT: sched.reduce_scatter @grads[0, 32] -> @grad_shard[0] over ["dp"] {accumulate, purpose = "gradients"}
// Z3-NEXT: sched.reduce_scatter @grads[128, 16] -> @grad_shard[32] over ["dp"] {accumulate, purpose = "gradients"}
// Z3-NEXT: sched.free @grads
// Z3-NEXT: }
// Z3-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// Z3-NEXT: sched.sumsq [@grad_shard, @grad_shard] [0, 32] state @state
// Z3-NEXT: sched.all_reduce @state[6, 1] over ["dp"] {purpose = "gradient norm", reduce = "sum"}
// Z3-NEXT: sched.update %[[STEP]] [@param_shard, @param_shard, @grad_shard, @grad_shard, @exp_avg, @exp_avg, @exp_avg_sq, @exp_avg_sq] [0, 32, 0, 32, 0, 32, 0, 32] state @state
// Z3-NEXT: return
// Z3-NEXT: }
// Z3-NEXT: func.func @planc_gather(%{{[^:]*}}: !llvm.ptr {sched.context}) {
// Z3-NEXT: sched.alloc @params
// Z3-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "parameters (evaluation)"}
// Z3-NEXT: sched.all_gather @param_shard[32, 16] -> @params[128] over ["dp"] {purpose = "parameters (evaluation)"}
// Z3-NEXT: return
// Z3-NEXT: }
// Z3-NEXT: func.func @planc_release(%{{[^:]*}}: !llvm.ptr {sched.context}) {
// Z3-NEXT: sched.free @params
// Z3-NEXT: return
// Z3-NEXT: }
// Z3-NEXT: }

// ZeRO-1 over two data axes (dp 2 × dq 2 = 4 ranks, the same layout as d = 4): every
// collective spans both axes.
// Z1X2: \22mesh\22:{\22axes\22:[\22dp\22,\22dq\22],\22data\22:[\22dp\22,\22dq\22],\22name\22:\22dp2x2\22,\22per_node\22:4,\22sizes\22:[2,2],\22tensor\22:\22\22},
// Z1X2: sched.mesh @mesh {axes = ["dp", "dq"], sizes = array<i64: 2, 2>}
// Z1X2: sched.buffer @param_shard {floats = 48 : i64, lifetime = "persistent"}
// Z1X2: sched.micro_loop 2 {
// Z1X2-NEXT: ^bb0(
// Z1X2-NEXT: sched.grad
// Z1X2-NEXT: }
// Z1X2-NEXT: sched.reduce_scatter @grads[0, 32] -> @grad_shard[0] over ["dp", "dq"] {purpose = "gradients"}
// Z1X2-NEXT: sched.reduce_scatter @grads[128, 16] -> @grad_shard[32] over ["dp", "dq"] {purpose = "gradients"}
// Z1X2-NEXT: sched.all_reduce @state[7, 1] over ["dp", "dq"] {purpose = "loss", reduce = "mean"}
// Z1X2-NEXT: sched.sumsq [@grad_shard, @grad_shard] [0, 32] state @state
// Z1X2-NEXT: sched.all_reduce @state[6, 1] over ["dp", "dq"] {purpose = "gradient norm", reduce = "sum"}
// Z1X2-NEXT: sched.update
// Z1X2-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp", "dq"] {purpose = "updated parameters"}
// Z1X2-NEXT: sched.all_gather @param_shard[32, 16] -> @params[128] over ["dp", "dq"] {purpose = "updated parameters"}
// Z1X2-NEXT: return

// ZeRO-2 in explain: 2 micro-steps × 2 reduce-scatters of the 192-float (768-byte) gradients,
// 3/4 × 768 = 576 bytes per micro-step, 1152 in all; 2 all-gathers, 576 bytes; the loss and
// the norm: 2 × 3/4 × 4 = 6 bytes each.
// EXPLAIN2: reduce_scatter  data      gradients {{ *}}1.12 KiB       4 calls
// EXPLAIN2-NEXT: all_gather      data      updated parameters {{ *}}576 B       2 calls
// EXPLAIN2-NEXT: all_reduce      data      loss {{ *}}6 B       1 calls
// EXPLAIN2-NEXT: all_reduce      data      gradient norm {{ *}}6 B       1 calls
// ZeRO-3: the parameters gathered once per micro-step (forward and backward share a gather
// on the CPU target), 2 calls each time.
// EXPLAIN3: all_gather      data      parameters {{ *}}1.12 KiB       4 calls
// EXPLAIN3-NEXT: reduce_scatter  data      gradients {{ *}}1.12 KiB       4 calls
// EXPLAIN3-NEXT: all_reduce      data      loss {{ *}}6 B       1 calls
// EXPLAIN3-NEXT: all_reduce      data      gradient norm {{ *}}6 B       1 calls

// DDP with gradient buckets (bucket = 256 B, plan-train-abi's plan.grad_buckets): the last
// micro-batch runs outside the loop, its sched.grad gives one event per bucket, and each
// bucket's ranges are all-reduced as it fires, in the order the backward pass finishes them:
// bucket 0 = head.weight [48, 128) and head.bias [160, 192) (448 bytes), bucket 1 = wte
// [0, 48), ln.weight and ln.bias [128, 160). The wait comes before anything reads the
// gradients; the whole-gradient all-reduce is gone.
// DDPB-LABEL: func.func @planc_step(
// DDPB-SAME: %[[STEP:[^:]*]]: i64
// DDPB-NEXT: sched.fill @state[7, 1] = 0.000000e+00
// DDPB-NEXT: sched.fill @grads[0, 192] = 0.000000e+00
// DDPB-NEXT: sched.micro_loop 1 {
// DDPB-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// DDPB-NEXT: sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state
// DDPB-NEXT: }
// DDPB-NEXT: %[[LAST:.*]] = arith.constant 1 : i64
// DDPB-NEXT: %[[B:.*]]:2 = sched.grad %[[STEP]], %[[LAST]] params @params grads @grads state @state -> !sched.event, !sched.event
// DDPB-NEXT: %[[R0:.*]] = sched.all_reduce_start @grads[48, 80] over ["dp"] after %[[B]]#0 {purpose = "gradients", reduce = "sum"}
// DDPB-NEXT: %[[R1:.*]] = sched.all_reduce_start @grads[160, 32] over ["dp"] after %[[B]]#0 {purpose = "gradients", reduce = "sum"}
// DDPB-NEXT: %[[R2:.*]] = sched.all_reduce_start @grads[0, 48] over ["dp"] after %[[B]]#1 {purpose = "gradients", reduce = "sum"}
// DDPB-NEXT: %[[R3:.*]] = sched.all_reduce_start @grads[128, 32] over ["dp"] after %[[B]]#1 {purpose = "gradients", reduce = "sum"}
// DDPB-NEXT: sched.wait %[[R0]], %[[R1]], %[[R2]], %[[R3]]
// DDPB-NEXT: sched.all_reduce @state[7, 1] over ["dp"] {purpose = "loss", reduce = "mean"}
// DDPB-NEXT: sched.sumsq [@grads, @grads] [0, 128] state @state

// ZeRO-3 with parameter buckets (bucket = 128 B, plan-train-abi's plan.param_buckets, in the
// order the forward pass first reads them: wte [0, 48), ln [128, 160), head.weight [48, 128),
// head.bias [160, 192)): each micro-batch allocates the parameters by parts and hands the
// slices of the two groups' all-gathers (group 0 [0, 128) from the shard's [0, 32), group 1
// [128, 192) from [32, 16)) to its sched.grad, which waits for them; then the same ranges
// again for the backward pass (plan.param_regather), in the order it reads them: head.weight,
// ln, then wte and head.bias, which it does not read. The whole-group gathers are gone
// from the step (not from evaluation's planc_gather). The gradients are held by parts and
// reduce-scattered bucket by bucket as the backward pass finishes them (plan.grad_buckets:
// head.bias, head.weight, ln, wte), each added to the shard (accumulate).
// Z3B-LABEL: func.func @planc_step(
// Z3B-SAME: %[[STEP:[^:]*]]: i64
// Z3B: sched.micro_loop 2 {
// Z3B-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// Z3B-NEXT: sched.alloc @params parts
// Z3B-NEXT: %[[P0:.*]] = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [0, 48] for bucket 0 {purpose = "parameters (forward)"}
// Z3B-NEXT: %[[P1:.*]] = sched.all_gather_start @param_shard[32, 16] -> @params[128] over ["dp"] slice [128, 32] for bucket 1 {purpose = "parameters (forward)"}
// Z3B-NEXT: %[[P2:.*]] = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [48, 80] for bucket 2 {purpose = "parameters (forward)"}
// Z3B-NEXT: %[[P3:.*]] = sched.all_gather_start @param_shard[32, 16] -> @params[128] over ["dp"] slice [160, 32] for bucket 3 {purpose = "parameters (forward)"}
// Z3B-NEXT: %[[P4:.*]] = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [48, 80] for bucket 4 {purpose = "parameters (backward)"}
// Z3B-NEXT: %[[P5:.*]] = sched.all_gather_start @param_shard[32, 16] -> @params[128] over ["dp"] slice [128, 32] for bucket 5 {purpose = "parameters (backward)"}
// Z3B-NEXT: %[[P6:.*]] = sched.all_gather_start @param_shard[0, 32] -> @params[0] over ["dp"] slice [0, 48] for bucket 6 {purpose = "parameters (backward)"}
// Z3B-NEXT: %[[P7:.*]] = sched.all_gather_start @param_shard[32, 16] -> @params[128] over ["dp"] slice [160, 32] for bucket 7 {purpose = "parameters (backward)"}
// Z3B-NEXT: sched.alloc @grads parts
// Z3B-NEXT: %[[G:.*]]:4 = sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state gathered %[[P0]], %[[P1]], %[[P2]], %[[P3]], %[[P4]], %[[P5]], %[[P6]], %[[P7]] -> !sched.event, !sched.event, !sched.event, !sched.event
// Z3B-NEXT: %[[R0:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [160, 32] after %[[G]]#0 {accumulate, purpose = "gradients"}
// Z3B-NEXT: %[[R1:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [48, 80] after %[[G]]#1 {accumulate, purpose = "gradients"}
// Z3B-NEXT: %[[R2:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [128, 32] after %[[G]]#2 {accumulate, purpose = "gradients"}
// Z3B-NEXT: %[[R3:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [0, 48] after %[[G]]#3 {accumulate, purpose = "gradients"}
// Z3B-NEXT: sched.wait %[[R0]], %[[R1]], %[[R2]], %[[R3]]
// Z3B-NEXT: sched.free @params
// Z3B-NEXT: sched.free @grads
// Z3B-NEXT: }
// Z3B-NOT: sched.all_gather @
// Z3B: func.func @planc_gather(
// Z3B-NEXT: sched.alloc @params
// Z3B-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "parameters (evaluation)"}

// ZeRO-2 with gradient buckets (bucket = 256 B): every micro-batch's buckets are
// reduce-scattered into the shard and added to it as its backward pass finishes them; the
// gradient is held by parts, never whole (no fill: it is zeroed as allocated).
// Z2B-LABEL: func.func @planc_step(
// Z2B-SAME: %[[STEP:[^:]*]]: i64
// Z2B: sched.micro_loop 2 {
// Z2B-NEXT: ^bb0(%[[I:[^:]*]]: i64):
// Z2B-NEXT: sched.alloc @grads parts
// Z2B-NEXT: %[[G:.*]]:2 = sched.grad %[[STEP]], %[[I]] params @params grads @grads state @state -> !sched.event, !sched.event
// Z2B-NEXT: %[[R0:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [48, 80] after %[[G]]#0 {accumulate, purpose = "gradients"}
// Z2B-NEXT: %[[R1:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [160, 32] after %[[G]]#0 {accumulate, purpose = "gradients"}
// Z2B-NEXT: %[[R2:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [0, 48] after %[[G]]#1 {accumulate, purpose = "gradients"}
// Z2B-NEXT: %[[R3:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [128, 32] after %[[G]]#1 {accumulate, purpose = "gradients"}
// Z2B-NEXT: sched.wait %[[R0]], %[[R1]], %[[R2]], %[[R3]]
// Z2B-NEXT: sched.free @grads
// Z2B-NEXT: }
// Z2B-NOT: sched.reduce_scatter @
// Z2B: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "updated parameters"}

// ZeRO-1 with gradient buckets (bucket = 256 B): the DDP buckets' peeled last micro-batch and
// events, each bucket's ranges cut at the optimizer groups into slices of the two groups'
// reduce-scatters (group 0 [0, 128) into the shard's [0, 32), group 1 [128, 192) into
// [32, 48)), then the wait; the whole-group reduce-scatters are gone, the gathers of the
// updated parameters stay.
// Z1B-LABEL: func.func @planc_step(
// Z1B-SAME: %[[STEP:[^:]*]]: i64
// Z1B: %[[B:.*]]:2 = sched.grad %[[STEP]], %{{.*}} params @params grads @grads state @state -> !sched.event, !sched.event
// Z1B-NEXT: %[[R0:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [48, 80] after %[[B]]#0 {purpose = "gradients"}
// Z1B-NEXT: %[[R1:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [160, 32] after %[[B]]#0 {purpose = "gradients"}
// Z1B-NEXT: %[[R2:.*]] = sched.reduce_scatter_start @grads[0, 32] -> @grad_shard[0] over ["dp"] slice [0, 48] after %[[B]]#1 {purpose = "gradients"}
// Z1B-NEXT: %[[R3:.*]] = sched.reduce_scatter_start @grads[128, 16] -> @grad_shard[32] over ["dp"] slice [128, 32] after %[[B]]#1 {purpose = "gradients"}
// Z1B-NEXT: sched.wait %[[R0]], %[[R1]], %[[R2]], %[[R3]]
// Z1B-NOT: sched.reduce_scatter @
// Z1B: sched.update
// Z1B-NEXT: sched.all_gather @param_shard[0, 32] -> @params[0] over ["dp"] {purpose = "updated parameters"}
// The zero-bubble schedule (ZB-H1) over three stages, 4 micro-batches: 1F1B's passes and
// transfers, each stage but the first's backward pass an input pass that writes what its
// weight pass reads to a slot of wsaved (the middle stage: 2 slots of 1024 floats), and
// the weight passes (sched.wgrad) where schedule::zeroBubbleOrders puts them: after the
// steady state's send_recv when the stage holds 3 micro-batches, and in the cool-down
// before the receive of the next gradient, which they fill.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry zb | planc-opt -plan-emit-manifest | FileCheck %s --check-prefix=ZB
// ZB:      sched.buffer @wsaved_s1 {floats = 2048 : i64, lifetime = "step", stage = 1 : i64}
// ZB:      sched.on "pp" = 1 {
// ZB:        sched.backward %[[STEP:[^,]*]], %[[M0:[^ ]*]] stage 1 {{.*}} wsaved @wsaved_s1[0]
// ZB-NEXT:   sched.send_recv @dinput_s1[0, 64] to 0, @stash_s1[0, 64] from 0
// ZB-NEXT:   sched.forward
// ZB-NEXT:   sched.send_recv
// ZB-NEXT:   sched.backward %[[STEP]], %[[M1:[^ ]*]] stage 1 {{.*}} wsaved @wsaved_s1[1024]
// ZB-NEXT:   sched.send_recv @dinput_s1[0, 64] to 0, @stash_s1[64, 64] from 0
// ZB-NEXT:   sched.wgrad %[[STEP]], %[[M0]] stage 1 params @params_s1 grads @grads_s1 state @state wsaved @wsaved_s1[0]
// ZB-NEXT:   sched.forward
// ZB-NEXT:   sched.send_recv
// ZB-NEXT:   sched.backward %[[STEP]], %[[M2:[^ ]*]] stage 1 {{.*}} wsaved @wsaved_s1[0]
// ZB-NEXT:   sched.send @dinput_s1[0, 64] to 0
// ZB-NEXT:   sched.wgrad %[[STEP]], %[[M1]] stage 1 {{.*}} wsaved @wsaved_s1[1024]
// ZB-NEXT:   sched.wgrad %[[STEP]], %[[M2]] stage 1 {{.*}} wsaved @wsaved_s1[0]
// ZB-NEXT:   sched.recv @cot_s1[0, 64] from 2
// ZB-NEXT:   sched.backward %[[STEP]], %[[M3:[^ ]*]] stage 1 {{.*}} wsaved @wsaved_s1[1024]
// ZB-NEXT:   sched.send @dinput_s1[0, 64] to 0
// ZB-NEXT:   sched.wgrad %[[STEP]], %[[M3]] stage 1 {{.*}} wsaved @wsaved_s1[1024]
// The first stage's backward passes stay whole: no weight pass, no wsaved.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry zb | FileCheck %s --check-prefix=ZB0
// ZB0-NOT:  @wsaved_s0
// ZB0:      sched.on "pp" = 0 {
// ZB0-NOT:    sched.wgrad
// ZB0:      sched.on "pp" = 1 {

// The interleaved schedule, 4 stages over the 2 ranks of "pp" (2 micro-batches): rank r
// holds stages r and r + 2, its parameters in one flat layout (@params_s<r>) that each of its
// stages' passes reads; each stage's own buffers (@stash_s<k>, …) are its rank's. Rank 0
// runs stage 0's forwards, then stage 2's on the inputs rank 1 sends back, whose backward
// passes come before stage 0's; the last stage (3, on rank 1) runs no forward pass of its
// own. Each transfer is placed where its data is made (schedule::pipelineProgram), so a
// receive may come before the pass that reads it: stage 2 keeps 2 inputs.
// RUN: planc emit %S/Inputs/pipeline.plan --stage sched --entry interleaved | FileCheck %s --check-prefix=ILV
// ILV:      sched.buffer @params_s0 {floats = 2048 : i64, lifetime = "persistent", stage = 0 : i64}
// ILV:      sched.buffer @params_s1 {floats = 2016 : i64, lifetime = "persistent", stage = 1 : i64}
// ILV:      sched.buffer @act_s0 {floats = 64 : i64, lifetime = "step", stage = 0 : i64}
// ILV:      sched.buffer @stash_s2 {floats = 128 : i64, lifetime = "step", stage = 0 : i64}
// ILV:      sched.buffer @stash_s3 {floats = 64 : i64, lifetime = "step", stage = 1 : i64}
// ILV-NOT:  sched.buffer @act_s3
// ILV:      sched.on "pp" = 0 {
// ILV-NEXT:   sched.fill @grads_s0[0, 2048]
// ILV-NEXT:   sched.forward %[[STEP:[^,]*]], %[[M0:[^ ]*]] stage 0 params @params_s0 out @act_s0[0]
// ILV-NEXT:   sched.send @act_s0[0, 64] to 1
// ILV-NEXT:   sched.forward %[[STEP]], %[[M1:[^ ]*]] stage 0 params @params_s0 out @act_s0[0]
// ILV-NEXT:   sched.send @act_s0[0, 64] to 1
// ILV-NEXT:   sched.recv @stash_s2[0, 64] from 1
// ILV-NEXT:   sched.forward %[[STEP]], %[[M0]] stage 2 params @params_s0 in @stash_s2[0] out @act_s2[0]
// ILV-NEXT:   sched.recv @stash_s2[64, 64] from 1
// ILV-NEXT:   sched.send @act_s2[0, 64] to 1
// ILV-NEXT:   sched.forward %[[STEP]], %[[M1]] stage 2 params @params_s0 in @stash_s2[64] out @act_s2[0]
// ILV-NEXT:   sched.send @act_s2[0, 64] to 1
// ILV-NEXT:   sched.recv @cot_s2[0, 64] from 1
// ILV-NEXT:   sched.backward %[[STEP]], %[[M0]] stage 2 params @params_s0 grads @grads_s0 state @state in @stash_s2[0] cotangent @cot_s2[0] dinput @dinput_s2[0]
// ILV:        sched.backward %[[STEP]], %[[M1]] stage 2
// ILV:        sched.backward %[[STEP]], %[[M0]] stage 0 params @params_s0 grads @grads_s0 state @state cotangent @cot_s0[0]
// ILV:        sched.backward %[[STEP]], %[[M1]] stage 0
// ILV-NEXT:   sched.all_reduce @grads_s0[0, 128] over ["pp"] {purpose = "tied-parameter gradients", reduce = "sum"}
// ILV:      sched.on "pp" = 1 {
// ILV-NOT:    stage 3 params @params_s1 in @stash_s3[0] out
// ILV:        sched.backward %[[STEP]], %[[M0]] stage 3 params @params_s1 grads @grads_s1 state @state in @stash_s3[0] dinput @dinput_s3[0]
// ILV:        sched.all_reduce @grads_s1[768, 128] over ["pp"]
