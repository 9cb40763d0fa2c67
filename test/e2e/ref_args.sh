# Sourced by the end-to-end scripts that run against a reference (PyTorch): their
# command line (PLANC_BIN WORKDIR) and what they all set from it — PLANC, WORK (made),
# HERE (the script's directory), ROOT, PY (PYTHON or /usr/bin/python3), one reference
# thread unless PLANC_REF_THREADS says otherwise, and fail MESSAGE, prefixed with NAME.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" NAME "$@"
ref_args_name=$1
shift
if [[ $# -ne 2 ]]; then
  echo "usage: $0 PLANC_BIN WORKDIR" >&2
  exit 2
fi
PLANC=$(realpath "$1")
mkdir -p "$2"
WORK=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
export PLANC_REF_THREADS=${PLANC_REF_THREADS:-1}
fail() { echo "$ref_args_name: FAIL: $*" >&2; exit 1; }
