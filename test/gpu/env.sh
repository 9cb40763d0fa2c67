# Sourced by run_all.sh and deep_checks.sh once B (the bundle) and R (the results file)
# are set: the Python, the libraries' path — the bundle's, then libcudart, libcublasLt
# and libnccl from the toolkit, else from PyTorch's wheels — the toolkit's tools, and
# fail (a failed check, noted in R; the exit status becomes 1).
PY=${PYTHON:-python3}
CUDA=${CUDA_HOME:-/usr/local/cuda}
WHEELS=$($PY -c 'import glob, os, site; print(":".join(sorted(glob.glob(os.path.join(site.getsitepackages()[0], "nvidia", "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH="$B/lib:$CUDA/lib64:${WHEELS:+$WHEELS:}${LD_LIBRARY_PATH:-}"
export PATH="$CUDA/bin:$PATH"
failed=0
fail() { echo "FAIL: $*" | tee -a "$R"; failed=1; }
