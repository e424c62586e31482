#!/usr/bin/env bash
# Runs the whole test suite in its own virtual environment (.venv), installing everything it needs.
# Each step says what it does before it starts; long ones print a line every 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."

# run "what" cmd...: says what, runs cmd, prints the elapsed time every 30 s and when done
run() {
  local what="$1"; shift
  local t0=$SECONDS
  echo "== $what"
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do sleep 1; kill -0 "$pid" 2>/dev/null || break; done
    kill -0 "$pid" 2>/dev/null && echo "   ... still running ($((SECONDS - t0)) s)"
  done
  wait "$pid"
  echo "   done in $((SECONDS - t0)) s"
}

echo "gluon_tb tests: 5 steps. The first time about 12 minutes (most of it building Horovod and the tests);"
echo "later runs skip what is installed and take about 7 minutes."
run "1/5 Python packages into .venv (MXNet, TensorBoard, test tools; skipped when installed)" \
  bash -c 'EXTRAS=test; set -euo pipefail; . scripts/_venv.sh'
# the optional set-up steps (2-4) never stop the run; each failure is noted here, and the tests'
# last lines name it beside every skipped test (tests/support/skip_summary.py)
export GLUON_TB_SETUP_NOTES="$PWD/.venv/setup-notes.txt"
: > "$GLUON_TB_SETUP_NOTES"
run "2/5 Chromium for the browser tests, from Debian's packages with apt-get (needs root or sudo; skipped when /usr/bin/chromium exists)" \
  bash scripts/install_browser.sh
run "3/5 Horovod 0.28.1 for the distributed tests, built from source against MXNet (about 5 minutes the first time; pip caches the wheel)" \
  bash scripts/install_horovod.sh .venv/bin/python
run "4/5 TensorBoard's Profile dashboard (XProf 2.24) for the profiler tests, in a venv of its own, .venv-xprof: it needs numpy>=1.24, MXNet numpy<1.24 (about 30 s the first time; skipped when installed)" \
  bash scripts/install_xprof.sh
# the XProf tests start that venv's python (tests/conftest.py: xprof_python)
export GLUON_TB_XPROF_PYTHON="${GLUON_TB_XPROF_PYTHON:-$PWD/.venv-xprof/bin/python}"
echo "== 5/5 pytest"
exec .venv/bin/python -m pytest -q "$@"
