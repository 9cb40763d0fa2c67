#!/usr/bin/env bash
# Same math on every layout: tiny trained 20 steps on one process (accumulation 1) and
# under each parallel layout on MPI ranks — accumulation 4 on one rank, DDP, ZeRO-1, 2 and 3
# on 4 ranks (with accumulation 2 where a stage reduces per micro-batch), DDP and ZeRO-1
# gradient and ZeRO-3 parameter buckets (bitwise equal to the same layout without), ZeRO-3 on 2 ranks
# and ZeRO-2 on 8 (oversubscribed), ZeRO-2 over two data axes [dp: 2, dq: 2]; recompute full
# and selective on one process (bitwise equal) and on 4 ranks; tensor parallelism (TP 2 and
# 4, data 2 × tensor 2 with ZeRO-1 and selective recompute, data 2 × tensor 4 with ZeRO-3 on
# 8 ranks, TP 2 with accumulation 4 and full recompute; the same with sequence parallelism);
# pipeline parallelism (GPipe and 1F1B, alone and times data, tensor and tensor + sequence,
# data 2 x tensor 2 x pipeline 2 on 8 ranks, evaluation through the pipeline; ZeRO-2 and 3
# with 2 and 4 stages; keep: activations, bitwise keep: inputs, on tiny and a small llama);
# and ZeRO-1,
# data 2 × tensor 2 and pipeline 2 in
# bf16, ZeRO-1 in fp16, against one process of the same precision. Each layout's per-step
# loss must match the single-process run within rtol 1e-5 (TESTING.md; 2e-2 for bf16 and
# fp16), and the bytes the runtime counts per step, by collective, must equal
# `planc explain --json`'s prediction exactly. A pipeline run also writes its memory trace
# (PLANRT_MEM_TRACE), whose rows must add up to the peak its log reports.
#
#   test/e2e/layouts.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf *.jsonl *.plan exe_* *.explain.json
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null

source "$ROOT/test/e2e/dp_plan.sh"
# plan NAME DEVICES MICRO ZERO [PRECISION [RECOMPUTE [TENSOR [SEQUENCE [STAGES [SCHEDULE]]]]]]:
# build, predict, run 20 steps (DEVICES data-parallel × TENSOR tensor-parallel × STAGES
# pipeline ranks; dp_plan.sh's run_layout).
plan() { run_layout "$@"; }

