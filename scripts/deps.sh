#!/usr/bin/env bash
# Installs the Debian packages planc needs that are missing (idempotent; root or sudo).
# The list and its reasons are in docs/TOOLCHAIN.md.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config git bc
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22   # MLIR 22, lit, FileCheck
  clang-22 libclang-rt-22-dev                                     # libFuzzer for the front-end fuzzer
  antlr4 libantlr4-runtime-dev default-jre-headless               # grammar → C++ at build time
  libgtest-dev                                                    # unit tests
  nlohmann-json3-dev                                              # safetensors headers in the runtime
  libssl-dev                                                      # sha256 of checkpoint shards
  libfaiss-dev libopenblas-dev libxapian-dev                      # vectors, BLAS, keyword search
  libssl-dev                                                      # sha256 in the retrieval runtime
  libcpp-httplib-dev                                              # HTTP server of `serve`
  libfasttext-dev                                                 # word vectors of embed = fasttext(…)
  libmpich-dev mpich                                              # processes and CPU collectives
  openssh-server openssh-client iproute2 slurm-wlm munge          # the multi-host test's hosts (namespaces)
  liburing-dev                                                    # asynchronous I/O of offloaded state
  libicu-dev                                                      # Unicode regexes of the BPE tokenizer
  python3-torch python3-numpy                                     # reference checks (/usr/bin/python3)
  python3-sklearn                                                 # the digits example's images
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The tokenizer's independent reference runs on Node.js and npm: Debian's, unless a node
# and npm are already there (another distribution's nodejs bundles npm and conflicts with
# Debian's npm package).
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
