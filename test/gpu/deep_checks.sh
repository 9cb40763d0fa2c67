#!/usr/bin/env bash
# The GPU checks beyond run_all.sh, on the same bundle (test/gpu/bundle.sh):
#   1. step-0 gradients (--save-grads) of the CUDA target against the CPU target's, tensor
#      by tensor (compare_grads.py: relative L2 error per tensor), for tiny and gpt2_small
#      in fp32;
#   2. compute-sanitizer memcheck (2 steps) and racecheck (1 step) on the tiny plan in fp32,
#      with each attention kernel (the default tensor cores, and PLANRT_CUDA_ATTENTION=simt),
#      and in bf16 (the bf16 tensor-core kernels);
#   3. the tensor-core instructions (HMMA/HGMMA) in each libplanrt_cuda kernel's SASS, and
#      each kernel's registers, stack and spills (cuobjdump -res-usage).
# Results go to OUT_DIR/deep_results.md; exit status 1 if a check failed.
#
#   test/gpu/deep_checks.sh BUNDLE_DIR [OUT_DIR]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=$(realpath "$1")
OUTDIR=$(realpath -m "${2:-${OUT:-$ROOT/gpu-results}}")
mkdir -p "$OUTDIR"
R="$OUTDIR/deep_results.md"
source "$ROOT/test/gpu/env.sh"
cd "$B"
data() { [[ $1 == tiny* ]] && echo "$B/data/train.bin" || echo "$B/data/gpt2_tokens.bin"; }

echo "# planc GPU deep checks" > "$R"
echo -e "\n## 1. Step-0 gradients, CUDA against CPU (fp32)\n" >> "$R"
for p in tiny_check gpt2s_check; do
  echo -e "### $p\n" >> "$R"
  OMP_NUM_THREADS=16 timeout 120 ./cpu_$p --steps 1 --quiet --data "$(data $p)" --save-grads "$OUTDIR/grads_cpu_$p.safetensors" \
    > "$OUTDIR/grads_cpu_$p.out" 2>&1 || { fail "cpu_$p --save-grads"; continue; }
  timeout 120 ./cuda_$p --steps 1 --quiet --data "$(data $p)" --save-grads "$OUTDIR/grads_cuda_$p.safetensors" \
    > "$OUTDIR/grads_cuda_$p.out" 2>&1 || { fail "cuda_$p --save-grads (see grads_cuda_$p.out)"; continue; }
  $PY "$ROOT/test/gpu/compare_grads.py" "$OUTDIR/grads_cpu_$p.safetensors" "$OUTDIR/grads_cuda_$p.safetensors" \
    --rtol 1e-4 >> "$R" || fail "$p: step-0 gradients differ"
  rm -f "$OUTDIR"/grads_*_"$p".safetensors
done

echo -e "\n## 2. compute-sanitizer on the tiny plans\n" >> "$R"
# tiny in fp32 with each attention kernel (the default tensor cores, simt), and in bf16.
for run in tiny_check:default tiny_check:simt tiny_bf16_check:default; do
  p=${run%%:*} att=${run##*:}
  [[ -x ./cuda_$p ]] || continue
  for tool in memcheck racecheck; do
    steps=2; [[ $tool == racecheck ]] && steps=1
    log="$OUTDIR/sanitizer_${tool}_${p}_$att.txt"
    PLANRT_CUDA_ATTENTION=$att timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 3 --print-limit 20 \
      ./cuda_$p --steps $steps --quiet --data "$(data tiny_check)" > "$log" 2>&1
    rc=$?
    echo "- $tool, $p, attention $att: exit $rc; $(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$log" | tr '\n' ' ')" >> "$R"
    [[ $rc == 0 ]] || fail "compute-sanitizer $tool, $p, attention $att (exit $rc, see $(basename "$log"))"
  done
done

echo -e "\n## 3. libplanrt_cuda: tensor-core instructions and resources per kernel\n" >> "$R"
LIB="$B/lib/libplanrt_cuda.so"
cuobjdump -sass "$LIB" > "$OUTDIR/sass.txt" 2>&1
echo '```' >> "$R"
awk '/Function :/{f=$3} /HMMA|HGMMA/{n[f]++} END{for (k in n) print n[k], k}' "$OUTDIR/sass.txt" | sort -k2 >> "$R"
echo "total HMMA/HGMMA: $(grep -cE 'HMMA|HGMMA' "$OUTDIR/sass.txt")" >> "$R"
cuobjdump -res-usage "$LIB" 2>&1 | grep -E 'Function|REG|STACK' | paste - - | awk '{print}' | head -80 > "$OUTDIR/res_usage.txt"
grep -E 'STACK:[1-9]' "$OUTDIR/res_usage.txt" >> "$R" || echo "no kernel uses a stack frame" >> "$R"
echo '```' >> "$R"
gzip -f "$OUTDIR/sass.txt"
cat "$R"
exit $failed