# eval_vs_one LABEL RANKS ONE LAYOUT MICRO [DP_PLAN ARGS AFTER STEPS…]: one process (ONE) and a
# layout on RANKS processes (LAYOUT, dp_plan's arguments after STEPS, on EVAL_DATA data ranks,
# 1 by default, with ZeRO stage EVAL_ZERO, 0; ONE's micro-batches EVAL_DATA times as large),
# both evaluating every 10 steps on 2 batches of the same windows: their validation losses
# must agree within 1e-5.
eval_vs_one() {
  local label=$1 ranks=$2 one=$3 layout=$4 micro=$5
  shift 5
  dp_plan "$one" 1 $(( micro * ${EVAL_DATA:-1} )) 0 20
  dp_plan "$layout" "${EVAL_DATA:-1}" "$micro" "${EVAL_ZERO:-0}" 20 "$@"
  for name in "$one" "$layout"; do
    sed -i "s|^  data .*|&\\n  val       = tokens(\"$WORK/data/val.bin\")\\n  eval      { every: 10, batches: 2 }|" $name.plan
    "$PLANC" build $name.plan -o exe_$name
  done
  "./exe_$one" --log "$one.jsonl" --quiet
  "$MPIRUN" -n "$ranks" "./exe_$layout" --log "$layout.jsonl" --quiet
  "$PY" - "$one.jsonl" "$layout.jsonl" "$label" <<'PYEOF'
import json, sys
val = lambda f: [json.loads(l)["val_loss"] for l in open(f) if '"val_loss"' in l]
one, other, label = val(sys.argv[1]), val(sys.argv[2]), sys.argv[3]
worst = max(abs(a - b) / a for a, b in zip(one, other)) if one else 1
if len(one) != 2 or len(other) != 2 or worst > 1e-5:
    sys.exit(f"layouts: FAIL: validation losses under {label} {other} vs one process {one}")
print(f"evaluation under {label}: {len(other)} validation losses within {worst:.2e} of one process")
PYEOF
}
plan single 1 8 0
plan accum4 1 2 0
plan ddp 4 2 0
plan zero1 4 1 1
plan zero2 4 1 2
plan zero3 4 1 3
plan zero3_dp2 2 2 3
plan zero2_dp8 8 1 2
# DDP gradient buckets of 16 KiB (the tiny model's 471 KiB of gradients: 10 buckets, 19 ranges), each
# all-reduced as the last micro-batch's backward pass finishes it: without accumulation, and
# with 2 micro-batches; and under tensor parallelism 2.
BUCKET="16 KiB" plan ddp_buckets 4 2 0
BUCKET="16 KiB" plan ddp_buckets_accum2 4 1 0
BUCKET="16 KiB" plan dp2_tp2_buckets 2 4 0 fp32 none 2
# ZeRO-3 parameter buckets of 16 KiB (19 slices of the all-gathers), each started a bucket
# ahead of the forward pass's first read, freed after its last and gathered again for the
# backward pass; the gradients reduce-scattered bucket by bucket as the backward pass
# finishes them: on 4 ranks, and on 2 with 2 micro-batches.
BUCKET="16 KiB" plan zero3_buckets 4 1 3
BUCKET="16 KiB" plan zero3_dp2_buckets 2 2 3
# ZeRO-2 gradient buckets: every micro-batch's gradient reduce-scattered bucket by bucket and
# added to the shard, never held whole: on 4 ranks, and on 2 with 2 micro-batches.
BUCKET="16 KiB" plan zero2_buckets 4 1 2
plan zero2_dp2 2 2 2
BUCKET="16 KiB" plan zero2_dp2_buckets 2 2 2
# ZeRO-1 gradient buckets: the same 16 KiB buckets reduce-scattered (19 slices) as the last
# micro-batch's backward pass finishes them; and under tensor parallelism 2.
BUCKET="16 KiB" plan zero1_buckets 4 1 1
BUCKET="16 KiB" plan dp2_tp2_zero1_buckets 2 4 1 fp32 none 2
"$PY" "$ROOT/test/e2e/compare_layouts.py" single accum4 ddp zero1 zero2 zero3 zero3_dp2 zero2_dp8 \
  ddp_buckets ddp_buckets_accum2 dp2_tp2_buckets zero3_buckets zero3_dp2_buckets zero1_buckets \
  dp2_tp2_zero1_buckets zero2_buckets zero2_dp2 zero2_dp2_buckets
# Buckets change when the data moves, not what is computed: the same losses as the
# whole-buffer collectives, bit for bit, and the schedule has the buckets.
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 ddp ddp_buckets
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 zero1 zero1_buckets
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 zero2 zero2_buckets
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 zero2_dp2 zero2_dp2_buckets
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 zero3 zero3_buckets
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 zero3_dp2 zero3_dp2_buckets
[[ $("$PLANC" emit ddp_buckets.plan --stage sched | grep -c 'sched.all_reduce_start @grads') -eq 19 ]] ||
  { echo "layouts: FAIL: ddp_buckets.plan's schedule lacks its bucket all-reduces"; exit 1; }
[[ $("$PLANC" emit zero1_buckets.plan --stage sched | grep -c 'sched.reduce_scatter_start @grads') -eq 19 ]] ||
  { echo "layouts: FAIL: zero1_buckets.plan's schedule lacks its bucket reduce-scatters"; exit 1; }
