#!/usr/bin/env bash
# The interleaved 1F1B schedule (`schedule: interleaved`, Narayanan et al. 2021): each
# pipeline rank holds several stages (model chunks), rank r of p stages r, r + p, …, and
# runs the program schedule::pipelineProgram placed. Same math as one process (rtol 1e-5
# over 20 steps, TESTING.md) with 2 stages a rank over 2 and 4 ranks, with data
# parallelism, ZeRO-2 and ZeRO-3, tensor parallelism with sequence parallelism, `keep:
# activations` and recompute; the bytes each collective moves per step equal `planc
# explain --json`'s (compare_layouts.py). The sched IR is checked for each rank's stages;
# sharded checkpoints are resumed bitwise and loaded across layouts.
#
#   test/e2e/interleaved.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf *.jsonl *.plan exe_* *.explain.json
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
source "$ROOT/test/e2e/dp_plan.sh"
# plan NAME DEVICES MICRO ZERO [PRECISION [RECOMPUTE [TENSOR [SEQUENCE [STAGES]]]]]:
# dp_plan.sh's run_layout, interleaved with VIRTUAL (default 2) stages a rank.
plan() { VIRTUAL=${VIRTUAL:-2} DEFAULT_SCHEDULE=interleaved run_layout "$@"; }
LAYERS=4 plan single_l4 1 8 0
LAYERS=4 plan pp2_il 1 2 0 fp32 none 1 false 2
LAYERS=4 plan pp2_il_m8 1 1 0 fp32 none 1 false 2
LAYERS=4 KEEP=activations plan pp2_il_keep 1 2 0 fp32 none 1 false 2
LAYERS=4 plan dp2_pp2_il_zero2 2 2 2 fp32 none 1 false 2
LAYERS=4 plan dp2_pp2_il_zero3 2 1 3 fp32 none 1 false 2
LAYERS=4 plan tp2_sp_pp2_il_selective 1 2 0 fp32 selective 2 true 2
"$PY" "$ROOT/test/e2e/compare_layouts.py" single_l4 pp2_il pp2_il_m8 pp2_il_keep dp2_pp2_il_zero2 \
  dp2_pp2_il_zero3 tp2_sp_pp2_il_selective
# 8 stages over 4 ranks.
LAYERS=8 plan single_l8 1 8 0
LAYERS=8 plan pp4_il 1 2 0 fp32 none 1 false 4
LAYERS=8 plan dp2_pp4_il_zero1_full 2 1 1 fp32 full 1 false 4
"$PY" "$ROOT/test/e2e/compare_layouts.py" single_l8 pp4_il dp2_pp4_il_zero1_full
# The sched IR of 8 stages over 4 ranks: rank r's region runs the passes of stages r and
# r + 4 only, a forward and a backward pass of each micro-batch on each (the last stage's
# backward pass runs its forward pass).
"$PLANC" emit pp4_il.plan --stage sched > pp4_il.sched.mlir
"$PY" - pp4_il.sched.mlir <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
step = text[text.index("func.func @planc_step"):]
step = step[:step.index("\n  func.func") if "\n  func.func" in step else len(step)]
regions = re.split(r"sched\.on \"pp\" = (\d+)", step)
seen = {}
for coord, body in zip(regions[1::2], regions[2::2]):
    r = int(coord)
    for m in re.finditer(r"sched\.(forward|backward) %\w+, %\w+ stage (\d+)", body):
        seen.setdefault(r, {}).setdefault(int(m.group(2)), []).append(m.group(1))
for r, stages in seen.items():
    assert sorted(stages) == [r, r + 4], f"interleaved: FAIL: rank {r} runs stages {sorted(stages)}"
    for k, ops in stages.items():
        want = {"backward": 4} if k == 7 else {"forward": 4, "backward": 4}
        got = {op: ops.count(op) for op in set(ops)}
        assert got == want, f"interleaved: FAIL: stage {k} runs {got}"
assert sorted(seen) == [0, 1, 2, 3], f"interleaved: FAIL: ranks {sorted(seen)}"
print("interleaved: ranks 0-3 run stages r and r + 4, each pass of 4 micro-batches once")
PYEOF
# Sharded checkpoints: a file per pipeline rank, holding the parameters of both its stages,
# resumed bitwise on the same layout, and loaded bitwise by one process and by 1F1B over the
# same two ranks (whose rank 0 holds layers 0-1, not 0 and 2), and one process's by it.
LAYERS=4 dp_plan pp2_1f1b_l4 1 2 0 20 fp32 none 1 false 2 1f1b
run 2 ./exe_pp2_il --steps 10 --checkpoint-dir ck_il --checkpoint-every 5 --quiet
[[ -f ck_il/step-00000010/rank-00001.safetensors ]] || { echo "interleaved: FAIL: no rank files in ck_il" >&2; exit 1; }
run 2 ./exe_pp2_il --resume ck_il --log pp2_il_resumed.jsonl --quiet
run 2 ./exe_pp2_il --resume ck_il --steps 10 --export il_own.st --quiet
run 1 ./exe_single_l4 --resume ck_il --steps 10 --export single_from_il.st --quiet
run 2 ./exe_pp2_1f1b_l4 --resume ck_il --steps 10 --export 1f1b_from_il.st --quiet
run 1 ./exe_single_l4 --steps 10 --checkpoint-dir ck_l4 --checkpoint-every 10 --quiet
run 1 ./exe_single_l4 --resume ck_l4 --steps 10 --export single_l4_own.st --quiet
run 2 ./exe_pp2_il --resume ck_l4 --steps 10 --export il_from_single.st --quiet
PYTHONPATH="$ROOT/test/e2e" "$PY" - <<'PYEOF'
from same_tensors import resumed_bitwise, same
resumed_bitwise("pp2_il.jsonl", "pp2_il_resumed.jsonl", "interleaved PP x2 resumed from its checkpoint")
same("il_own.st", "single_from_il.st", "interleaved PP x2 -> one process")
same("il_own.st", "1f1b_from_il.st", "interleaved PP x2 -> 1F1B PP x2")
same("single_l4_own.st", "il_from_single.st", "one process -> interleaved PP x2")
PYEOF
echo "interleaved: PASS"
