# Sourced by demo.sh and test.sh: makes .venv with Python 3.11 and installs the project with
# the extras in $EXTRAS. MXNet 1.9.1 needs numpy<1.24, which has no wheel for Python 3.12.
# The install is skipped when .venv already holds it for these extras and these build files
# (pyproject.toml, setup.py, the C kernels): a second run starts in a second, and quietly.
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "Python 3.11 is required (MXNet 1.9.1 needs numpy<1.24, which has no wheel for 3.12)" >&2; exit 1; }
stamp=".venv/.installed-$(printf '%s' "$EXTRAS" | tr ',' '-')"
want="$(cat pyproject.toml setup.py gluon_tb/writer/*/*.c | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  return 0 2>/dev/null || exit 0
fi
echo "setting up .venv with gluon_tb[$EXTRAS] (the first time about 2 minutes: MXNet, TensorBoard and the rest from the package registry; the C kernels are compiled)"
start=$SECONDS
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
log="$(mktemp)"
if ! .venv/bin/python -m pip install -q -e ".[$EXTRAS]" >"$log" 2>&1; then
  cat "$log" >&2; rm -f "$log"
  echo "installing gluon_tb[$EXTRAS] into .venv failed (pip's output above)" >&2; exit 1
fi
# setuptools boxes a warning about editable installs on every build; its advice does not apply here
grep -v -e 'BuildBackendWarning' -e 'Editable installation' -e '^ *!!$' -e '^ *\*\{20,\}$' \
  -e 'Please be careful with folders' -e 'name as your package as they may' \
  -e 'with strategy, WheelFile' -e '^ *$' "$log" || true
rm -f "$log"
.venv/bin/python -c 'import gluon_tb' || { echo "installing gluon_tb[$EXTRAS] into .venv failed" >&2; exit 1; }
echo "$want" > "$stamp"
echo ".venv ready ($((SECONDS - start)) s)"
