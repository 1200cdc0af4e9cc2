#!/usr/bin/env bash
# The main job from a fresh clone: install what is missing, build, and run dtrain across
# 4 local ranks. Extra arguments go to the dtrain command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --main
scripts/build.sh
exec build/bin/dtrain train -n 4 "$@"
