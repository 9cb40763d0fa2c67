#!/usr/bin/env bash
# End to end: federated training (docs/FEDERATED.md) on four client processes with
# different license texts, against a FedAvg reference written in PyTorch
# (test/e2e/fedavg_ref.py).
#
#   test/e2e/federated.sh PLANC_BIN WORKDIR
#
# 1. FedAvg, every client, token weighting, AdamW clients, SGD server: each round's loss
#    and the global model after each of 5 rounds against the reference, rtol 1e-5.
# 2. secure: true gives bitwise the global model of secure: false; the buffers each client
#    hands to the aggregation are uncorrelated with its true update, and sum to the same.
# 3. Half the clients a round (the seeded sample reproduced), FedProx, FedAdam: against the
#    reference (the global model's tensors within 1e-4, the whole within 1e-5).
# 4. DP-FedAvg: clipping against the reference (noise 0); the noise's spread as set.
# 5. Rounds resumed from a round checkpoint (FedAdam's moments in it) are bitwise those of
#    the uninterrupted run.
# 6. DDP identity: one round, one local SGD step, every client, uniform weights, server SGD
#    at lr 1 equals one SGD step on all the clients' batches together (PyTorch).
# 7. Clients with SGD (momentum, weight decay) against the reference.
# 8. A per_client glob that matches too few files is refused by name.
# And planc explain's bytes per client per round equal the executable's count.
# MPIRUN is the MPI launcher; PYTHON overrides the interpreter.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" federated "$@"
MPIRUN=${MPIRUN:-mpirun}
RTOL=${FED_RTOL:-1e-5}

# The clients' AdamW with eps 1e-5 rather than 1e-8: an element whose gradient is rounding
# noise then moves by about lr · noise / eps rather than by ±lr on each side's own noise,
# so that the comparison measures the federated algorithm rather than fp32 rounding
# amplified (planc's AdamW itself is tested against PyTorch in train_vs_torch.sh).
BATCH=4 MICRO=2 SEQ=32 SEED=7 LR=1e-3 EPS=1e-5
MODEL=(--vocab 256 --context 64 --layers 2 --heads 4 --width 64)

cd "$WORK"
rm -rf data dump ./*.safetensors ./*.jsonl ./*.json exe_* ./*.plan
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" --clients 4 > /dev/null

# plan NAME FEDAVG_ARGS [SERVER [MORE [OPTIMIZER]]]: MORE, more keys of the train plan;
# OPTIMIZER, the clients' (default AdamW at LR, EPS)
plan() {
  cat > "$1.plan" <<EOF
// Written by test/e2e/federated.sh.
import "models/gpt.plan"

mesh sites { devices = cpu(4)  axes = [clients: 4] }

train $1 {
  model     = tiny
  mesh      = sites
  data      = per_client("$WORK/data/clients/*/train.bin")
  batch = $BATCH  micro = $MICRO  seq = $SEQ
  parallel  { federated = clients }
  federated = fedavg($2)
  optimizer = ${5:-adamw(lr: $LR, eps: $EPS)}
  server    = ${3:-sgd(lr: 1.0)}
  seed      = $SEED
  ${4:-}
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" > /dev/null
}

# ref OUT FINAL ARGS…: the reference from init.safetensors
ref() {
  local out=$1 final=$2
  shift 2
  "$PY" "$HERE/fedavg_ref.py" --init init.safetensors --clients "$WORK/data/clients/*/train.bin" "${MODEL[@]}" \
    --batch "$BATCH" --micro "$MICRO" --seq "$SEQ" --lr "$LR" --eps "$EPS" --seed "$SEED" --out "$out" --final-out "$final" "$@" \
    > /dev/null
}

