#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine (idempotent, one progress line per step):
# system packages with apt, a virtual environment in .venv with the CPU torch wheel, the package and its extras.
#
# To add a system package: one line in APT_PACKAGES. To add a Python package: pyproject.toml (an extra listed in
# PIP_EXTRAS); a change to pyproject.toml makes the next bootstrap reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  openmpi-bin          # mpirun
  libopenmpi-dev       # mpicc, which mpi4py builds against
  gcc                  # builds the local jobs' loopback-bind preload library (backends/local/loopback_bind.c)
  python3-dev          # Python.h: sagemaker-training (test extra) builds a small C extension from its sdist
  openssh-server       # sshd on each simulated host: the netns/docker backends' real multi-host MPI path
  docker.io            # the docker backend's engine (tests start a private dockerd in its own netns)
  debootstrap          # tests build a minimal Debian base image (no image registry is reachable)
  slurm-wlm            # the slurm backend's tests start slurmctld + two slurmd in a private netns
  munge                # Slurm's authentication daemon (a private munged per test cluster)
  chromium             # headless browser: tests load `smdist report`'s page and check its plots render
)
PIP_EXTRAS="torch,aws,pack,k8s,test,lint"
TORCH_PIN="torch==2.13.0"  # installed first and pinned: the CPU wheel; a range would pull a CUDA build
IMPORT_CHECK="import smdist_launcher, torch, numpy, mpi4py, moto, pytest, mypy, ruff"
# Another apt/dpkg (unattended-upgrades, a second shell) may hold the package lock: wait for it this long.
APT_LOCK_TIMEOUT_S=${SMDIST_APT_LOCK_TIMEOUT_S:-600}

START=$SECONDS
step() { echo "[bootstrap] $*"; }

# --- system packages -----------------------------------------------------------------------------------------
missing_apt_packages() {
  local pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    # SMDIST_BOOTSTRAP_APT=always treats every package as missing (reinstalls nothing, but goes through apt)
    if [ "${SMDIST_BOOTSTRAP_APT:-}" = always ] \
       || ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      echo "$pkg"
    fi
  done
}

dpkg_lock_held() {
  # apt and dpkg take fcntl locks, which flock(1) cannot see; python3 can. No python3: let apt wait on its own.
  command -v python3 >/dev/null 2>&1 || return 1
  python3 - <<'EOF' 2>/dev/null
import fcntl, os, sys
for path in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock"):
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        continue
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(0)  # held by someone else
    finally:
        os.close(fd)
sys.exit(1)
EOF
}

wait_for_dpkg_lock() {
  local waited=0
  if dpkg_lock_held; then
    step "another apt/dpkg process holds the package lock; waiting for it (up to ${APT_LOCK_TIMEOUT_S} s)"
    while dpkg_lock_held; do
      if [ "$waited" -ge "$APT_LOCK_TIMEOUT_S" ]; then
        step "the package lock is still held after ${APT_LOCK_TIMEOUT_S} s; let the other apt/dpkg finish, then run this again" >&2
        exit 1
      fi
      sleep 2; waited=$((waited + 2))
    done
    step "package lock free after ${waited} s"
  fi
}

apt_get() {
  # DPkg::Lock::Timeout also covers the moment between our check and apt taking the lock
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT_S" -y -qq "$@"
}

mapfile -t MISSING < <(missing_apt_packages)
if [ "${#MISSING[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  wait_for_dpkg_lock
  step "apt: installing ${MISSING[*]}"
  # Stale or empty package lists make install fail: refresh them then, and only then.
  if ! apt_get install --no-upgrade "${MISSING[@]}" >/dev/null 2>&1; then
    step "apt: refreshing package lists (apt-get update)"
    wait_for_dpkg_lock
    apt_get update >/dev/null
    apt_get install --no-upgrade "${MISSING[@]}" >/dev/null
  fi
else
  step "apt: ${#APT_PACKAGES[@]} system packages present"
fi

# --- Python environment --------------------------------------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY"
  "$PY" -m venv .venv
fi

# Reinstall when pyproject.toml, the extras or the torch pin changed, or when an import fails.
STAMP_FILE=.venv/.smdist-bootstrap-stamp
STAMP="$(cat pyproject.toml; echo "$PIP_EXTRAS $TORCH_PIN")"
STAMP=$(printf '%s' "$STAMP" | sha256sum | cut -d' ' -f1)
pip_install() {
  .venv/bin/python -m pip install -q "$@" 2>&1 | grep -v '^WARNING: Location' || true
}
if [ "$(cat "$STAMP_FILE" 2>/dev/null)" != "$STAMP" ] || ! .venv/bin/python -c "$IMPORT_CHECK" >/dev/null 2>&1; then
  step "pip: upgrading pip"
  pip_install --upgrade pip
  step "pip: installing $TORCH_PIN (CPU wheel; about a minute on a fresh machine)"
  pip_install "$TORCH_PIN"
  step "pip: installing the package with extras [$PIP_EXTRAS]"
  pip_install -e ".[$PIP_EXTRAS]"
  .venv/bin/python -c "$IMPORT_CHECK" || { step "install failed: '$IMPORT_CHECK' does not run in .venv" >&2; exit 1; }
  echo "$STAMP" > "$STAMP_FILE"
else
  step "python: .venv up to date"
fi
step "ready in $((SECONDS - START)) s (commands: .venv/bin/smdist, or 'source .venv/bin/activate' first)"
