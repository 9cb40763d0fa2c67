#!/usr/bin/env bash
# LoRA fine-tuning (adapt = lora(…)) against PyTorch, one process, fp32.
#
#   test/e2e/lora_vs_torch.sh PLANC_BIN WORKDIR
#
# A base tiny GPT is trained 3 steps and exported; a plan fine-tunes it with rank-4
# adapters on c_attn, c_proj (both) and c_fc (`init = checkpoint(base)`), 20 steps with
# accumulation 2, warm-up + cosine, clipping and weight decay, saving its initial state
# (base and adapters), the first step's gradients (adapters only), a last checkpoint and
# the merged model. test/e2e/lora_ref.py (PEFT's LoRA written in PyTorch) trains from the
# same state on the same batches. Checks: losses rtol 1e-4, adapter gradients rtol 1e-3,
# final adapters; step 0's loss equals the base model's bitwise; the checkpoint holds
# the adapters alone and points at the base (path, sha256); the merged export's tensors
# that no adapter touches are the base's bitwise (the step never wrote them) and the
# adapted ones are W + (alpha/rank)·a·b of the final adapters; the PEFT export's names,
# shapes and adapter_config.json; the merged model, run by PyTorch's GPT-2 (gpt_ref.py eval), gives
# the run's validation loss; a generate executable reads the checkpoint's adapters over the base
# they point at as it reads the merged export (and refuses a base whose sha256 changed). Then a small Llama with adapters on c_attn, c_proj, gate, up and
# down against the same reference over llama_ref.py's model: losses and adapter gradients; its
# merged export gives its validation loss in llama_ref.py, and its PEFT export is under
# Hugging Face's module names (the fused c_attn's adapter as q_proj's, k_proj's and v_proj's).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" lora-vs-torch "$@"
source "$HERE/lora_setup.sh"
TARGETS=c_attn,c_proj,c_fc

echo "== planc: LoRA over it"
cat > tune.plan <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train tune {
  model     = tiny
  mesh      = cpu1
  init      = checkpoint("base_ckpt.safetensors")
  adapt     = lora(rank: $RANK, alpha: $ALPHA, targets: [c_attn, c_proj, c_fc])
  data      = tokens("data/train.bin")
  val       = tokens("data/val.bin")
  eval      { every: $STEPS, batches: 2 }
$(lora_keys)
  steps     = $STEPS
  checkpoint { every: $STEPS, dir: "ckpt", keep: 1 }
}
EOF
"$PLANC" build tune.plan -o tune >/dev/null
mkdir -p peft
./tune --quiet --save-init init.safetensors --save-grads grads.safetensors --log log.jsonl \
  --export merged.safetensors --merge --export-adapters peft/adapter_model.safetensors
./base --quiet --steps 1 --init base_ckpt.safetensors --log base0.jsonl

echo "== torch reference"
lora_ref ref init.safetensors "$TARGETS" "$STEPS" --final-out ref_final.safetensors

CKPT=$(printf 'ckpt/step-%08d.safetensors' "$STEPS")
lora_compare log.jsonl grads.safetensors ref "$STEPS" --planc-params "$CKPT" --ref-params ref_final.safetensors

echo "== base, checkpoint and exports"
HERE_DIR="$HERE" "$PY" - "$CKPT" "$RANK" "$ALPHA" <<'EOF'
import hashlib, json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE_DIR"])
from gpt_ref import read_safetensors
from same_tensors import load
ckpt, rank, alpha = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
first = lambda f: next(json.loads(l)["loss"] for l in open(f) if '"step": 0' in l)
assert first("log.jsonl") == first("base0.jsonl"), ("step 0 != the base model's", first("log.jsonl"), first("base0.jsonl"))
print("step 0 loss equals the base model's:", first("log.jsonl"))
init, _ = read_safetensors("init.safetensors")
base, _ = read_safetensors("base_ckpt.safetensors")
c, meta = read_safetensors(ckpt)
adapters = sorted(k for k in init if ".lora_" in k)
assert len(adapters) == 16, adapters
assert sorted(k for k in c if not k.startswith("optimizer.")) == adapters, sorted(c)
assert meta["base"].endswith("base_ckpt.safetensors"), meta
assert meta["base_sha256"] == hashlib.sha256(open("base_ckpt.safetensors", "rb").read()).hexdigest(), meta
print("checkpoint: the %d adapters and their moments, base %s" % (len(adapters), meta["base_sha256"][:12]))
raw_init, raw_merged = load("init.safetensors"), load("merged.safetensors")
merged, _ = read_safetensors("merged.safetensors")
params = sorted(k for k in init if ".lora_" not in k)
assert sorted(merged) == params, sorted(merged)
for k in params:
    assert np.array_equal(np.asarray(init[k]), np.asarray(base[k])), k  # init = the base checkpoint
    p = k[:-len(".weight")]
    if p + ".lora_a" in c:
        w = np.asarray(init[k], np.float64) + alpha / rank * (np.asarray(c[p + ".lora_a"], np.float64) @ np.asarray(c[p + ".lora_b"], np.float64))
        err = np.max(np.abs(np.asarray(merged[k], np.float64) - w)) / np.max(np.abs(w))
        assert err < 1e-6, (k, err)
    else:
        assert raw_merged[k] == raw_init[k], k