# compare PLANC_LOG REF_JSON PLANC_PARAMS REF_PARAMS [TENSOR_RTOL MODEL_RTOL]: the clients and
# losses of every round within RTOL; the global model, each tensor's relative L2 difference
# within TENSOR_RTOL and the whole model's within MODEL_RTOL (both RTOL by default). Over
# many AdamW steps the two fp32 implementations' rounding grows where gradients are near
# zero (AdamW divides by their size), as train_vs_torch.sh's parameters show; the clients'
# eps below keeps that small, and FedAdam's division by the mean update's size is allowed
# 1e-4 per tensor.
compare() {
  "$PY" - "$1" "$2" "$3" "$4" "$RTOL" "${5:-$RTOL}" "${6:-$RTOL}" <<'EOF' || fail "planc and the reference differ ($1 against $2)"
import json, sys
import numpy as np
sys.path.insert(0, __import__("os").environ["HERE"])
from gpt_ref import read_safetensors
log, ref, mine, theirs = sys.argv[1:5]
rtol, tensor_rtol, model_rtol = map(float, sys.argv[5:8])
got = [json.loads(l) for l in open(log) if '"round"' in l]
want = json.load(open(ref))["rounds"][:len(got)]
assert len(got) == len(want) and got, (len(got), len(want))
worst = 0.0
for g, w in zip(got, want):
    assert g["clients"] == w["clients"], ("round %d clients" % g["round"], g["clients"], w["clients"])
    worst = max(worst, abs(g["loss"] - w["loss"]) / abs(w["loss"]))
print("  round losses: worst rel. diff %.2e over %d rounds" % (worst, len(got)))
a, _ = read_safetensors(mine)
b, _ = read_safetensors(theirs)
assert set(b) <= set(a), sorted(set(b) - set(a))
worstp, worstk = 0.0, ""
diff2 = norm2 = 0.0
for k in b:
    x, y = np.asarray(a[k], np.float64), np.asarray(b[k], np.float64)
    if k.endswith("attn.c_attn.bias"):
        # The keys' bias changes no output (softmax ignores a shift common to all keys), so
        # its gradient is zero but for rounding, which each side's Adam (the clients', and
        # FedAdam's) scales up to steps of its own: left out of the comparison.
        w = x.size // 3
        x, y = np.delete(x, np.s_[w:2 * w]), np.delete(y, np.s_[w:2 * w])
    r = np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)
    diff2 += float(np.sum((x - y) ** 2))
    norm2 += float(np.sum(y ** 2))
    if r >= worstp:
        worstp, worstk = r, k
whole = (diff2 / norm2) ** 0.5
print("  global model: rel. L2 diff %.2e; worst tensor %.2e (%s)" % (whole, worstp, worstk))
assert worst <= rtol, "round losses beyond rtol %g" % rtol
assert worstp <= tensor_rtol and whole <= model_rtol, "global model beyond %g per tensor, %g whole" % (
    tensor_rtol, model_rtol)
EOF
}
export HERE

echo "== 1. FedAvg against PyTorch (every client, token weighting)"
plan fedavg "rounds: 5, local_steps: 3, weighting: tokens"
"$MPIRUN" -n 4 ./exe_fedavg --save-init init.safetensors --export fedavg.safetensors --log fedavg.jsonl --quiet
# The global model after each round: runs of 1 … 4 rounds (and the 5 above) from the same start.
for r in 1 2 3 4; do
  "$MPIRUN" -n 4 ./exe_fedavg --init init.safetensors --steps $r --export fedavg_r$r.safetensors \
    --log fedavg_r$r.jsonl --quiet
done
cp fedavg.safetensors fedavg_r5.safetensors
cp fedavg.jsonl fedavg_r5.jsonl
for r in 1 2 3 4 5; do
  ref fedavg_ref_r$r.json fedavg_ref_r$r.safetensors --rounds $r --local-steps 3 --weighting tokens
  echo " after round $r:"
  compare fedavg_r$r.jsonl fedavg_ref_r$r.json fedavg_r$r.safetensors fedavg_ref_r$r.safetensors
done
"$PY" -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"round\"" in l]
assert r[-1]["loss"] < r[0]["loss"], "the round loss does not fall: %r" % [x["loss"] for x in r]' fedavg.jsonl \
  || fail "FedAvg's loss does not fall"

echo "== planc explain: the bytes each client sends a round, to the byte"
"$PLANC" explain --json fedavg.plan > fedavg_explain.json
"$PY" - fedavg_explain.json fedavg.jsonl <<'EOF' || fail "explain's bytes per round differ from the executable's"
import json, sys
want = json.load(open(sys.argv[1]))["federated"]["bytes_per_client_per_round"]
got = {json.loads(l)["comm_bytes"]["all_reduce"] for l in open(sys.argv[2]) if '"round"' in l}
print("  explain %d bytes per client per round; the executable logged %s" % (want, sorted(got)))
assert got == {want}
EOF

echo "== 2. secure aggregation: bitwise the same; what the aggregation receives is masked"
plan secure "rounds: 5, local_steps: 3, weighting: tokens, secure: true"
mkdir -p dump
PLANRT_FED_DUMP="$WORK/dump" "$MPIRUN" -n 4 ./exe_secure --init init.safetensors --export secure.safetensors \
  --log secure.jsonl --quiet
