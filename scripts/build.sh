#!/usr/bin/env bash
# Configures (once) and builds planc in build/ with Ninja and ccache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PLANC_BUILD:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build"
