#!/usr/bin/env bash
# Runs the whole test suite in its own virtual environment (.venv), installing everything it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test
. scripts/_venv.sh
bash scripts/install_browser.sh
bash scripts/install_horovod.sh .venv/bin/python  # ~5 min the first time: builds from source
exec .venv/bin/python -m pytest -q "$@"
