#!/usr/bin/env bash
# `EXE serve` against one process per query (docs/BENCHMARKS.md "Serving"), on the
# rag_manpages corpus (rag_manpages_prepare.sh): for each store, ingest time, the
# latency of `EXE query … --k 10 --json` started once per query, and the server under
# wrk at 1, 8 and 32 connections (p50, p99, requests/s), hybrid k = 10, each request a
# different query (the pages' NAME descriptions, in turn).
#
#   test/bench/serve.sh [WORKDIR] [STORE...]
#
# STORE is NAME:CHUNK_SIZE:OVERLAP:FACTORY[:SEARCH_OPTIONS], e.g. pages:256:32:Flat or
# small:32:4:HNSW32:ef_search=64. Default: the 2000 pages as 256-token chunks (about 9.3K)
# and as 32-token chunks (about 100K), with Flat.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${PLANC_BUILD:-$root/build}
work=${1:-$build/rag_manpages}
shift || true
stores=("$@")
[[ ${#stores[@]} -gt 0 ]] || stores=(pages:256:32:Flat small:32:4:Flat)
command -v wrk > /dev/null || { echo "serve bench: needs wrk (apt-get install wrk)" >&2; exit 2; }
[[ -f "$work/queries.tsv" ]] || bash "$root/test/bench/rag_manpages_prepare.sh" "$work"
source "$root/test/e2e/serve_lib.sh"
fail() { echo "serve bench: $*" >&2; exit 1; }
cd "$work"
threads=${SERVE_THREADS:-4}
duration=${SERVE_SECONDS:-10}

# wrk posts the queries in turn.
awk -F'\t' 'NR <= 1000 {print $2}' queries.tsv | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    print(json.dumps({"text": line.strip(), "k": 10}))' > bodies.jsonl
cat > post.lua <<'EOF'
local bodies, i = {}, 0
for line in io.lines("bodies.jsonl") do bodies[#bodies + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, "/query", nil, bodies[i])
end
EOF

for spec in "${stores[@]}"; do
  IFS=: read -r name size overlap factory options <<< "$spec"
  extra=""
  [[ -n "${options:-}" ]] && extra=", ${options//=/: }"
  cat > "bench_$name.plan" <<EOF
retrieval $name {
  corpus = files("corpus/*.txt", manifest: "MANIFEST.sha256")
  chunk  = tokens($size, overlap: $overlap)
  embed  = hashing(dim: 384)
  index  = faiss("$factory", metric: ip$extra)
  search = hybrid(vector: 0.3, keyword: 0.7, top: 10)
  guard  = quarantine
  store  = "stores/$name"
}
EOF
  "$build/bin/planc" build "bench_$name.plan" -o "rag_$name"
  t0=$(date +%s.%N)
  "./rag_$name" ingest --quiet > "ingest_$name.log"
  t1=$(date +%s.%N)
  echo "== $name ($spec): $(grep -o '[0-9]* chunks' "ingest_$name.log" | head -1), ingest $(echo "$t1 - $t0" | bc) s"

  # One process per query: the command line, 20 different queries.
  awk -F'\t' 'NR <= 20 {print $2}' queries.tsv > cli_queries.txt
  : > cli_times.txt
  while IFS= read -r q; do
    s0=$(date +%s%N)
    "./rag_$name" query "$q" --k 10 --json > /dev/null
    echo $(( ($(date +%s%N) - s0) / 1000 )) >> cli_times.txt
  done < cli_queries.txt
  sort -n cli_times.txt | awk '{a[NR]=$1} END {printf "one process per query: p50 %.1f ms, max %.1f ms (%d queries)\n", a[int((NR+1)/2)]/1000, a[NR]/1000, NR}'

  SERVE_START_SECONDS=120 serve_start "serve_$name" "rag_$name" --threads "$threads" --access-log off
  pid=$PID port=$PORT
  wrk -t1 -c1 -d2s -s post.lua "http://127.0.0.1:$port" > /dev/null # warm
  for c in 1 8 32; do
    wrk -t1 -c"$c" -d"${duration}s" --latency -s post.lua "http://127.0.0.1:$port" > "wrk_${name}_$c.txt"
    awk -v c="$c" -v t="$threads" '
      /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /^Requests\/sec/ {rps=$2} /Non-2xx/ {bad=$NF}
      END {printf "serve (%d threads), %2d connections: p50 %s, p99 %s, %s requests/s%s\n", t, c, p50, p99, rps, bad ? ", NON-2XX " bad : ""}' \
      "wrk_${name}_$c.txt"
  done
  kill -TERM "$pid"
  wait "$pid"
done
