#!/usr/bin/env bash
# Benchmark (not a test): LoRA and QLoRA against full fine-tuning of the same model on the
# CPU target. A 6-layer, 384-wide GPT (10.8M parameters), batch 8 × 256, 12 steps from the
# same base checkpoint: full fine-tuning, rank-8 adapters on c_attn, c_proj and c_fc, and
# the same over the base stored as NF4. Reports the median step time of steps 3–11,
# tokens/s, the peak memory the executable counts (mem_device_peak_bytes: its buffers and
# the generated code's) beside `planc explain`'s total and their ratio, the weight-gradient
# GEMMs in each gradient function (nn.matmul_wgrad in `planc emit --stage grad`) and the
# trained parameters. Results go to stdout as a Markdown table.
#
#   test/bench/lora.sh PLANC_BIN WORKDIR [THREADS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
plan() { # NAME EXTRA
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
model bench = gpt(vocab: 256, context: 256, layers: 6, heads: 6, width: 384)
train $1 {
  model = bench  mesh = cpu1  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = 8  seq = 256  parallel { data = dp }
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)  steps = 12  seed = 1
  $2
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" > /dev/null
}
plan base ""
./exe_base --quiet --steps 1 --export base.safetensors > /dev/null 2>&1
plan full 'init = checkpoint("base.safetensors")'
plan lora 'init = checkpoint("base.safetensors")
  adapt = lora(rank: 8, alpha: 16, targets: [c_attn, c_proj, c_fc])'
plan qlora 'init = checkpoint("base.safetensors")
  adapt = lora(rank: 8, alpha: 16, targets: [c_attn, c_proj, c_fc])
  quantize = nf4(block: 64, double: true)'
echo "| run | trained parameters | weight-gradient GEMMs | median ms/step | tok/s | peak memory (MiB) | explain (MiB) | measured / explain |"
echo "|---|---|---|---|---|---|---|---|"
for name in full lora qlora; do
  "$PLANC" explain --json $name.plan > $name.explain.json
  ./exe_$name --quiet --log $name.jsonl --save-init $name.init.safetensors > /dev/null 2>&1
  wgrads=$("$PLANC" emit --stage grad $name.plan | awk "/func.func private @${name}_grad/,/^  }/" |
    grep -c "nn.matmul_wgrad" || true)
  /usr/bin/python3 - "$name" "$wgrads" <<'EOF'
import json, statistics, struct, sys
name, wgrads = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(name + ".jsonl") if '"loss"' in l]
tokps = statistics.median(r["tokens_per_s"] for r in rows[3:])
ms = 8 * 256 / tokps * 1e3
peak = max(r["mem_device_peak_bytes"] for r in rows) / 2**20
predicted = json.load(open(name + ".explain.json"))["per_rank_bytes"][0]["total"] / 2**20
raw = open(name + ".init.safetensors", "rb").read()
head = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
count = lambda keep: sum(eval("*".join(map(str, v["shape"])) or "1") for k, v in head.items()
                         if k != "__metadata__" and keep(k))
trained = count(lambda k: ".lora_" in k) if name != "full" else count(lambda k: True)
print("| %s | %s | %s | %.1f | %.0f | %.1f | %.1f | %.3f |" % (name, format(trained, ","), wgrads, ms, tokps, peak,
                                                            predicted, peak / predicted))
EOF
done
