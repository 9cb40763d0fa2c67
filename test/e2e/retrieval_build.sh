#!/usr/bin/env bash
# `planc build` of a retrieval declaration, end to end: the executable planc links
# (its main hands the graph's manifest to the runtime) ingests a manifest-checked
# corpus of the machine's license texts, answers a query with provenance and both
# sides' ranks (--json), verifies its store, refuses a changed corpus file and a
# tampered store, and `planc run` passes arguments through. Semantic chunks and a fastText
# embedder (trained at ingest, shared by serve's searchers) through built executables.
#
#   test/e2e/retrieval_build.sh PLANC_BIN WORKDIR
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 PLANC_BIN WORKDIR" >&2; exit 2; }
PLANC=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$2"
mkdir -p "$2/docs"
WORK=$(cd "$2" && pwd)
cd "$WORK"
fail() { echo "retrieval_build: FAIL: $*" >&2; exit 1; }
source "$HERE/serve_lib.sh"
licenses_corpus GPL-3 Apache-2.0 Artistic BSD MPL-2.0 LGPL-2.1
licenses_plan
"$PLANC" build licenses.plan -o rag
./rag ingest --quiet | grep -q "chunks" || fail "ingest printed no summary"
./rag query "Apache License Version 2.0 grant of patent license" --k 3 --json > hits.json
/usr/bin/python3 - <<'EOF'
import json
out = json.load(open("hits.json"))
hits = out["results"] if isinstance(out, dict) else out
assert hits, "no hits"
top = hits[0]
text = json.dumps(top)
assert "Apache-2.0.txt" in text, f"top hit is not the Apache license: {text[:300]}"
for key in ("sha256", "file"):
    assert key in text, f"no {key} in the hit"
print(f"retrieval_build: the query's top hit is {top.get('file', '?')} with provenance")
EOF
./rag verify | grep -q "ok" || fail "verify of a fresh store"
# A corpus file that changed after the manifest was written is refused; the store stays.
cp docs/BSD.txt bsd.orig
echo "one more line" >> docs/BSD.txt
if ./rag ingest --quiet > changed.log 2>&1; then fail "a changed file was ingested"; fi
grep -q "BSD.txt" changed.log || { cat changed.log; fail "the changed file is not named"; }
./rag verify | grep -q "ok" || fail "the store changed after a refused ingest"
cp bsd.orig docs/BSD.txt
# A tampered store is refused before FAISS reads it.
idx=$(find index/licenses -type f -name '*faiss*' | head -1)
[[ -n "$idx" ]] || idx=$(find index/licenses -type f | grep -v MANIFEST | head -1)
printf 'X' | dd of="$idx" bs=1 seek=100 conv=notrunc status=none
if ./rag query "license" > tampered.log 2>&1; then fail "a tampered store was used"; fi
grep -qi "$(basename "$idx")" tampered.log || { cat tampered.log; fail "the tampered file is not named"; }
echo "retrieval_build: changed corpus file and tampered $(basename "$idx") refused, naming them"
"$PLANC" run licenses.plan -- verify > run.log 2>&1 && fail "planc run verify passed on a tampered store"
grep -qi "$(basename "$idx")" run.log || { cat run.log; fail "planc run did not pass arguments through"; }
# chunk = semantic(…): whole sentences cut where the topic changes, through a built executable.
sed -e 's/chunk    = tokens(96, overlap: 16)/chunk    = semantic(96, threshold: 0.2)/' -e 's|index/licenses|index/semantic|' \
  licenses.plan > semantic.plan
grep -q "semantic(96" semantic.plan || fail "semantic.plan was not written"
cp bsd.orig docs/BSD.txt
"$PLANC" build semantic.plan -o semantic
./semantic ingest --quiet > semantic.log || { cat semantic.log; fail "semantic ingest"; }
./semantic query "grant of patent license" --k 3 --json > semantic.json
/usr/bin/python3 - <<'EOF' || fail "semantic chunks"
import json
hits = json.load(open("semantic.json"))["results"]
assert len(hits) == 3, hits
for h in hits:
    words = len(h["text"].split())
    # At most 96 tokens, unless the chunk is one long sentence.
    assert 0 < words <= 96 or ". " not in h["text"].strip(), f"a chunk of {words} tokens"
print(f"retrieval_build: semantic chunks of {[len(h['text'].split()) for h in hits]} tokens answer the query")
EOF
./semantic verify | grep -q "ok" || fail "verify of a semantic store"
# embed = fasttext(…): word vectors trained on the corpus at ingest, a file of the store.
# The same corpus gives the same model (one thread), the vector side answers, and a
# server's searchers share the store's model: POST /query answers what `query --json` does.
sed -e 's/embed    = hashing(dim: 256)/embed    = fasttext(dim: 32, epoch: 10, min_count: 1)/' \
  -e 's|index/licenses|index/fasttext|' licenses.plan > fasttext.plan
grep -q "fasttext(dim: 32" fasttext.plan || fail "fasttext.plan was not written"
"$PLANC" build fasttext.plan -o ft
./ft ingest --quiet > ft.log || { cat ft.log; fail "fasttext ingest"; }
[[ -s index/fasttext/fasttext.bin ]] || fail "the store has no fastText model"
cp index/fasttext/fasttext.bin ft1.bin
rm -rf index/fasttext
./ft ingest --quiet > /dev/null || fail "fasttext ingest, again"
cmp -s ft1.bin index/fasttext/fasttext.bin || fail "the same corpus trained another model"
./ft verify | grep -q "ok" || fail "verify of a fastText store"
./ft query "Apache License Version 2.0 grant of patent license" --k 3 --json > ft.json
./ft query "permission to copy and distribute" --k 5 --json --mode vector > ft_vector.json
serve_start ft.serve ft
/usr/bin/python3 - "$PORT" <<'EOF2' || { kill "$PID"; fail "fastText queries"; }
import http.client, json, sys
hybrid, vector = json.load(open("ft.json")), json.load(open("ft_vector.json"))
assert "Apache-2.0.txt" in hybrid["results"][0]["file"], hybrid["results"][0]["file"]
assert len(vector["results"]) == 5 and all(r["vector"] and not r["keyword"] for r in vector["results"]), vector
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
conn.request("POST", "/query", json.dumps({"text": "Apache License Version 2.0 grant of patent license", "k": 3}),
             {"Content-Type": "application/json"})
served = json.loads(conn.getresponse().read())
assert served == hybrid, (served, hybrid)
print("retrieval_build: a fastText store answers by both sides, and serve answers as query --json")
EOF2
kill -TERM "$PID"
wait "$PID" || fail "serve did not exit 0 on SIGTERM"
echo "retrieval_build: all checks passed"
