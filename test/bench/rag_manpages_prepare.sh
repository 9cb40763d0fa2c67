#!/usr/bin/env bash
# The rag_manpages corpus: 2000 installed man(1) pages rendered to plain text
# (MANWIDTH=80, `man -l -P cat | col -bx`), and one query per page, its NAME line's
# description. Deterministic: every non-gcloud page, then every k-th gcloud page in
# name order to reach 2000 (this machine has 1119 + 16631). Pages whose description
# is shared with another page are kept as documents but give no query.
#
#   test/bench/rag_manpages_prepare.sh WORKDIR [PAGES]
set -euo pipefail
WORK=$1
PAGES=${2:-2000}
mkdir -p "$WORK/corpus"
cd /usr/share/man/man1
mapfile -t other < <(find . -maxdepth 1 -type f ! -name 'gcloud*' -printf '%f\n' | LC_ALL=C sort)
mapfile -t gcloud < <(find . -maxdepth 1 -type f -name 'gcloud*' -printf '%f\n' | LC_ALL=C sort)
pages=("${other[@]:0:$PAGES}")
need=$((PAGES - ${#pages[@]}))
if ((need > 0)); then
  step=$(( ${#gcloud[@]} / need ))
  for ((i = 0; i < need; i++)); do pages+=("${gcloud[$((i * step))]}"); done
fi
: > "$WORK/pages.txt"
for p in "${pages[@]}"; do
  name=${p%.gz}
  out="$WORK/corpus/$name.txt"
  [[ -s "$out" ]] || MANWIDTH=80 man -l -P cat "/usr/share/man/man1/$p" 2>/dev/null | col -bx > "$out" || true
  echo "$name" >> "$WORK/pages.txt"
done
/usr/bin/python3 - "$WORK" <<'PY'
import collections, os, re, sys
work = sys.argv[1]
names = [l.strip() for l in open(os.path.join(work, "pages.txt")) if l.strip()]
desc = {}
for n in names:
    path = os.path.join(work, "corpus", n + ".txt")
    text = open(path, "rb").read()
    try:
        text = text.decode("utf-8")
    except UnicodeDecodeError:
        os.remove(path); continue
    if len(text) < 200 or "\0" in text:
        os.remove(path); continue
    m = re.search(r"^NAME\n((?:[ \t]+\S.*\n)+)", text, re.M)
    if not m:
        continue
    line = " ".join(m.group(1).split())
    parts = re.split(r"\s[-\u2010\u2013\u2014]+\s", line, maxsplit=1)
    if len(parts) == 2 and len(parts[1].split()) >= 3:
        desc[n] = parts[1].strip()
count = collections.Counter(desc.values())
with open(os.path.join(work, "queries.tsv"), "w") as q:
    for n, d in desc.items():
        if count[d] == 1:
            q.write(f"corpus/{n}.txt\t{d}\n")
PY
(cd "$WORK" && find corpus -name '*.txt' | LC_ALL=C sort | xargs sha256sum > MANIFEST.sha256)
echo "$(ls "$WORK/corpus" | wc -l) pages, $(wc -l < "$WORK/queries.tsv") queries, $(du -sm "$WORK/corpus" | cut -f1) MB in $WORK"
