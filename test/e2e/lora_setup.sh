# Sourced by the fine-tuning scripts that run against lora_ref.py (lora_vs_torch.sh,
# qlora_vs_torch.sh), after ref_args.sh: the shared run settings, a fresh WORK with the
# text data and a base tiny GPT trained 3 steps (base, base_ckpt.safetensors), and
#
#   lora_ref OUT INIT TARGETS STEPS [ARG…]   lora_ref.py train from INIT on the same batches
#                                            and schedule (OUT.json, OUT_grads.safetensors);
#                                            ARGs: --family llama …, --final-out …
#   lora_compare LOG GRADS OUT STEPS [ARG…]  compare_training.py of a planc run's log and
#                                            --save-grads file against lora_ref's OUT
#   lora_keys                                a train block's batch, layout, optimizer,
#                                            schedule, clipping and seed lines, as lora_ref's
#   lora_llama_plan TARGETS LINES            tune_llama.plan, a small Llama (lora_ref's
#                                            LLAMA shape) with adapters on TARGETS and the
#                                            train block's extra LINES, 10 steps; built as
#                                            tune_llama
#   same_generation CKPT MERGED              a tiny-GPT generate executable gives the same
#                                            tokens and log-probabilities from a run's
#                                            checkpoint (its adapters applied to the base it
#                                            points at) as from its merged export
RANK=4 ALPHA=8
BATCH=4 MICRO=2 SEQ=32 STEPS=20 SEED=1337
LR=3e-3 SCHEDULE=cosine WARMUP=5 MIN_LR=3e-4 CLIP=1.0 WD=0.1 BETA1=0.9 BETA2=0.95 EPS=1e-8

cd "$WORK"
rm -rf ./*
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" >/dev/null

echo "== the base model"
cat > base.plan <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train base {
  model = tiny  mesh = cpu1  data = tokens("data/train.bin")
  batch = $BATCH  micro = $MICRO  seq = $SEQ  parallel { data = dp }
  optimizer = adamw(lr: 1e-3)  steps = 3  seed = $SEED
}
EOF
"$PLANC" build base.plan -o base >/dev/null
./base --quiet --export base_ckpt.safetensors

lora_ref() {
  local out=$1 init=$2 targets=$3 steps=$4
  shift 4
  "$PY" "$HERE/lora_ref.py" train --rank "$RANK" --alpha "$ALPHA" --targets "$targets" \
    --init "$init" --data "$WORK/data/train.bin" --batch "$BATCH" --micro "$MICRO" --seq "$SEQ" \
    --steps "$steps" --seed "$SEED" --lr "$LR" --schedule "$SCHEDULE" --warmup "$WARMUP" --min-lr "$MIN_LR" \
    --clip "$CLIP" --weight-decay "$WD" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" \
    --out "$out.json" --grads-out "${out}_grads.safetensors" --quiet "$@"
}

lora_compare() {
  local log=$1 grads=$2 out=$3 steps=$4
  shift 4
  "$PY" "$HERE/compare_training.py" --planc-log "$log" --ref "$out.json" \
    --planc-grads "$grads" --ref-grads "${out}_grads.safetensors" --min-steps "$steps" "$@"
}

lora_keys() {
  cat <<EOF
  batch = $BATCH  micro = $MICRO  seq = $SEQ
  parallel  { data = dp }
  optimizer = adamw(lr: $LR, betas: [$BETA1, $BETA2], eps: $EPS, weight_decay: $WD)
  schedule  = $SCHEDULE(warmup: $WARMUP, min_lr: $MIN_LR)
  clip      = $CLIP
  seed      = $SEED
EOF
}

same_generation() {
  cat > gen.plan <<EOF
import "models/gpt.plan"
generate gen {
  model = tiny  checkpoint = "$1"  max_tokens = 24  temperature = 0
}
EOF
  "$PLANC" build gen.plan -o gen >/dev/null
  ./gen --tokens "10 20 30 40" --json > gen_adapters.json
  ./gen --tokens "10 20 30 40" --checkpoint "$2" --json > gen_merged.json
  "$PY" - <<'EOF'
import json
a, b = json.load(open("gen_adapters.json")), json.load(open("gen_merged.json"))
assert a["tokens"] == b["tokens"] and a["logprobs"] == b["logprobs"], (a, b)
print("generation from the adapters over their base = from the merged export: %d tokens, the same "
      "log-probabilities" % len(a["tokens"]))
EOF
}

LLAMA=(--family llama --depth 2 --heads 4 --kv-heads 2 --width 64 --hidden 128)
lora_llama_plan() {
  cat > tune_llama.plan <<EOF
import "models/llama.plan"
import "meshes/cpu_local.plan"
model tl = llama(vocab: 256, depth: 2, heads: 4, kv_heads: 2, width: 64, hidden: 128)
train tune_llama {
  model     = tl
  mesh      = cpu1
  adapt     = lora(rank: $RANK, alpha: $ALPHA, targets: [$1])
  data      = tokens("data/train.bin")
$2
$(lora_keys)
  steps     = 10
}
EOF
  "$PLANC" build tune_llama.plan -o tune_llama >/dev/null
}
