#!/usr/bin/env bash
# Sharded checkpoints, resharding and faults, on data-parallel layouts over MPI ranks:
#   1. ZeRO-3 on 4 ranks writes sharded checkpoints (one file per rank, an index with
#      sha256s); resumed on the same layout, steps 10-19 are bitwise the uninterrupted run's;
#   2. that checkpoint loaded by DDP on 4 ranks, ZeRO-3 on 2 ranks and one process, and a
#      one-process checkpoint loaded by ZeRO-1 on 4 ranks: the parameters and Adam moments
#      (exported with --export, one consolidated file) are bitwise equal; training on from the
#      resharded checkpoint follows the uninterrupted run within rtol 1e-5; tensor parallelism
#      (TP 2): its checkpoint resumed bitwise, loaded by one process, and the ZeRO-3
#      checkpoint loaded into data 2 x tensor 2, bitwise; --save-grads under TP 2 gives one
#      process's first gradient to rounding; pipeline parallelism (PP 2): resumed bitwise,
#      PP 2 -> DDP 2 and one process, one process and ZeRO-3 -> PP 2, data 2 x tensor 2 x
#      pipeline 2 -> one process, bitwise; --save-grads under PP 2; ZeRO-3 over data 2 x
#      pipeline 2 resumed bitwise, to and from one process bitwise;
#   3. a shard whose bytes change is refused, naming the file and the hash;
#   4. one rank killed mid-run: every rank exits non-zero within the timeout and the
#      launcher names the rank; a stopped (hung) rank: the others stop within
#      --comm-timeout naming the collective; then --resume continues with the same losses.
#
#   test/e2e/reshard.sh PLANC_BIN WORKDIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
rm -rf ck_* *.jsonl *.plan exe_* *.st *.log
"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null

source "$ROOT/test/e2e/dp_plan.sh"
plan() { dp_plan "$1" "$2" "$3" "$4" "$5"; }  # NAME DEVICES MICRO ZERO STEPS
fail() { echo "reshard: FAIL: $*" >&2; exit 1; }
# checkpointed RANKS NAME CK LAST: exe_NAME's uninterrupted run (NAME_full.jsonl); its first 10
# steps with a sharded checkpoint every 5 into CK, whose step-00000010 must hold LAST (its last
# rank file); resumed from it (NAME_resumed.jsonl); and that state exported (NAME.st).
checkpointed() {
  local n=$1 name=$2 ck=$3 last=$4
  run "$n" "./exe_$name" --log "${name}_full.jsonl" --quiet
  run "$n" "./exe_$name" --steps 10 --checkpoint-dir "$ck" --checkpoint-every 5 --quiet
  [[ -f $ck/step-00000010/index.json && -f $ck/step-00000010/$last ]] ||
    fail "no sharded checkpoint $ck/step-00000010 with its $last"
  run "$n" "./exe_$name" --resume "$ck" --log "${name}_resumed.jsonl" --quiet
  run "$n" "./exe_$name" --resume "$ck" --steps 10 --export "$name.st" --quiet
}

plan zero3 4 1 3 20
plan ddp 4 2 0 20
plan zero3_dp2 2 2 3 20
plan single 1 8 0 20
plan zero1 4 1 1 20

# 1. Sharded save and bitwise resume on the same layout.
checkpointed 4 zero3 ck_z3 rank-00003.safetensors
PYTHONPATH="$ROOT/test/e2e" "$PY" -c 'from same_tensors import resumed_bitwise
resumed_bitwise("zero3_full.jsonl", "zero3_resumed.jsonl", "ZeRO-3 x4 resumed from its sharded checkpoint")'

