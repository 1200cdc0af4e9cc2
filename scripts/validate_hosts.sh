#!/usr/bin/env bash
# The planner across hosts: two network-namespace "hosts" on this machine joined by a veth
# pair whose both ends are shaped to RATE (tbf; default 1gbit, a LAN), one rank on each. It
# calibrates the link between them (`dtrain run --nnodes 2 -- dtrain bench calibrate
# --transport tcp --no-compute`: the file's "links_by_size"."hosts"), then trains every
# data-parallel strategy and the GPT's across the two and prints each run's predicted step
# and memory beside the measured ones, as scripts/validate_planner.sh does on one host.
# CALIBRATE_HOSTS=0 keeps the link between hosts the calibration file already has.
# PER_HOST=L (default 1) runs L ranks on each host (2L in all; past this machine's cores at
# L = 2, as the ranks of two real hosts would not be).
# Usage (root, iproute2 with tbf): OUT=/tmp/dv-hosts [RATE=1gbit] [BURST=32kb] [ROUNDS=1] [ONLY=regex]
#   scripts/validate_hosts.sh [BUILD_DIR]
# The calibration starts from $DTRAIN_CALIBRATION (or ~/.cache/dtrain/calibration.json),
# copied into $OUT: compute and this host's links come from there (run `dtrain bench
# calibrate` first). Only the namespaces, links and processes it made are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN=$(realpath "$BUILD/bin/dtrain")
OUT=${OUT:-/tmp/dtrain-validate-hosts}
RATE=${RATE:-1gbit}
# The shaper's bucket: a transfer up to this size passes at the veth's own speed once the
# bucket has refilled (compute between a job's calls refills it). 256kb let a tensor-parallel
# step's 393 KB all-reduces through at several times the rate; 32kb holds even 16 KiB to it.
BURST=${BURST:-32kb}
ROUNDS=${ROUNDS:-1}
PER_HOST=${PER_HOST:-1}
RANKS=$((2 * PER_HOST))
DATA=${DTRAIN_SHARED_DATA:-../shared/data}
TEXT=text:$(realpath -m "$DATA/tinyshakespeare/input.txt.gz")
GPT=gpt:layers=6,heads=8,width=128,context=64
SRC_CAL=${DTRAIN_CALIBRATION:-$HOME/.cache/dtrain/calibration.json}
[ "$(id -u)" = 0 ] || { echo "validate_hosts: needs root (network namespaces)" >&2; exit 2; }
[ -s "$SRC_CAL" ] || { echo "validate_hosts: no calibration at $SRC_CAL: run \`dtrain bench calibrate\` first" >&2; exit 2; }
mkdir -p "$OUT"
export DTRAIN_CALIBRATION=$OUT/calibration.json
cp "$SRC_CAL" "$DTRAIN_CALIBRATION"

