#!/usr/bin/env bash
# The main job: trains a small CNN on the shipped digits data with Gluon's Estimator and
# TensorBoardHandler, offline, in its own virtual environment (.venv), and writes logs/digits.
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
.venv/bin/python -m pip install -q -e ".[mxnet,fast,board]"
exec .venv/bin/python examples/estimator_digits.py --logdir "${LOGDIR:-logs/digits}" --epochs "${EPOCHS:-10}" "$@"
