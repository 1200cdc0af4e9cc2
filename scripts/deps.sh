#!/usr/bin/env bash
# Installs the Debian packages dtrain needs to build, test and run, when any is missing.
# Usage: scripts/deps.sh [--main | --slurm]   (--main adds the Fashion-MNIST dataset package;
# --slurm installs only SLURM, munge, PMIx and OpenMPI for scripts/test_slurm.sh)
# DTRAIN_PYTHON=0 skips the Python/torch packages (the build then skips python/ with a message).
set -euo pipefail
# libpmix-dev: optional for the library, but without it a build has no PMIx rendezvous and
# the slurm label's srun --mpi=pmix / mpirun cases fail; installed here so that a fresh
# machine builds the whole product (it arrived before only with OpenMPI's -dev package).
pkgs=(build-essential cmake ninja-build pkg-config git python3
      libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libopenblas-dev nlohmann-json3-dev
      libpmix-dev iproute2 procps clang libclang-rt-dev)
# The Python module and the torch.distributed backend (python/); DTRAIN_PYTHON=0 leaves them out.
if [[ "${DTRAIN_PYTHON:-1}" != 0 ]]; then
  pkgs+=(python3-torch libtorch-dev pybind11-dev python3-dev python3-numpy python3-pytest)
fi
if [[ "${1:-}" == "--main" ]]; then pkgs+=(dataset-fashion-mnist); fi
# --slurm: the optional engines scripts/test_slurm.sh runs dtrain under (a plain build needs none).
if [[ "${1:-}" == "--slurm" ]]; then pkgs=(slurm-wlm munge libpmix-dev openmpi-bin); fi
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if ((${#missing[@]})); then
  echo "dtrain: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
