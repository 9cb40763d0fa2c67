#!/usr/bin/env bash
# One command on a fresh Debian machine: install what is missing, build planc, then the
# main job on an example: make a byte-level data set from the license texts every Debian
# machine has, build examples/licenses_char.plan into a training executable, and train it.
# With a plan file as argument, check it and print its plan IR instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/build.sh"
planc="$root/build/bin/planc"
if [[ $# -gt 0 ]]; then
  echo
  echo "\$ planc check --summary $1"
  "$planc" check --summary "$1"
  echo
  echo "\$ planc emit $1 --stage plan"
  "$planc" emit "$1" --stage plan
  exit 0
fi
cd "$root"
echo
echo "\$ scripts/prepare_text.py"
/usr/bin/python3 scripts/prepare_text.py
echo
echo "\$ planc check --summary examples/licenses_char.plan"
"$planc" check --summary examples/licenses_char.plan
echo
echo "\$ planc build examples/licenses_char.plan -o build/licenses_char"
"$planc" build examples/licenses_char.plan -o build/licenses_char
echo
echo "\$ build/licenses_char --log build/licenses_char.jsonl"
build/licenses_char --log build/licenses_char.jsonl
