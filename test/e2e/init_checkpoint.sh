#!/usr/bin/env bash
# `init = checkpoint(PATH, format: planc | hf)`: a pretrained model's parameters loaded by
# name before step 0.
#
#   test/e2e/init_checkpoint.sh PLANC_BIN WORKDIR
#
# A tiny GPT and a small Llama save their initial parameters (planc's names); the test's
# own converter (hf_checkpoint.py, written from transformers' documented layouts) turns
# them into Hugging Face checkpoints: GPT-2's (`transformer.` prefix, tied lm_head, mask
# buffers; F32) and Llama's (q/k/v/o, gate/up/down as [out, in]; BF16, two shards and an
# index). Plans that init from those must start from exactly the original parameters
# (the Llama's rounded to bf16 by torch), and train exactly as `--init` of the original
# file does. A planc checkpoint directory loads its latest step. Adapters over the sharded
# base resume, and refuse to once a shard has changed. Then the bad inputs: a
# checkpoint of another model, of another size, a missing path (a located compile error).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" init-checkpoint "$@"
cd "$WORK"
rm -rf ./*
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" >/dev/null

# plan NAME MODEL_DECL MODEL EXTRA: writes NAME.plan, a 3-step fp32 train.
plan() {
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "models/llama.plan"
import "meshes/cpu_local.plan"
$2
train $1 {
  model     = $3
  mesh      = cpu1
  data      = tokens("data/train.bin")
  batch = 4  micro = 2  seq = 32
  parallel { data = dp }
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)
  steps     = 3
  seed      = 11
  $4
}
EOF
}
LLAMA='model tl = llama(vocab: 256, depth: 2, heads: 4, kv_heads: 2, width: 64, hidden: 128)'
WIDE='model wide = gpt(vocab: 256, context: 64, layers: 2, heads: 4, width: 128)'

echo "== base models and their Hugging Face checkpoints"
plan gpt_base "" tiny "checkpoint { every: 3, dir: \"gpt_ckpt\" }"
plan llama_base "$LLAMA" tl ""
for p in gpt_base llama_base; do
  "$PLANC" build $p.plan -o $p >/dev/null
done
./gpt_base --save-init gpt_init.safetensors --log gpt_base.jsonl --quiet
./llama_base --steps 1 --save-init llama_init.safetensors --quiet
"$PY" "$HERE/hf_checkpoint.py" gpt2 gpt_init.safetensors hf_gpt2
"$PY" "$HERE/hf_checkpoint.py" llama llama_init.safetensors hf_llama --heads 4 --kv-heads 2
"$PY" "$HERE/hf_checkpoint.py" bf16 llama_init.safetensors llama_init_bf16.safetensors

echo "== init from them"
plan gpt_hf "" tiny 'init = checkpoint("hf_gpt2", format: hf)'
plan llama_hf "$LLAMA" tl 'init = checkpoint("hf_llama/model.safetensors.index.json", format: hf)'
plan gpt_planc_dir "" tiny 'init = checkpoint("gpt_ckpt")'
for p in gpt_hf llama_hf gpt_planc_dir; do
  "$PLANC" build $p.plan -o $p >/dev/null
done
./gpt_hf --save-init gpt_hf_init.safetensors --log gpt_hf.jsonl --quiet
./gpt_base --init gpt_init.safetensors --log gpt_flag.jsonl --quiet
./llama_hf --steps 1 --save-init llama_hf_init.safetensors --quiet
./gpt_planc_dir --steps 1 --save-init gpt_dir_init.safetensors --quiet
"$PY" - <<EOF
import json, sys
sys.path.insert(0, "$HERE")
from same_tensors import load
def same(a, b, what):  # b's tensors (parameters) bitwise equal to a's of the same names
    x, y = load(a), load(b)
    assert y and set(y) <= set(x), (what, sorted(set(y) - set(x)))
    bad = [k for k in y if x[k] != y[k]]
    assert not bad, f"{what}: {len(bad)} tensors differ, e.g. {bad[:3]}"
    print(f"{what}: {len(y)} tensors bitwise equal")
same("gpt_init.safetensors", "gpt_hf_init.safetensors", "GPT-2 (hf) init")
same("llama_init_bf16.safetensors", "llama_hf_init.safetensors", "Llama (hf, bf16, sharded) init")
same("gpt_ckpt/step-00000003.safetensors", "gpt_dir_init.safetensors", "planc checkpoint directory")
losses = lambda f: [json.loads(l)["loss"] for l in open(f) if '"loss"' in l and '"step"' in l]
a, b = losses("gpt_hf.jsonl"), losses("gpt_flag.jsonl")
assert len(a) == 3 and a == b, ("init from hf vs --init of the same weights", a, b)
print("init tensors equal; losses bitwise equal:", a)
EOF

echo "== adapters over a sharded Hugging Face base: a changed shard is refused on resume"
plan llama_lora "$LLAMA" tl 'init = checkpoint("hf_llama/model.safetensors.index.json", format: hf)
  adapt = lora(rank: 2, targets: [c_attn])
  checkpoint { every: 1, dir: "lora_ckpt" }'
"$PLANC" build llama_lora.plan -o llama_lora >/dev/null
./llama_lora --steps 1 --quiet
./llama_lora --steps 2 --quiet --resume lora_ckpt
"$PY" - <<EOF
# Flip the low bit of the last byte of the second shard: still a valid file, another base.
p = "hf_llama/model-00002-of-00002.safetensors"
b = bytearray(open(p, "rb").read()); b[-1] ^= 1; open(p, "wb").write(bytes(b))
EOF
if out=$(./llama_lora --steps 3 --quiet --resume lora_ckpt 2>&1); then fail "resumed over a changed shard"; fi
grep -q "the checkpoint's adapters were trained over the base .*model.safetensors.index.json" <<<"$out" ||
  fail "expected the base's sha256 mismatch: $out"
echo "ok: $(head -1 <<<"$out" | cut -c1-160)…"

echo "== bad inputs"
expect_run_error() { # EXE PATTERN...
  local exe=$1 out
  shift
  if out=$(./"$exe" --steps 1 --quiet 2>&1); then fail "$exe ran; expected an error"; fi
  for pat in "$@"; do
    grep -qF -- "$pat" <<<"$out" || fail "$exe: expected '$pat' in: $out"
  done
  echo "ok: $exe: $(head -1 <<<"$out")"
}
plan llama_from_gpt "$LLAMA" tl 'init = checkpoint("hf_gpt2", format: hf)'
plan wide_from_tiny "$WIDE" wide 'init = checkpoint("hf_gpt2", format: hf)'
plan gpt_hf_as_planc "" tiny 'init = checkpoint("hf_gpt2/model.safetensors")'
for p in llama_from_gpt wide_from_tiny gpt_hf_as_planc; do
  "$PLANC" build $p.plan -o $p >/dev/null
done
expect_run_error llama_from_gpt "hf_gpt2/model.safetensors" "'tok_embeddings.weight'" "'model.embed_tokens.weight'"
expect_run_error wide_from_tiny "'transformer.wte.weight' is F32 [256, 64] in the checkpoint" "'wte.weight' is [256, 128]"
expect_run_error gpt_hf_as_planc "'wte.weight' is not in the checkpoint" "format: hf"
plan missing "" tiny 'init = checkpoint("no/such/dir", format: hf)'
if out=$("$PLANC" check missing.plan 2>&1); then fail "planc check accepted a missing checkpoint"; fi
grep -qE "missing.plan:[0-9]+:[0-9]+: error: no checkpoint at '.*no/such/dir'" <<<"$out" ||
  fail "expected a located error for the missing checkpoint: $out"
echo "ok: missing path: $(head -1 <<<"$out")"
plan badformat "" tiny 'init = checkpoint("hf_gpt2", format: pytorch)'
if out=$("$PLANC" check badformat.plan 2>&1); then fail "planc check accepted format: pytorch"; fi
grep -q "error:.*format" <<<"$out" || fail "expected an error naming the format: $out"
echo "PASS: init = checkpoint(…) loads planc and Hugging Face checkpoints by name"
