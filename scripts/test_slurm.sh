#!/usr/bin/env bash
# dtrain on the real engines: a SLURM cluster of two hosts (network namespaces h0 and h1 joined
# by a veth pair; slurmctld, slurmd and munged started here, nothing system-wide) and OpenMPI's
# mpirun across the same two hosts with an agent in place of ssh. It runs
#   1. an sbatch job with two srun steps in one allocation (one host, PMIx) and dtrain train
#      -n 2 inside the batch script (the script launches, it is no rank);
#   2. srun -N2 ddp and gossip with nothing set by hand (PMIx), flags over the environment
#      (--transport tcp --timeout 10 beat DTRAIN_TRANSPORT=shm DTRAIN_TIMEOUT=1);
#   3. srun -N2 without PMIx: DTRAIN_TOKEN exported (store on the first host), and without it
#      an immediate error naming what is missing;
#   4. mpirun -np 2 across h0 and h1;
#   5. a killed task, and a cut link, each ending the step within a bound;
# then checks that no dtrain file is left in /tmp or /dev/shm and every daemon is stopped.
# Exit 77 (ctest: skipped) when not root or the packages cannot be installed.
# Usage: scripts/test_slurm.sh [BUILD_DIR]     (every wait is bounded; a few minutes in all)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD_DIR:-build}}
BIN=$(realpath "$BUILD/bin/dtrain" 2>/dev/null)
RANKP=$(realpath "$BUILD/tests/dtrain_test_rank" 2>/dev/null)
skip() { echo "test_slurm: SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, slurmd)"
[[ -x "$BIN" && -x "$RANKP" ]] || skip "no $BUILD/bin/dtrain or $BUILD/tests/dtrain_test_rank: build first (scripts/build.sh)"
command -v ip >/dev/null || skip "needs iproute2"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v mpirun >/dev/null; then
  timeout 600 scripts/deps.sh --slurm >/dev/null 2>&1 || skip "cannot install slurm-wlm, munge, openmpi-bin (scripts/deps.sh --slurm)"
fi
ID=$$
W=$(mktemp -d /tmp/dtrain-slurmtest-XXXXXX)
NS0=dts0_$ID NS1=dts1_$ID VA=dsa$ID VB=dsb$ID NET=10.214.$((ID % 250))
FAILS=0 JOBS=()
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
on() { local n=$1; shift; ip netns exec "$n" env SLURM_CONF="$W/slurm.conf" PATH="$PATH" "$@"; }

DAEMONS=()  # pids of munged, slurmctld and the slurmds (started in the foreground, here)
dead() { [[ ! -e /proc/$1 ]] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
cleanup() {
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${DAEMONS[@]}"; do  # bounded: each daemon gets 10 s, then SIGKILL
    for _ in $(seq 50); do dead "$p" && break; sleep 0.2; done
    dead "$p" || kill -9 "$p" 2>/dev/null
  done
  for n in "$NS0" "$NS1"; do  # anything still in the hosts (slurmstepd, ranks): TERM, then KILL
    for p in $(ip netns pids "$n" 2>/dev/null); do kill "$p" 2>/dev/null; done
    for p in $(ip netns pids "$n" 2>/dev/null); do
      for _ in $(seq 25); do dead "$p" && break; sleep 0.2; done
      dead "$p" || kill -9 "$p" 2>/dev/null
    done
  done
  ip netns del "$NS0" 2>/dev/null; ip netns del "$NS1" 2>/dev/null
  rm -rf "/etc/netns/$NS0" "/etc/netns/$NS1" "$W"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP

# --- two hosts ---------------------------------------------------------------------------
ip netns add "$NS0" && ip netns add "$NS1" && ip link add "$VA" type veth peer name "$VB" &&
  ip link set "$VA" netns "$NS0" && ip link set "$VB" netns "$NS1" &&
  ip -n "$NS0" addr add "$NET.1/24" dev "$VA" && ip -n "$NS1" addr add "$NET.2/24" dev "$VB" &&
  for n in "$NS0" "$NS1"; do ip -n "$n" link set lo up; done &&
  ip -n "$NS0" link set "$VA" up && ip -n "$NS1" link set "$VB" up || skip "cannot create network namespaces here"
for n in "$NS0" "$NS1"; do  # ip netns exec bind-mounts these over /etc/hosts: h0, h1 resolve
  mkdir -p "/etc/netns/$n" && printf '127.0.0.1 localhost\n%s.1 h0\n%s.2 h1\n' "$NET" "$NET" > "/etc/netns/$n/hosts"
done

# --- munge and slurm -----------------------------------------------------------------------
mkdir -p "$W/ctld" "$W/spool-h0" "$W/spool-h1" "$W/tmp-h0" "$W/tmp-h1" && touch "$W/plugstack.conf"
munged -F --force --socket="$W/munge.sock" --pid-file="$W/munged.pid" --seed-file="$W/munge.seed" \
  --log-file="$W/munged.log" --key-file=/etc/munge/munge.key > "$W/munged.out" 2>&1 &
DAEMONS+=($!)
for _ in $(seq 50); do [[ -S $W/munge.sock ]] && break; sleep 0.2; done
[[ -S $W/munge.sock ]] || skip "munged does not start: $(tail -2 "$W/munged.log")"
# MinJobAge: a finished job's record is kept 300 s (SLURM's default). At 2 s, `sbatch --wait`
# on a loaded machine could poll after the record was gone and print "Job 1 no longer found
# and exit code not found" with no log (a fresh-clone .ci/run, 2026-11-29).
cat > "$W/slurm.conf" <<EOF
ClusterName=dtraintest
SlurmctldHost=$(hostname -s)($NET.1)
AuthType=auth/munge
AuthInfo=socket=$W/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$W/ctld
SlurmdSpoolDir=$W/spool-%n
TmpFS=$W/tmp-%n
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd-%n.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd-%n.log
PlugStackConfig=$W/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=30
KillWait=2
MinJobAge=300
NodeName=h0 NodeAddr=$NET.1 CPUs=4 State=UNKNOWN
NodeName=h1 NodeAddr=$NET.2 CPUs=4 State=UNKNOWN
PartitionName=one Nodes=h0 MaxTime=10 State=UP OverSubscribe=FORCE
PartitionName=two Nodes=h0,h1 Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
EOF
ip netns exec "$NS0" env SLURM_CONF="$W/slurm.conf" slurmctld -D -i > "$W/slurmctld.out" 2>&1 &
DAEMONS+=($!)
# `ip netns exec` mounts a fresh /sys without the cgroup hierarchies slurmd needs: mount the
# host's again inside (same hierarchies; the mount namespace ends with the daemon).
{
  echo "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup || exit 1"
  awk '$3 == "cgroup" || $3 == "cgroup2" { printf "mkdir -p %s && mount -t %s -o %s %s %s || exit 1\n", $2, $3, $4, $1, $2 }' /proc/self/mounts
  echo 'exec slurmd -D -N "$1"'
} > "$W/slurmd.sh"
ip netns exec "$NS0" env SLURM_CONF="$W/slurm.conf" sh "$W/slurmd.sh" h0 > "$W/slurmd-h0.out" 2>&1 &
DAEMONS+=($!)
ip netns exec "$NS1" env SLURM_CONF="$W/slurm.conf" sh "$W/slurmd.sh" h1 > "$W/slurmd-h1.out" 2>&1 &
DAEMONS+=($!)
for _ in $(seq 60); do  # both nodes idle, at most 30 s
  [[ $(on "$NS0" sinfo -h -p two -o '%t' 2>/dev/null | sort -u) == idle ]] && break; sleep 0.5
done
[[ $(on "$NS0" sinfo -h -p two -o '%t' | sort -u) == idle ]] || { on "$NS0" sinfo; tail -n3 "$W"/slurm*.log; skip "the SLURM nodes never became idle"; }
echo "test_slurm: SLURM cluster up (h0=$NET.1, h1=$NET.2) in $W"

# A small data set: 3 classes on 8 features, 1200 rows.
awk 'BEGIN{srand(7); for(i=0;i<1200;i++){c=i%3; printf "%d",c; for(j=0;j<8;j++) printf ",%.4f", (j%3==c?1:0)+rand()*0.5; print ""}}' > "$W/data.csv"
# The two namespaces share this machine's hostname and boot id, which transport auto would
# take for one host (shm): each rank's host id is its SLURM node name / its address instead.
printf '#!/bin/sh\nexport DTRAIN_HOST_ID=${SLURMD_NODENAME:-$(ip -4 -o addr show scope global | awk "{print \\$4}" | head -1)}\nexec "$@"\n' > "$W/host.sh"
chmod +x "$W/host.sh"
BIN0=$BIN BIN="$W/host.sh $BIN" RANKP="$W/host.sh $RANKP"
TRAIN="$BIN train --model mlp:8-16-3 --data csv:$W/data.csv --epochs 2 --batch 32"
S="timeout 120"  # every srun/sbatch wait is bounded

# 1. sbatch: two srun steps in one allocation, then dtrain train -n 2 inside the batch script.
cat > "$W/job.sh" <<EOF
#!/bin/bash
#SBATCH -p one -N1 -n2 -o $W/job-%j.out
srun --mpi=pmix -n2 $RANKP exchange 100000 || exit 11
srun --mpi=pmix -n2 $RANKP exchange 100000 || exit 12
env | grep -E '^SLURM_(STEP_?ID|PROCID)=' | sort | sed 's/^/batch-env: /'
$TRAIN -n 2 --quiet || exit 13
EOF
out=$(on "$NS0" $S sbatch --wait --parsable "$W/job.sh" 2>&1); rc=$?
job=${out##*$'\n'}; JOBS+=("$job")
log=$(cat "$W/job-$job.out" 2>/dev/null)
[[ $rc -eq 0 && $(grep -c "exchange ok 2" <<<"$log") -eq 2 ]] && pass "sbatch: two srun steps in one allocation" ||
  fail "sbatch with two steps (rc $rc): $out $log"
grep -q "batch-env" <<<"$log" && echo "     (the batch script's own environment: $(grep batch-env <<<"$log" | tr '\n' ' '))"
grep -qi "test accuracy\|test_accuracy\|accuracy" <<<"$log" && pass "dtrain train -n 2 inside an sbatch script launches 2 ranks" ||
  fail "dtrain train -n 2 inside sbatch: $log"

# An sbatch script over two hosts: dtrain train -n 2 starts its ranks with srun across them.
cat > "$W/job2.sh" <<EOF
#!/bin/bash
#SBATCH -p two -N2 -n2 -o $W/job2-%j.out
DTRAIN_LOG=info ${TRAIN/$BIN/$BIN0} -n 2 || exit 13
EOF
out=$(on "$NS0" $S sbatch --wait --parsable "$W/job2.sh" 2>&1); rc=$?
job=${out##*$'\n'}; JOBS+=("$job")
log=$(cat "$W/job2-$job.out" 2>/dev/null)
[[ $rc -eq 0 ]] && grep -q "starting 2 ranks with srun" <<<"$log" && [[ $(grep -c "(srun, 2 host(s))" <<<"$log") -eq 2 ]] &&
  pass "dtrain train -n 2 in an sbatch script over two hosts: srun across them" || fail "sbatch over two hosts (rc $rc): $log"

# 2. srun -N2 with nothing set by hand (PMIx): ddp and gossip; flags beat the environment.
for strategy in ddp gossip; do
  out=$(on "$NS0" $S srun --mpi=pmix -N2 -n2 $TRAIN --strategy $strategy 2>&1); rc=$?
  [[ $rc -eq 0 ]] && grep -q "2 rank" <<<"$out" && pass "srun -N2 --strategy $strategy, nothing set by hand" ||
    fail "srun -N2 $strategy (rc $rc): $out"
done
out=$(on "$NS0" $S srun --mpi=pmix -N1 -n2 env DTRAIN_TRANSPORT=shm DTRAIN_TIMEOUT=0.001 DTRAIN_LOG=info \
  $TRAIN --transport tcp --timeout 10 2>&1); rc=$?
[[ $rc -eq 0 && $(grep -c "transport tcp, timeout 10 s" <<<"$out") -eq 2 ]] && pass "--transport tcp --timeout 10 override DTRAIN_TRANSPORT=shm DTRAIN_TIMEOUT=0.001 under srun" ||
  fail "flags under srun (rc $rc): $out"
out=$(on "$NS0" $S srun --mpi=pmix -N1 -n2 $RANKP exchange 1000 2>&1)
grep -q "exchange ok 2 shm" <<<"$out" && pass "srun one host: shm" || fail "srun one host: $out"

# 3. Without PMIx: a token is enough (store on the first host); without one, an immediate error.
out=$(on "$NS0" env DTRAIN_TOKEN=t$RANDOM$RANDOM $S srun --mpi=none -N2 -n2 $RANKP exchange 100000 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -q "exchange ok 2 tcp" <<<"$out" && pass "srun -N2 --mpi=none with DTRAIN_TOKEN: store on h0" ||
  fail "srun --mpi=none with a token (rc $rc): $out"
t0=$SECONDS
out=$(on "$NS0" env -u DTRAIN_TOKEN timeout 60 srun --mpi=none -N2 -n2 $RANKP exchange 1000 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -q "DTRAIN_TOKEN" <<<"$out" && grep -q "mpi=pmix" <<<"$out" && ((SECONDS - t0 < 30)) &&
  pass "srun -N2 without any rendezvous fails in $((SECONDS - t0)) s naming the missing piece" ||
  fail "srun -N2 without rendezvous (rc $rc, $((SECONDS - t0)) s): $out"
out=$(on "$NS0" env DTRAIN_BIND_ADDR=127.0.0.1 timeout 60 srun --mpi=pmix -N2 -n2 $RANKP exchange 1000 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -q "loopback.*DTRAIN_BIND_ADDR" <<<"$out" && pass "loopback advertised to another host is an error naming DTRAIN_BIND_ADDR" ||
  fail "loopback bind across hosts (rc $rc): $out"

# 4. mpirun across the two hosts, an agent in place of ssh.
printf '#!/bin/sh\nh=$1; shift\ncase $h in h1) n=%s;; *) n=%s;; esac\nexec ip netns exec $n sh -c "$*"\n' "$NS1" "$NS0" > "$W/agent.sh"
chmod +x "$W/agent.sh"
MPI="mpirun --allow-run-as-root --host h0,h1 -np 2 --mca plm_rsh_agent $W/agent.sh --mca oob_tcp_if_include $NET.0/24 --mca btl self,tcp --mca btl_tcp_if_include $NET.0/24"
out=$(on "$NS0" timeout 120 $MPI $RANKP exchange 100000 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -q "exchange ok 2 tcp" <<<"$out" && pass "mpirun -np 2 across h0 and h1, nothing set by hand" ||
  fail "mpirun across hosts (rc $rc): $out"
out=$(on "$NS0" timeout 120 $MPI $TRAIN --strategy ddp 2>&1); rc=$?
[[ $rc -eq 0 ]] && pass "mpirun -np 2 across hosts: dtrain train ddp" || fail "mpirun train (rc $rc): $out"

# 5. Faults: a killed task, a cut link. Each step must end (non-zero) well within its bound.
t0=$SECONDS
out=$(on "$NS0" env DTRAIN_FAULT_KILL=1:1 timeout 120 srun --mpi=pmix -N2 -n2 --kill-on-bad-exit=1 $TRAIN --epochs 3 --timeout 20 2>&1); rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] && pass "killed task: the step ends (rc $rc) in $((SECONDS - t0)) s" || fail "killed task (rc $rc): $out"
t0=$SECONDS
# Epochs enough to outlast the start-up poll below by far: 200 of this tiny model once ended in
# 0.17 s, before the link was cut (the run is ended by the cut, or by `timeout`).
on "$NS0" timeout 120 srun --mpi=pmix -N2 -n2 --kill-on-bad-exit=1 $TRAIN --epochs 100000 --timeout 5 > "$W/cut.out" 2>&1 &
cut=$!
for _ in $(seq 200); do grep -q "epoch\|strategy" "$W/cut.out" && break; sleep 0.2; done  # training started (<= 40 s)
ip -n "$NS1" link set "$VB" down
t1=$SECONDS
for _ in $(seq 300); do grep -q "error" "$W/cut.out" && break; sleep 0.2; done  # a rank reports it (<= 60 s)
seen=$((SECONDS - t1))
ip -n "$NS1" link set "$VB" up  # so that srun hears from h1 again and ends
wait $cut; rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] && grep -q error "$W/cut.out" &&
  pass "cut link: reported after ${seen} s, step ended (rc $rc): $(grep -m1 -o 'error.*' "$W/cut.out" | cut -c1-240)" ||
  fail "cut link (rc $rc): $(tail -5 "$W/cut.out")"
for _ in $(seq 60); do [[ -z $(on "$NS0" squeue -h 2>/dev/null) ]] && break; sleep 0.5; done

# --- nothing left behind, every daemon stopped -----------------------------------------------
# (jobs' file stores by job id; shm segments and OpenMPI session directories made since the
# cluster started; other programs' transient segments are gone again after a second. In /tmp
# only dtrain's own names, dtrain-UID-...: other tests running beside this one under ctest -j
# keep their scratch folders there, dtrain-pytest-* and the like, while they run)
shm_new() {
  { find /dev/shm -maxdepth 1 -newer "$W/slurm.conf" \( -name 'dtrain-*' -o -name 'ompi.*' \)
    find /tmp -maxdepth 1 -newer "$W/slurm.conf" \( -name "dtrain-$(id -u)-*" -o -name 'dtrain-train-*' -o -name 'ompi.*' \) ! -path "$W"; } 2>/dev/null
}
left=$(shm_new); [[ -n "$left" ]] && sleep 1 && left=$(comm -12 <(echo "$left" | sort) <(shm_new | sort))
for j in "${JOBS[@]}"; do left+=$(ls -d "/tmp/dtrain-$(id -u)-$j-"* 2>/dev/null); done  # world.cc: dtrain-UID-JOB-STEP
[[ -z "$left" ]] && pass "nothing left in /tmp or /dev/shm" || fail "left behind: $left"
inside=$(for n in "$NS0" "$NS1"; do ip netns pids "$n"; done 2>/dev/null | while read -r p; do dead "$p" || echo "$p"; done)
cleanup; trap - EXIT
alive=""; for p in "${DAEMONS[@]}" $inside; do dead "$p" || alive+=" $p"; done
[[ -z "$alive" ]] && pass "every daemon stopped" || fail "daemons still running:$alive"
((FAILS == 0)) && echo "test_slurm: all passed" || echo "test_slurm: $FAILS FAILED"
exit $((FAILS > 0))
