#!/usr/bin/env bash
# libplanrt_cuda's kernels compiled for sm_90 with ptxas's report (-Xptxas -v): no kernel
# may spill registers to local memory (a spill turns a register access into a memory
# access in the inner loops of attention or the norms). Prints each kernel's registers.
#
#   test/e2e/cuda_resources.sh NVCC SOURCE_ROOT WORKDIR
set -euo pipefail
NVCC=$1 ROOT=$2 WORK=$3
mkdir -p "$WORK"
failed=0
for cu in "$ROOT"/runtime/cuda/*.cu; do
  log="$WORK/$(basename "$cu" .cu).ptxas.txt"
  "$NVCC" -std=c++17 -O2 -arch=sm_90 -Xptxas -v -I"$ROOT/runtime/cuda" -I"$ROOT/runtime/include" \
    -c "$cu" -o "$WORK/$(basename "$cu" .cu).o" > "$log" 2>&1 || { cat "$log"; exit 1; }
  kernels=$(grep -c "Compiling entry function" "$log" || true)
  spills=$(grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$log" || true)
  echo "$(basename "$cu"): $kernels kernels, registers $(grep -oE "Used [0-9]+ registers" "$log" | awk '{print $2}' | sort -n | tail -1) at most"
  if [[ -n $spills ]]; then
    echo "FAIL: $(basename "$cu") spills:"
    grep -B2 -E "[1-9][0-9]* bytes spill" "$log"
    failed=1
  fi
done
exit $failed
