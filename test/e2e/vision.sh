#!/usr/bin/env bash
# End to end, models over images (EXTENSIONS.md §4), fp32, against PyTorch.
#
#   test/e2e/vision.sh PLANC_BIN WORKDIR
#
# Writes a planc image file of 64 random 3×8×8 images in 10 classes (cnn_ref.py write),
# then for two small CNNs — conv (no bias: batchnorm follows) → batchnorm → ReLU → maxpool →
# strided conv with bias → ReLU, then global average pooling, or a flatten whose width the
# images' size gives — builds a plan, trains 20 steps (accumulation 2; random crop, flip and
# normalisation on the first) saving the initial parameters and the first step's gradients,
# and checks them against test/e2e/cnn_ref.py from the same parameters over the same samples
# (compare_training.py: losses rtol 1e-4, gradients 1e-3), then the exported batchnorm
# running statistics (compare_bn.py, rtol 1e-5, num_batches_tracked exactly) and, on the
# first, two evaluations with them on 16 images (val_loss rtol 1e-4, the same
# correct predictions). A run resumed from its step-10 checkpoint exports the same bits.
# Then, on 2 data-parallel ranks: `batchnorm = sync` (SyncBatchNorm) against the
# one-process run, with DDP (resumed as well, from a sharded checkpoint; and on 4 ranks) and with ZeRO-3
# (losses rtol 1e-5; running statistics and evaluations against PyTorch's),
# `batchnorm = local` against PyTorch with per-rank statistics (the running ones data
# rank 0's), and a CNN without batchnorm against one process; `planc explain`'s bytes per
# step against every run's. The stdlib's ResNets against torchvision's definition
# (resnet_ref.py: names, shapes, published counts), and ResNet-20 training on 2 ranks.
# Last, the errors: a batchnorm mode that is neither, a
# linear of the wrong width after a flatten, images of another shape at run time, too few
# validation images.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" vision "$@"
MPIRUN=${MPIRUN:-mpirun}
cd "$WORK"
rm -rf exe_* ckpt_* ./*.jsonl ./*.safetensors ref_*.json ./*.plan out.txt

echo "== data"
"$PY" "$HERE/cnn_ref.py" write --out train.bin --count 64 --channels 3 --size 8 --classes 10 --seed 7
"$PY" "$HERE/cnn_ref.py" write --out other.bin --count 8 --channels 3 --size 12 --classes 10 --seed 8
"$PY" "$HERE/cnn_ref.py" write --out few.bin --count 4 --channels 3 --size 8 --classes 10 --seed 10

# model NAME HEAD [BN]: HEAD pool (global average pooling, fc 16 → 10) or flatten
# (16 × 2 × 2 = 64 features); BN false drops the batchnorm.
model() {
  local bn=${3:-true} norm="bn1(conv1(images))" features=64 head=x
  [[ $bn == true ]] || norm="conv1(images)"
  [[ $2 == pool ]] && features=16 head="gap(x)"
  echo "model $1() (images, labels) {"
  echo "  conv1 = conv2d(3, 8, 3, padding: 1, bias: $([[ $bn == true ]] && echo false || echo true))"
  [[ $bn == true ]] && echo "  bn1 = batchnorm(8)"
  echo "  pool  = maxpool(2)"
  echo "  conv2 = conv2d(8, 16, 3, stride: 2, padding: 1)"
  [[ $2 == pool ]] && echo "  gap = avgpool()"
  echo "  fc    = linear($features, 10)"
  echo "  x = pool(relu($norm))"
  echo "  x = relu(conv2(x))"
  echo "  return cross_entropy(fc(flatten($head)), labels)"
  echo "}"
}

# train NAME MODEL MESH DATA-EXTRA MICRO [PARALLEL-EXTRA] [MORE-ENTRIES]
train() {
  echo "train $1 {"
  echo "  model = $2   mesh = $3"
  echo "  data  = images(\"$WORK/train.bin\", format: planc$4)"
  echo "  batch = 8   micro = $5"
  echo "  parallel { data = dp ${6:-} }"
  echo "  optimizer = adamw(lr: 3e-3, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1)"
  echo "  schedule  = cosine(warmup: 2, min_lr: 3e-4)"
  echo "  clip = 1.0   steps = 20   seed = 1337"
  [[ -z ${7:-} ]] || echo "  $7"
  echo "}"
}

{
  echo 'import "meshes/cpu_local.plan"'
  echo 'mesh dp4 { devices = cpu(4)  axes = [dp: 4] }'
  model cnn_pool pool
  model cnn_flat flatten
  model cnn_plain pool false
  AUG=", normalize: [0.5, 0.4, 0.3], [0.25, 0.2, 0.3], crop: 1, flip: true"
  # Evaluation after steps 10 and 20 on the first 4 × 4 training images (some of which it
  # learns to classify, so that the accuracy is not 0).
  EVAL="val = images(\"$WORK/train.bin\", format: planc)  eval { every: 10, batches: 4 }"
  train pool cnn_pool cpu1 "$AUG" 4 "" "$EVAL  checkpoint { every: 10, dir: \"$WORK/ckpt_pool\" }"
  train pool_sync cnn_pool cpu2 "$AUG" 2 "" "$EVAL  checkpoint { every: 10, dir: \"$WORK/ckpt_sync\" }"
  train pool_sync4 cnn_pool dp4 "$AUG" 1 "" "$EVAL"
  train pool_local cnn_pool cpu2 "$AUG" 2 "batchnorm = local" "$EVAL"
  train pool_zero3 cnn_pool cpu2 "$AUG" 2 "zero = 3" "$EVAL"
  train flat cnn_flat cpu1 "" 4
  train plain1 cnn_plain cpu1 "" 8
  train plain2 cnn_plain cpu2 "" 4
} > vision.plan
"$PLANC" check vision.plan

COMMON=(--channels 3 --batch 8 --micro 4 --steps 20 --seed 1337 --lr 3e-3 --schedule cosine --warmup 2 --min-lr 3e-4
        --clip 1.0 --weight-decay 0.1 --beta1 0.9 --beta2 0.95 --eps 1e-8)
AUG_REF=(--crop 1 --flip --mean 0.5 0.4 0.3 --std 0.25 0.2 0.3)
EVAL_REF=(--val train.bin --eval-every 10 --eval-batches 4)
for run in pool flat; do
  echo "== $run: planc"
  "$PLANC" build vision.plan --entry "$run" -o "exe_$run"
  "./exe_$run" --quiet --save-init "init_$run.safetensors" --save-grads "grads_$run.safetensors" \
    --log "log_$run.jsonl" --export "final_$run.safetensors"
  extra=()
  [[ $run == pool ]] && extra=("${AUG_REF[@]}" "${EVAL_REF[@]}")
  echo "== $run: torch"
  "$PY" "$HERE/cnn_ref.py" train --init "init_$run.safetensors" --data train.bin --head "$([[ $run == pool ]] && echo pool || echo flatten)" "${COMMON[@]}" \
    "${extra[@]}" --out "ref_$run.json" --grads-out "ref_grads_$run.safetensors" --final-out "ref_final_$run.safetensors"
  "$PY" "$HERE/compare_training.py" --planc-log "log_$run.jsonl" --ref "ref_$run.json" \
    --planc-grads "grads_$run.safetensors" --ref-grads "ref_grads_$run.safetensors" --min-steps 20
  # batchnorm's running statistics after 40 micro-batches (rtol 1e-5), and on the pool
  # run the evaluations with them (val_loss rtol 1e-4, the same correct predictions).
  if [[ $run == pool ]]; then
    "$PY" "$HERE/compare_bn.py" --planc final_pool.safetensors --ref ref_final_pool.safetensors \
      --planc-log log_pool.jsonl --ref ref_pool.json --rtol 1e-5 --val-rtol 1e-4
  else
    "$PY" "$HERE/compare_bn.py" --planc final_flat.safetensors --ref ref_final_flat.safetensors --rtol 1e-5
  fi
done

# resumed RUN CKPT RANKS: resumes RUN from its step-10 checkpoint (a copy of it alone)
# and checks that the export after step 20 is the uninterrupted run's, bit for bit
# (parameters, moments, running statistics), as are the last 10 losses.
resumed() {
  local run=$1 ckpt=$2 ranks=$3
  rm -rf "${ckpt}_r" && mkdir "${ckpt}_r" && cp -r "$ckpt"/step-00000010* "${ckpt}_r/"
  local launch=()
  [[ $ranks == 1 ]] || launch=("$MPIRUN" -n "$ranks")
  "${launch[@]}" "./exe_$run" --quiet --resume "${ckpt}_r" --checkpoint-dir "${ckpt}_r" \
    --export "final_${run}_r.safetensors" --log "log_${run}_r.jsonl"
  "$PY" - "final_$run.safetensors" "final_${run}_r.safetensors" "log_$run.jsonl" "log_${run}_r.jsonl" "$HERE" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[5])
import gpt_ref
a, _ = gpt_ref.read_safetensors(sys.argv[1])
b, _ = gpt_ref.read_safetensors(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
assert any(k.endswith(".running_var") for k in a), sorted(a)
bad = [k for k in a if not np.array_equal(a[k], b[k])]
assert not bad, "resumed export differs in %s" % bad
la, lb = ([json.loads(l) for l in open(p) if '"loss"' in l] for p in sys.argv[3:5])
assert [r["loss"] for r in la[10:]] == [r["loss"] for r in lb], "resumed losses differ"
print("resumed from step 10: the export (%d tensors) and losses equal the uninterrupted run's" % len(a))
PYEOF
}
resumed pool ckpt_pool 1
# --init from an export takes its running statistics too: one more step of 2 micro-batches
# counts 42.
./exe_pool --quiet --init final_pool.safetensors --steps 1 --checkpoint-every 0 --log /dev/null \
  --export init_pool.safetensors
"$PY" - final_pool.safetensors init_pool.safetensors "$HERE" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, sys.argv[3])
import gpt_ref
a, _ = gpt_ref.read_safetensors(sys.argv[1])
b, _ = gpt_ref.read_safetensors(sys.argv[2])
assert int(a["bn1.num_batches_tracked"]) == 40 and int(b["bn1.num_batches_tracked"]) == 42, \
    (a["bn1.num_batches_tracked"], b["bn1.num_batches_tracked"])
# Two updates at momentum 0.1 keep 81% of what was loaded.
for k in ("bn1.running_mean", "bn1.running_var"):
    assert np.abs(b[k] - a[k]).max() < 0.5 * np.abs(a[k]).max(), k
print("--init: running statistics loaded (num_batches_tracked 40 -> 42)")
PYEOF

# explained ENTRY LOG [PLAN]: `planc explain`'s bytes per step, by collective
# (SyncBatchNorm's included), equal every logged step's, and the measured device peak lies
# within 10% of its total.
explained() {
  "$PLANC" explain "${3:-vision.plan}" --entry "$1" --json > "$1.explain.json"
  "$PY" - "$1.explain.json" "$2" "$1" <<'PYEOF'
import json, sys
e = json.load(open(sys.argv[1]))
want = {}
for r in e["comm"]:
    want[r["collective"]] = want.get(r["collective"], 0) + r["bytes"]
steps = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
for s in steps:
    got = {k: v for k, v in s["comm_bytes"].items() if v}
    assert got == want, (sys.argv[3], s["step"], got, want)
ratio = max(s["mem_device_peak_bytes"] for s in steps) / e["per_rank_bytes"][0]["total"]
print("%s: comm per step %s == explain on all %d steps; device peak / explain %.3f"
      % (sys.argv[3], want, len(steps), ratio))
assert 0.9 <= ratio <= 1.1, ratio
PYEOF
}
explained pool log_pool.jsonl

echo "== batchnorm = sync on 2 ranks against one process"
# same_losses A.jsonl B.jsonl WHAT [STEPS [RTOL]]: the same number of losses (20), each
# within RTOL (1e-5; 0: bitwise) of A's.
same_losses() {
  "$PY" - "$1" "$2" "$3" "${4:-20}" "${5:-1e-5}" <<'PYEOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:3])
steps, rtol = int(sys.argv[4]), float(sys.argv[5])
assert len(a) == len(b) == steps, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print("%s: worst loss rtol %.2e over %d steps" % (sys.argv[3], worst, steps))
sys.exit(0 if worst <= rtol else 1)
PYEOF
}
# synced ENTRY RANKS WHAT: ENTRY on RANKS ranks gives the one-process losses, and its
# running statistics and evaluations are PyTorch's one-process ones (the group's statistics
# update the running ones as one process's do; evaluation splits the same images over the
# ranks); explain's bytes are its own.
synced() {
  "$PLANC" build vision.plan --entry "$1" -o "exe_$1"
  "$MPIRUN" -n "$2" "./exe_$1" --quiet --log "log_$1.jsonl" --export "final_$1.safetensors"
  same_losses log_pool.jsonl "log_$1.jsonl" "$3"
  "$PY" "$HERE/compare_bn.py" --planc "final_$1.safetensors" --ref ref_final_pool.safetensors \
    --planc-log "log_$1.jsonl" --ref ref_pool.json --rtol 1e-5 --val-rtol 1e-4
  explained "$1" "log_$1.jsonl"
}
synced pool_sync 2 "SyncBatchNorm, 2 ranks vs 1 process"
resumed pool_sync ckpt_sync 2
synced pool_sync4 4 "SyncBatchNorm, 4 ranks (a micro-batch of 1 each) vs 1 process"
synced pool_zero3 2 "SyncBatchNorm with ZeRO-3, 2 ranks vs 1 process"

echo "== batchnorm = local on 2 ranks against PyTorch with per-rank statistics"
"$PLANC" build vision.plan --entry pool_local -o exe_pool_local
"$MPIRUN" -n 2 ./exe_pool_local --quiet --save-init init_local.safetensors --save-grads grads_local.safetensors \
  --log log_pool_local.jsonl --export final_local.safetensors
"$PY" "$HERE/cnn_ref.py" train --init init_local.safetensors --data train.bin --head pool "${COMMON[@]}" \
  "${AUG_REF[@]}" "${EVAL_REF[@]}" --ranks 2 --out ref_local.json --grads-out ref_grads_local.safetensors \
  --final-out ref_final_local.safetensors
"$PY" "$HERE/compare_training.py" --planc-log log_pool_local.jsonl --ref ref_local.json \
  --planc-grads grads_local.safetensors --ref-grads ref_grads_local.safetensors --min-steps 20
# The running statistics are data rank 0's, as DDP's broadcast_buffers makes them.
"$PY" "$HERE/compare_bn.py" --planc final_local.safetensors --ref ref_final_local.safetensors \
  --planc-log log_pool_local.jsonl --ref ref_local.json --rtol 1e-5 --val-rtol 1e-4
explained pool_local log_pool_local.jsonl

echo "== data parallel: 2 ranks against one process"
"$PLANC" build vision.plan --entry plain1 -o exe_plain1
"$PLANC" build vision.plan --entry plain2 -o exe_plain2
./exe_plain1 --quiet --log log_plain1.jsonl
"$MPIRUN" -n 2 ./exe_plain2 --quiet --log log_plain2.jsonl
same_losses log_plain1.jsonl log_plain2.jsonl "no batchnorm, 2 ranks vs 1 process"

echo "== stdlib ResNets against torchvision's definition, and ResNet-20 trains"
cat > resnet.plan <<'PLANEOF'
import "models/resnet.plan"
import "meshes/cpu_local.plan"
model r18 = resnet18
model r34 = resnet34
model r50 = resnet50
PLANEOF
"$PLANC" emit resnet.plan --stage nn > resnet_nn.mlir
"$PY" "$HERE/cnn_ref.py" write --out cifar_like.bin --count 16 --channels 3 --size 32 --classes 10 --seed 9
cat >> resnet.plan <<PLANEOF
train r20 {
  model = resnet20_cifar  mesh = cpu2  data = images("$WORK/cifar_like.bin", crop: 4, flip: true)
  batch = 8  parallel { data = dp }  optimizer = adamw(lr: 1e-3)  steps = 3
}
train r20_full {
  model = resnet20_cifar  mesh = cpu2  data = images("$WORK/cifar_like.bin", crop: 4, flip: true)
  batch = 8  parallel { data = dp }  optimizer = adamw(lr: 1e-3)  steps = 3  recompute = full
}
PLANEOF
"$PY" "$HERE/resnet_ref.py" resnet_nn.mlir r18=resnet18 r34=resnet34 r50=resnet50
"$PLANC" build resnet.plan --entry r20 -o exe_r20
"$MPIRUN" -n 2 ./exe_r20 --quiet --log log_r20.jsonl
# Full recompute computes each residual block again, but never its batchnorms' statistics
# (their all-gathers happen once, as explain counts): the same losses and bytes.
"$PLANC" build resnet.plan --entry r20_full -o exe_r20_full
"$MPIRUN" -n 2 ./exe_r20_full --quiet --log log_r20_full.jsonl
same_losses log_r20.jsonl log_r20_full.jsonl "resnet20_cifar with full recompute" 3 0
explained r20 log_r20.jsonl resnet.plan
explained r20_full log_r20_full.jsonl resnet.plan
"$PY" - log_r20.jsonl <<'PYEOF'
import json, math, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
assert len(losses) == 3 and all(math.isfinite(x) for x in losses), losses
print("resnet20_cifar, 2 ranks with SyncBatchNorm: losses %s" % ", ".join("%.4f" % x for x in losses))
PYEOF

echo "== errors"
fails() {  # fails WHAT PATTERN COMMAND...
  local what=$1 pattern=$2
  shift 2
  if "$@" > out.txt 2>&1; then fail "$what: exit 0"; fi
  grep -Eq -- "$pattern" out.txt || { cat out.txt; fail "$what: expected /$pattern/"; }
  echo "ok: $what: $(grep -E -- "$pattern" out.txt | head -1)"
}
{ echo 'import "meshes/cpu_local.plan"'; model cnn_pool pool; train bad cnn_pool cpu2 "" 4 "batchnorm = global"; } \
  > bad_bn.plan
fails "batchnorm neither sync nor local" "'batchnorm' .*sync.*local" "$PLANC" check bad_bn.plan
{ echo 'import "meshes/cpu_local.plan"'; model cnn_flat flatten | sed 's/linear(64, 10)/linear(32, 10)/'
  train wide cnn_flat cpu1 "" 4; } > bad_width.plan
fails "flatten wider than the linear" "'fc' takes 32 features, but the flattened 3×8×8 images give 64" \
  "$PLANC" build bad_width.plan -o exe_bad
fails "images of another shape" "other\.bin: its images are 3x12x12, but this executable was built for 3x8x8" \
  ./exe_flat --quiet --data "$WORK/other.bin"
fails "too few validation images" "few\.bin: the validation images are 4, fewer than eval_batches × micro × data-parallel ranks = 16" \
  ./exe_pool --quiet --val "$WORK/few.bin" --checkpoint-every 0
echo "PASS: models over images match PyTorch"
