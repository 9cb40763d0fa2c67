#!/usr/bin/env bash
# Benchmark (not a test): ZeRO-Infinity on the CPU target. The offload benchmark's 6-layer,
# 384-wide GPT (10.8M parameters) under ZeRO-3 over 2 MPI ranks, batch 8 × 256, 12 steps,
# gathered by 4 MiB buckets: without offload, with the optimizer's moments on NVMe
# (`offload { optimizer = nvme(DIR) }`), and with the parameter shard there too
# (`params = nvme(DIR)`), 4 MiB chunks. Reports the median step time of steps 3–11, the
# peak memory the executable counts beside explain's, and the run's offload summary (the
# updates' I/O, and the parameters fetched for the all-gathers). Results go to stdout as
# Markdown.
#
#   test/bench/offload_params.sh PLANC_BIN WORKDIR [THREADS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
MPIRUN=${MPIRUN:-mpirun}
rm -rf nvme_* *.jsonl
plan() { # NAME OFFLOAD
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
model bench = gpt(vocab: 256, context: 256, layers: 6, heads: 6, width: 384)
mesh two { devices = cpu(2)  axes = [dp: 2] }
train $1 {
  model = bench  mesh = two  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = 4  seq = 256
  parallel { data = dp  zero = 3  bucket = 4 MiB  $2 }
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)  steps = 12  seed = 1
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" > /dev/null
}
plan zero3 ""
plan zero3_opt "offload { optimizer = nvme(\"$WORK/nvme_opt\") }"
plan zero3_opt_params "offload { optimizer = nvme(\"$WORK/nvme_both\")  params = nvme(\"$WORK/nvme_both\") }"
echo "| run | median ms/step | peak memory (MiB, a rank) | explain (MiB) | offload |"
echo "|---|---|---|---|---|"
for name in zero3 zero3_opt zero3_opt_params; do
  "$PLANC" explain --json $name.plan > $name.explain.json
  "$MPIRUN" -n 2 ./exe_$name --log $name.jsonl > $name.out 2>&1
  /usr/bin/python3 - "$name" <<'EOF'
import json, re, statistics, sys
name = sys.argv[1]
rows = [json.loads(l) for l in open(name + ".jsonl") if '"loss"' in l]
ms = 8 * 256 / statistics.median(r["tokens_per_s"] for r in rows[3:]) * 1e3
peak = max(r["mem_device_peak_bytes"] for r in rows) / 2**20
predicted = json.load(open(name + ".explain.json"))["per_rank_bytes"][0]["total"] / 2**20
out = open(name + ".out").read()
m = re.search(r"offload ([0-9.]+) MiB read and written in ([0-9.]+) s of updates \(([0-9.]+) GB/s\), ([0-9.]+) s waiting"
              r"(, ([0-9.]+) MiB of parameters fetched for all-gathers in ([0-9.]+) s)?", out)
off = "-"
if m:
    off = f"updates {m.group(1)} MiB in {m.group(2)} s ({m.group(4)} s waiting)"
    if m.group(5):
        off += f"; {m.group(6)} MiB fetched in {m.group(7)} s"
print(f"| {name} | {ms:.1f} | {peak:.1f} | {predicted:.1f} | {off} |")
EOF
done
