# Sourced first by the benchmarks that take `PLANC_BIN WORKDIR [THREADS]`: sets PLANC
# (absolute), WORK (created), ROOT (the repository) and THREADS (the third argument, 1 by
# default; OpenMP and OpenBLAS use that many), enters WORK and writes the text data's
# tokens to WORK/data.
PLANC=$(realpath "$1")
mkdir -p "$2"
WORK=$(cd "$2" && pwd)
THREADS=${3:-1}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
cd "$WORK"
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
