#!/usr/bin/env bash
# `planc build --target cuda`: a training executable that links libplanrt_cuda and, on a
# machine without a GPU (CI), starts and exits 1 with "no CUDA device" and what to do;
# where a GPU is, it trains 4 steps. Retrieval and generation for CUDA: refused by name.
#
#   test/e2e/cuda.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf exe_* *.out *.err log.jsonl
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null

cat > tiny_cuda.plan <<PLAN
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train tiny_cuda {
  model = tiny   mesh = cpu1   data = tokens("$WORK/data/train.bin")
  batch = 8   micro = 8   seq = 32
  parallel { data = dp }
  optimizer = adamw(lr: 2e-3)
  steps = 4   seed = 1
}
PLAN
"$PLANC" build tiny_cuda.plan --target cuda -o exe_cuda
nm exe_cuda | grep -q ' U planrt_cuda_start' || { echo "FAIL: the executable does not start the device" >&2; exit 1; }
nm exe_cuda | grep -q ' U mgpuLaunchKernel' || { echo "FAIL: the executable launches no kernel" >&2; exit 1; }
if nvidia-smi -L > /dev/null 2>&1; then
  ./exe_cuda --log log.jsonl > run.out 2> run.err || { cat run.err >&2; echo "FAIL: the CUDA executable failed on a GPU" >&2; exit 1; }
  [[ $(wc -l < log.jsonl) -ge 4 ]] || { echo "FAIL: fewer than 4 steps logged" >&2; exit 1; }
  echo "e2e-cuda: trained 4 steps on $(nvidia-smi -L | head -1)"
else
  set +e
  ./exe_cuda --log log.jsonl > run.out 2> run.err
  rc=$?
  set -e
  [[ $rc -eq 1 ]] || { cat run.err >&2; echo "FAIL: exit $rc without a GPU (want 1)" >&2; exit 1; }
  grep -q '^planrt: error: rank 0: no CUDA device: .*built with --target cuda.*--target cpu' run.err ||
    { cat run.err >&2; echo "FAIL: no clear message without a GPU" >&2; exit 1; }
  [[ ! -s log.jsonl ]] || { echo "FAIL: a log was written without a device" >&2; exit 1; }
  echo "e2e-cuda: without a GPU the executable says: $(cat run.err)"
fi

# --cuda-arch sm_80,sm_90: one fat binary holding both cubins. The cubins (ELF, machine
# EM_CUDA = 190) embedded in an executable are told apart by their ELF flags, which
# encode the architecture: the two-architecture executable must hold exactly the
# cubins of the two one-architecture ones.
cubins() {
  /usr/bin/python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
flags, at = set(), data.find(b"\x7fELF", 1)
while at > 0:
    if data[at + 4] == 2 and struct.unpack_from("<H", data, at + 18)[0] == 190:  # ELF64, EM_CUDA
        flags.add(struct.unpack_from("<I", data, at + 48)[0])
    at = data.find(b"\x7fELF", at + 1)
print(" ".join("%#x" % f for f in sorted(flags)))
PY
}
"$PLANC" build tiny_cuda.plan --target cuda --cuda-arch sm_80 -o exe_sm80
"$PLANC" build tiny_cuda.plan --target cuda --cuda-arch sm_80,sm_90 -o exe_fat
sm80=$(cubins exe_sm80) sm90=$(cubins exe_cuda) fat=$(cubins exe_fat)
[[ -n "$sm80" && -n "$sm90" && "$sm80" != "$sm90" ]] ||
  { echo "FAIL: no cubin found in the one-architecture executables (sm_80: '$sm80', sm_90: '$sm90')" >&2; exit 1; }
[[ "$fat" == "$(printf '%s\n' $sm80 $sm90 | sort -u | xargs)" ]] ||
  { echo "FAIL: the sm_80,sm_90 executable holds cubins '$fat', not sm_80's '$sm80' and sm_90's '$sm90'" >&2; exit 1; }
echo "e2e-cuda: sm_80,sm_90 executable holds both cubins (ELF flags $fat)"

# Retrieval and generation executables are the CPU target's in this version.
if "$PLANC" build "$ROOT/examples/rag.plan" --entry docs --target cuda -o exe_rag 2> rag.err; then
  echo "FAIL: a retrieval executable was built for CUDA" >&2; exit 1
fi
grep -q "planc: error: the CUDA target builds train executables; a retrieval executable for CUDA is not implemented in this version of planc: build it with --target cpu" rag.err ||
  { cat rag.err >&2; echo "FAIL: retrieval refusal" >&2; exit 1; }
if "$PLANC" build "$ROOT/examples/rag.plan" --entry answer --target cuda -o exe_gen 2> gen.err; then
  echo "FAIL: a generation executable was built for CUDA" >&2; exit 1
fi
grep -q "a generate executable for CUDA is not implemented in this version of planc" gen.err ||
  { cat gen.err >&2; echo "FAIL: generation refusal" >&2; exit 1; }
echo "e2e-cuda: OK"
