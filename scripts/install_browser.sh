#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (tests/system/test_browser.py), if it is missing.
# Idempotent and quiet; never fails the caller: without apt (or root) it says why and exits 0,
# and the browser tests then skip (or fail, under GLUON_TB_REQUIRE_BROWSER=1).
set -u
# a failure is also appended to $GLUON_TB_SETUP_NOTES (scripts/test.sh), whose tests print it at the end
not_run() { echo "$1" >&2; if [ -n "${GLUON_TB_SETUP_NOTES:-}" ]; then echo "$1" >> "$GLUON_TB_SETUP_NOTES" || true; fi; }
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  not_run "install_browser.sh: apt-get not found; install Chromium at $CHROMIUM yourself to run the browser tests"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    not_run "install_browser.sh: not root and no passwordless sudo; run 'apt-get install chromium' as root"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
if $SUDO apt-get update -qq >"$log" 2>&1 &&
   $SUDO apt-get install -y -qq chromium >>"$log" 2>&1 &&
   [ -x "$CHROMIUM" ]; then
  echo "install_browser.sh: installed $("$CHROMIUM" --version 2>/dev/null || echo chromium)"
else
  tail -n 5 "$log" >&2
  not_run "install_browser.sh: could not install chromium (apt's last lines are above); browser tests will not run"
fi
rm -f "$log"
exit 0