[[ $("$PLANC" emit zero2_buckets.plan --stage sched | grep -c 'sched.reduce_scatter_start @grads.*accumulate') -eq 19 ]] ||
  { echo "layouts: FAIL: zero2_buckets.plan's schedule lacks its accumulating bucket reduce-scatters"; exit 1; }
# ZeRO-3's buckets: 19 slices gathered for the forward pass and the same 19 again for the
# backward pass, so that a step all-gathers twice what it reduce-scatters (the ZeRO paper's
# 1.5x DDP). Held by parts, a bucket at a time, the parameters (ZeRO-3) and the gradient
# (ZeRO-2 and 3) lower the device peak: by at least what is gathered less the two largest
# parameter buckets, and the gradient less its three largest buckets (what is held at once).
[[ $("$PLANC" emit zero3_buckets.plan --stage sched | grep -c 'sched.all_gather_start @param_shard') -eq 38 ]] ||
  { echo "layouts: FAIL: zero3_buckets.plan's schedule lacks its bucket all-gathers, forward and backward"; exit 1; }
for z in zero2 zero3; do "$PLANC" emit ${z}_buckets.plan --stage sched > ${z}_buckets.sched.mlir; done
"$PY" - <<'PYEOF'
import json, re
log = lambda f: [json.loads(l) for l in open(f) if '"mem_device_peak_bytes"' in l]
peak = lambda f: max(r["mem_device_peak_bytes"] for r in log(f))
def largest(ir, pattern, k):
    sizes = {}
    for size, b in re.findall(pattern, ir):
        sizes[int(b)] = sizes.get(int(b), 0) + int(size)
    return sum(sorted(sizes.values())[-k:])
for z in ("zero2", "zero3"):
    ir = open(f"{z}_buckets.sched.mlir").read()
    whole = int(re.search(r"sched.buffer @grads \{floats = (\d+)", ir).group(1))
    # The gradient buckets: the slices each event of sched.grad starts.
    grads = largest(ir, r"sched.reduce_scatter_start @grads\[\d+, \d+\] -> @grad_shard\[\d+\] over \[[^]]*\] slice \[\d+, (\d+)\] after %\d+#(\d+)", 3)
    want = 4 * (whole - grads)
    if z == "zero3":
        want += 4 * (whole - largest(ir, r"slice \[\d+, (\d+)\] for bucket (\d+)", 2))
    fall = peak(f"{z}.jsonl") - peak(f"{z}_buckets.jsonl")
    if fall < want:
        raise SystemExit(f"layouts: FAIL: {z} with buckets holds {fall} bytes less than without, expected at least {want}")
    print(f"{z} buckets: device peak {fall} bytes below whole buffers (at least {want}: all but the buckets held at once)")
PYEOF
# Two data axes: ZeRO-2 over a [dp: 2, dq: 2] mesh, the batch split over both.
cat > zero2_2axes.plan <<EOF
import "models/gpt.plan"
mesh m2x2 {
  devices = cpu(4)
  axes    = [dp: 2, dq: 2]
}
train zero2_2axes {
  model     = tiny
  mesh      = m2x2
  data      = tokens("$WORK/data/train.bin")
  batch     = 8
  micro     = 1
  seq       = 32
  parallel { data = [dp, dq]  zero = 2 }
  optimizer = adamw(lr: 2e-3, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1)
  schedule  = cosine(warmup: 4, min_lr: 1e-4)
  clip      = 1.0
  steps     = 20
  seed      = 11
}
EOF
"$PLANC" build zero2_2axes.plan -o exe_zero2_2axes
"$PLANC" explain zero2_2axes.plan --json > zero2_2axes.explain.json
"$MPIRUN" -n 4 ./exe_zero2_2axes --log zero2_2axes.jsonl --quiet
"$PY" "$ROOT/test/e2e/compare_layouts.py" single zero2_2axes
# Recompute, full (every layer from its input) and selective (attention and the activations
# feeding a matmul), on one process and with DDP and ZeRO-2 on 4 ranks. On one process the
# recomputed values are the same kernels on the same inputs: the losses must be bitwise equal.
plan single_full 1 8 0 fp32 full
plan single_selective 1 8 0 fp32 selective
plan ddp_selective 4 2 0 fp32 selective
plan zero2_full 4 1 2 fp32 full
"$PY" "$ROOT/test/e2e/compare_layouts.py" single single_full single_selective ddp_selective zero2_full
"$PY" - single.jsonl single_full.jsonl single_selective.jsonl <<'PYEOF'
import json, sys
loss = lambda f: [json.loads(l)["loss"] for l in open(f) if '"loss"' in l]
ref = loss(sys.argv[1])
for f in sys.argv[2:]:
    if loss(f) != ref:
        sys.exit(f"layouts: FAIL: {f}: recompute changed the losses on one process: {loss(f)} vs {ref}")