# 2. Resharding: the same state under every layout, bitwise.
run 4 ./exe_ddp --resume ck_z3 --steps 10 --export ddp.st --quiet
run 2 ./exe_zero3_dp2 --resume ck_z3 --steps 10 --export zero3_dp2.st --quiet
run 1 ./exe_single --resume ck_z3 --steps 10 --export single.st --quiet
./exe_single --steps 10 --checkpoint-dir ck_single --checkpoint-every 10 --quiet
run 1 ./exe_single --resume ck_single --steps 10 --export single_own.st --quiet
run 4 ./exe_zero1 --resume ck_single --steps 10 --export zero1_from_single.st --quiet
run 4 ./exe_ddp --resume ck_z3 --log ddp_on.jsonl --quiet
PYTHONPATH="$ROOT/test/e2e" "$PY" - <<'EOF'
import json
from same_tensors import same
same("zero3.st", "ddp.st", "ZeRO-3 x4 -> DDP x4")
same("zero3.st", "zero3_dp2.st", "ZeRO-3 x4 -> ZeRO-3 x2")
same("zero3.st", "single.st", "ZeRO-3 x4 -> one process")
same("single_own.st", "zero1_from_single.st", "one process -> ZeRO-1 x4")
full = {r["step"]: r for r in map(json.loads, open("zero3_full.jsonl")) if "loss" in r}
on = [r for r in map(json.loads, open("ddp_on.jsonl")) if "loss" in r]
worst = max(abs(r["loss"] - full[r["step"]]["loss"]) / full[r["step"]]["loss"] for r in on)
assert len(on) == 10 and worst <= 1e-5, (len(on), worst)
print(f"reshard: DDP x4 trained on from the ZeRO-3 checkpoint: steps 10-19 within {worst:.2e} of ZeRO-3")
EOF

# 2b. Tensor parallelism: sharded checkpoints with a file per data and tensor rank (each
# holding its piece of the split parameters), resumed bitwise on the same layout; loaded by
# one process and by data 2 x tensor 2; and the ZeRO-3 checkpoint loaded into data 2 x tensor 2.
dp_plan tp2 1 8 0 20 fp32 none 2
dp_plan dp2_tp2 2 4 1 20 fp32 none 2
checkpointed 2 tp2 ck_tp rank-00001.safetensors
run 1 ./exe_single --resume ck_tp --steps 10 --export single_from_tp.st --quiet
run 4 ./exe_dp2_tp2 --resume ck_z3 --steps 10 --export dp2_tp2_from_zero3.st --quiet
run 4 ./exe_dp2_tp2 --resume ck_tp --steps 10 --export dp2_tp2_from_tp.st --quiet
run 4 ./exe_dp2_tp2 --steps 10 --checkpoint-dir ck_dptp --checkpoint-every 10 --quiet
[[ -f ck_dptp/step-00000010/rank-00003.safetensors ]] || fail "no 4 rank files in ck_dptp/step-00000010"
run 4 ./exe_dp2_tp2 --resume ck_dptp --steps 10 --export dp2_tp2_own.st --quiet
run 1 ./exe_single --resume ck_dptp --steps 10 --export single_from_dp2_tp2.st --quiet
# --save-grads under tensor parallelism: the pieces gathered into whole tensors, the first
# step's gradient of one process to rounding.
run 1 ./exe_single --steps 1 --save-grads grads_single.st --quiet
run 2 ./exe_tp2 --steps 1 --save-grads grads_tp2.st --quiet
PYTHONPATH="$ROOT/test/e2e" "$PY" -c 'from same_tensors import close_gradients
close_gradients("grads_single.st", "grads_tp2.st", "TP x2")'
PYTHONPATH="$ROOT/test/e2e" "$PY" - <<'EOF'
from same_tensors import resumed_bitwise, same
resumed_bitwise("tp2_full.jsonl", "tp2_resumed.jsonl", "TP x2 resumed from its checkpoint")
same("tp2.st", "single_from_tp.st", "TP x2 -> one process")
same("zero3.st", "dp2_tp2_from_zero3.st", "ZeRO-3 x4 -> data 2 x tensor 2")
same("tp2.st", "dp2_tp2_from_tp.st", "TP x2 -> data 2 x tensor 2 (ZeRO-1)")
same("dp2_tp2_own.st", "single_from_dp2_tp2.st", "data 2 x tensor 2 (ZeRO-1) -> one process")
EOF

