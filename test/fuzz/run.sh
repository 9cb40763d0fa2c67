#!/usr/bin/env bash
# Fuzzes the front end with libFuzzer: builds an instrumented planc-fuzz-check with
# clang in build-fuzz/ (ccache'd), seeds a corpus from the stdlib, examples and
# tests, and runs for SECONDS (default 60). Crashes land in build-fuzz/crashes/.
#   test/fuzz/run.sh [SECONDS] [extra libFuzzer flags]
#   test/fuzz/run.sh --build-only   (configure and build the harness, run nothing:
#                                    scripts/test.sh does this before ctest, so that
#                                    ctest's fuzz-smoke never builds a cold tree)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
seconds=${1:-60}
shift || true
build=${PLANC_FUZZ_BUILD:-$root/build-fuzz}
cc=$(command -v clang-22 || command -v clang)
cxx=$(command -v clang++-22 || command -v clang++)
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DPLANC_ENABLE_FUZZ=ON -DPLANC_ENABLE_TESTS=OFF >/dev/null
fi
ninja -C "$build" planc-fuzz-check
[ "$build_only" -eq 0 ] || exit 0
corpus="$build/corpus"
mkdir -p "$corpus" "$build/crashes"
find "$root/stdlib" "$root/examples" "$root/test/lang" -name '*.plan' -exec cp {} "$corpus/" \; 2>/dev/null || true
cp "$root"/test/fuzz/regressions/* "$corpus/" 2>/dev/null || true
# Fixed crashes stay fixed: replay every regression input first.
if ls "$root"/test/fuzz/regressions/* >/dev/null 2>&1; then
  "$build/bin/planc-fuzz-check" "$root"/test/fuzz/regressions/*
fi
# -timeout: `planc check` of a 1,024-device plan that does not fit searches every layout
# of its mesh for the fit error's notes (1.2 s natively, 17 s under this instrumentation).
exec "$build/bin/planc-fuzz-check" "$corpus" -dict="$root/test/fuzz/plan.dict" \
  -max_total_time="$seconds" -max_len=4096 -timeout=30 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1 "$@"
