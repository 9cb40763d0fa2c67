#!/usr/bin/env bash
# LoRA (adapt = lora(…)) is the same math on every layout that builds it: the tiny GPT with
# rank-4 adapters on c_attn, c_proj and c_fc, 20 steps, on one process and under
# accumulation 4, DDP (with and without gradient buckets), ZeRO-1, ZeRO-2 and ZeRO-3 (the
# frozen base sharded too, with and without parameter buckets) on 4 ranks, full and selective
# recompute, bf16 and fp16 (rtol 2e-2) alone and with ZeRO-1,
# tensor parallelism 2 (with and without sequence parallelism), data 2 × tensor 2 with
# ZeRO-1, 2-stage GPipe and 1F1B pipelines (keeping inputs or activations) and data 2 ×
# pipeline 2 with ZeRO-1 and ZeRO-3: each
# layout's per-step loss within rtol 1e-5 of one process (TESTING.md), its communication
# equal to `planc explain`'s to the byte and its memory peak within 5 % (compare_layouts.py);
# a pipeline's --save-init and merged export hold every stage's tensors. The
# adapters split with their base matrices under tensor parallelism (b column-split with a
# column-parallel W, a row-split with a row-parallel one). One process and tensor 2 built
# for --target cuda-host are bitwise the CPU target's. Then: a ZeRO-2 run killed at a
# checkpoint and resumed is bitwise the uninterrupted one (the checkpoint holds the
# adapters and points at the base).
# Last, QLoRA (quantize = nf4(…)) on one process, accumulation, DDP, ZeRO-2, ZeRO-3 and a pipeline,
# and --target cuda-host bitwise the CPU target.
#
#   test/e2e/lora_layouts.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf ./*.jsonl ./*.plan exe_* ckpt_*
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
source "$ROOT/test/e2e/dp_plan.sh"

ADAPT='  adapt     = lora(rank: 4, alpha: 8, targets: [c_attn, c_proj, c_fc])'
# lora NAME DEVICES MICRO ZERO [TENSOR [SEQUENCE]]: dp_plan's plan with adapters, built and
# run 20 steps on DEVICES × TENSOR × STAGES ranks (STAGES > 1: a pipeline of that many
# stages, run with SCHEDULE), in PRECISION (fp32) with RECOMPUTE (none).
lora() {
  PLANC=true dp_plan "$1" "$2" "$3" "$4" 20 "${PRECISION:-fp32}" "${RECOMPUTE:-none}" "${5:-1}" "${6:-false}" \
    "${STAGES:-1}" "${SCHEDULE:-1f1b}"
  sed -i "s|^  data .*|&\\n$ADAPT|" "$1.plan"
  "$PLANC" build "$1.plan" -o "exe_$1" ${TARGET:+--target "$TARGET"}
  "$PLANC" explain --json "$1.plan" > "$1.explain.json"
  local ranks=$(( $2 * ${5:-1} * ${STAGES:-1} ))
  if [[ $ranks -eq 1 ]]; then
    "./exe_$1" --log "$1.jsonl" --quiet "${@:7}"
  else
    "$MPIRUN" -n "$ranks" "./exe_$1" --log "$1.jsonl" --quiet "${@:7}"
  fi
}
lora single 1 8 0
./exe_single --quiet --steps 1 --save-init single_init.safetensors --log /dev/null > /dev/null
lora accum4 1 2 0
lora ddp 4 2 0
BUCKET="1 KiB" lora ddp_buckets 4 2 0
lora zero1 4 1 1
lora zero2 4 1 2
lora tp2 1 8 0 2
lora tp2_sp 1 8 0 2 true
lora dp2_tp2 2 4 1 2
STAGES=2 SCHEDULE=gpipe lora pp2_gpipe 1 2 0
STAGES=2 lora pp2 1 2 0 1 false --save-init pp2_init.safetensors --export pp2_merged.safetensors --merge
STAGES=2 lora dp2_pp2 2 2 1
STAGES=2 lora dp2_pp2_zero3 2 1 3 1 false --export dp2_pp2_zero3_merged.safetensors --merge
STAGES=2 KEEP=activations lora pp2_keep 1 2 0
lora zero3 4 1 3 1 false --export zero3_merged.safetensors --merge
BUCKET="1 KiB" lora zero3_buckets 4 1 3
lora dp2_tp2_zero3 2 4 3 2
RECOMPUTE=full lora full 1 8 0
RECOMPUTE=selective lora selective 1 8 0
PRECISION=bf16 lora bf16 1 8 0 1 false --init single_init.safetensors --checkpoint-dir ckpt_bf16 \
  --checkpoint-every 20 --export bf16_merged.safetensors --merge
PRECISION=fp16 lora fp16 1 8 0
PRECISION=bf16 lora bf16_zero1 4 2 1
"$PY" "$ROOT/test/e2e/compare_layouts.py" single accum4 ddp ddp_buckets zero1 zero2 tp2 tp2_sp dp2_tp2 pp2_gpipe pp2 \
  dp2_pp2 dp2_pp2_zero3 pp2_keep zero3 zero3_buckets dp2_tp2_zero3 full selective
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 2e-2 single bf16 fp16 bf16_zero1
# The interleaved schedule (2 stages a rank over 2 ranks, 4 layers): each rank's frozen base
# and adapters over both its stages, with and without ZeRO-3.
LAYERS=4 lora single_l4 1 8 0
LAYERS=4 VIRTUAL=2 STAGES=2 SCHEDULE=interleaved lora pp2_il 1 2 0
LAYERS=4 VIRTUAL=2 STAGES=2 SCHEDULE=interleaved lora dp2_pp2_il_zero3 2 1 3
"$PY" "$ROOT/test/e2e/compare_layouts.py" single_l4 pp2_il dp2_pp2_il_zero3
echo "== a pipeline's --save-init and --export --merge, and ZeRO-3's merge (alone and with a pipeline), hold every tensor"
./exe_single --quiet --export single_merged.safetensors --merge --log /dev/null > /dev/null
"$PY" - "$ROOT/test/e2e" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from gpt_ref import read_safetensors
for one, piped, tol in (("single_init", "pp2_init", 0), ("single_merged", "pp2_merged", 1e-6),
                        ("single_merged", "zero3_merged", 1e-6),
                        ("single_merged", "dp2_pp2_zero3_merged", 1e-6)):
    a, _ = read_safetensors(one + ".safetensors")
    b, _ = read_safetensors(piped + ".safetensors")
    assert sorted(a) == sorted(b), (one, sorted(set(a) ^ set(b)))
    worst = max(float(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)).max()) for k in a)
    assert worst <= tol, (one, worst)
    print("%s: %d tensors, as one process's (max diff %.2g)" % (piped, len(a), worst))
