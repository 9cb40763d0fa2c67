#!/usr/bin/env bash
# A second retrieval benchmark corpus, one nothing in planc was tuned on: Debian's package
# descriptions, from the English Translation file of the machine's package lists (Debian
# 12 "bookworm" main here; fetched with `apt-get update -o Acquire::Languages=en` when
# the lists lack it, which needs root). A document is a package's long description; its query is the
# package's one-line synopsis, which the long description does not contain verbatim.
# Deterministic: packages in name order, those whose long description is at least 150
# bytes and shared with no other package (a -dev and its library often share one: such a
# query would have several right answers), then every k-th to reach DOCS; a query for every
# 10th document whose synopsis is unique. Same layout as rag_manpages_prepare.sh: corpus/,
# queries.tsv (file TAB query), MANIFEST.sha256.
#
#   test/bench/rag_debian_prepare.sh WORKDIR [DOCS]
set -euo pipefail
WORK=$1
DOCS=${2:-20000}
mkdir -p "$WORK/corpus"
shopt -s nullglob
lists=(/var/lib/apt/lists/*_dists_*_main_i18n_Translation-en*)
if [[ ${#lists[@]} -eq 0 ]]; then
  apt-get update -qq -o Acquire::Languages=en
  lists=(/var/lib/apt/lists/*_dists_*_main_i18n_Translation-en*)
fi
for f in "${lists[@]}"; do /usr/lib/apt/apt-helper cat-file "$f"; done | /usr/bin/python3 -c '
import collections, os, sys
work, want = sys.argv[1], int(sys.argv[2])
pkgs, cur, field = {}, {}, None
def flush():
    if "Package" in cur and "Description-en" in cur and cur["Package"] not in pkgs:
        pkgs[cur["Package"]] = cur["Description-en"]
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        flush(); cur, field = {}, None; continue
    if line[0] in " \t" and field:
        cur[field] += "\n" + line; continue
    k, _, v = line.partition(":")
    field = k; cur[k] = v.strip()
flush()
docs = {}
for name, d in pkgs.items():
    synopsis, _, body = d.partition("\n")
    lines = [("" if l.strip() == "." else l[1:]) for l in body.split("\n")]
    text = "\n".join(lines).strip()
    if len(text.encode()) >= 150 and synopsis.strip():
        docs[name] = (synopsis.strip(), text)
shared = collections.Counter(t for _, t in docs.values())
names = sorted(n for n, (_, t) in docs.items() if shared[t] == 1)
step = max(1, len(names) // want)
names = names[::step][:want]
syn = collections.Counter(docs[n][0].lower() for n in names)
with open(os.path.join(work, "queries.tsv"), "w") as q:
    for i, n in enumerate(names):
        with open(os.path.join(work, "corpus", n + ".txt"), "w") as f:
            f.write(docs[n][1] + "\n")
        if i % 10 == 0 and syn[docs[n][0].lower()] == 1:
            q.write(f"corpus/{n}.txt\t{docs[n][0]}\n")
' "$WORK" "$DOCS"
(cd "$WORK" && find corpus -name '*.txt' | LC_ALL=C sort | xargs sha256sum > MANIFEST.sha256)
echo "$(ls "$WORK/corpus" | wc -l) package descriptions, $(wc -l < "$WORK/queries.tsv") queries, $(du -sm "$WORK/corpus" | cut -f1) MB in $WORK"
