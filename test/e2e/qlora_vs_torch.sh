#!/usr/bin/env bash
# QLoRA (adapt = lora(…) with quantize = nf4(…)) against an independent NF4 and PyTorch.
#
#   test/e2e/qlora_vs_torch.sh PLANC_BIN WORKDIR
#
# A base tiny GPT is trained 3 steps and exported; a plan fine-tunes it with rank-4
# adapters on c_attn and c_fc over its base stored as NF4 (block 64, double
# quantization), 20 steps with accumulation 2, warm-up + cosine, clipping and weight
# decay. test/e2e/nf4_ref.py, the paper's NF4 and double quantization written
# independently in the test, quantizes and dequantizes the base's linear and attention
# weights; test/e2e/lora_ref.py (PEFT's LoRA in PyTorch) trains over those dequantized
# weights from the same adapters on the same batches. Checks: losses rtol 1e-4, adapter
# gradients rtol 1e-3; step 0's loss is bitwise the loss of the dequantized base model;
# --save-init writes the base as loaded (full precision); the merged export's unadapted
# quantized matrices (c_proj) are bitwise nf4_ref.py's dequantization, the adapted ones
# that plus (alpha/r)·a·b, and embeddings, norms and biases the base's bitwise; a generate
# executable reading the checkpoint (the base quantized and dequantized as the run did, the
# adapters applied) gives the merged export's tokens and log-probabilities. Then the
# same without double quantization, and a small Llama (every projection and the output
# head quantized) against lora_ref.py's llama family.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" qlora-vs-torch "$@"
source "$HERE/lora_setup.sh"
GPT_MATRICES='\.(c_attn|c_proj|c_fc)\.weight$'

# qlora_plan NAME DOUBLE: a QLoRA plan over base_ckpt.safetensors.
qlora_plan() {
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train $1 {
  model     = tiny
  mesh      = cpu1
  init      = checkpoint("base_ckpt.safetensors")
  adapt     = lora(rank: $RANK, alpha: $ALPHA, targets: [c_attn, c_fc])
  quantize  = nf4(block: 64, double: $2)
  data      = tokens("data/train.bin")
$(lora_keys)
  steps     = $STEPS
  checkpoint { every: $STEPS, dir: "ckpt_$1", keep: 1 }
}
EOF
  "$PLANC" build "$1.plan" -o "$1" >/dev/null
}

# against_torch NAME DOUBLE: trains the plan, and lora_ref.py over nf4_ref.py's
# dequantization of its initial state; compares losses and adapter gradients.
against_torch() {
  ./"$1" --quiet --save-init "$1_init.safetensors" --save-grads "$1_grads.safetensors" --log "$1.jsonl" \
    --export "$1_merged.safetensors" --merge
  "$PY" "$HERE/nf4_ref.py" dequantize --in "$1_init.safetensors" --out "$1_deq.safetensors" \
    --match "$GPT_MATRICES" --block 64 --double "$2"
  lora_ref "$1_ref" "$1_deq.safetensors" c_attn,c_fc "$STEPS"
  lora_compare "$1.jsonl" "$1_grads.safetensors" "$1_ref" "$STEPS"
}

echo "== planc: QLoRA (NF4, double quantization) against PyTorch on nf4_ref.py's weights"
qlora_plan tune true
against_torch tune 1

echo "== step 0 is the dequantized base model's loss; the exports"
"$PY" "$HERE/nf4_ref.py" dequantize --in base_ckpt.safetensors --out base_deq.safetensors \
  --match "$GPT_MATRICES" --block 64 --double 1
./base --quiet --steps 1 --init base_deq.safetensors --log base0.jsonl
HERE_DIR="$HERE" "$PY" - "$RANK" "$ALPHA" <<'EOF'
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE_DIR"])
from gpt_ref import read_safetensors
from same_tensors import load
rank, alpha = int(sys.argv[1]), float(sys.argv[2])
first = lambda f: next(json.loads(l)["loss"] for l in open(f) if '"step": 0' in l)
assert first("tune.jsonl") == first("base0.jsonl"), ("step 0 != the dequantized base's", first("tune.jsonl"), first("base0.jsonl"))
print("step 0 loss equals the dequantized base model's:", first("tune.jsonl"))
init, _ = read_safetensors("tune_init.safetensors")
base, _ = read_safetensors("base_ckpt.safetensors")
deq, _ = read_safetensors("tune_deq.safetensors")
merged, _ = read_safetensors("tune_merged.safetensors")
raw_base, raw_deq, raw_merged = load("base_ckpt.safetensors"), load("tune_deq.safetensors"), load("tune_merged.safetensors")
params = sorted(k for k in init if ".lora_" not in k)
assert sorted(merged) == params == sorted(k for k in base if not k.startswith("optimizer.")), sorted(merged)
quantized = 0
for k in params:
    assert np.array_equal(np.asarray(init[k]), np.asarray(base[k])), k  # --save-init: the base as loaded
    module = k[: -len(".weight")] if k.endswith(".weight") else None
    if module and module.rsplit(".", 1)[-1] in ("c_attn", "c_proj", "c_fc"):
        quantized += 1
        assert not np.array_equal(np.asarray(deq[k]), np.asarray(base[k])), k
        if module.endswith(("c_attn", "c_fc")):
            continue  # adapted: checked below against the final checkpoint's adapters
        assert raw_merged[k] == raw_deq[k], ("not nf4_ref.py's dequantization", k)
    else:
        assert raw_merged[k] == raw_base[k], ("changed though not quantized", k)
assert quantized == 8, quantized
print("merged: the unadapted NF4 matrices bitwise nf4_ref.py's; embeddings, norms and biases the base's")
EOF

echo "== generation from the QLoRA checkpoint: the base quantized as the run did, the adapters applied"
same_generation ckpt_tune tune_merged.safetensors

echo "== without double quantization"
qlora_plan tune_single false
against_torch tune_single 0

echo "== the llama family, the output head quantized too"
lora_llama_plan "c_attn, down" '  quantize  = nf4(block: 64, double: true)'
./tune_llama --quiet --save-init llama_init.safetensors --save-grads llama_grads.safetensors --log llama.jsonl
"$PY" "$HERE/nf4_ref.py" dequantize --in llama_init.safetensors --out llama_deq.safetensors \
  --match '\.(c_attn|c_proj|gate|up|down)\.weight$|^output\.weight$' --block 64 --double 1
lora_ref llama_ref llama_deq.safetensors c_attn,down 10 "${LLAMA[@]}"
lora_compare llama.jsonl llama_grads.safetensors llama_ref 10
echo "PASS: QLoRA matches PyTorch over the independently dequantized base"
