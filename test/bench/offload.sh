#!/usr/bin/env bash
# Benchmark (not a test): offloaded state against the same plan without offload on the CPU
# target, on a 6-layer, 384-wide GPT (10.8M parameters: 82 MiB of moments), batch 8 × 256,
# 12 steps, with the state's files in WORKDIR.
# 1. One process: without offload, and with the optimizer's moments on NVMe (`offload {
#    optimizer = nvme(DIR) }`) at 4 MiB chunks (the default) and at 256 KiB.
# 2. ZeRO-3 over 2 MPI ranks with 4 MiB buckets: without offload, with the moments on NVMe,
#    and with the parameter shard there too (`params = nvme(DIR)`, ZeRO-Infinity); each
#    offload with its update overlapped with the next step (the default) and with
#    `--offload-sync` (each update finished before the next step starts).
# Reports the median step time of steps 3–11, the peak memory the executable counts (on a
# rank) beside explain's, the run's offload summary (the updates' own bytes and seconds, and
# the shard's bytes read for the all-gathers), and the same disk's sequential direct-I/O
# rates from fio (io_uring, 8 MiB blocks, depth 2) where fio is installed, else dd. Results
# go to stdout as Markdown.
#
#   test/bench/offload.sh PLANC_BIN WORKDIR [THREADS]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
MPIRUN=${MPIRUN:-mpirun}
rm -rf nvme_* *.jsonl
plan() { # NAME MESH PARALLEL
  local micro=8
  [[ $2 == two ]] && micro=4
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
model bench = gpt(vocab: 256, context: 256, layers: 6, heads: 6, width: 384)
mesh two { devices = cpu(2)  axes = [dp: 2] }
train $1 {
  model = bench  mesh = $2  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = $micro  seq = 256  parallel { data = dp  $3 }
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)  steps = 12  seed = 1
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" > /dev/null
}
run() { # NAME RANKS [EXECUTABLE OPTION]: one row of a table
  local out=$1${3:+$3}
  "$PLANC" explain --json "$1.plan" > "$1.explain.json"
  if [[ $2 -eq 1 ]]; then
    "./exe_$1" --log "$out.jsonl" ${3:+"$3"} > "$out.out" 2>&1
  else
    "$MPIRUN" -n "$2" "./exe_$1" --log "$out.jsonl" ${3:+"$3"} > "$out.out" 2>&1
  fi
  /usr/bin/python3 - "$1" "$out" "${3:-}" <<'PYEOF'
import json, re, statistics, sys
name, out, option = sys.argv[1:4]
rows = [json.loads(l) for l in open(out + ".jsonl") if '"loss"' in l]
ms = 8 * 256 / statistics.median(r["tokens_per_s"] for r in rows[3:]) * 1e3
peak = max(r["mem_device_peak_bytes"] for r in rows) / 2**20
predicted = json.load(open(name + ".explain.json"))["per_rank_bytes"][0]["total"] / 2**20
text = open(out + ".out").read()
m = re.search(r"offload ([0-9.]+) MiB read and written in ([0-9.]+) s of updates \(([0-9.]+) GB/s\), ([0-9.]+) s waiting"
              r"(, ([0-9.]+) MiB of parameters fetched for all-gathers in ([0-9.]+) s)?", text)
updates = "-"
if m:
    updates = f"{m.group(1)} MiB in {m.group(2)} s: {m.group(3)} GB/s, {m.group(4)} s waiting"
    if m.group(5):
        updates += f"; {m.group(6)} MiB of the shard read for all-gathers in {m.group(7)} s"
    if w := re.search(r"overlapped with the next steps, which waited ([0-9.]+) s for them", text):
        updates += f"; overlapped, the steps waited {w.group(1)} s for them"
print(f"| {name}{' ' + option if option else ''} | {ms:.1f} | {peak:.1f} | {predicted:.1f} | {updates} |")
PYEOF
}
plan plain cpu1 ""
plan nvme_4m cpu1 "offload { optimizer = nvme(\"$WORK/nvme_4m\") }"
plan nvme_256k cpu1 "offload { optimizer = nvme(\"$WORK/nvme_256k\", buffer: 256 KiB) }"
zero3="zero = 3  bucket = 4 MiB"
plan zero3 two "$zero3"
plan zero3_opt two "$zero3  offload { optimizer = nvme(\"$WORK/nvme_opt\") }"
plan zero3_opt_params two "$zero3  offload { optimizer = nvme(\"$WORK/nvme_both\")  params = nvme(\"$WORK/nvme_both\") }"
echo "| run | median ms/step | peak memory (MiB) | explain (MiB) | offloaded updates |"
echo "|---|---|---|---|---|"
for name in plain nvme_4m nvme_256k; do run "$name" 1; done
echo
echo "| run (ZeRO-3, 2 ranks) | median ms/step | peak memory (MiB, a rank) | explain (MiB) | offloaded updates |"
echo "|---|---|---|---|---|"
run zero3 2
for name in zero3_opt zero3_opt_params; do
  run "$name" 2 --offload-sync
  run "$name" 2
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
