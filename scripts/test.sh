#!/usr/bin/env bash
# The test command (README, .ci/run): set up everything on a fresh machine, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