ID=$$
H0=dtvh0_$ID H1=dtvh1_$ID VA=dtva$ID VB=dtvb$ID
NET=10.215.$((ID % 250))
cleanup() {
  for n in "$H0" "$H1"; do
    for p in $(ip netns pids "$n" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    ip netns del "$n" 2>/dev/null || true
  done
}
trap cleanup EXIT
ip netns add "$H0" && ip netns add "$H1"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$H0" && ip link set "$VB" netns "$H1"
ip -n "$H0" addr add "$NET.1/24" dev "$VA" && ip -n "$H1" addr add "$NET.2/24" dev "$VB"
for n in "$H0" "$H1"; do ip -n "$n" link set lo up; done
ip -n "$H0" link set "$VA" up && ip -n "$H1" link set "$VB" up
if [ "$RATE" != none ]; then
  ip netns exec "$H0" tc qdisc add dev "$VA" root tbf rate "$RATE" burst "$BURST" latency 50ms
  ip netns exec "$H1" tc qdisc add dev "$VB" root tbf rate "$RATE" burst "$BURST" latency 50ms
fi

PORT=29700
across() {  # log args...: $PER_HOST ranks on each host, node 0's output to log
  local log=$1
  shift
  PORT=$((PORT + 1))
  local common=(run -n "$PER_HOST" --nnodes 2 --master "$NET.1:$PORT" --timeout 120)
  # Each namespace its own host id: the transport's auto choice then takes tcp between them,
  # as between machines (one machine's namespaces could share memory).
  ip netns exec "$H1" env DTRAIN_HOST_ID=h1-$ID DTRAIN_TOKEN=hosts-$ID DTRAIN_BIND_ADDR=$NET.2 "$BIN" "${common[@]}" --node-rank 1 -- \
    "$BIN" "$@" >"$log.node1" 2>&1 &
  local other=$!
  local rc=0
  ip netns exec "$H0" env DTRAIN_HOST_ID=h0-$ID DTRAIN_TOKEN=hosts-$ID DTRAIN_BIND_ADDR=$NET.1 "$BIN" "${common[@]}" --node-rank 0 -- \
    "$BIN" "$@" >"$log" 2>&1 || rc=$?
  wait "$other" || rc=$((rc == 0 ? 1 : rc))
  return $rc
}

if [ "${CALIBRATE_HOSTS:-1}" = 1 ]; then
  echo "== calibrate the link between the hosts ($RATE) -> $DTRAIN_CALIBRATION"
  PER_HOST=1 across "$OUT/calibrate.log" bench calibrate --transport tcp --no-compute --seconds 0.2 --out "$DTRAIN_CALIBRATION"
  grep -E "B: all-reduce|alpha" "$OUT/calibrate.log" | sed 's/^\[rank 0\] //'
else
  jq -e '.links_by_size.hosts' "$DTRAIN_CALIBRATION" >/dev/null ||
    { echo "validate_hosts: CALIBRATE_HOSTS=0 but $SRC_CAL has no link between hosts" >&2; exit 2; }
  echo "== the link between the hosts as $SRC_CAL has it (CALIBRATE_HOSTS=0)"
fi

run() {  # name args...
  local name=$1
  shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  local j=$OUT/$name-n$RANKS-r$round.json
  # The run's flags, one a line: scripts/repredict_validation.py prices it again from them.
  printf '%s\n' -n $RANKS "$@" >"$OUT/$name-n$RANKS-r$round.args"
  if ! across "$OUT/$name-n$RANKS-r$round.log" train --quiet --json "$j" "$@"; then
    printf "%-20s FAILED (see %s)\n" "$name" "$OUT/$name-n$RANKS-r$round.log"
    return
  fi
  jq -r --arg name "$name" --arg r "$round" '.prediction as $p |
    [$r, $name, '"$RANKS"', ($p.step_ms // 0), ($p.measured_step_ms // 0), ($p.memory_mb // 0),
     ($p.measured_train_heap_mb // 0)] | @tsv' "$j" | tee -a "$OUT/runs.tsv" |
    awk -F'\t' '{ printf "%-20s %3s  %9.3f ms %9.3f ms %+7.1f%%   %8.2f MB %8.2f MB %+7.1f%%\n", $2, $3, $4, $5,
                  ($5 > 0 ? ($4 / $5 - 1) * 100 : 0), $6, $7, ($7 > 0 ? ($6 / $7 - 1) * 100 : 0) }'
}

MLP=(--model mlp:784-256-128-10 --data "mnist:$(realpath -m "$DATA/mnist")" --epochs 1)
GARGS=(--model $GPT --data "$TEXT" --steps ${STEPS:-8} --eval-batches 1)
: >"$OUT/runs.tsv"
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS, 2 hosts of $PER_HOST rank(s): strategy, ranks, predicted step, measured step, error; predicted memory, measured heap, error"
  run ddp --strategy ddp "${MLP[@]}"
  run localsgd --strategy localsgd "${MLP[@]}"
  run gossip --strategy gossip "${MLP[@]}"
  run ps --strategy ps --servers 1 --sync "${MLP[@]}"
  run fedavg --strategy fedavg "${MLP[@]}" --epochs 4
  run gpt-zero1 --strategy zero --zero 1 "${GARGS[@]}" --batch 24
  run gpt-tp --strategy tp "${GARGS[@]}" --batch 12
  run gpt-pp-1f1b --strategy pp --microbatches 4 --schedule 1f1b "${GARGS[@]}" --batch 8
done
python3 - "$OUT/runs.tsv" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, name, n, pred, meas, pmb, mmb = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append((float(pred), float(meas), float(pmb), float(mmb)))
step, mem = [], []
print("== median of the rounds: strategy, predicted step, measured step, error; predicted memory, measured heap, error")
for name, runs in rows.items():
    p, m = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    pm, mm = statistics.median(r[2] for r in runs), statistics.median(r[3] for r in runs)
    e, em = (p / m - 1) * 100 if m else 0, (pm / mm - 1) * 100 if mm else 0
    step.append(abs(e)), mem.append(em)
    print(f"{name:20s} {p:9.3f} ms {m:9.3f} ms {e:+7.1f}%   {pm:8.2f} MB {mm:8.2f} MB {em:+7.1f}%")
if step:
    print(f"== step: median |error| {statistics.median(step):.1f}%, {sum(e <= 10 for e in step)} of {len(step)} within 10%, "
          f"{sum(e > 25 for e in step)} beyond 25%; memory: {sum(abs(e) <= 10 for e in mem)} of {len(mem)} within 10%, "
          f"the most under {min(mem):+.1f}%")
PY
