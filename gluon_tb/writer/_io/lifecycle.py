"""Process-level safety nets for every live writer.

* at interpreter exit, everything still queued is written (``atexit``);
* on SIGTERM, when nobody else handles it, live writers are flushed before
  the process ends the way SIGTERM would have ended it;
* after ``fork``, the child forgets the parent's queue, worker and files.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from typing import Any

log = logging.getLogger("gluon_tb")

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_installed = False
_lock = threading.Lock()


def register(writer: Any) -> None:
    """Track ``writer`` (anything with ``_close_at_exit()`` and ``_after_fork()``)."""
    global _installed
    with _lock:
        _live.add(writer)
        if _installed:
            return
        _installed = True
    atexit.register(_close_all)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
    _install_sigterm()


def _close_all() -> None:
    for w in list(_live):
        try:
            w._close_at_exit()
        except Exception:  # never let logging break interpreter shutdown
            log.exception("gluon_tb: could not finish writing %r at exit", w)


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    for w in list(_live):
        w._after_fork()


def _install_sigterm() -> None:
    if os.environ.get("GLUON_TB_NO_SIGNAL_HANDLER"):
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone (a launcher, the user) handles it: leave theirs alone
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # pragma: no cover - embedded interpreters
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    _close_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)

