#!/usr/bin/env bash
# Reproduces docs/PLANNER.md's validation table: calibrates this machine (collectives and
# compute), then runs every strategy at 2, 4 and 8 ranks with `dtrain train --json` and prints
# the planner's predicted step time and memory beside the measured ones (the "prediction"
# object every --json run records). Each run is short (a few seconds); the whole script takes
# several minutes a round. Usage: scripts/validate_planner.sh [BUILD_DIR] [RANKS...]; ONLY=regex
# runs the matching rows only; REPROBE=1 re-measures the slowdown curve before each row.
# TCP=1 (default) adds the -tcp rows (the same strategies over loopback tcp at 2 and 4 ranks);
# scripts/validate_hosts.sh runs them across two network-namespace hosts.
# ROUNDS=R (default 3): every row runs R times, in R interleaved rounds (every row, then every
# row again), and the table takes each row's median measured step and heap: one run's figure
# moves with the VM (localsgd at 2 ranks measured 0.42 and 0.52 ms a step minutes apart).
# Each run is appended to $OUT/runs.tsv (round, name, ranks, predicted ms, measured ms,
# predicted MB, measured training-heap MB); $OUT/table.tsv gets one row per layout (name, ranks,
# predicted ms, median measured ms, error %, predicted MB, median measured MB, error %, runs,
# the measured steps' spread as (max - min) / median %). The measured step is the run's steady
# step (plan/plan_measure.h steady_step_s: the GPT's median round after the first, the MLP's
# epoch rate); the GPT's mean including the first step's warm-up is in each JSON beside it.
# PROBE_SPEED=1 (default): every run times the speed probe right before itself (`dtrain train
# --probe-speed`: each CPU in turn, the ranks priced at the slowest CPU they need) and is
# priced at that pace against the calibration's own probe; $OUT/runs-pace.tsv keeps each run
# against the calibration's pace too (round, name, ranks, predicted ms at the calibration's
# pace, measured ms, the run's compute scale), and the last line gives that table's step
# figures. PROBE_SPEED=0 prices every run at the calibration's pace only (docs/PLANNER.md,
# "The speed probe": dv-f2 8.6% against 12.9%, dv-f3 5.3% against 5.8%).
# CARRY_FROM=FILE: the calibration replaces FILE's copy and keeps what FILE has of the cores'
# placements it does not see (below).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
RANKS=${*:-2 4 8}
BIN=$BUILD/bin/dtrain
OUT=${OUT:-/tmp/dtrain-validate}
mkdir -p "$OUT"
export DTRAIN_CALIBRATION=$OUT/calibration.json
DATA=${DTRAIN_SHARED_DATA:-../shared/data}
TEXT=text:$DATA/tinyshakespeare/input.txt.gz
GPT=gpt:layers=6,heads=8,width=128,context=64

# The MLP rows train on Fashion-MNIST (the Debian package, or the data directory), the GPT
# rows on tinyshakespeare from $DATA: say what is missing before spending the calibration.
if ! "$BIN" data 2>/dev/null | grep -q "^fashion-mnist  *found"; then
  echo "validate_planner: Fashion-MNIST is not installed (the MLP rows train on it): run scripts/deps.sh --main" >&2
  exit 2
fi
[ -f "${TEXT#text:}" ] || { echo "validate_planner: ${TEXT#text:} is missing (the GPT rows' text; set DTRAIN_SHARED_DATA)" >&2; exit 2; }

# CARRY_FROM=FILE: an earlier calibration of this machine, which the new one replaces and keeps
# the cores' placements it does not see from, as `dtrain bench calibrate` over a user's file
# does (plan/calibration_carry.h). Without it $OUT starts empty and carries nothing.
if [ -n "${CARRY_FROM:-}" ] && [ ! -s "$DTRAIN_CALIBRATION" ]; then
  cp "$CARRY_FROM" "$DTRAIN_CALIBRATION"
  CALIBRATE=1
fi
# Calibrate once per $OUT (CALIBRATE=1 to redo): the runs below can then go in pieces.
if [ ! -s "$DTRAIN_CALIBRATION" ] || [ "${CALIBRATE:-0}" = 1 ]; then
  echo "== calibrate (collectives at 2 ranks over shm and tcp, compute rates, unit timings) -> $DTRAIN_CALIBRATION"
  "$BIN" bench calibrate -n 2 --transport shm,tcp --seconds 0.3
fi

