#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests (tests/test_browser.py), if it is missing.
# Idempotent and quiet; never fails the caller: without apt (or root) it says why and exits 0,
# and the browser tests then skip (or fail, under GLUON_TB_REQUIRE_BROWSER=1).
set -u
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser.sh: apt-get not found; install Chromium at $CHROMIUM yourself to run the browser tests" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "install_browser.sh: not root and no passwordless sudo; run 'apt-get install chromium' as root" >&2
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
  echo "install_browser.sh: could not install chromium (last lines of apt's output below); browser tests will not run" >&2
  tail -n 5 "$log" >&2
fi
rm -f "$log"
exit 0
