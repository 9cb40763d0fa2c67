#!/usr/bin/env bash
# Benchmark (not a test): per-rank step time and communication share of each
# data-parallel layout, and of tensor and pipeline parallelism over the same ranks, against one process, for a 4-layer, 256-wide GPT (3.4M
# parameters), batch 16 × 128 tokens, on this machine's cores (one rank per core, bound,
# one BLAS thread per rank); the pipelines (GPipe, 1F1B keeping inputs and keeping
# activations, the zero-bubble schedule keeping activations and inputs, the interleaved
# schedule with two stages a rank keeping inputs and activations) also with the bubble
# planc explain predicts. Results go to stdout as a
# Markdown table.
#
#   test/bench/layouts.sh PLANC_BIN WORKDIR [RANKS]
set -euo pipefail
PLANC=$(realpath "$1")
mkdir -p "$2"
WORK=$(cd "$2" && pwd)
RANKS=${3:-2}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cd "$WORK"
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
plan() {  # NAME DEVICES ZERO [TENSOR [SEQUENCE [SCHEDULE [KEEP]]]]: DEVICES / TENSOR data-parallel ranks ×
  # TENSOR; with a SCHEDULE (gpipe, 1f1b, zb or interleaved), a pipeline over DEVICES
  # ranks instead (of as many stages; 2 a rank interleaved), 4 micro-batches, keeping KEEP
  # (the schedule's default, or inputs or activations).
  local t=${4:-1} d=$(( $2 / ${4:-1} )) axes="dp: $2" tensor="" micro
  if [[ $t -gt 1 ]]; then axes="dp: $d, tp: $t"; tensor="tensor = tp  sequence = ${5:-false}"; fi
  micro=$((16 / d))
  local stages=$2
  [[ ${6:-} == interleaved ]] && stages=$(( 2 * $2 ))
  if [[ -n ${6:-} ]]; then axes="dp: 1, pp: $2"; tensor="pipeline = pp(stages: $stages, schedule: $6${7:+, keep: $7})"; micro=4; fi
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
model bench = gpt(vocab: 256, context: 128, layers: 4, heads: 8, width: 256)
mesh m$2 {
  devices = cpu($2)
  axes    = [$axes]
}
train $1 {
  model = bench  mesh = m$2  data = tokens("$WORK/data/train.bin")
  batch = 16  micro = $micro  seq = 128
  parallel { data = dp  zero = $3  $tensor }
  optimizer = adamw(lr: 1e-3)
  steps = 30  seed = 1
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1"
}
measure() {  # NAME DEVICES
  local out
  # One rank per core, bound: unbound, two ranks on this 2-core machine sometimes share a
  # core and run at half speed.
  if [[ $2 -eq 1 ]]; then out=$("./exe_$1" --log "$1.jsonl" --quiet 2>&1)
  else out=$(mpirun -bind-to core -n "$2" "./exe_$1" --log "$1.jsonl" --quiet 2>&1); fi
  local share
  share=$(echo "$out" | grep -o "communication [0-9.]*%" | grep -o "[0-9.]*%" || echo "-")
  /usr/bin/python3 - "$1" "$share" <<'EOF'
import json, statistics, sys
name, share = sys.argv[1], sys.argv[2]
steps = [r for r in map(json.loads, open(name + ".jsonl")) if "loss" in r][5:]
ms = statistics.median(16 * 128 / r["tokens_per_s"] * 1e3 for r in steps)
comm = sum(steps[0]["comm_bytes"].values())
print(f"{name}|{ms:.1f}|{share}|{comm}")
EOF
}
# The share of the step planc explain predicts idle in the pipeline's bubble, beside the
# measured share rank 0 spends in communication calls (waiting for its neighbour: the
# bubble, and the stages' imbalance).
bubble() {  # NAME
  "$PLANC" explain "$1.plan" --json | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)
print("%.1f%%" % (100 * e["time_breakdown_s"]["bubble"] / e["step_time_s"]))'
}
plan single 1 0
for z in 0 1 2 3; do plan "zero$z" "$RANKS" "$z"; done
plan "tp$RANKS" "$RANKS" 0 "$RANKS"
plan "tp${RANKS}_sp" "$RANKS" 0 "$RANKS" true
plan "pp${RANKS}_gpipe" "$RANKS" 0 1 false gpipe
plan "pp${RANKS}_1f1b" "$RANKS" 0 1 false 1f1b
plan "pp${RANKS}_1f1b_keep" "$RANKS" 0 1 false 1f1b activations
plan "pp${RANKS}_zb" "$RANKS" 0 1 false zb
plan "pp${RANKS}_zb_inputs" "$RANKS" 0 1 false zb inputs
plan "pp${RANKS}_il" "$RANKS" 0 1 false interleaved
plan "pp${RANKS}_il_keep" "$RANKS" 0 1 false interleaved activations
echo "| layout | ranks | step (ms, median of steps 5-29) | communication share | bytes sent per rank per step | explain's bubble share |"
echo "|---|---|---|---|---|---|"
for row in "single 1" "zero0 $RANKS" "zero1 $RANKS" "zero2 $RANKS" "zero3 $RANKS" "tp$RANKS $RANKS" "tp${RANKS}_sp $RANKS" \
           "pp${RANKS}_gpipe $RANKS" "pp${RANKS}_1f1b $RANKS" "pp${RANKS}_1f1b_keep $RANKS" "pp${RANKS}_zb $RANKS" \
           "pp${RANKS}_zb_inputs $RANKS" "pp${RANKS}_il $RANKS" "pp${RANKS}_il_keep $RANKS"; do
  set -- $row
  IFS='|' read -r name ms share bytes <<< "$(measure "$1" "$2")"
  predicted=-
  [[ $name == pp* ]] && predicted=$(bubble "$name")
  echo "| $name | $2 | $ms | $share | $bytes | $predicted |"
done
