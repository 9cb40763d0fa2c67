#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, then runs every test with
# ctest (gtest unit tests, the lit suite, and a short fuzzing smoke test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure -j2 "$@"