print(f"recompute full and selective: {len(ref)} losses bitwise equal to no recompute")
# And they hold less: the step's peak of generated buffers (mem_peak_bytes) falls.
peak = lambda f: max(json.loads(l)["mem_peak_bytes"] for l in open(f) if '"loss"' in l)
none, full, selective = (peak(f) for f in sys.argv[1:4])
if not full < selective < none:
    sys.exit(f"layouts: FAIL: step buffers peak none {none}, selective {selective}, full {full} bytes")
print(f"step buffers peak: none {none / 2**20:.2f} MiB, selective {selective / 2**20:.2f}, full {full / 2**20:.2f}")
PYEOF
# Tensor parallelism (Megatron: heads, MLP and vocabulary split, nn-tensor-parallel): TP = 2
# and 4 alone, data 2 × tensor 2 under ZeRO-1 and ZeRO-3 (8 ranks oversubscribed for the
# latter's 2 × 4), TP = 2 with accumulation 4 and full recompute, and with selective recompute.
plan tp2 1 8 0 fp32 none 2
plan tp4 1 8 0 fp32 none 4
plan dp2_tp2_zero1 2 4 1 fp32 none 2
plan dp2_tp4_zero3 2 4 3 fp32 none 4
plan tp2_accum4_full 1 2 0 fp32 full 2
plan dp2_tp2_selective 2 4 0 fp32 selective 2
# Sequence parallelism with it (norms, residuals and position embeddings on a slice of the
# sequence; gathers before and reduce-scatters after the tensor-parallel blocks): TP 2, data 2
# × tensor 2 under ZeRO-1, 2 (accumulation 2: the replicated gradients summed per micro-batch)
# and 3 with full recompute, TP 4 with selective recompute, TP 2 with accumulation 4 and full.
plan tp2_sp 1 8 0 fp32 none 2 true
plan dp2_tp2_sp_zero1 2 4 1 fp32 none 2 true
plan tp4_sp_selective 1 8 0 fp32 selective 4 true
plan tp2_sp_accum4_full 1 2 0 fp32 full 2 true
plan dp2_tp2_sp_zero2 2 2 2 fp32 none 2 true
plan dp2_tp2_sp_zero3 2 4 3 fp32 full 2 true
"$PY" "$ROOT/test/e2e/compare_layouts.py" single tp2 tp4 dp2_tp2_zero1 dp2_tp4_zero3 tp2_accum4_full dp2_tp2_selective \
  tp2_sp dp2_tp2_sp_zero1 tp4_sp_selective tp2_sp_accum4_full dp2_tp2_sp_zero2 dp2_tp2_sp_zero3
