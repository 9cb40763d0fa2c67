#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds planc and the fuzz harness,
# then runs every test with ctest (gtest unit tests, the lit suite, and a short fuzzing
# smoke test). The fuzz harness is a second, instrumented build (build-fuzz/); it is
# built here, before ctest, so that no test's timeout covers a cold build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"
if command -v clang++-22 >/dev/null; then
  PLANC_FUZZ_BUILD="$root/build-fuzz" "$root/test/fuzz/run.sh" --build-only
fi
cd "$root/build"
ctest --output-on-failure -j2 "$@"
