"""Process-level safety nets for every live writer, kept in one registry.

* when the main thread ends, writers with a remote log directory are flushed
  while Python's thread pools still take work (:func:`_flush_remote`);
* at interpreter exit, everything still queued is written (``atexit``), and so at the end of a
  ``multiprocessing`` child, which ends with ``os._exit`` and runs no ``atexit`` hook
  (:func:`_hook_multiprocessing`);
* on SIGTERM, when nobody else handles it, live writers are flushed before
  the process ends the way SIGTERM would have ended it;
* after ``fork``, the child forgets the parent's queue, worker and files, and
  gets SIGTERM's default action back (:func:`_after_fork`).
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import weakref
from typing import Any, Optional, Protocol

log = logging.getLogger("gluon_tb")


class Writer(Protocol):
    """What the registry calls on a writer (``SummaryWriter`` has these)."""

    def _flush_before_shutdown(self) -> None:
        """Flush a remote log directory, without closing it."""

    def _close_at_exit(self) -> None:
        """Write everything queued and close the files."""

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's queue, worker and files."""


_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_installed = False
_sigterm_ours = False  # _on_sigterm is this process's SIGTERM handler
_remote_hooked = False
_lock = threading.Lock()


def register(writer: Writer, remote: bool = False) -> None:
    """Track ``writer``; ``remote``: its log directory is a URL (see :func:`_hook_remote`)."""
    global _installed
    with _lock:
        _live.add(writer)
        first = not _installed
        _installed = True
    if remote:
        _hook_remote()
    if first:  # a forked child inherits these two, so they are made once
        atexit.register(_close_all)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=_before_fork, after_in_child=_after_fork)
    _hook_multiprocessing()
    if not _sigterm_ours:
        _install_sigterm()


_mp_hooked = -1  # the pid whose multiprocessing finalizer is registered
_mp_forker_set = False


class _Token:
    """What ``multiprocessing.util.register_after_fork`` keys our hook on (kept alive here)."""


_token = _Token()


def _hook_multiprocessing() -> None:
    """In a ``multiprocessing`` child (``Process``, ``Pool`` worker): write everything queued when
    it ends. Such a child ends with ``os._exit`` after its target returns, so ``atexit`` never runs
    there; ``multiprocessing`` runs its finalizers first (``util._exit_function``). Without this,
    what a child logged in its last ``flush_secs`` was lost. Called when a writer registers and in
    every forked child; a ``multiprocessing`` child clears the finalizers it inherits (and any made
    at the fork), then runs its after-fork hooks, where :func:`_mp_child` registers ours again."""
    global _mp_hooked, _mp_forker_set
    if "multiprocessing" not in sys.modules:  # no child of multiprocessing yet
        return
    import multiprocessing.util as util

    pid = os.getpid()
    try:
        if not _mp_forker_set:
            util.register_after_fork(_token, _mp_child)
            _mp_forker_set = True
        if _mp_hooked != pid:
            _mp_hooked = pid
            util.Finalize(None, _close_all, exitpriority=10)
    except Exception:  # pragma: no cover - a multiprocessing without these: atexit only
        log.debug("gluon_tb: no multiprocessing finalizer", exc_info=True)


def _mp_child(_token: Any) -> None:
    """In a ``multiprocessing`` child, after it cleared the finalizers it inherited."""
    global _mp_hooked
    _mp_hooked = -1
    if _live:  # the parent's writers, which write files of their own here
        _hook_multiprocessing()


def _hook_remote() -> None:
    """Flush the writers when the main thread ends, before Python shuts its thread pools down.

    ``atexit`` comes too late for a remote store: by then asyncio can no longer
    resolve a host name (its executor refuses new work), so uploads would fail.
    The writers are only flushed here, not closed: a non-daemon thread may
    still be logging; ``atexit`` closes them later as for local files.
    """
    global _remote_hooked
    with _lock:
        if _remote_hooked:
            return
        _remote_hooked = True
    import concurrent.futures.thread  # noqa: F401  registers its hook first, so ours runs before it

    # Private, and no public hook runs early enough: tests/writer/io/test_lifecycle.py pins the order
    # (these hooks in reverse, before thread pools refuse work; atexit after) and fails if
    # Python changes it. Without it, atexit still closes the writers, for local stores.
    hook = getattr(threading, "_register_atexit", None)
    if hook is not None:
        try:
            hook(_flush_remote)
        except RuntimeError:  # "can't register atexit after shutdown": atexit closes them then
            with _lock:
                _remote_hooked = False


def _flush_remote() -> None:
    for w in list(_live):
        try:
            w._flush_before_shutdown()
        except Exception:  # never let logging break interpreter shutdown
            log.exception("gluon_tb: could not flush %s at exit", getattr(w, "logdir", "?"))


def _close_all() -> None:
    for w in list(_live):
        try:
            w._close_at_exit()
        except Exception:  # never let logging break interpreter shutdown
            log.exception("gluon_tb: could not finish writing %r at exit", w)


def _after_fork() -> None:
    """In a forked child: forget the parent's writers, and give SIGTERM its default action back.

    The child did not ask for our handler, and a Python handler runs only when
    the main thread next runs Python code. A child blocked in C (a DataLoader
    worker inside MXNet's engine, a pthread lock) would then never die of
    SIGTERM, and ``Pool.terminate()`` in the parent would wait for it forever.
    A writer the child makes itself installs the handler again (:func:`register`).
    """
    global _lock, _sigterm_ours, _ending_on
    _lock = threading.Lock()
    _ending_on = None  # a child of the writer's own threads, forked while the parent ends
    for w in list(_live):
        w._after_fork()
    _hook_multiprocessing()
    if _sigterm_ours:
        _sigterm_ours = False
        try:
            if signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except (ValueError, OSError):  # pragma: no cover - fork() from a thread of an embedded interpreter
            pass


def _install_sigterm() -> None:
    global _sigterm_ours
    if os.environ.get("GLUON_TB_NO_SIGNAL_HANDLER"):
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone (a launcher, the user) handles it: leave theirs alone
        signal.signal(signal.SIGTERM, _on_sigterm)
        _sigterm_ours = True
    except (ValueError, OSError):  # pragma: no cover - embedded interpreters
        pass


_ending_on: Optional[int] = None  # the thread running the SIGTERM handler: the process is ending


def _before_fork() -> None:
    """While the SIGTERM handler writes what is queued, no other thread of the process forks: a
    ``Pool`` would start workers (replacing those the signal killed) that outlive the process.
    The writer's own threads may (their encoders run in child processes)."""
    if _ending_on is not None and threading.get_ident() != _ending_on and \
            not threading.current_thread().name.startswith("gluon_tb"):
        threading.Event().wait()  # until the process ends, moments from now


def _on_sigterm(signum: int, frame: Any) -> None:
    global _ending_on
    _ending_on = threading.get_ident()
    _close_all()
    _end_daemonic_children()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _end_daemonic_children() -> None:
    """SIGTERM to this process's daemonic ``multiprocessing`` children (a ``Pool``'s, so a
    DataLoader's workers), as ``multiprocessing`` ends them at a normal exit. While the writers
    were written, a ``Pool`` replaced the workers that a SIGTERM to the whole process group had
    just killed; without our handler the process would have died before it could. Left alone,
    the replacements outlived it, blocked for ever, holding its pipes open."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    try:
        children = [p for p in mp.active_children() if p.daemon and p.pid is not None]
    except Exception:  # noqa: BLE001 - never let the handler fail before the process ends
        return
    for p in children:
        try:
            os.kill(p.pid, signal.SIGTERM)
        except OSError:
            pass