# Evaluation under tensor parallelism (collectives inside the forward pass; no data axis to
# reduce over): the validation losses of TP 2 + SP equal those of one process.
eval_vs_one "TP 2 + SP" 2 single_eval tp2_sp_eval 8 fp32 none 2 true
# Pipeline parallelism (two stages over "pp"; each stage's backward computes its forward again
# from the input it kept): GPipe and 1F1B alone (4 micro-batches), with data 2 under DDP and
# ZeRO-1, with TP 2 and TP 2 + SP (selective recompute), with accumulation 8 and full
# recompute, and data 2 x tensor 2 x pipeline 2 on 8 ranks (oversubscribed).
plan pp2_gpipe 1 2 0 fp32 none 1 false 2 gpipe
plan pp2_1f1b 1 2 0 fp32 none 1 false 2 1f1b
plan dp2_pp2 2 2 0 fp32 none 1 false 2 1f1b
plan dp2_pp2_zero1 2 1 1 fp32 none 1 false 2 gpipe
plan tp2_pp2 1 4 0 fp32 none 2 false 2 1f1b
plan tp2_sp_pp2_selective 1 4 0 fp32 selective 2 true 2 gpipe
plan pp2_accum8_full 1 1 0 fp32 full 1 false 2 1f1b
plan dp2_tp2_pp2 2 2 1 fp32 none 2 false 2 1f1b
"$PY" "$ROOT/test/e2e/compare_layouts.py" single pp2_gpipe pp2_1f1b dp2_pp2 dp2_pp2_zero1 tp2_pp2 tp2_sp_pp2_selective \
  pp2_accum8_full dp2_tp2_pp2
# PLANRT_MEM_TRACE: what each rank holds at its peak; rank 0's total is the peak its log
# reports, and its rows (grouped blocks, committed parts) add up to that total.
rm -f trace.txt trace.txt.rank1
PLANRT_MEM_TRACE="$WORK/trace.txt" "$MPIRUN" -n 2 ./exe_pp2_accum8_full --log trace.jsonl --quiet
"$PY" - trace.txt trace.txt.rank1 trace.jsonl <<'PYEOF'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")]
total = int(open(sys.argv[1]).readline().split(": ")[1].split()[0])
peak = max(json.loads(l)["mem_device_peak_bytes"] for l in open(sys.argv[3]) if '"loss"' in l)
summed = sum(int(r[0]) for r in rows)
assert total == peak == summed, f"layouts: FAIL: trace total {total}, log peak {peak}, rows {summed}"
assert open(sys.argv[2]).readline().startswith("# planrt memory at its peak"), "layouts: FAIL: no rank 1 trace"
print(f"memory trace: rank 0 holds {total} B at its peak in {len(rows)} rows, as its log says")
PYEOF
# ZeRO-2 and 3 with a pipeline (a stage's gradient reduce-scattered once, after its last
# backward pass; ZeRO-3's parameters gathered once, before its first forward pass): data 2 x
# pipeline 2 under 1F1B and GPipe, with tensor 2 + SP and selective recompute on 8 ranks; and
# on a 4-layer tiny, 4 stages alone and times data 2 with ZeRO-2 and ZeRO-3 (8 ranks).
plan dp2_pp2_zero2 2 2 2 fp32 none 1 false 2 1f1b
plan dp2_pp2_zero3 2 1 3 fp32 none 1 false 2 gpipe
plan dp2_tp2_sp_pp2_zero3 2 2 3 fp32 selective 2 true 2 1f1b
"$PY" "$ROOT/test/e2e/compare_layouts.py" single dp2_pp2_zero2 dp2_pp2_zero3 dp2_tp2_sp_pp2_zero3
LAYERS=4 plan single_l4 1 8 0
LAYERS=4 plan pp4 1 2 0 fp32 none 1 false 4 1f1b
LAYERS=4 plan dp2_pp4_zero2 2 1 2 fp32 none 1 false 4 gpipe
LAYERS=4 plan dp2_pp4_zero3 2 1 3 fp32 none 1 false 4 1f1b
"$PY" "$ROOT/test/e2e/compare_layouts.py" single_l4 pp4 dp2_pp4_zero2 dp2_pp4_zero3
# keep: activations (each stage but the last keeps what its backward pass reads, per
# micro-batch in flight, instead of computing its forward again): 1F1B and GPipe, tensor 2 +
# SP with selective recompute (its forward collectives not repeated), full recompute (only
# the layers' inputs kept), ZeRO-3 over data 2, and 4 stages; each bitwise the same layout
# keeping its inputs where there is one, and within 1e-5 of one process.
KEEP=activations plan pp2_1f1b_keep 1 2 0 fp32 none 1 false 2 1f1b
KEEP=activations plan pp2_gpipe_keep 1 2 0 fp32 none 1 false 2 gpipe
KEEP=activations plan tp2_sp_pp2_selective_keep 1 4 0 fp32 selective 2 true 2 gpipe
KEEP=activations plan pp2_accum8_full_keep 1 1 0 fp32 full 1 false 2 1f1b
KEEP=activations plan dp2_pp2_zero3_keep 2 1 3 fp32 none 1 false 2 gpipe
"$PY" "$ROOT/test/e2e/compare_layouts.py" single pp2_1f1b_keep pp2_gpipe_keep tp2_sp_pp2_selective_keep \
  pp2_accum8_full_keep dp2_pp2_zero3_keep
