#!/usr/bin/env bash
# Every GPU test and benchmark, on a bare GPU machine (nvcc, CMake, PyTorch; no apt, no
# planc): the bundle test/gpu/bundle.sh made where planc builds, then
#   1. the CUDA kernels against their CPU references (planc-cuda-kernels-test), with
#      each kernel's time;
#   2. correctness: tiny and gpt2_small (fp32 and bf16), 20 steps on the CUDA target
#      against the CPU target from the same initial weights and batches: per-step loss
#      rtol 2e-2, final loss within 1 % (TESTING.md's bf16 row); 2b. the optimizer's
#      moments on NVMe (offload): tiny's losses against the same plan without offload on
#      the GPU (bitwise expected), and gpt2_small's benchmark step with them;
#   3. memory: each CUDA run's device memory peak (mem_device_peak_bytes: all the managed
#      memory the runtime and the generated code held at once) and the arena its manifest
#      reserves (plan-memory-plan) against `planc explain`'s per-device total for the plan
#      on a mesh of one GPU (bundle.sh), less the cuBLASLt workspace the peak leaves out;
#   4. benchmark: gpt2_small (124M), batch 8 × 1024, bf16: planc's tokens/s and MFU
#      against PyTorch eager and torch.compile (test/gpu/torch_gpt.py) in the same run;
#   5. where the benchmark's time goes (PLANRT_CUDA_PROFILE, profile_summary.py);
#   6. deep_checks.sh: step-0 gradients against the CPU's, compute-sanitizer memcheck and
#      racecheck, tensor-core instructions and spills of libplanrt_cuda.
# Section 2 uses the CPU target's losses the bundle carries (bundle.sh ran them where it
# was made) and runs the CPU executables only when they are missing.
# Results go to OUT_DIR/gpu_results.md and OUT_DIR/deep_results.md, the logs to
# OUT_DIR/logs.tgz (the device tool brings back 8 files at most); the exit status is 1
# if any check failed.
#
#   test/gpu/run_all.sh [BUNDLE_DIR|BUNDLE.tar.xz [OUT_DIR]]   (defaults: gpu-bundle, $OUT or gpu-results)
# CHECKS="tiny_check" limits sections 2 and 3 to those plans; BENCH=0 skips sections 4
# and 5, TORCH=0 PyTorch's runs in section 4, DEEP=0 section 6; NCU=REGEX adds section 7,
# Nsight Compute on the benchmark's kernels matching REGEX. Each program is stopped
# after STEP_TIMEOUT seconds (default 300) and compute-sanitizer after SAN_TIMEOUT (default
# 150), so that a hang costs one check.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$(realpath "${1:-$ROOT/gpu-bundle}")
if [[ -f "$B" && "$B" == *.tar.xz ]]; then  # the carried form: unpack beside /tmp
  mkdir -p /tmp/planc-gpu && tar -C /tmp/planc-gpu -xJf "$B" && B=/tmp/planc-gpu/$(basename "$B" .tar.xz)
fi
RESULTS=$(realpath -m "${2:-${OUT:-$ROOT/gpu-results}}")
[[ -x "$B/planc-cuda-kernels-test" ]] || { echo "run_all.sh: no bundle at $B (make one with test/gpu/bundle.sh)" >&2; exit 2; }
OUTDIR="$RESULTS/logs"
mkdir -p "$OUTDIR"
R="$RESULTS/gpu_results.md"
source "$ROOT/test/gpu/env.sh"
T="timeout ${STEP_TIMEOUT:-300}"

{
  echo "# planc GPU results"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "- torch: $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1)"
  echo
  echo "## 1. Kernels against the CPU"
  echo '```'
} > "$R"
if ! $T "$B/planc-cuda-kernels-test" > "$OUTDIR/kernels.txt" 2>&1; then fail "planc-cuda-kernels-test"; fi
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^\[bench\]|^\[diff\]' "$OUTDIR/kernels.txt" >> "$R"
echo '```' >> "$R"

