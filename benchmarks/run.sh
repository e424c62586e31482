#!/usr/bin/env bash
# One command: build benchmarks/.venv (Python 3.11) with gluon_tb and its peers, then run
# every benchmark (fresh processes, writers alternated, medians), check every output with
# TensorBoard's reader and print the table (Markdown) on stdout; progress goes to stderr.
#   bash benchmarks/run.sh                       # full run (~30 min on 2 cores)
#   QUICK=1 bash benchmarks/run.sh               # smaller sizes, 1 repetition (smoke test, ~5 min)
#   bash benchmarks/run.sh --only scalar,mlp     # a subset (names: benchmarks/README.md)
#   bash benchmarks/run.sh --only sweep --quick --sweep-vocab 7800,200000   # a short sweep
#   MXBOARD_PROTOBUF=upb bash benchmarks/run.sh  # mxboard on protobuf's C backend instead
# Raw results: benchmarks/out/results.json. Never touches /work/venv or site-packages outside .venv.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3.11}"

# numpy<1.24: MXNet 1.9.1 uses np.bool. tensorboard: needed by torch.utils.tensorboard, and its
# reader checks every writer's output. torch 2.13.0 (CPU) is found as a local wheel (pip's
# find-links on this machine). matplotlib: the sweep's plot (benchmarks/sweep.png).
REQS=(
  -e "$ROOT[mxnet,fast]"
  "numpy<1.24"
  "tensorboardX==2.6.5"
  "mxboard==0.1.0"
  "tensorboard>=2.10"
  "torch==2.13.0"
  "psutil"
  "matplotlib"
)
STAMP="$VENV/.bench-reqs"
WANT="$(printf '%s\n' "${REQS[@]}" | sha1sum | cut -c1-12)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== installing into $VENV ($("$PY" -V 2>&1)); log: $VENV/pip.log" >&2
  "$PY" -m venv "$VENV"
  if ! { "$VENV/bin/python" -m pip install --upgrade pip &&
         "$VENV/bin/python" -m pip install "${REQS[@]}"; } > "$VENV/pip.log" 2>&1; then
    tail -25 "$VENV/pip.log" >&2
    echo "pip install failed. If it is torch: a pip constraints file (pip config list) may cap it;" \
         "see $VENV/pip.log" >&2
    exit 1
  fi
  echo "$WANT" > "$STAMP"
fi
# gluon_tb's bytecode caches, as an installed package has them (pip compiles the peers at install;
# this checkout is installed editable, and PYTHONDONTWRITEBYTECODE may be set): otherwise a fresh
# process's first call of a kind compiles the modules it imports
"$VENV/bin/python" -m compileall -q "$ROOT/gluon_tb" >/dev/null
exec "$VENV/bin/python" "$HERE/run.py" "$@"
