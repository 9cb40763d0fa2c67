#!/usr/bin/env bash
# rag_manpages end to end: prepare the man-page corpus (once), build the benchmark,
# run it for the configurations docs/BENCHMARKS.md reports (the last, fasttext(…), trains
# for about five minutes).
#   test/bench/rag_manpages.sh [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${PLANC_BUILD:-$root/build}
work=${1:-$build/rag_manpages}
[[ -f "$work/queries.tsv" ]] || bash "$root/test/bench/rag_manpages_prepare.sh" "$work"
ninja -j1 -C "$build" rag_manpages > /dev/null
for args in "--factory Flat" "--factory IVF64,Flat --nprobe 8" "--factory Flat --dim 1024" \
  "--factory Flat --fasttext skipgram"; do
  # shellcheck disable=SC2086
  "$build/test/bench/rag_manpages" "$work" $args
  echo
done
