#!/usr/bin/env bash
# Determinism and resume, end to end, on a planc-built executable:
#   1. the same plan and seed twice: bitwise the same losses, lr and grad norms;
#   2. a run killed with SIGKILL mid-training, then `--resume` from its checkpoint directory:
#      every step after the checkpoint bitwise equal to the uninterrupted run.
#
#   test/e2e/resume.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf ck_* *.jsonl exe
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null

cat > resume.plan <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train resume {
  model     = tiny
  mesh      = cpu1
  data      = tokens("$WORK/data/train.bin")
  batch     = 4
  micro     = 2
  seq       = 64
  parallel { data = dp }
  optimizer = adamw(lr: 1e-3, betas: [0.9, 0.95], weight_decay: 0.1)
  schedule  = cosine(warmup: 10, min_lr: 1e-4)
  clip      = 1.0
  steps     = 300
  seed      = 7
  checkpoint { every: 10, dir: "ck_plan", keep: 2 }
}
EOF
"$PLANC" build resume.plan -o exe

# The fields that must match bitwise (tokens_per_s is a measurement).
fields() { "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "loss" in r:
        print(r["step"], repr(r["loss"]), repr(r["lr"]), repr(r["grad_norm"]))' "$1"; }

echo "== uninterrupted, twice"
./exe --quiet --log a.jsonl --checkpoint-dir ck_a
./exe --quiet --log b.jsonl --checkpoint-dir ck_b
fields a.jsonl > a.txt
fields b.jsonl > b.txt
[[ $(wc -l < a.txt) -eq 300 ]] || { echo "FAIL: expected 300 logged steps"; exit 1; }
cmp a.txt b.txt || { echo "FAIL: the same seed gave different runs"; exit 1; }

echo "== killed with SIGKILL, then resumed"
./exe --quiet --log c1.jsonl --checkpoint-dir ck_c &
pid=$!
for _ in $(seq 1 600); do
  if ls ck_c/step-00000050.safetensors > /dev/null 2>&1 || ! kill -0 $pid 2> /dev/null; then break; fi
  sleep 0.01
done
sleep 0.05  # mid-way between checkpoints
kill -9 $pid 2> /dev/null || { echo "FAIL: the run finished before it could be killed"; exit 1; }
wait $pid || true
killed_at=$(fields c1.jsonl | tail -1 | cut -d' ' -f1)
echo "killed after step $killed_at; checkpoints: $(ls ck_c | tr '\n' ' ')"
./exe --quiet --resume ck_c --log c2.jsonl --checkpoint-dir ck_c
fields c2.jsonl > c2.txt
first=$(head -1 c2.txt | cut -d' ' -f1)
echo "resumed at step $first"
[[ $first -le $((killed_at + 1)) ]] || { echo "FAIL: resumed past the kill"; exit 1; }
awk -v f="$first" '$1 >= f' a.txt > a_tail.txt
cmp a_tail.txt c2.txt || { echo "FAIL: the resumed run differs from the uninterrupted one"; diff a_tail.txt c2.txt | head; exit 1; }
echo "PASS: steps $first..299 after a SIGKILL are bitwise those of the uninterrupted run; two runs are bitwise equal"
