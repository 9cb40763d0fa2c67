#!/usr/bin/env bash
# End to end, fp32, one process: a planc-built executable against the PyTorch reference.
#
#   test/e2e/train_vs_torch.sh PLANC_BIN WORKDIR
#
# Makes the byte-level license-text data set (scripts/prepare_text.py), writes a plan for the
# stdlib's `tiny` GPT (accumulation 2, warm-up + cosine, clipping, weight decay), builds it with
# PLANC_BIN, trains 20 steps saving the initial parameters and the first step's gradients, runs
# test/e2e/gpt_ref.py from the same initial parameters over the same batches, and checks
# (test/e2e/compare_training.py): per-step loss rtol 1e-4, lr, grad_norm and gradients rtol 1e-3,
# and the last checkpoint's parameters; then that the checkpoint loads strictly into the
# reference model and gives the reference's validation loss. Exit 0 when all hold.
# PYTHON overrides the interpreter (default /usr/bin/python3, which needs torch and numpy).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" train-vs-torch "$@"

# The hyper-parameters: written into the plan and given to the reference.
BATCH=8 MICRO=4 SEQ=64 STEPS=20 SEED=1337
LR=3e-3 SCHEDULE=cosine WARMUP=5 MIN_LR=3e-4 CLIP=1.0
WD=0.1 BETA1=0.9 BETA2=0.95 EPS=1e-8
MODEL=(--vocab 256 --context 64 --layers 2 --heads 4 --width 64)
EVAL_WINDOWS=0:8   # eval { batches: 2 } × micro 4: the windows the executable evaluates

cd "$WORK"
rm -rf ckpt exe log.jsonl init.safetensors grads.safetensors ref.json ref_grads.safetensors ref_final.safetensors

echo "== data"
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data"

echo "== plan"
cat > tiny_vs_torch.plan <<EOF
// Written by test/e2e/train_vs_torch.sh: the stdlib's tiny GPT, fp32, one process.
import "models/gpt.plan"
import "meshes/cpu_local.plan"

train tiny_vs_torch {
  model     = tiny
  mesh      = cpu1
  data      = tokens("$WORK/data/train.bin")
  val       = tokens("$WORK/data/val.bin")
  batch     = $BATCH
  micro     = $MICRO
  seq       = $SEQ
  parallel { data = dp }
  precision = fp32
  optimizer = adamw(lr: $LR, betas: [$BETA1, $BETA2], eps: $EPS, weight_decay: $WD)
  schedule  = $SCHEDULE(warmup: $WARMUP, min_lr: $MIN_LR)
  clip      = $CLIP
  steps     = $STEPS
  seed      = $SEED
  eval       { every: 10, batches: 2 }
  checkpoint { every: 10, dir: "$WORK/ckpt", keep: 2 }
}
EOF
"$PLANC" check --summary tiny_vs_torch.plan

echo "== planc build"
"$PLANC" build tiny_vs_torch.plan -o exe

echo "== planc run"
./exe --steps "$STEPS" --save-init init.safetensors --save-grads grads.safetensors --log log.jsonl

echo "== torch reference"
"$PY" "$HERE/gpt_ref.py" train "${MODEL[@]}" --init init.safetensors --data "$WORK/data/train.bin" \
  --batch "$BATCH" --micro "$MICRO" --seq "$SEQ" --steps "$STEPS" --seed "$SEED" \
  --lr "$LR" --schedule "$SCHEDULE" --warmup "$WARMUP" --min-lr "$MIN_LR" --clip "$CLIP" \
  --weight-decay "$WD" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" \
  --out ref.json --grads-out ref_grads.safetensors --final-out ref_final.safetensors --quiet

# The checkpoint with the highest "step" in its metadata.
CKPT=$(GPT_REF_DIR="$HERE" "$PY" - "$WORK/ckpt" <<'EOF'
import os, sys
sys.path.insert(0, os.environ.get("GPT_REF_DIR", ""))
from gpt_ref import read_safetensors
best = None
for d, _, files in os.walk(sys.argv[1]):
    for f in files:
        if f.endswith(".safetensors"):
            p = os.path.join(d, f)
            step = int(read_safetensors(p)[1].get("step", -1))
            if best is None or step > best[0]:
                best = (step, p)
if best is None:
    sys.exit("no checkpoint (*.safetensors) under %s" % sys.argv[1])
print(best[1])
EOF
)
echo "== compare (last checkpoint: $CKPT)"
"$PY" "$HERE/compare_training.py" --planc-log log.jsonl --ref ref.json \
  --planc-grads grads.safetensors --ref-grads ref_grads.safetensors \
  --planc-params "$CKPT" --ref-params ref_final.safetensors --min-steps "$STEPS"

echo "== the checkpoint in the reference model"
# The executable's last val_loss was computed with the parameters it then wrote to the last
# checkpoint; loaded strictly into the PyTorch model, that checkpoint must give the same loss.
PLANC_VAL=$("$PY" -c 'import json, sys
vals = [json.loads(l) for l in open(sys.argv[1]) if "val_loss" in l]
print(repr(vals[-1]["val_loss"]))' log.jsonl)
"$PY" "$HERE/gpt_ref.py" eval "${MODEL[@]}" --ckpt "$CKPT" --data "$WORK/data/val.bin" \
  --seq "$SEQ" --windows "$EVAL_WINDOWS" --expect "$PLANC_VAL" --rtol 1e-5

echo "PASS: planc matches PyTorch over $STEPS steps"