print("merged: %d tensors; untouched ones bitwise the base's, adapted ones W + (alpha/r)·a·b" % len(params))
peft, _ = read_safetensors("peft/adapter_model.safetensors")
cfg = json.load(open("peft/adapter_config.json"))
assert cfg["peft_type"] == "LORA" and cfg["r"] == rank and cfg["lora_alpha"] == alpha, cfg
assert sorted(cfg["target_modules"]) == ["c_attn", "c_fc", "c_proj"], cfg
for k in adapters:
    module, which = k.rsplit(".", 1)
    name = "base_model.model.transformer." + module + (".lora_A.weight" if which == "lora_a" else ".lora_B.weight")
    assert np.array_equal(np.asarray(peft[name]), np.asarray(c[k]).T), name
print("PEFT export: %d tensors, lora_A [r, in] and lora_B [out, r]" % len(peft))
EOF
echo "== the merged model in PyTorch's GPT-2 gives the run's validation loss"
VAL=$("$PY" -c "import json; print([json.loads(l)['val_loss'] for l in open('log.jsonl') if 'val_loss' in l][-1])")
"$PY" "$HERE/gpt_ref.py" eval --ckpt merged.safetensors --data "$WORK/data/val.bin" --windows 0:$((2 * MICRO)) \
  --micro "$MICRO" --seq "$SEQ" --expect "$VAL" --rtol 1e-5
echo "== generation from the checkpoint's adapters, applied to the base they point at"
same_generation ckpt merged.safetensors
cp base_ckpt.safetensors base_saved.safetensors
"$PY" -c "f = open('base_ckpt.safetensors', 'r+b'); f.seek(-1, 2); b = f.read(1); f.seek(-1, 2); f.write(bytes([b[0] ^ 1]))"
if out=$(./gen --tokens "10 20 30 40" 2>&1); then
  fail "generation over a changed base ran"
fi
grep -q "its adapters were trained over .*base_ckpt.safetensors with sha256 .*, but that file's is now" <<<"$out" ||
  fail "unexpected error for a changed base: $out"
mv base_saved.safetensors base_ckpt.safetensors
echo "refused: a changed base: $out"
HERE_DIR="$HERE" "$PY" - <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE_DIR"])
from gpt_ref import read_safetensors, write_safetensors
t, meta = read_safetensors("base_ckpt.safetensors")
t = {k: np.array(v, np.float32) for k, v in t.items()}
t["h.1.mlp.c_fc.weight"][3, 5] = np.nan
write_safetensors("base_nan.safetensors", t, meta)
EOF
cp base_ckpt.safetensors base_saved.safetensors
cp base_nan.safetensors base_ckpt.safetensors
if out=$(./tune --quiet --steps 1 2>&1); then
  fail "training over a base with a NaN ran"
fi
mv base_saved.safetensors base_ckpt.safetensors
grep -q "the base's tensor 'h.1.mlp.c_fc.weight' is NaN at element 773" <<<"$out" || fail "unexpected error: $out"
echo "refused: a base with a NaN: $out"

echo "== the llama family: rotary embeddings, grouped-query attention, SwiGLU"
lora_llama_plan "c_attn, c_proj, gate, up, down" '  val       = tokens("data/val.bin")
  eval      { every: 10, batches: 2 }'
