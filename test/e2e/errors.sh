#!/usr/bin/env bash
# Bad input to a planc-built training executable: each case must exit non-zero with a
# message naming the file (or step) and the cause, and leave the last good checkpoint
# loadable.
#
#   test/e2e/errors.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf ck* exe exe_big *.bin *.out
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null

plan() {  # plan NAME MODEL LR
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
model big = gpt(vocab: 256, context: 64, layers: 3, heads: 4, width: 64)
train $1 {
  model = $2   mesh = cpu1   data = tokens("$WORK/data/train.bin")
  batch = 2   micro = 2   seq = 32
  parallel { data = dp }
  optimizer = adamw(lr: $3)
  steps = 6   seed = 1
  checkpoint { every: 2, dir: "$WORK/ck", keep: 5 }
}
EOF
  "$PLANC" build "$1.plan" -o "$1"
}
plan exe tiny 1e-3
plan exe_big big 1e-3

fails() {  # fails "what" "expected message (grep -E)" command...
  local what=$1 pattern=$2
  shift 2
  if "$@" > out.txt 2>&1; then echo "FAIL: $what: exit 0"; cat out.txt; exit 1; fi
  grep -Eq -- "$pattern" out.txt || { echo "FAIL: $what: message"; cat out.txt; echo "expected: $pattern"; exit 1; }
  echo "ok: $what: $(grep -E -- "$pattern" out.txt | head -1)"
}

fails "missing data file" "no-such\.bin" ./exe --quiet --data "$WORK/no-such.bin"
head -c 300 data/train.bin > short.bin
/usr/bin/python3 - <<'EOF'
import struct
def llmc(path, magic, count, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = magic, 1, count
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack("<%dH" % tokens, *([65] * tokens)))
llmc("truncated.bin", 20240520, 5000, 1000)   # the header promises 5000 tokens, 1000 follow
llmc("wrongmagic.bin", 20240521, 1000, 1000)  # not llm.c's magic
EOF
fails "truncated llm.c file" "truncated\.bin" ./exe --quiet --data "$WORK/truncated.bin"
fails "llm.c header with the wrong magic" "wrongmagic\.bin" ./exe --quiet --data "$WORK/wrongmagic.bin"
printf 'hi' > tiny.bin
fails "file shorter than one sequence" "tiny\.bin" ./exe --quiet --data "$WORK/tiny.bin"
python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<'+'H'*4000, *([300]*4000)))" > big_ids.bin
fails "token id beyond the vocabulary" "big_ids\.bin.*300|300.*big_ids\.bin" ./exe --quiet --data "$WORK/big_ids.bin"

./exe --quiet --steps 4 > /dev/null 2>&1
fails "checkpoint of another model" "h\.2\.|mismatch|shape|missing" ./exe_big --quiet --resume "$WORK/ck"
./exe --quiet --save-init other_init.safetensors --steps 1 --checkpoint-dir "$WORK/ck_other" > /dev/null 2>&1
fails "--init with another model's tensors" "h\.2\.|missing" ./exe_big --quiet --init other_init.safetensors
touch afile
fails "unwritable checkpoint directory" "afile" ./exe --quiet --checkpoint-dir "$WORK/afile/ck"

plan exe_nan tiny 1e30
fails "NaN/Inf in training" "step [0-9]+.*(NaN|Inf|not finite)|(NaN|Inf|not finite).*step [0-9]+" ./exe_nan --quiet --checkpoint-dir "$WORK/ck_nan"
ls ck_nan/*.safetensors > /dev/null 2>&1 && echo "note: the NaN run had written checkpoints before diverging"
# The last good checkpoint of the first run still resumes.
./exe --quiet --resume "$WORK/ck" --log resumed.jsonl > /dev/null
echo "PASS: every bad input was refused with its cause named"
