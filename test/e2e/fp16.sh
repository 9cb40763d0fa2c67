#!/usr/bin/env bash
# precision = fp16 on the CPU target (emulated: f32 master weights, parameters, activations
# and gradients rounded to fp16, overflow to infinity) with loss scaling:
#   1. dynamic loss scaling (initial scale 65536) against fp32 from the same weights and
#      batches: per-step loss rtol 2e-2, final loss within 1 %, and not bitwise fp32;
#   2. a static scale of 1e9 overflows fp16 at every step: every step is skipped (logged),
#      the run ends normally, and the parameters are bitwise the initial ones;
#   3. the checkpoint records the loss scale and Adam's step count (updates applied: a
#      skipped step does not count, as with GradScaler), and a resumed run continues bitwise;
#   4. --save-grads writes the true (unscaled) gradients.
#
#   test/e2e/fp16.sh PLANC_BIN WORKDIR
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf ck_* *.jsonl fp32 fp16 huge
/usr/bin/python3 "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
plan() {  # plan NAME PRECISION LOSS_SCALE_LINE
  cat > $1.plan <<EOF
import "models/gpt.plan"
import "meshes/cpu_local.plan"
train $1 {
  model = tiny   mesh = cpu1   data = tokens("$WORK/data/train.bin")
  batch = 8   micro = 4   seq = 64
  parallel { data = dp }
  precision = $2
  $3
  optimizer = adamw(lr: 3e-3, betas: [0.9, 0.95], weight_decay: 0.1)
  schedule = cosine(warmup: 5, min_lr: 3e-4)
  clip = 1.0   steps = 30   seed = 5
  checkpoint { every: 10, dir: "$WORK/ck_$1", keep: 5 }
}
EOF
  "$PLANC" build $1.plan -o $1
}
plan fp32 fp32 ""
plan fp16 fp16 ""
plan huge fp16 "loss_scale = 1e9"
./fp32 --quiet --log fp32.jsonl --save-init init.safetensors
./fp16 --quiet --log fp16.jsonl --init init.safetensors
./huge --quiet --log huge.jsonl --init init.safetensors
./fp32 --quiet --steps 1 --init init.safetensors --save-grads g32.safetensors --checkpoint-dir "$WORK/ck_g32" > /dev/null
./fp16 --quiet --steps 1 --init init.safetensors --save-grads g16.safetensors --checkpoint-dir "$WORK/ck_g16" > /dev/null
mkdir -p ck_resume && cp ck_fp16/step-00000020.safetensors ck_resume/
./fp16 --quiet --resume ck_resume --log resumed.jsonl --checkpoint-dir "$WORK/ck_resume"
/usr/bin/python3 - "$HERE" <<'EOF'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from gpt_ref import read_safetensors
def rows(p):
    return [json.loads(l) for l in open(p)]
def losses(p):
    return [r["loss"] for r in rows(p) if "loss" in r]
ok = True
a, b = losses("fp32.jsonl"), losses("fp16.jsonl")
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
final = abs(a[-1] - b[-1]) / abs(a[-1])
print("fp16 (dynamic scaling) vs fp32 over %d steps: worst per-step rel diff %.3g (rtol 2e-2), final %.4f vs %.4f (%.3g)"
      % (len(a), worst, b[-1], a[-1], final))
ok &= len(a) == len(b) == 30 and worst <= 2e-2 and final <= 1e-2
if a == b:
    print("FAIL: fp16 and fp32 runs are identical: the rounding is not active"); ok = False
skips = [r for r in rows("huge.jsonl") if r.get("skipped")]
print("static scale 1e9: %d of 30 steps skipped" % len(skips))
ok &= len(skips) == 30
init, _ = read_safetensors("init.safetensors")
last, meta = read_safetensors("ck_huge/step-00000030.safetensors")
same = all(np.array_equal(np.asarray(init[k]), np.asarray(last[k])) for k in init)
print("static scale 1e9: parameters after 30 skipped steps %s the initial ones; checkpoint loss_scale %s"
      % ("bitwise equal to" if same else "DIFFER from", meta.get("loss_scale")))
ok &= same and meta.get("loss_scale") == "1e+09"
_, meta16 = read_safetensors("ck_fp16/step-00000030.safetensors")
print("dynamic: checkpoint loss_scale %s, good steps %s" % (meta16.get("loss_scale"), meta16.get("loss_scale_good_steps")))
ok &= meta16.get("loss_scale") == "65536" and meta16.get("loss_scale_good_steps") == "30"
print("Adam's step count (updates applied): dynamic %s, static 1e9 %s" % (meta16.get("optimizer_steps"), meta.get("optimizer_steps")))
ok &= meta16.get("optimizer_steps") == "30" and meta.get("optimizer_steps") == "0"
g32, _ = read_safetensors("g32.safetensors")
g16, _ = read_safetensors("g16.safetensors")
ratio = max(abs(np.linalg.norm(g16[k]) / np.linalg.norm(g32[k]) - 1) for k in g32 if np.linalg.norm(g32[k]) > 0)
print("--save-grads with fp16: gradient norms per tensor within %.3g of fp32's (unscaled)" % ratio)
ok &= ratio < 2e-2
r = losses("resumed.jsonl")
print("resumed from the step-20 checkpoint: steps 20..29 %s" % ("bitwise equal" if r == b[20:] else "DIFFER"))
ok &= r == b[20:]
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
