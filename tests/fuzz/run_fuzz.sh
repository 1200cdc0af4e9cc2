#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over the committed seed corpus.
# Usage: run_fuzz.sh FUZZER SEED_DIR SECONDS [SKIP_REASON]
# New inputs the fuzzer finds go to a temporary directory (the committed corpus stays as it
# is); a crash, a sanitizer report or a leak fails the test and leaves the input in the
# output. Exit 77 (ctest: skipped) when the fuzzers could not be built here.
set -uo pipefail
fuzzer=$1 seeds=$2 seconds=$3 skip=${4:-}
if [[ -n "$skip" ]]; then echo "SKIPPED: fuzz targets not built: $skip"; exit 77; fi
if [[ ! -x "$fuzzer" ]]; then echo "SKIPPED: $fuzzer was not built (build the dtrain_fuzz target)"; exit 77; fi
fuzzer=$(realpath "$fuzzer") seeds=$(realpath "$seeds")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cd "$work"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus" "$seeds" 2>&1 | tail -n 40
rc=${PIPESTATUS[0]}
for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
  [[ -e "$f" ]] && { echo "failing input $f:"; od -A d -t x1 "$f" | head -20; }
done
exit "$rc"
