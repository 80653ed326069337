#!/usr/bin/env bash
# The test command (README, .ci/run): set up everything on a fresh machine, run the lint and type gate, then the
# whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/lint.sh
# Every test but a GPU one must run: any other skip fails the run (tests/skip_policy.py).
export SMDIST_TEST_NO_SKIPS=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
