#!/usr/bin/env bash
# The zero-bubble pipeline schedule (`schedule: zb`, ZB-H1): each stage but the first runs
# its backward pass as an input pass and, later, a weight pass. Same math as one process
# (rtol 1e-5 over 20 steps, TESTING.md) on 2 and 4 stages, with data parallelism, ZeRO-2 and
# ZeRO-3, tensor parallelism with sequence parallelism, recompute, both `keep`s and fp16;
# the bytes each collective moves per step equal `planc explain --json`'s (compare_layouts.py).
# The order of passes is checked in the sched IR: weight passes after their input passes,
# one per micro-batch, and on stage 0 none.
#
#   test/e2e/zero_bubble.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf *.jsonl *.plan exe_* *.explain.json
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
source "$ROOT/test/e2e/dp_plan.sh"
# plan NAME DEVICES MICRO ZERO [PRECISION [RECOMPUTE [TENSOR [SEQUENCE [STAGES [SCHEDULE]]]]]]:
# dp_plan.sh's run_layout, schedule zb unless given.
plan() { DEFAULT_SCHEDULE=zb run_layout "$@"; }
plan single 1 8 0
plan pp2_zb 1 2 0 fp32 none 1 false 2
plan pp2_zb_m8 1 1 0 fp32 none 1 false 2
KEEP=inputs plan pp2_zb_inputs 1 2 0 fp32 none 1 false 2
plan dp2_pp2_zb_zero2 2 2 2 fp32 none 1 false 2
plan dp2_pp2_zb_zero3 2 1 3 fp32 none 1 false 2
plan tp2_sp_pp2_zb_selective 1 4 0 fp32 selective 2 true 2
KEEP=inputs plan tp2_pp2_zb_inputs 1 4 0 fp32 none 2 false 2
"$PY" "$ROOT/test/e2e/compare_layouts.py" single pp2_zb pp2_zb_m8 dp2_pp2_zb_zero2 dp2_pp2_zb_zero3 \
  tp2_sp_pp2_zb_selective pp2_zb_inputs tp2_pp2_zb_inputs
# fp16 with its loss scale (the last stage's weight pass reads it too), against one
# process in fp16 (TESTING.md: 2e-2).
plan single_fp16 1 8 0 fp16
plan pp2_zb_fp16 1 2 0 fp16 none 1 false 2
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 2e-2 single_fp16 pp2_zb_fp16
LAYERS=4 plan single_l4 1 8 0
LAYERS=4 plan pp4_zb 1 1 0 fp32 none 1 false 4
LAYERS=4 plan dp2_pp4_zb_zero3 2 1 3 fp32 none 1 false 4
LAYERS=4 plan pp4_zb_full 1 2 0 fp32 full 1 false 4
"$PY" "$ROOT/test/e2e/compare_layouts.py" single_l4 pp4_zb dp2_pp4_zb_zero3 pp4_zb_full
# The middle stages in bf16 with selective recompute (their input pass starts from the
# saved values, and writes what the weight pass reads), against one process in bf16.
LAYERS=4 plan single_l4_bf16 1 8 0 bf16
LAYERS=4 plan pp4_zb_bf16_selective 1 1 0 bf16 selective 1 false 4
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 2e-2 single_l4_bf16 pp4_zb_bf16_selective
# The last stage holds the weight passes' inputs the longest (its order keeps up to p
# waiting): its rank's peak, from PLANRT_MEM_TRACE, against explain's for that rank.
# last_stage_memory NAME RANKS RANK: run NAME on RANKS ranks, RANK one of the last stage's.
last_stage_memory() {
  rm -f "trace_$1.txt"*
  PLANRT_MEM_TRACE="$WORK/trace_$1.txt" "$MPIRUN" -n "$2" "./exe_$1" --log "trace_$1.jsonl" --quiet
  "$PY" - "trace_$1.txt.rank$3" "$1.explain.json" "$1" <<'PYEOF'
import json, sys
measured = int(open(sys.argv[1]).readline().split(": ")[1].split()[0])
e = json.load(open(sys.argv[2]))
want = e["per_rank_bytes"][-1]["total"]
ratio = measured / want
assert 0.97 <= ratio <= 1.03, f"zero_bubble: FAIL: {sys.argv[3]}'s last stage holds {measured} B, {ratio:.3f} x explain's {want}"
print(f"{sys.argv[3]}: the last stage's device memory peak {measured} B, {ratio:.3f} x explain's")
PYEOF
}
last_stage_memory pp2_zb 2 1
last_stage_memory pp2_zb_inputs 2 1
LAYERS=4 last_stage_memory pp4_zb 4 3
# The sched IR of 4 stages over 8 micro-batches: every stage but the first runs one weight
# pass per micro-batch, each after that micro-batch's input pass, in micro-batch order.
"$PLANC" emit pp4_zb.plan --stage sched > pp4_zb.sched.mlir
"$PY" - pp4_zb.sched.mlir <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
micro = {m.group(1): int(m.group(2)) for m in re.finditer(r"(%c\w*) = arith.constant (\d+) : i64", text)}
passes = {}
for m in re.finditer(r"sched\.(forward|backward|wgrad) %\w+, (%\w+) stage (\d+)", text):
    passes.setdefault(int(m.group(3)), []).append((m.group(1), micro.get(m.group(2), -1)))
assert sorted(passes) == [0, 1, 2, 3], f"zero_bubble: FAIL: stages {sorted(passes)}"
for k, ps in passes.items():
    w = [i for op, i in ps if op == "wgrad"]
    assert w == ([] if k == 0 else list(range(8))), f"zero_bubble: FAIL: stage {k}'s weight passes {w}"
    for op, i in ps:
        if op == "wgrad":
            assert ps.index(("backward", i)) < ps.index(("wgrad", i)), f"zero_bubble: FAIL: stage {k} W{i} before B{i}"
print("zero_bubble: the weight passes of stages 1-3 follow their input passes, 8 each; stage 0 has none")
PYEOF
echo "zero_bubble: PASS"