cd "$B"
echo -e "\n## 2. CUDA target against the CPU target (20 steps, same weights and batches)\n" >> "$R"
echo "| plan | precision | worst per-step loss rel. diff | final loss CPU / CUDA | pass |" >> "$R"
echo "|---|---|---|---|---|" >> "$R"
# The plans' data paths were resolved where the bundle was made: name the bundle's copy.
data() { [[ $1 == tiny* ]] && echo "$B/data/train.bin" || echo "$B/data/gpt2_tokens.bin"; }
CHECKS=${CHECKS:-tiny_check tiny_bf16_check gpt2s_check gpt2s_bf16_check}
for p in $CHECKS; do
  ok=1
  if [[ -s "$B/ref/cpu_$p.jsonl" ]]; then
    cp "$B/ref/cpu_$p.jsonl" "$OUTDIR/cpu_$p.jsonl"
  else
    OMP_NUM_THREADS=16 ./cpu_$p --data "$(data $p)" --log "$OUTDIR/cpu_$p.jsonl" > "$OUTDIR/cpu_$p.out" 2>&1 ||
      { fail "cpu_$p"; ok=0; }
  fi
  [[ $ok == 1 ]] || continue
  # Each plan with the default attention kernels (tensor cores: bf16 in a bf16 plan, split
  # TF32 in an fp32 one) and with the CUDA-core ones (simt).
  # A bf16 plan also with every GEMM's operands staged in 16 bits (gemm.cpp).
  for v in default simt $([[ $p == *bf16* ]] && echo staged); do
    run=cuda_$p; [[ $v != default ]] && run=cuda_${p}_$v
    att=$v stage=auto; [[ $v == staged ]] && att=default stage=operands
    PLANRT_CUDA_ATTENTION=$att PLANRT_CUDA_GEMM_STAGE=$stage $T ./cuda_$p --data "$(data $p)" \
      --log "$OUTDIR/$run.jsonl" > "$OUTDIR/$run.out" 2>&1 || { fail "$run (see $run.out)"; continue; }
    $PY - "$OUTDIR/cpu_$p.jsonl" "$OUTDIR/$run.jsonl" "$p" "$v" >> "$R" <<'PY' || fail "$run: CUDA losses differ from the CPU's"
import json, sys
def losses(f): return [json.loads(l)["loss"] for l in open(f) if '"loss"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
final = abs(a[-1] - b[-1]) / abs(a[-1])
ok = len(a) == len(b) >= 20 and worst <= 2e-2 and final <= 1e-2
prec = "bf16" if "bf16" in sys.argv[3] else "fp32"
name = sys.argv[3] + {"simt": " (attention: simt)", "staged": " (GEMMs: every one staged)"}.get(sys.argv[4], "")
print(f"| {name} | {prec} | {worst:.2e} | {a[-1]:.5f} / {b[-1]:.5f} | {'yes' if ok else 'NO'} |")
sys.exit(0 if ok else 1)
PY
  done
done

if [[ -x ./cuda_tiny_offload_check && -s "$OUTDIR/cuda_tiny_check.jsonl" ]]; then
  echo -e "\n## 2b. The optimizer's moments on NVMe (offload { optimizer = nvme })\n" >> "$R"
  rm -rf /tmp/planc-nvme && mkdir -p /tmp/planc-nvme
  $T ./cuda_tiny_offload_check --data "$(data tiny)" --offload-dir /tmp/planc-nvme/tiny \
    --log "$OUTDIR/cuda_tiny_offload_check.jsonl" > "$OUTDIR/cuda_tiny_offload_check.out" 2>&1 ||
    fail "cuda_tiny_offload_check (see cuda_tiny_offload_check.out)"
  if [[ ${BENCH:-1} != 0 ]]; then
    $T ./cuda_gpt2s_bench_offload --steps 12 --data "$B/data/gpt2_tokens.bin" --offload-dir /tmp/planc-nvme/gpt2s \
      --log "$OUTDIR/bench_offload.jsonl" > "$OUTDIR/bench_offload.out" 2>&1 || fail "cuda_gpt2s_bench_offload"
  fi
  $PY - "$OUTDIR" >> "$R" <<'PY' || fail "offload: the losses differ from the plan's without offload"
import json, os, statistics, sys
out = sys.argv[1]
rows = lambda f: [json.loads(l) for l in open(os.path.join(out, f)) if '"loss"' in l]
a, b = rows("cuda_tiny_check.jsonl"), rows("cuda_tiny_offload_check.jsonl")
same = len(a) == len(b) == 20 and all(x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"] for x, y in zip(a, b))
worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b)) if a and b else float("nan")
fall = max(r["mem_device_peak_bytes"] for r in a) - max(r["mem_device_peak_bytes"] for r in b) if a and b else 0
print(f"- tiny, 20 steps: losses and gradient norms bitwise those without offload: {'yes' if same else 'NO'} "
      f"(worst loss rel. diff {worst:.2e}); device peak {fall / 2**20:.2f} MiB lower")
