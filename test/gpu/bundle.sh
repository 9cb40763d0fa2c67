#!/usr/bin/env bash
# Makes what test/gpu/run_all.sh needs on a GPU machine that has CUDA, CMake and PyTorch
# but neither LLVM/MLIR, ANTLR nor MPI (so no planc): the executables of the GPU tests,
# built here for both targets from the same plans, the libraries they load that such a
# machine lacks, the data, `planc explain` of each plan and the CPU target's losses on
# the checks (ref/). CUDA's own libraries
# (libcudart, libcublasLt, libnccl) are the GPU machine's.
#
#   [BASE_PLANC=PLANC] [BASE_RUNTIME=LIB] test/gpu/bundle.sh [PLANC_BIN [BUNDLE_DIR]]
#     (defaults: build/bin/planc, gpu-bundle; BASE_RUNTIME: another build's libplanrt_cuda.so,
#     which run_all.sh times the benchmark's executable on too, beside this build's)
# writes BUNDLE_DIR and BUNDLE_DIR.tar.xz. Then, on the GPU machine, from the repository
# root: test/gpu/run_all.sh BUNDLE_DIR[.tar.xz] OUT_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PLANC=$(realpath "${1:-$ROOT/build/bin/planc}")
B=$(realpath -m "${2:-$ROOT/gpu-bundle}")
BUILD=$(dirname "$(dirname "$PLANC")")
KTEST="$BUILD/test/gpu/planc-cuda-kernels-test"
[[ -x "$KTEST" ]] || { echo "bundle.sh: $KTEST is missing: build planc where the CUDA toolkit is" >&2; exit 1; }
rm -rf "$B"
mkdir -p "$B/lib" "$B/data" "$B/plans"
cd "$B"

# Data: the byte-level license text for tiny, random GPT-2 tokens for gpt2_small.
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$B/data" > /dev/null
/usr/bin/python3 - "$B/data/gpt2_tokens.bin" <<'PY'
import sys, numpy as np
np.random.default_rng(0).integers(0, 50257, size=4_000_000, dtype=np.uint16).tofile(sys.argv[1])
PY

# plan NAME MODEL DATA MICRO SEQ STEPS PRECISION [DECLARATION]: one device, the same
# everything on both targets; DECLARATION (a model's) goes before the train block.
plan() {
  cat > "plans/$1.plan" <<PLAN
import "models/gpt.plan"
import "meshes/cpu_local.plan"
${8:-}
train $1 {
  model = $2   mesh = cpu1   data = tokens("$3")
  batch = $4   micro = $4   seq = $5
  parallel { data = dp }
  precision = $7
  optimizer = adamw(lr: 6e-4, betas: [0.9, 0.95], weight_decay: 0.1)
  clip = 1.0
  steps = $6   seed = 1
}
PLAN
}
# Paths in the plans are relative to their directory: the bundle moves as a whole.
plan tiny_check tiny ../data/train.bin 8 64 20 fp32
plan tiny_bf16_check tiny ../data/train.bin 8 64 20 bf16
plan gpt2s_check gpt2_small ../data/gpt2_tokens.bin 1 1024 20 fp32
plan gpt2s_bf16_check gpt2_small ../data/gpt2_tokens.bin 1 1024 20 bf16
plan gpt2s_bench gpt2_small ../data/gpt2_tokens.bin 8 1024 30 bf16
# The same with the vocabulary padded to 50,304 in the model (as llm.c trains GPT-2): what
# a padded vocabulary buys, before the compiler pads it.
plan gpt2s_bench_v50304 gpt2_small_v50304 ../data/gpt2_tokens.bin 8 1024 30 bf16 \
  "model gpt2_small_v50304 = gpt(vocab: 50304, context: 1024, layers: 12, heads: 12, width: 768)"
# The optimizer's moments on NVMe (run_all.sh's section 2b): the tiny check's plan through
# 64 KiB records, and gpt2_small's benchmark plan through 4 MiB ones; the runs put the
# files under --offload-dir.
sed 's/parallel { data = dp }/parallel { data = dp  offload { optimizer = nvme("nvme", buffer: 64 KiB) } }/' \
  plans/tiny_check.plan > plans/tiny_offload_check.plan
sed 's/parallel { data = dp }/parallel { data = dp  offload { optimizer = nvme("nvme") } }/' \
  plans/gpt2s_bench.plan > plans/gpt2s_bench_offload.plan
for p in tiny_check tiny_bf16_check gpt2s_check gpt2s_bf16_check gpt2s_bench gpt2s_bench_v50304 tiny_offload_check \
  gpt2s_bench_offload; do
  "$PLANC" build "plans/$p.plan" --target cuda -o "cuda_$p"
  [[ $p == gpt2s_bench* || $p == *offload* ]] || "$PLANC" build "plans/$p.plan" -o "cpu_$p"
  # explain as for the CUDA executable: the same plan on a mesh of one GPU.
  { echo "mesh gpu1 { devices = cuda(1)  axes = [dp: 1] }"; sed 's/mesh = cpu1/mesh = gpu1/' "plans/$p.plan"; } \
    > "plans/$p.gpu.plan"
  "$PLANC" explain "plans/$p.gpu.plan" --json > "explain_$p.json"
done
cp "$KTEST" .
# BASE_PLANC=PLANC (and BASE_LABEL): the benchmark's plan built by another planc too (an
# earlier commit's), which run_all.sh times beside it on the same GPU. Its executable
# loads this bundle's libraries.
if [[ -n ${BASE_PLANC:-} ]]; then
  "$BASE_PLANC" build plans/gpt2s_bench.plan --target cuda -o cuda_gpt2s_bench_base
  echo "${BASE_LABEL:-$BASE_PLANC}" > base_planc.txt
fi

# BASE_RUNTIME=LIB (and BASE_LABEL): another build's libplanrt_cuda.so (an earlier
# commit's, with the same ABI), under which run_all.sh also times this bundle's benchmark:
# a runtime change measured against its base on the same GPU.
if [[ -n ${BASE_RUNTIME:-} ]]; then
  mkdir -p baselib
  cp -L "$BASE_RUNTIME" baselib/libplanrt_cuda.so
  strip --strip-debug baselib/libplanrt_cuda.so
  echo "${BASE_LABEL:-$BASE_RUNTIME}" > baselib/label.txt
fi

# The CPU target's losses for run_all.sh's section 2, run here so that the GPU machine's
# time goes to the GPU (REFS=0 leaves them to run_all.sh). About 5 minutes on 2 cores.
if [[ ${REFS:-1} != 0 ]]; then
  mkdir -p ref
  for p in tiny_check tiny_bf16_check gpt2s_check gpt2s_bf16_check; do
    d=data/gpt2_tokens.bin
    [[ $p == tiny* ]] && d=data/train.bin
    "./cpu_$p" --data "$d" --log "ref/cpu_$p.jsonl" --quiet > /dev/null
  done
fi

# Libraries: what the executables load, less the C library, the C++ runtime and CUDA's.
for exe in cuda_* cpu_* planc-cuda-kernels-test; do
  ldd "$exe" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda*|libcublas*|libnccl*) ;;
    *) cp -L "$lib" lib/ ;;
  esac
done
strip --strip-debug lib/* cuda_* cpu_* planc-cuda-kernels-test
# One compressed file to carry to the GPU machine (the device tool carries 64 MiB).
tar -C "$(dirname "$B")" -cJf "$B.tar.xz" "$(basename "$B")"
du -sh "$B" "$B.tar.xz" | awk '{print "bundle.sh: " $2 " " $1}'
