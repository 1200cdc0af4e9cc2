#!/usr/bin/env bash
# Soak benchmark (not a test): trains for MINUTES minutes while a fault is injected every EVERY
# seconds, cycling kill (SIGKILL a random rank), stop (SIGSTOP a random rank: the heartbeat
# must catch it) and cut (take the link between two hosts down for CUT_S seconds; only with
# two hosts). The job runs with --max-restarts and --checkpoint-every, so it should survive
# every fault and lose at most K steps each time. At the end it reports faults injected and
# survived, rounds redone, what was left behind (/dev/shm segments, /tmp job directories,
# processes) and the launchers' memory growth.
#
#   bench/soak.sh                       # 30 minutes, a fault a minute, 2 hosts x 2 ranks if root
#   MINUTES=5 EVERY=20 bench/soak.sh    # a short sitting
#
# Two hosts are network namespaces joined by a veth pair (needs root and iproute2); otherwise
# one host with 4 ranks and no cut faults. Everything goes to OUT (default out/soak-<time>).
set -uo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-30}
EVERY=${EVERY:-60}
CUT_S=${CUT_S:-8}
K=${K:-20}                       # --checkpoint-every
OUT=${OUT:-out/soak-$(date +%Y%m%d-%H%M%S)}
B=$(pwd)/build/bin/dtrain
mkdir -p "$OUT"
[[ -x $B ]] || { echo "soak: build first (scripts/build.sh)"; exit 2; }

# Data: 20,000 examples of 32 features, 4 classes (written here, so no dataset is needed).
/usr/bin/python3 - "$OUT" <<'EOF'
import random, sys
random.seed(1)
out = sys.argv[1]
with open(out + "/train.csv", "w") as t, open(out + "/test.csv", "w") as s:
    for i in range(22000):
        y = random.randrange(4)
        (t if i < 20000 else s).write(str(y) + "," + ",".join(
            "%.4f" % (random.gauss(0, 1) + (1.0 if j % 4 == y else 0.0)) for j in range(32)) + "\n")
EOF

shm_before=$(ls /dev/shm | grep -c '^dtrain' || true)
tmp_before=$(ls -d /tmp/dtrain-* 2>/dev/null | wc -l)
TRAIN="$B train --data csv:$OUT/train.csv,$OUT/test.csv --model mlp:32-256-256-4 --epochs 1000000 --batch 64 \
  --checkpoint $OUT/ck --checkpoint-every $K"
RUN_OPTS="--timeout 5 --heartbeat 3 --max-restarts 1000"

HOSTS=1
if [[ $(id -u) -eq 0 ]] && command -v ip > /dev/null; then
  ID=$$
  NS0=dsoak0_$ID NS1=dsoak1_$ID VA=dsa$ID VB=dsb$ID NET=10.219.$((ID % 250))
  if ip netns add $NS0 && ip netns add $NS1 && ip link add $VA type veth peer name $VB &&
     ip link set $VA netns $NS0 && ip link set $VB netns $NS1 &&
     ip -n $NS0 addr add $NET.1/24 dev $VA && ip -n $NS1 addr add $NET.2/24 dev $VB &&
     ip -n $NS0 link set lo up && ip -n $NS1 link set lo up && ip -n $NS0 link set $VA up && ip -n $NS1 link set $VB up; then
    HOSTS=2
  fi
  trap 'ip netns del $NS0 2>/dev/null; ip netns del $NS1 2>/dev/null' EXIT
fi

pids=()
if [[ $HOSTS == 2 ]]; then
  for k in 1 0; do
    ns=$([[ $k == 0 ]] && echo $NS0 || echo $NS1)
    ip netns exec $ns env DTRAIN_TOKEN=soak-$ID DTRAIN_BIND_ADDR=$NET.$((k + 1)) DTRAIN_HOST_ID=host$k \
      $B run -n 2 --nnodes 2 --node-rank $k --master $NET.1:29531 $RUN_OPTS -- $TRAIN > "$OUT/node$k.log" 2>&1 &
    pids+=($!)
  done
else
  $B run -n 4 $RUN_OPTS -- $TRAIN > "$OUT/node0.log" 2>&1 &
  pids+=($!)
fi
echo "soak: $HOSTS host(s), ${MINUTES} min, a fault every ${EVERY} s; launchers ${pids[*]}; logs in $OUT"

ranks() {  # the ranks running now: children of the launchers (ip netns exec replaces itself)
  for p in "${pids[@]}"; do pgrep -P "$p"; done
}
rss() { local s=0; for p in "${pids[@]}"; do s=$((s + $(ps -o rss= -p "$p" 2>/dev/null || echo 0))); done; echo $s; }

rss_first=""
end=$(( $(date +%s) + MINUTES * 60 ))
faults=0; kinds=(kill stop cut)
while (( $(date +%s) + EVERY < end )); do
  sleep "$EVERY"   # the benchmark's clock, not a synchronisation
  kind=${kinds[$((faults % 3))]}
  [[ $kind == cut && $HOSTS != 2 ]] && kind=kill
  mapfile -t rs < <(ranks)
  (( ${#rs[@]} )) || { echo "soak: no rank running at fault $faults"; continue; }
  victim=${rs[$((RANDOM % ${#rs[@]}))]}
  case $kind in
    kill) kill -KILL "$victim" ;;
    stop) kill -STOP "$victim" ;;
    cut) ip -n $NS0 link set $VA down; sleep "$CUT_S"; ip -n $NS0 link set $VA up ;;
  esac
  faults=$((faults + 1))
  [[ -z $rss_first ]] && rss_first=$(rss)   # after warm-up: the growth from the first fault on
  echo "$(date +%T) fault $faults: $kind (rank pid $victim), launcher RSS $(rss) KiB" | tee -a "$OUT/faults.txt"
done
rss_last=$(rss)
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done

restarts=$(cat "$OUT"/node0.log | grep -c "restart [0-9]* of")
rounds_printed=$(grep -c "round [0-9]*/" "$OUT/node0.log" || true)
max_round=$(grep -o "round [0-9]*/" "$OUT/node0.log" | tr -dc '0-9\n' | sort -n | tail -1)
left_procs=$(pgrep -f "$OUT/train.csv" | wc -l)
shm_after=$(ls /dev/shm | grep -c '^dtrain' || true)
tmp_after=$(ls -d /tmp/dtrain-* 2>/dev/null | wc -l)
{
  echo "soak report ($(date), $(nproc) cores, $HOSTS host(s) x $((4 / HOSTS)) ranks, ${MINUTES} min)"
  echo "faults injected:       $faults ($(grep -c ': kill' "$OUT/faults.txt" 2>/dev/null || echo 0) kill," \
       "$(grep -c ': stop' "$OUT/faults.txt" 2>/dev/null || echo 0) stop, $(grep -c ': cut' "$OUT/faults.txt" 2>/dev/null || echo 0) cut)"
  echo "restarts (node 0):     $restarts"
  echo "rounds reached:        ${max_round:-0} (of $K steps each); rounds trained in all: $rounds_printed;" \
       "redone: $(( rounds_printed - ${max_round:-0} )) (plus < $K steps per fault, never printed)"
  echo "hung ranks caught:     $(cat "$OUT"/node*.log | grep -c 'hung')"
  echo "left behind:           /dev/shm dtrain segments $shm_before -> $shm_after, /tmp/dtrain-* $tmp_before -> $tmp_after," \
       "processes $left_procs"
  echo "launcher RSS:          $rss_first KiB at the first fault -> $rss_last KiB at the end"
} | tee "$OUT/report.txt"