for keep in pp2_1f1b pp2_gpipe tp2_sp_pp2_selective pp2_accum8_full dp2_pp2_zero3; do
  "$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 $keep ${keep}_keep
done
LAYERS=4 KEEP=activations plan pp4_keep 1 2 0 fp32 none 1 false 4 1f1b
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 pp4 pp4_keep
# The backward pass reads the forward pass's values: a stage before the last runs no forward
# op in its backward entry point (only their gradients).
"$PLANC" emit pp2_1f1b_keep.plan --stage llvm > pp2_1f1b_keep.ll
awk '/llvm.func @planc_bwd_s0\(/{on=1} on{print} on && /^  }/{exit}' pp2_1f1b_keep.ll > bwd_s0.ll
if grep -q "planrt_k_sdpa(\|planrt_k_layernorm(" bwd_s0.ll || ! grep -q "planrt_k_sdpa_bwd\|planrt_k_layernorm_bwd" bwd_s0.ll; then
  echo "layouts: FAIL: keep: activations's planc_bwd_s0 computes the forward pass again"; exit 1
fi
# Evaluation through the pipeline (each stage's forward, the activations sent on, the last
# stage's losses summed over "pp"): the validation losses of one process with the same
# micro-batches.
eval_vs_one "PP 2" 2 single_eval_m2 pp2_eval 2 fp32 none 1 false 2 1f1b
# And under ZeRO-3 over data 2 (each stage's parameters gathered by planc_gather).
EVAL_DATA=2 EVAL_ZERO=3 eval_vs_one "data 2 x PP 2, ZeRO-3" 4 single_eval_dp2 dp2_pp2_zero3_eval 1 fp32 none 1 false 2 1f1b
# And keeping activations (evaluation's forward passes write into the schedule's first slot).
KEEP=activations eval_vs_one "PP 2, keep: activations" 2 single_eval_m2k pp2_keep_eval 2 fp32 none 1 false 2 1f1b
# The same on a small stdlib llama (grouped-query attention with 4 query and 2 key/value
# heads split per block, SwiGLU's gate and up sharing one input gather, RMSNorm, rotary
# positions, an untied column-parallel head): TP 2 and TP 2 + SP against one process.
llama_plan() {  # NAME DEVICES PARALLEL: over the axis tp (pp with PIPELINE set, micro 2)
  local axis=tp micro=8
  [[ -n ${PIPELINE:-} ]] && { axis=pp; micro=2; }
  cat > "$1.plan" <<EOF
import "models/llama.plan"
model small_llama = llama(vocab: 256, depth: 2, heads: 4, kv_heads: 2, width: 64, hidden: 128)
mesh m_$1 { devices = cpu($2)  axes = [$axis: $2] }
train $1 {
  model = small_llama  mesh = m_$1  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = $micro  seq = 32
  parallel { $3 }
  optimizer = adamw(lr: 2e-3, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1)
  schedule = cosine(warmup: 4, min_lr: 1e-4)
  clip = 1.0  steps = 20  seed = 11
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1"
  "$PLANC" explain "$1.plan" --json > "$1.explain.json"
}
llama_plan llama_single 1 "replicate = [tp]"
llama_plan llama_tp2 2 "tensor = tp"
llama_plan llama_tp2_sp 2 "tensor = tp  sequence = true"
./exe_llama_single --log llama_single.jsonl --quiet
"$MPIRUN" -n 2 ./exe_llama_tp2 --log llama_tp2.jsonl --quiet
"$MPIRUN" -n 2 ./exe_llama_tp2_sp --log llama_tp2_sp.jsonl --quiet
"$PY" "$ROOT/test/e2e/compare_layouts.py" llama_single llama_tp2 llama_tp2_sp
# A 2-stage pipeline of it keeping activations (RMSNorm, rotary positions, grouped-query
# attention and SwiGLU cut where the backward pass starts): bitwise the one keeping inputs.
PIPELINE=1 llama_plan llama_pp2 2 "pipeline = pp(stages: 2)"
PIPELINE=1 llama_plan llama_pp2_keep 2 "pipeline = pp(stages: 2, keep: activations)"
"$MPIRUN" -n 2 ./exe_llama_pp2 --log llama_pp2.jsonl --quiet
"$MPIRUN" -n 2 ./exe_llama_pp2_keep --log llama_pp2_keep.jsonl --quiet
"$PY" "$ROOT/test/e2e/compare_layouts.py" llama_single llama_pp2 llama_pp2_keep
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 llama_pp2 llama_pp2_keep
# bf16 (emulated: f32 master weights and buffers): a layout against the one-process bf16 run,
# data-parallel and, as the language reference's tiny_3d, data 2 × tensor 2 under ZeRO-1,
# without and with sequence parallelism.
plan single_bf16 1 8 0 bf16
plan zero1_bf16 4 1 1 bf16
plan dp2_tp2_bf16 2 4 1 bf16 none 2
plan dp2_tp2_sp_bf16 2 4 1 bf16 none 2 true
plan pp2_bf16 1 2 0 bf16 none 1 false 2 1f1b
KEEP=activations plan pp2_bf16_keep 1 2 0 bf16 none 1 false 2 1f1b
# ZeRO-3 buckets in bf16: each bucket's parameters read and rounded again as the backward
# pass gathers it again, so only the gathered buckets' rounded copies are held.
BUCKET="16 KiB" plan zero3_dp2_buckets_bf16 2 2 3 bf16
# Recompute in bf16 (through the roundings: the layers' spans and the GELUs), full on one
# process and under ZeRO-3, and selective and full with ZeRO-3 buckets.
plan single_bf16_full 1 8 0 bf16 full
plan zero3_dp2_bf16_full 2 2 3 bf16 full
BUCKET="16 KiB" plan zero3_dp2_buckets_bf16_full 2 2 3 bf16 full
BUCKET="16 KiB" plan zero3_buckets_bf16_selective 4 1 3 bf16 selective
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 2e-2 single_bf16 zero1_bf16 dp2_tp2_bf16 dp2_tp2_sp_bf16 pp2_bf16 \
  pp2_bf16_keep zero3_dp2_buckets_bf16 single_bf16_full zero3_dp2_bf16_full zero3_dp2_buckets_bf16_full \
  zero3_buckets_bf16_selective
# Recompute gives the same values: bit for bit the losses without it.
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 single_bf16 single_bf16_full
# fp16 with dynamic loss scaling: the scale and the skip decision follow the reduced norm.
plan single_fp16 1 8 0 fp16
plan zero1_fp16 4 1 1 fp16
plan dp2_pp2_fp16 2 1 1 fp16 none 1 false 2 1f1b
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 2e-2 single_fp16 zero1_fp16 dp2_pp2_fp16
