#!/usr/bin/env bash
# Sanitizer builds: ASan+UBSan over the whole suite (build-asan/), TSan over the
# communication layers (build-tsan/: comm, coll and the launcher's multi-process tests).
# Neither runs the tests labelled slow: the collectives' full product (every size, type, op
# and algorithm at 1-8 ranks) outlasts its 300 s limit under TSan on 2 cores.
# Usage: scripts/sanitize.sh [asan|tsan|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
scripts/deps.sh
if [[ $what == asan || $what == all ]]; then
  BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DDTRAIN_SANITIZE=address,undefined -DDTRAIN_BUILD_BENCH=OFF -DDTRAIN_FUZZ=OFF
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" UBSAN_OPTIONS=print_stacktrace=1
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "slow|python"
  # The Python extensions are instrumented but python3 is not: the runtime must be loaded
  # first, and the interpreter's own allocations would read as leaks.
  if ctest --test-dir build-asan -N -L python | grep -q "Total Tests: [1-9]"; then
    LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0 \
      ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -L python
  fi
fi
if [[ $what == tsan || $what == all ]]; then
  BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo scripts/build.sh -DDTRAIN_SANITIZE=thread -DDTRAIN_BUILD_BENCH=OFF -DDTRAIN_FUZZ=OFF
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L "comm|coll" -LE slow
fi
