#!/usr/bin/env bash
# The digits example end to end (examples/digits.plan; EXTENSIONS.md §4): writes
# scikit-learn's 8×8 digits as planc image files (examples/digits/make_data.py), builds
# the plan as written (its data paths pointed at the work directory) and trains it:
# 300 steps, evaluating every 100 on all 360 test images with the batchnorms' running
# statistics. Passes when the last evaluation's top-1 accuracy is at least 95%.
#
#   test/e2e/digits.sh PLANC_BIN WORKDIR
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" digits "$@"
MPIRUN=${MPIRUN:-mpirun}
cd "$WORK"
rm -rf data ckpt exe_* ./*.jsonl ./*.plan

"$PY" "$ROOT/examples/digits/make_data.py" --out "$WORK/data"
sed -e "s#\.\./data/digits#$WORK/data#g" -e "s#\.\./ckpt/digits#$WORK/ckpt#g" "$ROOT/examples/digits.plan" > digits.plan
"$PLANC" check --summary digits.plan
"$PLANC" build digits.plan -o exe_digits
start=$(date +%s)
./exe_digits --quiet --log log_digits.jsonl
echo "digits: trained in $(( $(date +%s) - start )) s"
"$PY" - log_digits.jsonl <<'PYEOF'
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if '"val_accuracy"' in l]
assert [e["step"] for e in evals] == [99, 199, 299], evals
for e in evals:
    print("digits: after step %d: val_loss %.4f, test accuracy %.2f%% of 360" %
          (e["step"] + 1, e["val_loss"], 100 * e["val_accuracy"]))
acc = evals[-1]["val_accuracy"]
sys.exit(0 if acc >= 0.95 else "digits: FAIL: test accuracy %.4f < 0.95" % acc)
PYEOF
echo "PASS: the digits example reaches 95% test accuracy"
