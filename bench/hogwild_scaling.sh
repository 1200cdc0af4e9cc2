#!/usr/bin/env bash
# HOGWILD! scaling, reproducible in one command: plain HOGWILD!, the locking baseline and
# hogwild-hot at 1 and 2 threads on news20 (softmax) and a9a (logreg), interleaved runs of many
# epochs each, and news20 again with its features renumbered by frequency (serial SGD and
# hogwild-hot only) (bench/hogwild_scaling_bench.cc), with the load average before each dataset.
# Run it under the shared benchmark lock on a shared machine:
#   flock /tmp/dtrain-bench.lock bench/hogwild_scaling.sh
# Needs build/bin/hogwild_scaling_bench (scripts/build.sh) and news20 and a9a in the data
# directory (DTRAIN_DATA_DIR, default ../shared/data; see 'dtrain data'). REPS (default 5)
# runs per configuration; extra arguments go to every run (e.g. --merge-every 256).
set -euo pipefail
cd "$(dirname "$0")/.."
export DTRAIN_DATA_DIR=${DTRAIN_DATA_DIR:-$(cd .. && pwd)/shared/data}
B=build/bin/hogwild_scaling_bench
REPS=${REPS:-5}
[[ -x $B ]] || { echo "hogwild_scaling.sh: $B is missing; build first (scripts/build.sh)" >&2; exit 2; }
echo "== news20 $(uptime)"
$B --data news20 --model softmax --normalize --lr 0.5 --epochs 40 --reps "$REPS" "$@"
echo "== news20, features renumbered by frequency (hogwild-hot's layout for serial SGD too) $(uptime)"
$B --data news20 --model softmax --normalize --lr 0.5 --epochs 40 --reps "$REPS" --methods hogwild,hogwild-hot \
  --frequency-order "$@"
echo "== a9a $(uptime)"
$B --data a9a --model logreg --lr 0.01 --epochs 50 --reps "$REPS" "$@"
echo "== done $(uptime)"
