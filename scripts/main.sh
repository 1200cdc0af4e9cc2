#!/usr/bin/env bash
# The main job from a fresh clone: install what is missing, build, and train the Fashion-MNIST
# MLP with ddp across local ranks, one rank per CPU core of this machine (at least 2, at most
# 8; more ranks than cores only adds waiting), global batch 256 with momentum
# (scripts/main_defaults.sh says why). Extra arguments go to `dtrain train`; `-n N`, --batch,
# --optimizer or --lr among them override the choices.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --main
scripts/build.sh
source scripts/main_defaults.sh
main_defaults "$@"
exec build/bin/dtrain train "${main_args[@]}" "$@"