if os.path.exists(os.path.join(out, "bench_offload.jsonl")):
    ms = lambda f: statistics.median(1e3 * 8 * 1024 / r["tokens_per_s"] for r in rows(f)[3:])
    last = open(os.path.join(out, "bench_offload.out")).read().strip().splitlines()[-1:]
    print(f"- gpt2_small bf16, batch 8 x 1024: {ms('bench_offload.jsonl'):.1f} ms a step with the moments on NVMe "
          f"(median of steps 3-11; section 4 times it without)")
    print(f"- its final line: `{last[0] if last else ''}`")
sys.exit(0 if same else 1)
PY
fi

echo -e "\n## 3. Device memory peak against planc explain\n" >> "$R"
echo "| plan | executable's mem_device_peak_bytes (MiB) | its arena, from the manifest (MiB) | explain total on one GPU, less the cuBLASLt workspace (MiB) | peak / explain |" >> "$R"
echo "|---|---|---|---|---|" >> "$R"
for p in $CHECKS; do
  [[ -s "$OUTDIR/cuda_$p.jsonl" ]] || continue
  $PY - "$OUTDIR/cuda_$p.jsonl" "explain_$p.json" "$p" "cuda_$p" >> "$R" <<'PY'
import json, re, sys
peak = max(json.loads(l)["mem_device_peak_bytes"] for l in open(sys.argv[1]) if '"loss"' in l)
e = json.load(open(sys.argv[2]))
# The runtime's count leaves out the cuBLASLt workspace (cudaMalloc'd), which explain counts.
pred = e["per_rank_bytes"][0]["total"] - sum(b["bytes"] for b in e.get("buffers", []) if b["name"] == "cuBLASLt workspace")
m = re.search(rb'"memory":(\{[^{}]*\{[^{}]*\}[^{}]*\})', open(sys.argv[4], "rb").read())
plan = json.loads(m.group(1)) if m else None
arena = (plan.get("stage_state_bytes", [plan["state_bytes"]])[0] + plan.get("stage_step_bytes", [plan["step_bytes"]])[0]
         if plan else float("nan"))
print(f"| {sys.argv[3]} | {peak / 2**20:.1f} | {arena / 2**20:.1f} | {pred / 2**20:.1f} | {peak / pred:.2f} |")
PY
done

