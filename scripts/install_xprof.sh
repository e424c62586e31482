#!/usr/bin/env bash
# Makes .venv-xprof: TensorBoard with its Profile dashboard (tensorboard-plugin-profile 2.24, XProf),
# the viewer of profile_batch='s files, for tests/handlers/options/test_profile.py and tests/system/test_profile_browser.py.
# A venv of its own because XProf needs numpy >= 1.24 and MXNet 1.9.1 numpy < 1.24; TensorBoard only
# reads files, so the two never meet. Python 3.11, like .venv (scripts/_venv.sh).
# Skipped when .venv-xprof already holds these packages (a stamp): a second run takes a second.
# Never fails the caller: on failure it says why and exits 0, and the XProf tests then skip
# (or fail, under GLUON_TB_REQUIRE_XPROF=1).
set -u
# a failure is also appended to $GLUON_TB_SETUP_NOTES (scripts/test.sh), whose tests print it at the end
not_run() { echo "$1" >&2; if [ -n "${GLUON_TB_SETUP_NOTES:-}" ]; then echo "$1" >> "$GLUON_TB_SETUP_NOTES" || true; fi; }
cd "$(dirname "$0")/.."
VENV=.venv-xprof
# whatever versions of the two resolve together; the stamp holds this line
PACKAGES=(tensorboard "tensorboard-plugin-profile==2.24.*")
stamp="$VENV/.installed"
want="${PACKAGES[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY="$c"; break; fi
  done
fi
if [ -z "$PY" ]; then
  not_run "install_xprof.sh: Python 3.11 not found; the XProf tests will not run"
  exit 0
fi
start=$SECONDS
log="$(mktemp)"
if { [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"; } >"$log" 2>&1 &&
   "$VENV/bin/python" -m pip install -q "${PACKAGES[@]}" >>"$log" 2>&1 &&
   "$VENV/bin/python" -c 'import xprof.profile_data, tensorboard' >>"$log" 2>&1; then
  echo "$want" > "$stamp"
  versions="$("$VENV/bin/python" -c 'from importlib.metadata import version as v
print(", ".join(f"{p} {v(p)}" for p in ("tensorboard", "tensorboard-plugin-profile")))')"
  echo "install_xprof.sh: $VENV has $versions ($((SECONDS - start)) s)"
else
  tail -n 15 "$log" >&2
  not_run "install_xprof.sh: could not set up $VENV (pip's last lines are above); the XProf tests will not run"
fi
rm -f "$log"
exit 0
