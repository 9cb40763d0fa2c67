#!/usr/bin/env bash
# Benchmark (not a test): wall time of `planc check` on every stdlib and example file,
# best and median of N runs each, and of one run over all of them.
#   test/bench/check_time.sh [N]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
planc=${PLANC:-$root/build/bin/planc}
n=${1:-20}
files=$(cd "$root" && ls stdlib/models/*.plan stdlib/meshes/*.plan examples/*.plan)
now() { date +%s.%N; }
printf "%-32s %10s %10s\n" file best_ms median_ms
total_best=0
for f in $files; do
  times=()
  for _ in $(seq "$n"); do
    t0=$(now); "$planc" check "$root/$f" >/dev/null; t1=$(now)
    times+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
  done
  sorted=$(printf "%s\n" "${times[@]}" | sort -g)
  best=$(echo "$sorted" | head -1)
  median=$(echo "$sorted" | sed -n "$(( (n + 1) / 2 ))p")
  total_best=$(echo "$total_best + $best" | bc -l)
  printf "%-32s %10.1f %10.1f\n" "$f" "$best" "$median"
done
printf "%-32s %10.1f\n" "sum of best" "$total_best"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
