# Sourced by demo.sh and test.sh: makes .venv with Python 3.11 and installs the project with
# the extras in $EXTRAS. MXNet 1.9.1 needs numpy<1.24, which has no wheel for Python 3.12.
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "Python 3.11 is required (MXNet 1.9.1 needs numpy<1.24, which has no wheel for 3.12)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"
