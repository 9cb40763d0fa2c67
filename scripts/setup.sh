#!/usr/bin/env bash
# One command on a fresh Debian machine: install what is missing, build planc, and run
# it on an example (check it, then print its plan IR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"
planc="$root/build/bin/planc"
example=${1:-$root/examples/tiny_3d.plan}
echo
echo "\$ planc check --summary $(realpath --relative-to="$PWD" "$example")"
"$planc" check --summary "$example"
echo
echo "\$ planc emit $(realpath --relative-to="$PWD" "$example") --stage plan"
"$planc" emit "$example" --stage plan
