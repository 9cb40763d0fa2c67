#!/usr/bin/env bash
# End to end across hosts (docs/CLUSTERS.md): two "hosts" made here as network namespaces
# joined by a bridge, each with its own host name, IPC and /dev/shm (unshare) and an sshd;
# MPICH's hydra launches over ssh from a hostfile, through `planc run --hosts`.
#
#   test/e2e/multihost.sh PLANC_BIN WORKDIR
#
# 1. dp 2 × tp 2 on 2 hosts × 2 ranks gives the one-process losses within 1e-5 over 20
#    steps, with the tensor axis inside each host: the executable's host map (its log's
#    "hosts"/"axes" line) and planc explain's axis links agree.
#    The same through Slurm (a cluster of the two hosts: slurmctld here, a slurmd in each;
#    `salloc` + `planc run`, which starts the ranks with `srun --mpi=pmi2`): bitwise the
#    hostfile run's; an allocation that does not match the mesh's nodes is refused.
# 2. A hostfile whose slots do not match the mesh's nodes is refused, naming the line.
# 3. A plan whose tensor axis crosses nodes is warned about, naming the axis and the link.
# 4. A host whose processes are killed: every rank exits within 60 s (hydra's teardown;
#    ssh names the host when it notices before hydra stops it, which is not always).
#    Under Slurm (1c), where srun lets the ranks left find the loss themselves, within 60 s
#    too, and they name the lost host's ranks.
# 5. A host whose link is cut: every rank exits within 60 s (--comm-timeout 20), naming the
#    other host's ranks; then --resume on the restored hosts continues bitwise as on one.
# Needs root (namespaces), iproute2, sshd and ssh (openssh-server, -client) and MPICH;
# exits 77 (skipped) with the reason when any is missing. Each host's own IPC namespace and
# /dev/shm keep MPI's shared-memory transports inside it: across hosts it takes TCP.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/ref_args.sh" multihost "$@"
skip() { echo "multihost: SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "making network namespaces needs root"
for tool in ip unshare ssh ssh-keygen mpiexec.hydra; do
  command -v "$tool" > /dev/null || skip "$tool is not installed"
done
[[ -x /usr/sbin/sshd ]] || skip "sshd is not installed (openssh-server)"

# Names unique to this run: namespaces pl<PID>h1, h2; bridge pl<PID>br; subnet 10.201.N.0/24.
TAG=pl$$
NET=10.201.$(($$ % 250))
HOSTS=("$NET.11" "$NET.12")
cleanup() {
  set +e
  [[ -f $WORK/slurm/ctld.pid ]] && kill "$(cat "$WORK/slurm/ctld.pid")" 2> /dev/null
  for h in 1 2; do
    for p in $(ip netns pids "${TAG}h$h" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
    ip netns del "${TAG}h$h" 2> /dev/null
  done
  ip link del "${TAG}br" 2> /dev/null
}
trap cleanup EXIT
ip netns add "${TAG}probe" 2> /dev/null || skip "this machine cannot make network namespaces"
ip netns del "${TAG}probe"

cd "$WORK"
rm -rf ./*.jsonl ./*.out ckpt ckpt_local keys data
mkdir -p keys
ssh-keygen -q -t ed25519 -N "" -f keys/client
cp keys/client.pub keys/authorized_keys
chmod 600 keys/authorized_keys
mkdir -p /run/sshd
ip link add "${TAG}br" type bridge
ip addr add "$NET.1/24" dev "${TAG}br"
ip link set "${TAG}br" up
for h in 1 2; do
  ns=${TAG}h$h
  ip netns add "$ns"
  ip link add "${TAG}v$h" type veth peer name eth0 netns "$ns"
  ip link set "${TAG}v$h" master "${TAG}br"
  ip link set "${TAG}v$h" up
  ip netns exec "$ns" ip addr add "${HOSTS[$((h - 1))]}/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  ssh-keygen -q -t ed25519 -N "" -f "keys/host$h"
  cat > "keys/sshd$h.conf" << EOF
ListenAddress ${HOSTS[$((h - 1))]}
HostKey $WORK/keys/host$h
PermitRootLogin yes
AuthorizedKeysFile $WORK/keys/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
PidFile $WORK/keys/sshd$h.pid
EOF
  # A host of its own: name, IPC and /dev/shm (sshd's children, the ranks, inherit them).
  ip netns exec "$ns" unshare --uts --ipc --mount --propagation private sh -c \
    "hostname $ns && mount -t tmpfs tmpfs /dev/shm && exec /usr/sbin/sshd -f $WORK/keys/sshd$h.conf"
done
cat > keys/ssh << EOF
#!/bin/sh
exec ssh -i $WORK/keys/client -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
  -o BatchMode=yes -o ConnectTimeout=5 "\$@"
EOF
chmod +x keys/ssh
for h in "${HOSTS[@]}"; do
  for try in 1 2 3 4 5 6 7 8 9 10; do keys/ssh "$h" true 2> /dev/null && break; sleep 0.5; done
done
[[ $(keys/ssh "${HOSTS[1]}" hostname) == "${TAG}h2" ]] || fail "ssh into the second namespace does not work"
printf '%s:2\n%s:2\n' "${HOSTS[@]}" > hostfile
# Hydra: ssh through the wrapper, its control traffic on the bridge.
export HYDRA_LAUNCHER_EXEC=$WORK/keys/ssh HYDRA_IFACE=${TAG}br

"$PY" "$ROOT/scripts/prepare_text.py" "$WORK/data" > /dev/null
plan() { # plan NAME MESH_DEVICES AXES PARALLEL [MORE]
  cat > "$1.plan" << EOF
import "models/gpt.plan"
mesh m { devices = $2  axes = [$3] }
train $1 {
  model = tiny  mesh = m  data = tokens("$WORK/data/train.bin")
  batch = 8  micro = 4  seq = 64  steps = 20
  parallel { $4 }
  optimizer = adamw(lr: 1e-3)  seed = 11
  ${5:-}
}
EOF
}

echo "== 1. dp 2 x tp 2 on 2 hosts x 2 ranks against one process"
plan one "cpu(1)" "dp: 1" "data = dp"
sed -i 's/micro = 4/micro = 8/' one.plan
plan hosts "cpu(2) * 2" "dp: 2, tp: 2" "data = dp  tensor = tp" \
  "checkpoint { every: 200, dir: \"$WORK/ckpt\", keep: 2 }"
"$PLANC" run one.plan -o exe_one -- --log one.jsonl --quiet
"$PLANC" run hosts.plan -o exe_hosts --hosts hostfile -- --log hosts.jsonl --quiet 2> hosts.out || {
  cat hosts.out
  fail "the run across hosts failed"
}
"$PLANC" explain --json hosts.plan > explain.json
"$PY" - one.jsonl hosts.jsonl explain.json "$TAG" << 'EOF' || fail "across hosts"
import json, sys
one = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
lines = [json.loads(l) for l in open(sys.argv[2])]
two = [l for l in lines if "loss" in l]
assert len(one) == len(two) == 20, (len(one), len(two))
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(one, two))
print("  20 steps: worst loss rel. diff %.2e against one process" % worst)
assert worst <= 1e-5
topo = [l for l in lines if "hosts" in l][0]
tag = sys.argv[4]
assert [(h["name"], h["ranks"]) for h in topo["hosts"]] == [(tag + "h1", [0, 1]), (tag + "h2", [2, 3])], topo
assert topo["axes"] == {"dp": "network", "tp": "node"}, topo
links = json.load(open(sys.argv[3]))["axis_links"]
assert links == topo["axes"], (links, topo["axes"])
print("  host map %s; axes %s, as planc explain assumed" % (
    ", ".join("%s = ranks %s" % (h["name"], h["ranks"]) for h in topo["hosts"]), topo["axes"]))
EOF

# start_slurm: slurmctld here and a slurmd in each host (its own name, IPC and /dev/shm, as
# the sshd's), with munge; returns 1, having said why, where this machine cannot run them.
start_slurm() {
  command -v slurmctld > /dev/null && command -v slurmd > /dev/null && command -v munged > /dev/null \
    || { echo "  (slurm-wlm or munge is not installed)"; return 1; }
  if ! munge -n > /dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge 2> /dev/null
    su -s /bin/sh munge -c munged || { echo "  (munged does not start)"; return 1; }
  fi
  rm -rf "$WORK/slurm" # a state directory of another run's cluster would stop slurmctld
  mkdir -p "$WORK/slurm/state"
  local conf=$WORK/slurm/slurm.conf
  cat > "$conf" << EOF
ClusterName=planc$$
SlurmctldHost=$(hostname)($NET.1)
SlurmctldPort=$((6900 + $$ % 90))
SlurmdPort=$((7000 + $$ % 90))
AuthType=auth/munge
SlurmUser=root
StateSaveLocation=$WORK/slurm/state
SlurmdSpoolDir=$WORK/slurm/spool-%n
SlurmctldPidFile=$WORK/slurm/ctld.pid
SlurmdPidFile=$WORK/slurm/slurmd-%n.pid
SlurmctldLogFile=$WORK/slurm/ctld.log
SlurmdLogFile=$WORK/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=${TAG}h1 NodeAddr=${HOSTS[0]} CPUs=2 State=UNKNOWN
NodeName=${TAG}h2 NodeAddr=${HOSTS[1]} CPUs=2 State=UNKNOWN
PartitionName=p Nodes=${TAG}h1,${TAG}h2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  export SLURM_CONF=$conf
  slurmctld || { echo "  (slurmctld does not start: $WORK/slurm/ctld.log)"; return 1; }
  # slurmd needs a cgroup plugin: v1 where the machine mounts v1 controllers, else v2.
  local cg
  for cg in v1 v2; do
    printf 'CgroupPlugin=cgroup/%s\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n' "$cg" \
      > "$WORK/slurm/cgroup.conf"
    local mount_cg=""
    [[ $cg == v2 ]] && mount_cg="mount -t cgroup2 none /sys/fs/cgroup &&"
    for h in 1 2; do
      ip netns exec "${TAG}h$h" unshare --uts --ipc --mount --propagation private sh -c \
        "hostname ${TAG}h$h && mount -t tmpfs tmpfs /dev/shm && $mount_cg SLURM_CONF=$conf exec slurmd -N ${TAG}h$h" \
        2> /dev/null || true
    done
    for try in $(seq 1 20); do
      [[ $(sinfo -h -o %t 2> /dev/null | sort -u) == idle ]] && return 0
      sleep 0.5
    done
  done
  echo "  (slurmd does not come up: $WORK/slurm/slurmd-${TAG}h1.log)"
  return 1
}

echo "== 1b. the same through a Slurm allocation of the two hosts (srun)"
slurm_run() {
  timeout 300 salloc -N 2 --ntasks-per-node=2 env -u HYDRA_LAUNCHER_EXEC -u HYDRA_IFACE "$PLANC" run hosts.plan \
    -o exe_hosts -- --log slurm.jsonl --quiet > slurm.out 2>&1
}
if start_slurm; then
  # Twice in full test runs on a 2-core machine (beside other tests) the job step did not
  # end: its 20 steps and checkpoint done, the ranks ran on until salloc's timeout (300 s)
  # cancelled them. Not seen alone or on an idle machine; not understood yet. Such a run
  # is shown and retried once; any other failure, or a second timeout, fails.
  rc=0
  slurm_run || rc=$?
  if [[ $rc == 124 ]] && grep -q "done · 20 steps" slurm.out; then
    cat slurm.out
    echo "  (the Slurm job step did not end within 300 s of its start although its 20 steps were done: retried once)"
    rc=0
    slurm_run || rc=$?
  fi
  [[ $rc == 0 ]] || { cat slurm.out; fail "the run through Slurm failed"; }
  "$PY" - hosts.jsonl slurm.jsonl "$TAG" << 'EOF' || fail "through Slurm"
import json, sys
a = [l["loss"] for l in map(json.loads, open(sys.argv[1])) if "loss" in l]
lines = [json.loads(l) for l in open(sys.argv[2])]
b = [l["loss"] for l in lines if "loss" in l]
assert len(a) == 20 and a == b, (a, b)
topo = [l for l in lines if "hosts" in l][0]
tag = sys.argv[3]
assert [(h["name"], h["ranks"]) for h in topo["hosts"]] == [(tag + "h1", [0, 1]), (tag + "h2", [2, 3])], topo
assert topo["axes"] == {"dp": "network", "tp": "node"}, topo
print("  20 steps through salloc + planc run (srun --mpi=pmi2): bitwise the hostfile run's; tp inside each host")
EOF
  if salloc -N 2 --ntasks-per-node=1 "$PLANC" run hosts.plan -o exe_hosts > slurm_bad.out 2>&1; then
    fail "an allocation of 1 task a node ran a mesh of 2 devices a node"
  fi
  grep -q "the Slurm allocation runs 1 tasks a node, but mesh 'm' holds 2 devices a node" slurm_bad.out \
    || { cat slurm_bad.out; fail "the allocation's mismatch is not named"; }
  echo "  salloc -N 2 --ntasks-per-node=1: refused, naming the tasks a node against the mesh's"

  echo "== 1c. under Slurm, a host whose ranks are killed"
  timeout 300 salloc -N 2 --ntasks-per-node=2 env -u HYDRA_LAUNCHER_EXEC -u HYDRA_IFACE "$PLANC" run hosts.plan \
    -o exe_hosts -- --steps 1000000 --comm-timeout 20 --log slurm_killed.jsonl --quiet > slurm_killed.out 2>&1 &
  allocation=$!
  for try in $(seq 1 1200); do
    [[ $(grep -c '"loss"' slurm_killed.jsonl 2> /dev/null || true) -ge 30 ]] && break
    sleep 0.05
  done
  t0=$(date +%s.%N)
  for p in $(ip netns pids "${TAG}h2"); do
    [[ $(cat "/proc/$p/comm" 2> /dev/null) == exe_hosts ]] && kill -9 "$p"
  done
  waited=0
  while pgrep -f "$WORK/exe_hosts" > /dev/null && [[ $waited -lt 120 ]]; do
    sleep 0.5
    waited=$((waited + 1))
  done
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  wait "$allocation" || true
  pgrep -f "$WORK/exe_hosts" > /dev/null && { pkill -9 -f "$WORK/exe_hosts"; fail "ranks survive the killed host under Slurm"; }
  (($(echo "$took < 60" | bc))) || { cat slurm_killed.out; fail "under Slurm the ranks took ${took} s to exit"; }
  grep -q "a host of the job died or lost its link, or a rank there hung (${TAG}h2: rank 2, 3)" slurm_killed.out \
    || { cat slurm_killed.out; fail "under Slurm the ranks left do not name the killed host's"; }
  echo "  every rank gone ${took} s after host 2's ranks were killed; the ranks left said:"
  echo "    $(grep -m1 "a host of the job died" slurm_killed.out | cut -c1-240)"
  unset SLURM_CONF
else
  echo "  SKIP: no Slurm cluster on this machine (above); the hostfile runs remain"
fi

echo "== 2. a hostfile that does not match the mesh's nodes"
printf '%s:3\n%s:1\n' "${HOSTS[@]}" > badhosts
if "$PLANC" run hosts.plan -o exe_hosts --hosts badhosts 2> bad.out; then fail "a 3 + 1 hostfile ran a mesh of 2 x 2"; fi
grep -q "badhosts:1: error: host '${HOSTS[0]}' has 3 slots, but mesh 'm' holds 2 devices a node" bad.out \
  || { cat bad.out; fail "the hostfile error does not name the line"; }

echo "== 3. a tensor axis across nodes is warned about"
plan cross "cpu(2) * 2" "tp: 2, dp: 2" "data = dp  tensor = tp"
"$PLANC" check cross.plan 2> cross.out
grep -q "warning: the tensor axis 'tp' crosses nodes of mesh 'm' (2 devices a node): its collectives, several in every layer, take the network link" cross.out \
  || { cat cross.out; fail "no warning names the tensor axis and the link"; }

# run_until_fault NAME ACTION: a long run across the hosts, ACTION on host 2 once the log
# has 210 steps (just after the checkpoint of step 200, well before the next: a checkpoint
# may wait kCheckpointWait for slow storage); prints the seconds from the fault to the
# last rank's exit.
run_until_fault() {
  rm -f "$1.jsonl"
  "$PLANC" run hosts.plan -o exe_hosts --hosts hostfile -- --steps 1000000 --comm-timeout 20 --log "$1.jsonl" \
    --quiet > "$1.out" 2>&1 &
  local launcher=$!
  for try in $(seq 1 1200); do
    [[ $(grep -c '"loss"' "$1.jsonl" 2> /dev/null || true) -ge 210 ]] && break
    sleep 0.05
  done
  local t0
  t0=$(date +%s.%N)
  $2
  local waited=0
  while pgrep -f "$WORK/exe_hosts" > /dev/null && [[ $waited -lt 90 ]]; do
    sleep 0.5
    waited=$((waited + 1))
  done
  wait "$launcher" || true
  echo "$(date +%s.%N) - $t0" | bc
}

echo "== 4. a host whose processes die"
kill_host() { for p in $(ip netns pids "${TAG}h2"); do [[ $p == $(cat keys/sshd2.pid) ]] || kill -9 "$p"; done; }
took=$(run_until_fault killed kill_host)
echo "  every rank gone ${took} s after host 2's processes were killed"
pgrep -f "$WORK/exe_hosts" > /dev/null && fail "ranks survive the dead host"
(($(echo "$took < 60" | bc))) || fail "the ranks took ${took} s to exit"
# Hydra tears the job down as soon as host 2's proxy goes: the ranks left are killed
# (SIGKILL) before they can say anything, and only ssh, when it notices first, names the
# host. Under Slurm (1c) the ranks left name it.
if grep -q "${HOSTS[1]}" killed.out; then
  echo "  the launcher named the host: $(grep -m1 "${HOSTS[1]}" killed.out)"
else
  echo "  (this time nothing named the host: hydra stopped the job before ssh reported it)"
fi

echo "== 5. a host whose link is cut, then --resume on the restored hosts"
cut_link() { ip link set "${TAG}v2" down; }
took=$(run_until_fault cut cut_link)
ip link set "${TAG}v2" up
echo "  every rank gone ${took} s after host 2's link was cut"
pgrep -f "$WORK/exe_hosts" > /dev/null && fail "ranks survive the cut link"
(($(echo "$took < 60" | bc))) || fail "the ranks took ${took} s to exit"
grep -q "a host of the job died or lost its link, or a rank there hung (${TAG}h2: rank 2, 3)" cut.out \
  || { cat cut.out; fail "the ranks of the lost host are not named"; }
step=$(ls ckpt | sed -n 's/^step-0*\([0-9]*\)$/\1/p' | sort -n | tail -1)
[[ -n $step ]] || fail "the run wrote no checkpoint before the fault"
rm -rf ckpt_local && cp -r ckpt ckpt_local
# After a fault, MPICH's hydra on these namespace hosts now and then leaves every rank in
# MPI_Finalize's PMI barrier once the run is done (all steps logged, the checkpoint
# written): a launcher that outlives its finished run by 60 s is stopped and reported.
rc=0
timeout 240 "$PLANC" run hosts.plan -o exe_hosts --hosts hostfile -- --resume ckpt --steps $((step + 10)) \
  --log resumed.jsonl --quiet 2> resumed.out &
resumer=$!
for try in $(seq 1 240); do
  kill -0 $resumer 2> /dev/null || break
  grep -q "^done · 10 steps" resumed.out && break
  sleep 1
done
for try in $(seq 1 60); do kill -0 $resumer 2> /dev/null || break; sleep 1; done
if kill -0 $resumer 2> /dev/null; then
  echo "  WARNING: the resumed run finished, but hydra kept its ranks in MPI_Finalize for 60 s more: stopped"
  pkill -9 -f "$WORK/exe_hosts" || true
fi
wait $resumer || rc=$?
grep -q "^done · 10 steps" resumed.out || { cat resumed.out; fail "resume across the restored hosts (exit $rc)"; }
env -u HYDRA_LAUNCHER_EXEC -u HYDRA_IFACE -u UCX_TLS mpirun -n 4 ./exe_hosts --resume ckpt_local \
  --steps $((step + 10)) --log local.jsonl --quiet 2> local.out || { cat local.out; fail "resume on one host"; }
"$PY" - resumed.jsonl local.jsonl << 'EOF' || fail "the resumed run differs from one host's"
import json, sys
a = [(l["step"], l["loss"]) for l in map(json.loads, open(sys.argv[1])) if "loss" in l]
b = [(l["step"], l["loss"]) for l in map(json.loads, open(sys.argv[2])) if "loss" in l]
assert len(a) == 10 and a == b, (a, b)
print("  steps %d-%d resumed across the restored hosts: bitwise those resumed on one host" % (a[0][0], a[-1][0]))
EOF

echo "PASS: 2 hosts x 2 ranks match one process; hostfile, topology and host faults handled"
