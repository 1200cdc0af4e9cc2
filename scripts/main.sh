#!/usr/bin/env bash
# The main job from a fresh clone: install what is missing, build, and train the Fashion-MNIST
# MLP with ddp across local ranks, one rank per CPU core of this machine (at least 2, at most
# 8; more ranks than cores only adds waiting). Extra arguments go to `dtrain train`; `-n N`
# among them overrides the choice.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --main
scripts/build.sh
ranks=$(nproc)
(( ranks < 2 )) && ranks=2
(( ranks > 8 )) && ranks=8
for a in "$@"; do [[ $a == -n || $a == --ranks || $a == --ranks=* ]] && ranks=""; done
if [[ -n $ranks ]]; then
  echo "dtrain: $ranks ranks, one per CPU core of this machine (pass -n N to choose)"
  exec build/bin/dtrain train -n "$ranks" "$@"
fi
exec build/bin/dtrain train "$@"