mkdir -p llama_peft
./tune_llama --quiet --save-init llama_init.safetensors --save-grads llama_grads.safetensors --log llama.jsonl \
  --export llama_merged.safetensors --merge --export-adapters llama_peft/adapter_model.safetensors
lora_ref llama_ref llama_init.safetensors c_attn,c_proj,gate,up,down 10 "${LLAMA[@]}"
lora_compare llama.jsonl llama_grads.safetensors llama_ref 10
echo "== the merged Llama in PyTorch gives the run's validation loss; the PEFT export"
VAL=$("$PY" -c "import json; print([json.loads(l)['val_loss'] for l in open('llama.jsonl') if 'val_loss' in l][-1])")
"$PY" "$HERE/llama_ref.py" eval --ckpt llama_merged.safetensors --depth 2 --heads 4 --kv-heads 2 --width 64 \
  --hidden 128 --data "$WORK/data/val.bin" --windows 0:$((2 * MICRO)) --micro "$MICRO" --seq "$SEQ" \
  --expect "$VAL" --rtol 1e-5
HERE_DIR="$HERE" "$PY" - "$RANK" "$ALPHA" <<'EOF'
# Hugging Face's Llama names each projection: the fused c_attn's adapter is q_proj's, k_proj's
# and v_proj's, one lora_A shared and lora_B split by rows (4 heads and 2 kv heads of 16).
# W_hf + (alpha/r)·B·A of each must be the merged export's columns, transposed.
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE_DIR"])
from gpt_ref import read_safetensors
rank, alpha = int(sys.argv[1]), float(sys.argv[2])
peft, _ = read_safetensors("llama_peft/adapter_model.safetensors")
init, _ = read_safetensors("llama_init.safetensors")
merged, _ = read_safetensors("llama_merged.safetensors")
cfg = json.load(open("llama_peft/adapter_config.json"))
assert cfg["fan_in_fan_out"] is False and cfg["r"] == rank and cfg["lora_alpha"] == alpha, cfg
assert sorted(cfg["target_modules"]) == sorted(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                "down_proj"]), cfg
modules = {
    "attention.c_attn": [("self_attn.q_proj", 0, 64), ("self_attn.k_proj", 64, 96), ("self_attn.v_proj", 96, 128)],
    "attention.c_proj": [("self_attn.o_proj", 0, 64)],
    "feed_forward.gate": [("mlp.gate_proj", 0, 128)],
    "feed_forward.up": [("mlp.up_proj", 0, 128)],
    "feed_forward.down": [("mlp.down_proj", 0, 64)],
}
seen = 0
for layer in range(2):
    for planc, parts in modules.items():
        w = np.asarray(init["layers.%d.%s.weight" % (layer, planc)], np.float64)
        m = np.asarray(merged["layers.%d.%s.weight" % (layer, planc)], np.float64)
        for hf, lo, hi in parts:
            name = "base_model.model.model.layers.%d.%s" % (layer, hf)
            A = np.asarray(peft[name + ".lora_A.weight"], np.float64)
            B = np.asarray(peft[name + ".lora_B.weight"], np.float64)
            assert A.shape == (rank, w.shape[0]) and B.shape == (hi - lo, rank), (name, A.shape, B.shape)
            want = m[:, lo:hi].T
            got = w[:, lo:hi].T + alpha / rank * B @ A
            err = np.max(np.abs(got - want)) / np.max(np.abs(want))
            assert err < 1e-6, (name, err)
            seen += 2
assert seen == len(peft), (seen, sorted(peft))
print("PEFT export of the Llama: %d tensors under Hugging Face's module names, W + (alpha/r)·B·A = the merged weights" % seen)
EOF

if out=$(./base --quiet --steps 1 --export x.safetensors --merge 2>&1); then
  echo "lora-vs-torch: FAIL: --merge without adapters ran" >&2
  exit 1
fi
grep -q -- "--merge needs adapters (adapt = lora(…) in the plan)" <<<"$out" || {
  echo "lora-vs-torch: FAIL: unexpected error for --merge without adapters: $out" >&2
  exit 1
}
echo "PASS: LoRA matches PyTorch over $STEPS steps; the base is untouched"