# 2c. Pipeline parallelism: a file per stage (the last stage's copy of the tied embedding is
# marked a replica and read from the first stage's file), resumed bitwise on the same layout;
# loaded by DDP x2 and by one process, one process's checkpoint and the ZeRO-3 one loaded by
# PP x2, and data 2 x tensor 2 x pipeline 2's own loaded by one process, all bitwise;
# --save-grads and --export gather every stage's tensors.
dp_plan pp2 1 2 0 20 fp32 none 1 false 2 1f1b
dp_plan dp2 2 4 0 20
dp_plan dp2_tp2_pp2 2 2 1 20 fp32 none 2 false 2 gpipe
checkpointed 2 pp2 ck_pp rank-00001.safetensors
run 2 ./exe_dp2 --resume ck_pp --steps 10 --export dp2_from_pp.st --quiet
run 1 ./exe_single --resume ck_pp --steps 10 --export single_from_pp.st --quiet
run 2 ./exe_pp2 --resume ck_single --steps 10 --export pp2_from_single.st --quiet
run 2 ./exe_pp2 --resume ck_z3 --steps 10 --export pp2_from_zero3.st --quiet
run 8 ./exe_dp2_tp2_pp2 --steps 10 --checkpoint-dir ck_3d --checkpoint-every 10 --quiet
[[ -f ck_3d/step-00000010/rank-00007.safetensors ]] || fail "no 8 rank files in ck_3d/step-00000010"
run 8 ./exe_dp2_tp2_pp2 --resume ck_3d --steps 10 --export dp2_tp2_pp2_own.st --quiet
run 1 ./exe_single --resume ck_3d --steps 10 --export single_from_3d.st --quiet
run 2 ./exe_pp2 --steps 1 --save-grads grads_pp2.st --quiet
# ZeRO-3 over data 2 x pipeline 2: each stage's shards saved, resumed bitwise, loaded by one
# process, and one process's checkpoint loaded by it.
dp_plan dp2_pp2_zero3 2 2 3 20 fp32 none 1 false 2 1f1b
checkpointed 4 dp2_pp2_zero3 ck_pp_z3 rank-00003.safetensors
run 1 ./exe_single --resume ck_pp_z3 --steps 10 --export single_from_pp_z3.st --quiet
run 4 ./exe_dp2_pp2_zero3 --resume ck_single --steps 10 --export pp_z3_from_single.st --quiet
PYTHONPATH="$ROOT/test/e2e" "$PY" - <<'EOF'
from same_tensors import close_gradients, resumed_bitwise, same
resumed_bitwise("pp2_full.jsonl", "pp2_resumed.jsonl", "PP x2 resumed from its checkpoint")
same("pp2.st", "dp2_from_pp.st", "PP x2 -> DDP x2")
same("pp2.st", "single_from_pp.st", "PP x2 -> one process")
same("single_own.st", "pp2_from_single.st", "one process -> PP x2")
same("zero3.st", "pp2_from_zero3.st", "ZeRO-3 x4 -> PP x2")
same("dp2_tp2_pp2_own.st", "single_from_3d.st", "data 2 x tensor 2 x pipeline 2 -> one process")
close_gradients("grads_single.st", "grads_pp2.st", "PP x2")
resumed_bitwise("dp2_pp2_zero3_full.jsonl", "dp2_pp2_zero3_resumed.jsonl", "ZeRO-3 x data 2 x PP 2 resumed")
same("dp2_pp2_zero3.st", "single_from_pp_z3.st", "ZeRO-3 x data 2 x PP 2 -> one process")
same("single_own.st", "pp_z3_from_single.st", "one process -> ZeRO-3 x data 2 x PP 2")
EOF
# 3. A corrupted shard is refused before it is used.
cp -r ck_z3 ck_bad
printf 'X' | dd of=ck_bad/step-00000010/rank-00002.safetensors bs=1 seek=200 conv=notrunc status=none
# Each rank appends its own stderr to bad.log: through mpirun's forwarding, MPI_Abort can
# end the run before the first rank's error reaches the file.
: > bad.log
if "$MPIRUN" -n 4 sh -c 'exec ./exe_zero3 --resume ck_bad --quiet 2>>bad.log' > /dev/null 2>&1; then
  fail "a corrupted shard was accepted"
fi
grep -q "rank-00002.safetensors: sha256 .* differs from the index" bad.log || { cat bad.log; fail "no hash error"; }
echo "reshard: a changed byte in rank-00002.safetensors is refused by its sha256"

# 4. Faults: a killed rank, then a hung one; every rank exits within the timeout.
plan slow 4 1 1 400
kill_rank() {  # kill_rank SIGNAL RANK LOG: signal that rank's process (from the run's first line)
  for _ in $(seq 1 600); do
    [[ -d ck_fault/step-00000010 ]] && break
    sleep 0.1
  done
  local pid
  pid=$(grep -o "rank $2 = pid [0-9]*" "$3" | head -1 | awk '{print $5}')
  [[ -n "$pid" ]] && kill "-$1" "$pid"
}
rm -rf ck_fault
start=$(date +%s)
( kill_rank KILL 2 killed.log ) &
set +e
timeout 120 "$MPIRUN" -n 4 ./exe_slow --checkpoint-dir ck_fault --checkpoint-every 10 --comm-timeout 20 \
     --quiet > killed.log 2>&1
