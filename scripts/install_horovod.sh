#!/usr/bin/env bash
# Builds Horovod 0.28.1 with MXNet and Gloo into a virtual environment (default .venv), for
# tests/system/test_horovod.py, if `import horovod.mxnet` does not work there yet. About 5 minutes on
# 2 cores the first time; pip keeps the built wheel in its cache, so later runs take seconds.
# Never fails the caller: on failure it says why and exits 0, and the Horovod tests then skip
# (or fail, under GLUON_TB_REQUIRE_HOROVOD=1).
set -u
# a failure is also appended to $GLUON_TB_SETUP_NOTES (scripts/test.sh), whose tests print it at the end
not_run() { echo "$1" >&2; if [ -n "${GLUON_TB_SETUP_NOTES:-}" ]; then echo "$1" >> "$GLUON_TB_SETUP_NOTES" || true; fi; }
PY="${1:-.venv/bin/python}"
if "$PY" -c 'import horovod.mxnet' >/dev/null 2>&1; then
  exit 0
fi
if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
  not_run "install_horovod.sh: Horovod builds from source and needs cmake and g++; Horovod tests will not run"
  exit 0
fi
log="$(mktemp)"
# No build isolation: Horovod's build must import the mxnet installed in this environment
# (an isolated build environment has none and stops at "Could NOT find Mxnet").
# MAKEFLAGS: its setup.py would otherwise run make -j8 on however many cores there are.
if "$PY" -m pip install -q "setuptools==84.2.1" "wheel==0.48.0" >"$log" 2>&1 &&
   MAKEFLAGS=-j2 HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
   HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_JAX=1 \
   "$PY" -m pip install -q --no-build-isolation "horovod==0.28.1" >>"$log" 2>&1 &&
   "$PY" -c 'import horovod.mxnet' >>"$log" 2>&1; then
  echo "install_horovod.sh: installed horovod 0.28.1 (MXNet, Gloo)"
else
  tail -n 15 "$log" >&2
  not_run "install_horovod.sh: could not build horovod (pip's last lines are above); Horovod tests will not run"
fi
rm -f "$log"
exit 0
