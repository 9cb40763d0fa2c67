# Sourced first by the e2e scripts that take `PLANC_BIN WORKDIR`: checks the arguments and
# sets PLANC (absolute), WORK (created), ROOT (the repository), PY (Debian's python3 with
# torch unless PYTHON says otherwise) and MPIRUN, then enters WORK.
[[ $# -eq 2 ]] || { echo "usage: $0 PLANC_BIN WORKDIR" >&2; exit 2; }
PLANC=$(realpath "$1")
mkdir -p "$2"
WORK=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun}
cd "$WORK"
# run RANKS EXE ARGS...: EXE on one process, or on RANKS through MPIRUN.
run() {
  local n=$1; shift
  if [[ $n -eq 1 ]]; then "$@"; else "$MPIRUN" -n "$n" "$@"; fi
}