rc=$?; wait
set -e
[[ $rc -ne 0 ]] || fail "the job survived a killed rank"
elapsed=$(( $(date +%s) - start ))
[[ $rc -ne 124 ]] || fail "the job hung after a rank was killed"
# Either the other ranks notice the dead one first and name it ("rank 2 (pid …) has died"),
# or MPICH's launcher kills them at once (SIGKILL: they cannot report), naming one stopped
# process by pid, with the run's first line mapping pids to ranks. No rank is left behind.
if grep -q "rank 2 (pid [0-9]* on .*) has died" killed.log; then
  named="named by its peers: $(grep -m1 'has died' killed.log | cut -c1-120)"
elif grep -q "BAD TERMINATION" killed.log && grep -q "rank 2 = pid" killed.log; then
  named="the launcher stopped every rank first (rank table printed)"
else
  cat killed.log; fail "no rank named and no launcher report"
fi
for _ in $(seq 1 100); do  # every rank gone within 10 s (zombies awaiting their reaper count as gone)
  alive=$(ps -eo stat=,args= | awk '$1 !~ /^Z/ && /exe_slow --checkpoint-dir/' | grep -vc awk || true)
  [[ "$alive" -eq 0 ]] && break
  sleep 0.1
done
[[ "$alive" -eq 0 ]] || { ps -eo pid,stat,args | grep exe_slow; fail "ranks left running 10 s after the kill"; }
echo "reshard: rank 2 killed: every rank stopped (exit $rc) within ${elapsed} s; $named"

rm -rf ck_fault
( kill_rank STOP 1 hung.log ) &
start=$(date +%s)
set +e
timeout 120 "$MPIRUN" -n 4 ./exe_slow --checkpoint-dir ck_fault --checkpoint-every 10 --comm-timeout 5 \
     --quiet > hung.log 2>&1
rc=$?; wait
set -e
[[ $rc -ne 0 ]] || fail "the job survived a hung rank"
pkill -KILL -f exe_slow || true
elapsed=$(( $(date +%s) - start ))
[[ $rc -ne 124 ]] || fail "the job hung when a rank stopped"
grep -q "has waited 5 s for its peers: rank 1 (pid [0-9]* on .*) is stopped" hung.log ||
  { cat hung.log; fail "the watchdog did not name the stopped rank"; }
echo "reshard: rank 1 stopped: the others gave up after --comm-timeout 5 (exit $rc, ${elapsed} s): $(grep -m1 "has waited" hung.log | cut -c1-200)"

# ... and the run resumes from the last complete checkpoint with the same losses.
last=$(ls -d ck_fault/step-* | grep -v partial | tail -1)
resume_step=$((10#${last##*step-}))
"$MPIRUN" -n 4 ./exe_slow --steps $((resume_step + 10)) --log nofault.jsonl --quiet
"$MPIRUN" -n 4 ./exe_slow --resume ck_fault --steps $((resume_step + 10)) --log after.jsonl --quiet
"$PY" - "$resume_step" <<'EOF'
import json, sys
start = int(sys.argv[1])
ref = {r["step"]: r for r in map(json.loads, open("nofault.jsonl")) if "loss" in r}
got = [r for r in map(json.loads, open("after.jsonl")) if "loss" in r]
assert [r["step"] for r in got] == list(range(start, start + 10))
assert all(r["loss"] == ref[r["step"]]["loss"] for r in got)
print(f"reshard: resumed after the fault at step {start}: 10 steps bitwise equal to a run without faults")
EOF
# A run that diverges fails alike on every rank (the norm is reduced over them): the ranks
# finish together, rank 0 reports once, and its log ends with the step that diverged.
sed 's/lr: 2e-3/lr: 1e6/; s/  clip      = 1.0/  clip      = none/; s/train zero1/train diverge/' zero1.plan > diverge.plan
"$PLANC" build diverge.plan -o exe_diverge
set +e
timeout 120 "$MPIRUN" -n 4 ./exe_diverge --log diverge.jsonl --quiet > diverge.log 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat diverge.log; fail "a diverging run exited $rc, not 1"; }
[[ $(grep -c "planrt: error" diverge.log) -eq 1 ]] && grep -q "rank 0: step [0-9]*: the gradient norm is" diverge.log ||
  { cat diverge.log; fail "a diverging run did not report once, from rank 0"; }
tail -1 diverge.jsonl | grep -q '"grad_norm": null' || fail "the log does not end with the diverged step"
echo "reshard: a diverging run on 4 ranks: exit 1, one message ($(grep -o 'step [0-9]*: the gradient norm is [a-zA-Z]*' diverge.log)), the log complete"
echo "reshard: all checks passed"
