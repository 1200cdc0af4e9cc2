#!/usr/bin/env bash
# The whole test suite from a fresh clone: install what is missing, build, run every test.
# Multi-process tests carry the CTest label "multiprocess", slow ones "slow"
# (ctest -LE slow skips them); the libFuzzer targets run 20 s each, label "fuzz" (-LE fuzz
# skips them). Warnings are errors here (DTRAIN_WERROR), so CI keeps the build warning-free.
# Prints CTest's summary line last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh -DDTRAIN_WERROR=ON
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 300 "$@"
