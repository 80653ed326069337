#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine (idempotent):
# OpenMPI for mpirun, a virtual environment in .venv with the CPU torch wheel, the package and its test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

# mpicc comes with libopenmpi-dev, which mpi4py needs to build
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[bootstrap] installing OpenMPI (apt-get install -y openmpi-bin libopenmpi-dev)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import smdist_launcher, torch, numpy, mpi4py, moto, pytest" >/dev/null 2>&1; then
  echo "[bootstrap] installing the package with its runtime and test extras"
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # torch first and pinned: the CPU wheel on disk; a range would pull a CUDA build.
  .venv/bin/python -m pip install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install -q -e '.[torch,aws,test]' 2>&1 | grep -v '^WARNING: Location' || true
fi
.venv/bin/python -c "import smdist_launcher, torch, numpy, mpi4py, moto, pytest" || { echo "[bootstrap] install failed" >&2; exit 1; }
