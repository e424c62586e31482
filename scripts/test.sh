#!/usr/bin/env bash
# Runs the whole test suite in its own virtual environment (.venv), installing everything it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "Python 3.11 is required (MXNet 1.9.1 needs numpy<1.24, which has no wheel for 3.12)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
bash scripts/install_browser.sh
exec .venv/bin/python -m pytest -q "$@"
