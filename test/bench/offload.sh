#!/usr/bin/env bash
# Benchmark (not a test): the optimizer's moments on NVMe (`offload { optimizer =
# nvme(DIR) }`) against the same plan without offload on the CPU target. A 6-layer,
# 384-wide GPT (10.8M parameters: 82 MiB of moments), batch 8 × 256, 12 steps, with the
# state's files in WORKDIR: without offload, with 4 MiB chunks (the default) and with
# 256 KiB chunks. Reports the median step time of steps 3–11, the peak memory the
# executable counts beside explain's, the offloaded updates' own rate (bytes read and
# written over the seconds the updates took, from the run's summary), and the same
# disk's sequential direct-I/O rates from fio (io_uring, 8 MiB blocks, depth 2) where
# fio is installed, else dd. Results go to stdout as Markdown.
#
#   test/bench/offload.sh PLANC_BIN WORKDIR [THREADS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf nvme_* *.jsonl
plan() { # NAME OFFLOAD
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
model bench = gpt(vocab: 256, context: 256, layers: 6, heads: 6, width: 384)
train $1 {
  model = bench  mesh = cpu1  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = 8  seq = 256  parallel { data = dp  $2 }
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)  steps = 12  seed = 1
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" > /dev/null
}
plan plain ""
plan nvme_4m "offload { optimizer = nvme(\"$WORK/nvme_4m\") }"
plan nvme_256k "offload { optimizer = nvme(\"$WORK/nvme_256k\", buffer: 256 KiB) }"
echo "| run | median ms/step | peak memory (MiB) | explain (MiB) | offloaded updates |"
echo "|---|---|---|---|---|"
for name in plain nvme_4m nvme_256k; do
  "$PLANC" explain --json $name.plan > $name.explain.json
  ./exe_$name --log $name.jsonl > $name.out 2>&1
  /usr/bin/python3 - "$name" <<'EOF'
import json, re, statistics, sys
name = sys.argv[1]
rows = [json.loads(l) for l in open(name + ".jsonl") if '"loss"' in l]
ms = 8 * 256 / statistics.median(r["tokens_per_s"] for r in rows[3:]) * 1e3
peak = max(r["mem_device_peak_bytes"] for r in rows) / 2**20
predicted = json.load(open(name + ".explain.json"))["per_rank_bytes"][0]["total"] / 2**20
m = re.search(r"offload ([0-9.]+) MiB read and written in ([0-9.]+) s of updates \(([0-9.]+) GB/s\), ([0-9.]+) s waiting",
              open(name + ".out").read())
updates = f"{m.group(1)} MiB in {m.group(2)} s: {m.group(3)} GB/s, {m.group(4)} s waiting" if m else "-"
print(f"| {name} | {ms:.1f} | {peak:.1f} | {predicted:.1f} | {updates} |")
EOF
done
echo
mkdir -p "$WORK/nvme_probe"
if command -v fio > /dev/null; then
  for rw in write read; do
    fio --name=probe --directory="$WORK/nvme_probe" --size=1G --bs=8M --rw=$rw --direct=1 --ioengine=io_uring \
      --iodepth=2 --output-format=json > fio_$rw.json
    /usr/bin/python3 -c "import json; j = json.load(open('fio_$rw.json'))['jobs'][0]['$rw']; \
print('fio sequential $rw (O_DIRECT, io_uring, 8 MiB, depth 2): %.2f GB/s' % (j['bw_bytes'] / 1e9))"
  done
else
  dd if=/dev/zero of="$WORK/nvme_probe/probe" bs=8M count=128 oflag=direct 2>&1 | tail -1 | sed 's/^/dd write: /'
  dd if="$WORK/nvme_probe/probe" of=/dev/null bs=8M iflag=direct 2>&1 | tail -1 | sed 's/^/dd read: /'
fi
rm -rf "$WORK/nvme_probe"