"$PY" - fedavg.safetensors secure.safetensors fedavg.jsonl secure.jsonl "$WORK/dump" <<'EOF' || fail "secure aggregation"
import glob, json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE"])
from gpt_ref import read_safetensors
a, _ = read_safetensors(sys.argv[1])
b, _ = read_safetensors(sys.argv[2])
assert sorted(a) == sorted(b)
for k in a:
    assert np.array_equal(np.asarray(a[k]).view(np.uint32), np.asarray(b[k]).view(np.uint32)), "tensor %s differs" % k
la = [json.loads(l)["loss"] for l in open(sys.argv[3]) if '"round"' in l]
lb = [json.loads(l)["loss"] for l in open(sys.argv[4]) if '"round"' in l]
assert la == lb, (la, lb)
print("  secure: true = secure: false, bitwise, %d tensors and %d round losses" % (len(a), len(la)))
dump = sys.argv[5]
worst = 0.0
for r in range(5):
    plain = [np.fromfile(os.path.join(dump, "round%d_client%d_plain.u64" % (r, k)), np.uint64) for k in range(4)]
    sent = [np.fromfile(os.path.join(dump, "round%d_client%d_sent.u64" % (r, k)), np.uint64) for k in range(4)]
    total_plain = np.zeros_like(plain[0])
    total_sent = np.zeros_like(sent[0])
    for p, s in zip(plain, sent):
        total_plain += p  # modulo 2^64
        total_sent += s
        x, y = p.view(np.int64).astype(np.float64), s.view(np.int64).astype(np.float64)
        c = abs(np.corrcoef(x, y)[0, 1])
        worst = max(worst, c)
        assert not np.array_equal(p, s)
    assert np.array_equal(total_plain, total_sent), "round %d: the masks do not cancel" % r
print("  sent buffers: worst |correlation| with the true update %.4f over 5 rounds x 4 clients; masks cancel" % worst)
assert worst < 0.02, worst
EOF

echo "== 3. half the clients, FedProx, FedAdam against PyTorch"
plan prox "rounds: 5, local_steps: 2, fraction: 0.5, weighting: uniform, prox: 0.01" \
  "adam(lr: 0.01, betas: [0.9, 0.99], eps: 1e-3)"
"$MPIRUN" -n 4 ./exe_prox --init init.safetensors --export prox.safetensors --log prox.jsonl --quiet
ref prox_ref.json prox_ref.safetensors --rounds 5 --local-steps 2 --fraction 0.5 --weighting uniform --prox 0.01 \
  --server adam --server-lr 0.01 --server-beta1 0.9 --server-beta2 0.99 --server-eps 1e-3
compare prox.jsonl prox_ref.json prox.safetensors prox_ref.safetensors 1e-4

echo "== 4. DP-FedAvg: clipping against PyTorch; the noise's spread"
plan dpclip "rounds: 3, local_steps: 2, weighting: uniform, dp: gaussian(clip: 0.05, noise: 0.0)"
"$MPIRUN" -n 4 ./exe_dpclip --init init.safetensors --export dpclip.safetensors --log dpclip.jsonl --quiet
ref dpclip_ref.json dpclip_ref.safetensors --rounds 3 --local-steps 2 --weighting uniform --dp-clip 0.05
compare dpclip.jsonl dpclip_ref.json dpclip.safetensors dpclip_ref.safetensors
plan dpnoise "rounds: 1, local_steps: 2, weighting: uniform, dp: gaussian(clip: 0.05, noise: 2.0)"
plan dpnone "rounds: 1, local_steps: 2, weighting: uniform, dp: gaussian(clip: 0.05, noise: 0.0)"
"$MPIRUN" -n 4 ./exe_dpnoise --init init.safetensors --export dpnoise.safetensors --quiet
"$MPIRUN" -n 4 ./exe_dpnone --init init.safetensors --export dpnone.safetensors --quiet
"$PY" - dpnoise.safetensors dpnone.safetensors <<'EOF' || fail "DP noise"
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE"])
from gpt_ref import read_safetensors
a, _ = read_safetensors(sys.argv[1])
b, _ = read_safetensors(sys.argv[2])
d = np.concatenate([(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)).ravel() for k in sorted(a)])
want = 2.0 * 0.05 / 4  # sigma * clip / clients, times the server's lr 1
print("  noise: std %.4e (set: %.4e), mean %.1e over %d values" % (d.std(), want, d.mean(), d.size))
assert abs(d.std() / want - 1) < 0.02 and abs(d.mean()) < 5 * want / np.sqrt(d.size)
EOF

