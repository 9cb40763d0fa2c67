#!/usr/bin/env bash
# End to end, fp32, one process: a planc-built Llama executable against the PyTorch reference.
#
#   test/e2e/llama_vs_torch.sh PLANC_BIN WORKDIR
#
# Makes the byte-level license-text data set (scripts/prepare_text.py), writes a plan for a
# small model of the stdlib's `llama` family (RMSNorm, SwiGLU, rotary embeddings, grouped-query
# attention with 4 query and 2 key/value heads, untied head; accumulation 2, warm-up + cosine,
# clipping, weight decay), builds it with PLANC_BIN, trains 20 steps saving the initial
# parameters, the first step's gradients and a last checkpoint, runs test/e2e/llama_ref.py from
# the same initial parameters over the same batches, and checks (test/e2e/compare_training.py):
# per-step loss rtol 1e-4, lr, grad_norm and gradients rtol 1e-3, and the checkpoint's
# parameters against the reference's. Exit 0 when all hold.
# PYTHON overrides the interpreter (default /usr/bin/python3, which needs torch and numpy).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" llama-vs-torch "$@"

# The hyper-parameters: written into the plan and given to the reference.
VOCAB=256 DEPTH=2 HEADS=4 KV_HEADS=2 WIDTH=64 HIDDEN=128
BATCH=4 MICRO=2 SEQ=32 STEPS=20 SEED=1337
LR=3e-3 SCHEDULE=cosine WARMUP=5 MIN_LR=3e-4 CLIP=1.0
WD=0.1 BETA1=0.9 BETA2=0.95 EPS=1e-8

cd "$WORK"
rm -rf ckpt exe log.jsonl init.safetensors grads.safetensors ref.json ref_grads.safetensors ref_final.safetensors

echo "== data"
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data"

echo "== plan"
cat > llama_vs_torch.plan <<EOF
// Written by test/e2e/llama_vs_torch.sh: a small stdlib llama, fp32, one process.
import "models/llama.plan"
import "meshes/cpu_local.plan"

model tl = llama(vocab: $VOCAB, depth: $DEPTH, heads: $HEADS, kv_heads: $KV_HEADS, width: $WIDTH,
                 hidden: $HIDDEN)

train llama_vs_torch {
  model     = tl
  mesh      = cpu1
  data      = tokens("$WORK/data/train.bin")
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
  checkpoint { every: $STEPS, dir: "$WORK/ckpt", keep: 1 }
}
EOF
"$PLANC" check --summary llama_vs_torch.plan

echo "== planc build"
"$PLANC" build llama_vs_torch.plan -o exe

echo "== planc run"
./exe --steps "$STEPS" --save-init init.safetensors --save-grads grads.safetensors --log log.jsonl

echo "== torch reference"
"$PY" "$HERE/llama_ref.py" train --vocab "$VOCAB" --depth "$DEPTH" --heads "$HEADS" \
  --kv-heads "$KV_HEADS" --width "$WIDTH" --hidden "$HIDDEN" \
  --init init.safetensors --data "$WORK/data/train.bin" \
  --batch "$BATCH" --micro "$MICRO" --seq "$SEQ" --steps "$STEPS" --seed "$SEED" \
  --lr "$LR" --schedule "$SCHEDULE" --warmup "$WARMUP" --min-lr "$MIN_LR" --clip "$CLIP" \
  --weight-decay "$WD" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" \
  --out ref.json --grads-out ref_grads.safetensors --final-out ref_final.safetensors --quiet

CKPT=$(printf '%s/ckpt/step-%08d.safetensors' "$WORK" "$STEPS")
if [[ ! -f "$CKPT" ]]; then
  echo "no checkpoint $CKPT after $STEPS steps" >&2
  exit 1
fi
echo "== compare (checkpoint: $CKPT)"
"$PY" "$HERE/compare_training.py" --planc-log log.jsonl --ref ref.json \
  --planc-grads grads.safetensors --ref-grads ref_grads.safetensors \
  --planc-params "$CKPT" --ref-params ref_final.safetensors --min-steps "$STEPS"

echo "PASS: the planc llama matches PyTorch over $STEPS steps"
