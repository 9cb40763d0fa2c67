# Shell functions shared by the end-to-end tests of retrieval and serving
# (retrieval_build.sh, serve.sh, generate.sh): source it after defining fail().

# licenses_corpus NAME...: docs/NAME.txt from the machine's license texts (those it has),
# and their MANIFEST.sha256.
licenses_corpus() {
  mkdir -p docs
  local f
  for f in "$@"; do
    [[ -f /usr/share/common-licenses/$f ]] && cp "/usr/share/common-licenses/$f" "docs/$f.txt"
  done
  sha256sum docs/*.txt > MANIFEST.sha256
}

# licenses_plan: licenses.plan, a retrieval graph over docs/*.txt.
licenses_plan() {
  cat > licenses.plan <<'PLAN'
retrieval licenses {
  corpus   = files("docs/*.txt", manifest: "MANIFEST.sha256")
  chunk    = tokens(96, overlap: 16)
  embed    = hashing(dim: 256)
  index    = faiss("Flat", metric: ip)
  search   = hybrid(vector: 0.5, keyword: 0.5, top: 20)
  guard    = quarantine
  store    = "index/licenses"
}
PLAN
}

# A server still running when the test ends (a failed check) is killed, so that the
# test fails at once instead of waiting on its open output for the test's timeout. Only
# the script's own background jobs still running: a PID already waited for may be
# another process's by then.
trap 'for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null || true; done' EXIT

# serve_start LOG EXE [OPTION...]: `EXE serve` on a free loopback port in the background,
# stderr in LOG.err, stdout in LOG.out; sets PID and PORT once the ready line names it
# (within SERVE_START_SECONDS, default 10: a large store takes longer to verify and load).
serve_start() {
  local log=$1 exe=$2
  shift 2
  "./$exe" serve --listen 127.0.0.1:0 "$@" > "$log.out" 2> "$log.err" &
  PID=$!
  for _ in $(seq $((${SERVE_START_SECONDS:-10} * 10))); do
    PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$log.err" 2>/dev/null | sed 's/.*://' || true)
    [[ -n "$PORT" ]] && return 0
    kill -0 "$PID" 2>/dev/null || { cat "$log.err"; fail "$exe serve exited at start"; }
    sleep 0.1
  done
  fail "$exe serve printed no ready line"
}