run() {  # name ranks args...
  local name=$1 n=$2
  shift 2
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  local j=$OUT/$name-n$n-r$round.json
  # REPROBE=1: re-measure the oversubscription curve (a few seconds) right before each run, so
  # the prediction sees the background load the run will see (the machine is shared).
  if [ "${REPROBE:-0}" = 1 ]; then "$BIN" bench calibrate --slowdown-only >>"$OUT/reprobe.log" 2>&1; fi
  local probe=(--probe-speed)
  if [ "${PROBE_SPEED:-1}" = 0 ]; then probe=(); fi
  # The run's flags, one a line: scripts/repredict_validation.py prices it again from them.
  printf '%s\n' -n "$n" "$@" >"$OUT/$name-n$n-r$round.args"
  if ! "$BIN" train -n "$n" --quiet --json "$j" "${probe[@]}" "$@" >"$OUT/$name-n$n-r$round.log" 2>&1; then
    printf "%-34s %3s  FAILED (see %s)\n" "$name" "$n" "$OUT/$name-n$n-r$round.log"
    return
  fi
  # Probed: the same run against the prediction at the calibration's own pace too.
  if [ ${#probe[@]} -gt 0 ]; then
    jq -r --arg name "$name" --arg n "$n" --arg r "$round" '.prediction as $p |
      [$r, $name, $n, ($p.step_ms_at_calibration_pace // $p.step_ms // 0), ($p.measured_step_ms // 0),
       ($p.compute_scale // 1)] | @tsv' "$j" >>"$OUT/runs-pace.tsv"
  fi
  jq -r --arg name "$name" --arg n "$n" --arg r "$round" '
    .prediction as $p |
    [$r, $name, $n, ($p.step_ms // 0), ($p.measured_step_ms // 0), ($p.memory_mb // 0),
     ($p.measured_train_heap_mb // 0)] | @tsv' "$j" |
    tee -a "$OUT/runs.tsv" |
    awk -F'\t' -v cores="$(jq -r '.shm_cores // ((.cores_probed // "-") + (if (.cores_probed_end // .cores_probed) != .cores_probed then ">" + .cores_probed_end else "" end))' "$j")" '{
      printf "%-20s %3s  %9.3f ms %9.3f ms %+7.1f%%   %8.2f MB %8.2f MB %+7.1f%%  cores %s\n", $2, $3, $4, $5,
             ($5 > 0 ? ($4 / $5 - 1) * 100 : 0), $6, $7, ($7 > 0 ? ($6 / $7 - 1) * 100 : 0), cores }'
}

ROUNDS=${ROUNDS:-3}
# (runs.tsv accumulates: a second invocation with the same OUT adds its runs to the medians.)
MLP=(--model mlp:784-256-128-10 --epochs 1)
GARGS=(--model $GPT --data "$TEXT" --steps ${STEPS:-30} --eval-batches 1)
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS: strategy, ranks, predicted step, measured step, error; predicted memory, measured training heap, error"
  for n in $RANKS; do
    run ddp "$n" --strategy ddp "${MLP[@]}"
    run ddp-zero2 "$n" --strategy ddp --zero 2 "${MLP[@]}"
    run localsgd "$n" --strategy localsgd "${MLP[@]}"
    run gossip "$n" --strategy gossip "${MLP[@]}"
    run ps "$n" --strategy ps --servers 1 --sync "${MLP[@]}"
    # A fedavg round is 30-60 ms here, too short to time alone (the first, with its warm-up,
    # read 0.47 ms a step at 8 ranks where later rounds read 0.37-0.38), and each samples
    # other clients: 16 rounds, rounds 2-16's time over their examples (plan_measure.h
    # steady_step_s), the rounds the planner prices (it samples up to 16). With 4 rounds the
    # three timed ones read 0.39-0.60 ms a step at 2 ranks in two runs a minute apart
    # (2026-12-01); with 16, 0.450 and 0.458.
    run fedavg "$n" --strategy fedavg "${MLP[@]}" --epochs 16
    run gpt-zero1 "$n" --strategy zero --zero 1 "${GARGS[@]}" --batch $((12 * n))
    run gpt-zero3 "$n" --strategy zero --zero 3 "${GARGS[@]}" --batch $((12 * n))
    # The GPT has 8 heads and 8 units (6 blocks, embedding, head): tp and pp up to 8 ranks (on a
    # host with more cores, e.g. 16, these rows are left out rather than failed).
    if [ "$n" -le 8 ]; then run gpt-tp "$n" --strategy tp "${GARGS[@]}" --batch 12; fi
    if [ "$n" -le 8 ]; then
      run gpt-pp-1f1b "$n" --strategy pp --microbatches $((2 * n)) --schedule 1f1b "${GARGS[@]}" --batch $((4 * n))
      run gpt-pp-gpipe "$n" --strategy pp --microbatches $((2 * n)) --schedule gpipe "${GARGS[@]}" --batch $((4 * n))
      # activation checkpointing per unit (parallel/pipeline.h): memory and the re-run forward
      run gpt-pp-recompute "$n" --strategy pp --microbatches $((2 * n)) --schedule 1f1b --recompute "${GARGS[@]}" --batch $((4 * n))
    fi
    if [ "$n" -le 4 ]; then
      run gpt-pp-interleaved "$n" --strategy pp --microbatches $((2 * n)) --schedule interleaved --virtual-stages 2 "${GARGS[@]}" --batch $((4 * n))
    fi
    if [ "$n" -ge 4 ] && [ "$n" -le 16 ]; then
      run gpt-hybrid "$n" --strategy hybrid --dp 2 --tp 1 --pp $((n / 2)) --microbatches 4 "${GARGS[@]}" --batch 16
    fi
    if [ "$n" -ge 4 ]; then
      # tp inside a job whose ranks outnumber the cores (simulator.cc tp_block_ratio)
      run gpt-hybrid-tp "$n" --strategy hybrid --dp $((n / 4)) --tp 2 --pp 2 --microbatches 4 "${GARGS[@]}" --batch 16
    fi
    # The same strategies over tcp (loopback on this host; TCP=0 leaves them out): the run
    # records its transport and the prediction prices the tcp link's tables instead of the
    # shared-memory paths (plan/fabric.cc over_fabric).
    if [ "${TCP:-1}" = 1 ] && [ "$n" -le 4 ]; then
      run ddp-tcp "$n" --strategy ddp --transport tcp "${MLP[@]}"
      run localsgd-tcp "$n" --strategy localsgd --transport tcp "${MLP[@]}"
      run gossip-tcp "$n" --strategy gossip --transport tcp "${MLP[@]}"
      run ps-tcp "$n" --strategy ps --servers 1 --sync --transport tcp "${MLP[@]}"
      run gpt-zero1-tcp "$n" --strategy zero --zero 1 --transport tcp "${GARGS[@]}" --batch $((12 * n))
      run gpt-tp-tcp "$n" --strategy tp --transport tcp "${GARGS[@]}" --batch 12
      run gpt-pp-1f1b-tcp "$n" --strategy pp --microbatches $((2 * n)) --schedule 1f1b --transport tcp "${GARGS[@]}" --batch $((4 * n))
    fi
  done
done

# One row per layout: the median of its rounds.
python3 - "$OUT/runs.tsv" >"$OUT/table.tsv" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, name, n, pred, meas, pmb, mmb = line.rstrip("\n").split("\t")
    rows.setdefault((name, n), []).append((float(pred), float(meas), float(pmb), float(mmb)))
# Each run is compared with its own prediction (a 2-rank run's depends on the path its
# context's probe chose, which can differ between rounds), and the row's error is the median
# of its runs' errors; with equal predictions that is the prediction against the median run.
for (name, n), runs in rows.items():
    pred = statistics.median(x[0] for x in runs)
    pmb = statistics.median(x[2] for x in runs)
    meas = statistics.median(x[1] for x in runs)
    mmb = statistics.median(x[3] for x in runs)
    spread = (max(x[1] for x in runs) - min(x[1] for x in runs)) / meas * 100 if meas else 0
    err = statistics.median((x[0] / x[1] - 1) * 100 for x in runs if x[1] > 0) if meas else 0
    merr = statistics.median((x[2] / x[3] - 1) * 100 for x in runs if x[3] > 0) if mmb else 0
    print("\t".join(str(v) for v in (name, n, pred, meas, err, pmb, mmb, merr, len(runs), spread)))
PY
echo "== median of $ROUNDS rounds: strategy, ranks, predicted step, measured step, error; predicted memory, measured heap, error; runs, spread"
awk -F'\t' '{ printf "%-20s %3s  %9.3f ms %9.3f ms %+7.1f%%   %8.2f MB %8.2f MB %+7.1f%%  %d runs, spread %.1f%%\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }' "$OUT/table.tsv"
# The table against the targets (docs/PLANNER.md, "Where it stands"): the step's median
# |error| and how many rows lie within 10% and beyond 25%; the memory rows within 10% and
# the worst under-prediction.
python3 - "$OUT/table.tsv" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
step = [abs(float(r[4])) for r in rows]
mem = [float(r[7]) for r in rows]
beyond = [f"{r[0]} at {r[1]} ({float(r[4]):+.1f}%)" for r in rows if abs(float(r[4])) > 25]
print(f"== step: median |error| {statistics.median(step):.1f}% (target <= 10%), {sum(e <= 10 for e in step)} of "
      f"{len(rows)} rows within 10%, {len(beyond)} beyond 25% (target 0){': ' + ', '.join(beyond) if beyond else ''}")
print(f"== memory: {sum(abs(e) <= 10 for e in mem)} of {len(rows)} rows within 10% (target all), the most under "
      f"{min(mem):+.1f}% (target never under by more than 5%)")
PY
# With the probe, the same step figures at the calibration's pace (each row the median of its
# runs' errors), so a table shows what the probe moved.
if [ -s "$OUT/runs-pace.tsv" ]; then
  python3 - "$OUT/runs-pace.tsv" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    x = line.rstrip("\n").split("\t")
    if len(x) >= 5 and float(x[4]) > 0:
        rows.setdefault((x[1], x[2]), []).append((float(x[3]) / float(x[4]) - 1) * 100)
step = [abs(statistics.median(v)) for v in rows.values()]
if step:
    print(f"== step at the calibration's pace (no speed probe): median |error| {statistics.median(step):.1f}%, "
          f"{sum(e <= 10 for e in step)} of {len(step)} rows within 10%, {sum(e > 25 for e in step)} beyond 25%")
PY
fi