echo "== 5. a round checkpoint resumed gives bitwise the uninterrupted run"
plan ckpt "rounds: 4, local_steps: 2, fraction: 0.5, weighting: tokens, secure: true" "adam(lr: 0.01)" \
  "checkpoint { every: 1, dir: \"$WORK/ckpt\", keep: 2 }"
rm -rf ckpt
"$MPIRUN" -n 4 ./exe_ckpt --init init.safetensors --export whole.safetensors --log whole.jsonl --quiet
rm -rf ckpt
"$MPIRUN" -n 4 ./exe_ckpt --init init.safetensors --steps 2 --quiet
"$MPIRUN" -n 4 ./exe_ckpt --resume ckpt --export resumed.safetensors --log resumed.jsonl --quiet
"$PY" - whole.safetensors resumed.safetensors whole.jsonl resumed.jsonl ckpt <<'EOF' || fail "resume"
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE"])
from gpt_ref import read_safetensors
a, _ = read_safetensors(sys.argv[1])
b, _ = read_safetensors(sys.argv[2])
for k in a:
    assert np.array_equal(np.asarray(a[k]).view(np.uint32), np.asarray(b[k]).view(np.uint32)), k
la = [json.loads(l) for l in open(sys.argv[3]) if '"round"' in l][2:]
lb = [json.loads(l) for l in open(sys.argv[4]) if '"round"' in l]
assert [(x["round"], x["loss"], x["clients"]) for x in la] == [(x["round"], x["loss"], x["clients"]) for x in lb]
files = sorted(os.listdir(sys.argv[5]))
assert files == ["step-00000003.safetensors", "step-00000004.safetensors"], files
t, meta = read_safetensors(os.path.join(sys.argv[5], files[-1]))
assert meta["format"] == "planc-fed-1" and meta["step"] == "4", meta
assert any(k.startswith("server.exp_avg.") for k in t), "FedAdam's moments are not in the checkpoint"
print("  rounds 2-3 resumed from round 2's checkpoint: bitwise the uninterrupted run; %d checkpoints kept" % len(files))
EOF

echo "== 6. one round of one local SGD step on every client equals one DDP step of their batches"
plan ddp "rounds: 1, local_steps: 1, weighting: uniform" "sgd(lr: 1.0)" "" "sgd(lr: 0.5)"
"$MPIRUN" -n 4 ./exe_ddp --init init.safetensors --export ddp.safetensors --log ddp.jsonl --quiet
ref ddp_ref.json ddp_ref.safetensors --combined --client-optimizer sgd --lr 0.5
compare ddp.jsonl ddp_ref.json ddp.safetensors ddp_ref.safetensors
echo "== 7. clients with SGD and momentum against PyTorch"
plan sgdm "rounds: 3, local_steps: 3, weighting: tokens" "sgd(lr: 1.0)" "" "sgd(lr: 0.1, momentum: 0.9, weight_decay: 0.01)"
"$MPIRUN" -n 4 ./exe_sgdm --init init.safetensors --export sgdm.safetensors --log sgdm.jsonl --quiet
ref sgdm_ref.json sgdm_ref.safetensors --rounds 3 --local-steps 3 --client-optimizer sgd --lr 0.1 --momentum 0.9 \
  --weight-decay 0.01
compare sgdm.jsonl sgdm_ref.json sgdm.safetensors sgdm_ref.safetensors

echo "== 8. a per_client glob with too few files"
mkdir -p few/0 few/1
cp data/clients/0/train.bin few/0/ && cp data/clients/1/train.bin few/1/
sed "s|$WORK/data/clients/\*/train.bin|$WORK/few/*/train.bin|" fedavg.plan > few.plan
"$PLANC" build few.plan -o exe_few > /dev/null
if "$MPIRUN" -n 4 ./exe_few --quiet 2> few.err; then fail "a per_client glob of 2 files ran on 4 clients"; fi
grep -q "matches 2 files, but the federated axis 'clients' has 4 clients" few.err \
  || { cat few.err; fail "the error does not name the mismatch"; }

echo "PASS: federated training matches PyTorch's FedAvg; secure aggregation is exact and masked"
