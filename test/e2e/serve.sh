#!/usr/bin/env bash
# `EXE serve` of a planc-built retrieval executable, on loopback: every endpoint, the
# bearer token (401), bad and oversized requests (400, 413, 404, 405), /query equal to
# `query --json`, the metrics and the access log, a reload asked for and a store
# re-ingested on disk under concurrent load with no failed request, SIGTERM draining a
# request in flight, and the start-up refusals (beyond loopback without a token, a
# weak token). The client is serve_client.py (Python's standard library).
#
#   test/e2e/serve.sh PLANC_BIN WORKDIR
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 PLANC_BIN WORKDIR" >&2; exit 2; }
PLANC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$2"
mkdir -p "$2/docs"
WORK=$(cd "$2" && pwd)
cd "$WORK"
fail() { echo "serve: FAIL: $*" >&2; exit 1; }
source "$HERE/serve_lib.sh"
licenses_corpus GPL-3 Apache-2.0 Artistic BSD MPL-2.0
licenses_plan
"$PLANC" build licenses.plan -o rag
./rag ingest --quiet > /dev/null

# Start-up refusals: exit status 1 and the cause, before anything listens.
printf 'short\n' > weak.token
printf 'f3b1c9a07d2e4b8a9c6d5e4f3a2b1c0d\n' > good.token
chmod 600 good.token
refuse() { # refuse STATUS LOG WHY ARGS...: serve exits with STATUS, saying WHY
  local want=$1 log=$2 why=$3 rc=0
  shift 3
  ./rag serve "$@" > "$log" 2>&1 || rc=$?
  [[ $rc -eq $want ]] || { cat "$log"; fail "serve $* exited with status $rc, not $want"; }
  grep -q -- "$why" "$log" || { cat "$log"; fail "serve $* did not say '$why'"; }
}
refuse 1 wide.log "beyond loopback needs --token-file" --listen 0.0.0.0:0
refuse 1 weak.log "at least 16 characters" --listen 127.0.0.1:0 --token-file weak.token
refuse 1 missing.log "missing.token" --listen 127.0.0.1:0 --token-file missing.token
refuse 2 args.log "--threads: bad value 'zero'" --threads zero
refuse 2 listen.log "--listen takes HOST:PORT" --listen 8080
echo "serve: refused at start: beyond loopback without a token, a weak or missing token, a bad option"

# What the client compares /query with: the command line's own JSON.
./rag query "patent license grant" --k 5 --json > cli_hybrid.json
./rag query "patent license grant" --k 3 --mode keyword --json > cli_keyword.json
./rag query "warranty disclaimer" --k 4 --mode vector --fusion rrf --json > cli_vector.json

stop() { # stop NAME: SIGTERM, then exit status 0 within 20 s
  kill -TERM "$PID"
  for _ in $(seq 200); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$PID" 2>/dev/null && fail "serve did not stop within 20 s of SIGTERM"
  wait "$PID" || fail "serve exited with status $? after SIGTERM"
  grep -q "serve: stopped" "$1.err" || { cat "$1.err"; fail "no stop line"; }
}

serve_start main rag --token-file good.token --threads 6 --max-body 4096 --access-log access.jsonl
/usr/bin/python3 "$HERE/serve_client.py" endpoints "$PORT" good.token "$WORK" || fail "endpoint checks"

# A reload asked for (a file added to the corpus), then one seen on disk (`ingest` run
# beside the server), each under 8 clients querying without pause.
cat > reload.sh <<'EOF'
set -e
cp /usr/share/common-licenses/LGPL-2.1 docs/LGPL-2.1.txt
sha256sum docs/*.txt > MANIFEST.sha256
EOF
/usr/bin/python3 "$HERE/serve_client.py" reload "$PORT" good.token "$WORK" || fail "reload under load"
stop main
/usr/bin/python3 "$HERE/serve_client.py" access-log access.jsonl good.token || fail "access log"

# SIGTERM drains: a request whose body is still arriving when the signal comes is
# answered; the server then stops listening and exits 0.
serve_start drain rag --access-log off
/usr/bin/python3 "$HERE/serve_client.py" drain "$PORT" "$PID" || fail "drain"
wait "$PID" || fail "serve exited with status $? after draining"
grep -q "serve: stopped" drain.err || { cat drain.err; fail "no stop line after draining"; }
echo "serve: all checks passed"
