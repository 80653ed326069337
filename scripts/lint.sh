#!/usr/bin/env bash
# The lint and type gate (scripts/test.sh runs it after bootstrap, before pytest): ruff over src/ and tests/, mypy
# over src/. Rules and settings: [tool.ruff] and [tool.mypy] in pyproject.toml; the tools: the `lint` extra.
# Quiet when clean (one line per tool); otherwise each finding on one line, and a non-zero exit.
# Fix most import-order and pyupgrade findings with: .venv/bin/ruff check --fix src tests
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in ruff mypy; do
  if [ ! -x ".venv/bin/$tool" ]; then
    echo "[lint] .venv/bin/$tool is missing: run scripts/bootstrap.sh (it installs the lint extra)" >&2
    exit 1
  fi
done

status=0
if out=$(.venv/bin/ruff check --quiet --output-format concise src tests 2>&1); then
  echo "[lint] ruff: clean"
else
  printf '%s\n' "$out"
  echo "[lint] ruff: $(printf '%s\n' "$out" | grep -c ':[0-9]*:[0-9]*: ') finding(s)"
  status=1
fi
if out=$(.venv/bin/mypy 2>&1); then
  echo "[lint] mypy: $(printf '%s\n' "$out" | tail -n 1)"
else
  printf '%s\n' "$out"
  status=1
fi
exit "$status"