finish() {
  if [[ ${DEEP:-1} != 0 ]]; then
    echo -e "\n## 6. Deep checks: see deep_results.md\n" >> "$R"
    "$ROOT/test/gpu/deep_checks.sh" "$B" "$OUTDIR" > "$OUTDIR/deep.log" 2>&1 || fail "deep checks (see deep_results.md)"
    mv "$OUTDIR/deep_results.md" "$RESULTS/" 2>/dev/null
  fi
  if [[ -n ${NCU:-} ]]; then
    # Nsight Compute on the kernels named by the regular expression NCU (for instance
    # NCU='planc_grad_loop199|crossEntropy'), one launch each, in the benchmark's second
    # step: achieved bandwidth and occupancy, for what the profile cannot say.
    echo -e "\n## 7. Nsight Compute: kernels matching '$NCU'\n" >> "$R"
    timeout ${NCU_TIMEOUT:-240} ncu --kernel-name "regex:$NCU" --launch-skip 0 --launch-count 4 --section SpeedOfLight \
      --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats ./cuda_gpt2s_bench --steps 2 --quiet \
      --data "$B/data/gpt2_tokens.bin" > "$OUTDIR/ncu.txt" 2>&1 || fail "ncu (see ncu.txt)"
    echo '```' >> "$R"
    grep -E '^  [a-zA-Z_].*\(|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per' \
      "$OUTDIR/ncu.txt" >> "$R"
    echo '```' >> "$R"
  fi
  rm -f "$OUTDIR"/*.safetensors
  tar -C "$RESULTS" -czf "$RESULTS/logs.tgz" logs && rm -rf "$OUTDIR"
  cat "$R"
  exit $failed
}
if [[ ${BENCH:-1} == 0 ]]; then finish; fi
echo -e "\n## 4. Benchmark: gpt2_small, batch 8 x 1024, bf16 (median of steps 5-29)\n" >> "$R"
# Timed without the profile (which waits after every operation): the defaults, then each
# variant of BENCH_VARIANTS (space-separated; a variant's NAME=VALUE settings
# comma-separated); then profiled for 12 steps.
BENCH_VARIANTS=${BENCH_VARIANTS:-PLANRT_CUDA_GEMM_STAGE=never PLANRT_CUDA_GEMM_STAGE=operands}
: > "$OUTDIR/bench_runs.txt"
i=0
for v in "" $BENCH_VARIANTS; do
  log=bench$([[ -n $v ]] && echo _$i).jsonl
  env ${v//,/ } $T ./cuda_gpt2s_bench --data "$B/data/gpt2_tokens.bin" --log "$OUTDIR/$log" > "$OUTDIR/${log%.jsonl}.out" 2>&1 ||
    fail "cuda_gpt2s_bench ${v:-(defaults)} (see ${log%.jsonl}.out)"
  echo "$log|planc (CUDA target${v:+, $v})" >> "$OUTDIR/bench_runs.txt"
  i=$((i + 1))
done
if [[ -x ./cuda_gpt2s_bench_base ]]; then  # bundle.sh's BASE_PLANC: the same plan by another planc
  $T ./cuda_gpt2s_bench_base --data "$B/data/gpt2_tokens.bin" --log "$OUTDIR/bench_base.jsonl" \
    > "$OUTDIR/bench_base.out" 2>&1 || fail "cuda_gpt2s_bench_base (see bench_base.out)"
  echo "bench_base.jsonl|planc (CUDA target, built by BASE_PLANC: $(cat base_planc.txt 2>/dev/null))" >> "$OUTDIR/bench_runs.txt"
fi
if [[ -s baselib/libplanrt_cuda.so ]]; then  # bundle.sh's BASE_RUNTIME: this executable on another runtime
  LD_LIBRARY_PATH="$B/baselib:$LD_LIBRARY_PATH" $T ./cuda_gpt2s_bench --data "$B/data/gpt2_tokens.bin" \
    --log "$OUTDIR/bench_baselib.jsonl" > "$OUTDIR/bench_baselib.out" 2>&1 ||
    fail "cuda_gpt2s_bench on BASE_RUNTIME's library (see bench_baselib.out)"
  echo "bench_baselib.jsonl|planc (CUDA target, libplanrt_cuda of BASE_RUNTIME: $(cat baselib/label.txt 2>/dev/null))" \
    >> "$OUTDIR/bench_runs.txt"
fi
if [[ -x ./cuda_gpt2s_bench_v50304 ]]; then
  $T ./cuda_gpt2s_bench_v50304 --data "$B/data/gpt2_tokens.bin" --log "$OUTDIR/bench_v50304.jsonl" \
    > "$OUTDIR/bench_v50304.out" 2>&1 || fail "cuda_gpt2s_bench_v50304 (see bench_v50304.out)"
  echo "bench_v50304.jsonl|planc (CUDA target, the vocabulary padded to 50,304 in the model)" >> "$OUTDIR/bench_runs.txt"
fi
PLANRT_CUDA_PROFILE="$OUTDIR/profile.txt" $T ./cuda_gpt2s_bench --steps 12 --data "$B/data/gpt2_tokens.bin" \
  --log "$OUTDIR/bench_profiled.jsonl" > "$OUTDIR/bench_profiled.out" 2>&1 || fail "profiled cuda_gpt2s_bench"
for mode in $([[ ${TORCH:-1} != 0 ]] && echo eager compile); do
  $T $PY "$ROOT/test/gpu/torch_gpt.py" --mode $mode --batch 8 --seq 1024 --steps 30 --precision bf16 \
    > "$OUTDIR/torch_$mode.json" 2> "$OUTDIR/torch_$mode.err" || fail "torch $mode (see torch_$mode.err)"
done
$PY - "$OUTDIR" "explain_gpt2s_bench.json" >> "$R" <<'PY'
import json, os, statistics, subprocess, sys
out = sys.argv[1]
e = json.load(open(sys.argv[2]))
try:
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout
except OSError:
    name = "(no nvidia-smi)"
# Dense bf16 peak per device (H100/H200 SXM: 989 TFLOP/s); MFU as llm.c and nanoGPT count it: 6 N per token
# plus the attention's 6 L S d (forward and backward of QK^T and PV; causal work not halved).
peak = 989e12
L, S, d = 12, 1024, 768
def mfu(tok, params): return tok * (6 * params + 6 * L * S * d) / peak
rows = []
for log, label in (line.rstrip("\n").split("|", 1) for line in open(os.path.join(out, "bench_runs.txt"))):
    try:
        steps = [json.loads(l) for l in open(os.path.join(out, log)) if '"loss"' in l]
        tok = statistics.median(s["tokens_per_s"] for s in steps[5:])
        rows.append((label, tok, mfu(tok, e["params"])))
    except Exception as x:
        rows.append((label, None, None))
for mode in ("eager", "compile"):
    if not os.path.exists(os.path.join(out, f"torch_{mode}.json")):
        continue
    try:
        t = json.load(open(os.path.join(out, f"torch_{mode}.json")))
        rows.append((f"PyTorch {mode} {t['torch']}", t["tokens_per_s"], mfu(t["tokens_per_s"], t["params"])))
    except Exception:
        rows.append((f"PyTorch {mode}", None, None))
print(f"device: {name.strip()}; MFU against {peak/1e12:.0f} TFLOP/s dense bf16\n")
print("| trainer | tokens/s | MFU | planc / this |")
print("|---|---|---|---|")
base = rows[0][1]
for n, tok, m in rows:
    if tok is None:
        print(f"| {n} | failed | | |")
    else:
        ratio = f"{base / tok:.2f}x" if base else ""
        print(f"| {n} | {tok:,.0f} | {100 * m:.1f} % | {ratio} |")
PY
echo -e "\nreference: llm.c, about 470K tokens/s per H100 for GPT-2 124M (from its 8xH100 runs)" >> "$R"
echo -e "\n## 5. Where the benchmark's time goes (PLANRT_CUDA_PROFILE: every operation waited for, 12 steps)\n" >> "$R"
[[ -s "$OUTDIR/profile.txt" ]] && $PY "$ROOT/test/gpu/profile_summary.py" "$OUTDIR/profile.txt" 12 >> "$R"
finish
