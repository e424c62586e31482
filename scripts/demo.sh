#!/usr/bin/env bash
# The main job: trains a small CNN on the shipped digits data with Gluon's Estimator and
# TensorBoardHandler, offline, in its own virtual environment (.venv), and writes logs/digits.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=mxnet,fast,board
. scripts/_venv.sh
if [ -z "${LOGDIR:-}" ] && [ -d logs/digits ]; then
  # a second run into the same directory would draw its curves over the first one's, from step 0
  echo "replacing the previous demo's logs/digits"
  rm -rf logs/digits
fi
exec .venv/bin/python examples/estimator_digits.py --logdir "${LOGDIR:-logs/digits}" --epochs "${EPOCHS:-10}" "$@"