PYEOF

echo "== generation from the bf16 run's adapters: its base rounded as the run read it, as the merged export"
cat > gen_bf16.plan <<EOF
import "models/gpt.plan"
generate gen_bf16 { model = tiny  checkpoint = "ckpt_bf16"  max_tokens = 12  temperature = 0 }
EOF
"$PLANC" build gen_bf16.plan -o gen_bf16 > /dev/null
./gen_bf16 --tokens "5 6 7" --json > gen_adapters.json
./gen_bf16 --tokens "5 6 7" --checkpoint bf16_merged.safetensors --json > gen_merged.json
"$PY" - <<'PYEOF'
import json
a, b = json.load(open("gen_adapters.json")), json.load(open("gen_merged.json"))
assert a["tokens"] == b["tokens"] and a["logprobs"] == b["logprobs"], (a, b)
print("bf16: generation from the adapters = from the merged export (%d tokens)" % len(a["tokens"]))
PYEOF

echo "== --target cuda-host (the CUDA target's kernels on host loops): bitwise the CPU target"
TARGET=cuda-host lora single_ch 1 8 0
TARGET=cuda-host lora tp2_ch 1 8 0 2
"$PY" - <<'PYEOF'
import json
loss = lambda n: [json.loads(l)["loss"] for l in open(n + ".jsonl") if '"loss"' in l]
for cpu, host in (("single", "single_ch"), ("tp2", "tp2_ch")):
    assert loss(cpu) == loss(host), (cpu, loss(cpu), loss(host))
    print(f"{host}: 20 steps bitwise the CPU target's {cpu}")
PYEOF

echo "== resume: ZeRO-2 on 4 ranks, stopped at step 10"
sed -i "s|^  seed .*|&\\n  checkpoint { every: 10, dir: \"$WORK/ckpt_zero2\" }|" zero2.plan
"$PLANC" build zero2.plan -o exe_zero2
"$MPIRUN" -n 4 ./exe_zero2 --quiet --log full.jsonl
rm -rf ckpt_zero2/step-00000020*
"$MPIRUN" -n 4 ./exe_zero2 --quiet --resume ckpt_zero2 --log resumed.jsonl
"$PY" -c "
import sys; sys.path.insert(0, '$ROOT/test/e2e')
from same_tensors import resumed_bitwise
resumed_bitwise('full.jsonl', 'resumed.jsonl', 'LoRA under ZeRO-2')"
# A generate executable does not read a sharded checkpoint of adapters: it says how to export them.
cat > gen.plan <<EOF
import "models/gpt.plan"
generate gen { model = tiny  checkpoint = "ckpt_zero2"  max_tokens = 4  temperature = 0 }
EOF
"$PLANC" build gen.plan -o gen > /dev/null
if out=$(./gen --tokens "1 2 3" 2>&1); then
  echo "lora-layouts: FAIL: generation read a sharded checkpoint of adapters" >&2
  exit 1
fi
grep -q "a sharded checkpoint of a fine-tuning run's adapters, which generate 'gen' reads from one file" <<<"$out" || {
  echo "lora-layouts: FAIL: unexpected error: $out" >&2
  exit 1
}
echo "refused: $out"

echo "== QLoRA (the base stored as NF4) on the data-parallel layouts, and cuda-host bitwise"
ADAPT="$ADAPT"'\n  quantize  = nf4(block: 64, double: true)'
lora q_single 1 8 0
lora q_accum4 1 2 0
lora q_ddp 4 2 0
lora q_zero2 4 1 2
lora q_zero3 4 1 3
STAGES=2 lora q_pp2 1 2 0
STAGES=2 KEEP=activations lora q_pp2_keep 1 2 0
TARGET=cuda-host lora q_single_ch 1 8 0
"$PY" "$ROOT/test/e2e/compare_layouts.py" q_single q_accum4 q_ddp q_zero2 q_zero3 q_pp2 q_pp2_keep
# keep: activations keeps the adapters' activations, not the dequantized base (computed again
# from the NF4 codes in the backward pass): bitwise the run that keeps its inputs.
"$PY" "$ROOT/test/e2e/compare_layouts.py" --rtol 0 q_pp2 q_pp2_keep
"$PY" - <<'PYEOF'
import json
loss = lambda n: [json.loads(l)["loss"] for l in open(n + ".jsonl") if '"loss"' in l]
assert loss("q_single") != loss("single"), "QLoRA gave LoRA's losses: the base was not quantized"
assert loss("q_single_ch") == loss("q_single"), ("cuda-host", loss("q_single_ch"), loss("q_single"))
print("q_single_ch: 20 steps bitwise the CPU target's q_single")
PYEOF
echo "PASS: LoRA and QLoRA give one process's losses on every layout they build"
