#!/usr/bin/env bash
# data = text(…, tokenizer: bpe(…)): text files tokenized when the executable opens them.
#
#   test/e2e/text_data.sh PLANC_BIN WORKDIR
#
# The test learns a small byte-level BPE (200 merges over the license texts, in Python, as
# a Hugging Face tokenizer.json with GPT-2's pre-tokenizer), then trains a GPT of
# vocabulary 512 for 5 steps on the text through `text(…)`, and on the same text
# tokenized beforehand by planc-tokenize into a uint16 token file through `tokens(…)`:
# the losses must be bitwise equal (validation too, from text). Then the errors: text()
# without a tokenizer, a missing tokenizer file (located, at check time), a tokenizer.json
# that is not byte-level BPE and one larger than the model's vocabulary (at build time).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" text-data "$@"
TOKENIZE=${PLANC_TOKENIZE:-$(dirname "$PLANC")/../runtime/tokenizer/planc-tokenize}
cd "$WORK"
rm -rf ./*
mkdir -p corpus
n=0
for f in /usr/share/common-licenses/*; do
  [[ -f $f && ! -L $f ]] || continue
  n=$((n + 1))
  if [[ $n -le 10 ]]; then cp "$f" corpus/train_$n.txt; else cp "$f" corpus/val_$n.txt; fi
done

echo "== a tokenizer learned from the corpus"
"$PY" - <<'EOF'
import collections, glob, json, re

def byte_chars():  # GPT-2's byte <-> printable character map
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

chars = byte_chars()
text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in sorted(glob.glob("corpus/train_*.txt")))
words = collections.Counter(tuple(chars[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\s\w]+|\s+", text))
vocab = {chars[b]: i for i, b in enumerate(sorted(chars))}
merges = []
while len(merges) < 200:
    pairs = collections.Counter()
    for w, c in words.items():
        for a, b in zip(w, w[1:]):
            pairs[a, b] += c
    (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
    merges.append(a + " " + b)
    vocab.setdefault(a + b, len(vocab))
    new = collections.Counter()
    for w, c in words.items():
        out, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and (w[i], w[i + 1]) == (a, b):
                out.append(a + b); i += 2
            else:
                out.append(w[i]); i += 1
        new[tuple(out)] += c
    words = new
tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                 "merges": merges}}
json.dump(tok, open("tokenizer.json", "w"), ensure_ascii=False)
big = dict(tok, model=dict(tok["model"], vocab=dict(vocab, **{"<pad%d>" % i: 1000 + i for i in range(3)})))
json.dump(big, open("too_big.json", "w"), ensure_ascii=False)
meta = dict(tok, pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True})
json.dump(meta, open("metaspace.json", "w"), ensure_ascii=False)
print("tokenizer: %d ids, %d merges" % (len(vocab), len(merges)))
EOF

echo "== the same text as token files (planc-tokenize), one per text file"
for f in corpus/*.txt; do
  "$TOKENIZE" tokenizer.json "$f" > "${f%.txt}.ids"
done
"$PY" -c "
import glob, numpy as np
n = 0
for f in sorted(glob.glob('corpus/*.ids')):
    ids = [int(t) for t in open(f).read().split()]
    assert max(ids) < 512, (f, max(ids))
    np.array(ids, dtype='<u2').tofile(f[:-4] + '.bin')
    n += len(ids)
print('%d tokens in %d files' % (n, len(glob.glob('corpus/*.ids'))))"

# plan NAME DATA VAL [EXTRA]: a 5-step GPT of vocabulary 512, with evaluation unless EXTRA
# replaces it.
EVAL='eval { every: 5, batches: 2 }'
plan() {
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
model g512 = gpt(vocab: 512, context: 64, layers: 2, heads: 4, width: 64)
train $1 {
  model = g512  mesh = cpu1
  $2
  $3
  batch = 4  micro = 2  seq = 32  parallel { data = dp }
  optimizer = adamw(lr: 1e-3)  steps = 5  seed = 3
  ${4:-$EVAL}
}
EOF
}
plan from_text 'data = text("corpus/train_*.txt", tokenizer: bpe("tokenizer.json"))' 'val = text("corpus/val_*.txt")'
plan from_tokens 'data = tokens("corpus/train_*.bin")' 'val = tokens("corpus/val_*.bin")'
for p in from_text from_tokens; do
  "$PLANC" build $p.plan -o $p >/dev/null
  ./$p --quiet --log $p.jsonl
done
"$PY" - <<'EOF'
import json
rows = lambda f: [json.loads(l) for l in open(f)]
a, b = rows("from_text.jsonl"), rows("from_tokens.jsonl")
key = lambda r: (r.get("step"), r.get("loss"), r.get("val_loss"))
assert len(a) == len(b) == 6 and [key(r) for r in a] == [key(r) for r in b], ([key(r) for r in a], [key(r) for r in b])
print("text(…) and tokens(…) of the same text: losses and validation loss bitwise equal:", [key(r)[1] for r in a[:5]])
EOF

echo "== generation through the tokenizer"
sed -i 's|^  optimizer = adamw(lr: 1e-3)  steps = 5  seed = 3|&\n  checkpoint { every: 5, dir: "ckpt" }|' from_text.plan
cat >> from_text.plan <<EOF
generate talk {
  model = g512  checkpoint = "ckpt"  tokenizer = bpe("tokenizer.json")
  max_tokens = 20  temperature = 0
}
EOF
"$PLANC" build from_text.plan --entry from_text -o from_text >/dev/null
./from_text --quiet
"$PLANC" build from_text.plan --entry talk -o talk >/dev/null
./talk --json "The licensee may" > talk.json
./talk "The licensee may" > talk.txt
printf 'The licensee may' > prompt.txt
"$TOKENIZE" tokenizer.json prompt.txt > prompt.ids
"$PY" - "$TOKENIZE" <<'EOF'
import json, subprocess, sys
j = json.load(open("talk.json"))
prompt = [int(t) for t in open("prompt.ids").read().split()]
assert j["prompt_tokens"] == len(prompt), (j["prompt_tokens"], prompt)
text = subprocess.run([sys.argv[1], "--decode", "tokenizer.json", "-"], input=" ".join(map(str, j["tokens"])),
                      capture_output=True, text=True, check=True).stdout
assert j["text"] == text and j["prompt"] == "The licensee may", (j["text"], text, j["prompt"])
assert open("talk.txt").read() == text + "\n", (open("talk.txt").read(), text)
print("generate: the prompt's %d tokens and the %d generated ones go through the tokenizer: %r"
      % (len(prompt), len(j["tokens"]), text))
EOF

echo "== bad inputs"
expect() { # WHAT COMMAND... ; the pattern in $PATTERN
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then echo "text-data: FAIL: $what was accepted" >&2; exit 1; fi
  grep -qE -- "$PATTERN" <<<"$out" || { echo "text-data: FAIL: $what: expected /$PATTERN/ in: $out" >&2; exit 1; }
  echo "ok: $what: $(grep -m1 error <<<"$out")"
}
plan no_tok 'data = text("corpus/train_*.txt")' '' ' '
PATTERN='no_tok.plan:[0-9]+:[0-9]+: error: text\(…\) needs a tokenizer' expect "text() without a tokenizer" "$PLANC" check no_tok.plan
plan missing 'data = text("corpus/train_*.txt", tokenizer: bpe("nope.json"))' '' ' '
PATTERN="missing.plan:[0-9]+:[0-9]+: error: no tokenizer file at '.*nope.json'" expect "a missing tokenizer" "$PLANC" check missing.plan
plan meta 'data = text("corpus/train_*.txt", tokenizer: bpe("metaspace.json"))' '' ' '
PATTERN='meta.plan:[0-9]+:[0-9]+: error: .*metaspace.json.*not a byte-level BPE' expect "a Metaspace tokenizer" "$PLANC" build meta.plan -o meta
plan big 'data = text("corpus/train_*.txt", tokenizer: bpe("too_big.json"))' '' ' '
PATTERN='big.plan:[0-9]+:[0-9]+: error: .*too_big.json: the tokenizer has 1003 ids but model .g512. has a vocabulary of 512' \
  expect "a tokenizer larger than the vocabulary" "$PLANC" build big.plan -o big
echo "PASS: text data tokenized at load trains exactly as its token file"
