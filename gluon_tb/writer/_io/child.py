"""Run a pure builder in a fresh child Python process, so its work holds no GIL of ours.

The writer thread shares the interpreter with the training thread: a pure-Python
conversion that takes it 200 ms (a 20k-event profile trace) takes the training thread's
200 ms too. :func:`build_in_child` runs ``module.function(*args)`` (a pure function that
returns ``bytes``) in a new process instead, while the calling thread waits for its
answer with the GIL released. The bytes are those the same call gives in the
thread: the child imports this same copy of the package (its parent directory first on the
child's ``sys.path``) and runs the same function.

How the child is made. ``subprocess`` with no ``preexec_fn``: CPython 3.11 then starts
it with ``vfork()`` and ``exec``, which run no ``pthread_atfork`` handlers. MXNet's
handlers stop its engine on ``fork()``, waiting for every queued operator; verified
with MXNet 1.9.1 (``strace -f`` shows ``vfork()``; with 20 s of matrix products queued,
``subprocess.run`` returned in 0.15 s and ``os.fork()`` + exit in 21.8 s). The child
lowers its own priority to the writer's ``worker_nice`` first (19 by default; normal priority
while the CPU is saturated, see ``_common/threads.py``), so it takes the CPU that training leaves idle,
and imports only the builder's module: its ancestor packages are registered bare (no
``__init__`` run), since ``gluon_tb/__init__.py`` imports the whole writer. It starts in
about 0.25 s (numpy is most of it), does not import MXNet, and exits when done.

Protocol: the child's stdin is an unlinked temporary file holding two pickles, ``(package
dir, module, function)`` and then ``args`` (read once the module is imported: they may hold
its classes); its stdout another, which the parent reads once the child has exited. Files,
not pipes: a pipe moves 64 KiB at a time, and every chunk the waiting thread wrote or read
took the GIL back from the training thread (each hand-over costs it a thread switch; with
pipes a 1.4 MB trace cost the loop of ``benchmarks/bench_gil.py`` 50-250 ms).
It answers with one tag byte, then ``bytes`` (``0``) or a pickled ``(exception type,
message)`` (``1``) when the builder raised one of :data:`INPUT_ERRORS`: the input is bad,
and the same error is raised here. The waiting thread holds the GIL only to pickle the
arguments, write them, start the child and read the answer: 3-6 ms of its CPU for a 1.4 MB
profile trace, against 190 ms to convert it in the thread.

Failures. If the child cannot be started or fails otherwise (no ``sys.executable``, an
import error, killed, a nonzero exit without an answer), :func:`run_builder` logs at debug
and runs the builder in this thread: the same bytes, only not off the GIL.

Time: the child's start (about 0.25 s) is added to the writer thread's time for the
item; meanwhile the writer writes nothing else, as when the item was built in the thread.
A nice-19 child on a CPU that other work keeps busy gets about 1% of a core: one that has not
answered after :data:`STARVED_AFTER` s is killed and the work started again at normal
priority, so the writer waits at most that much longer. Memory: the parent holds ``args``,
their pickle until it is written (in ``TMPDIR``, with the answer, until the child is done) and
the answer; the child holds its own copy of the arguments and its working memory (for a
profile, the parsed JSON: roughly 10x the file) until it exits.
"""
from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Optional, Tuple

from .._common.threads import cpu_saturated, kernel_nice

log = logging.getLogger("gluon_tb")

#: What a builder raises for bad input: reported as such, never a reason to fall back.
INPUT_ERRORS: Tuple[type, ...] = (TypeError, ValueError)
_OK, _INPUT_ERROR = b"\x00", b"\x01"

# The child's program: stdin -> stdout. Kept free of gluon_tb imports until the builder's.
_CHILD = r"""
import os, pickle, sys, types
try:
    if int(sys.argv[1]):
        os.setpriority(os.PRIO_PROCESS, 0, int(sys.argv[1]))
except (AttributeError, OSError):
    pass
stdin = sys.stdin.buffer
root, module, function = pickle.load(stdin)
sys.path.insert(0, root)
parts = module.split(".")
for i in range(1, len(parts)):  # the ancestor packages, without running their __init__
    name = ".".join(parts[:i])
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(root, *parts[:i])]
        sys.modules[name] = pkg
import importlib
fn = getattr(importlib.import_module(module), function)
args = pickle.load(stdin)  # after the import: it may hold the module's own classes
out = sys.stdout.buffer
try:
    result = fn(*args)
except (TypeError, ValueError) as e:
    out.write(b"\x01" + pickle.dumps(("TypeError" if isinstance(e, TypeError) else "ValueError", str(e))))
else:
    if not isinstance(result, bytes):
        raise SystemExit(f"{module}.{function} returned {type(result).__name__}, not bytes")
    out.write(b"\x00" + result)
out.flush()
"""


class ChildFailed(RuntimeError):
    """The child did not answer: it could not be started, or it failed for a reason of its own."""


class ChildStarved(ChildFailed):
    """A low-priority child did not answer within its time: the CPU has no idle time for it."""


#: a low-priority child that has not answered after this many seconds is killed and started
#: again at normal priority (the writer waits for it, holding its files: flush_secs)
STARVED_AFTER = 5.0


def _package_root(module: str) -> str:
    """The directory that holds ``module``'s top-level package (what goes first on ``sys.path``)."""
    path = os.path.abspath(sys.modules[module].__file__ or "")
    for _ in module.split("."):
        path = os.path.dirname(path)
    return path


def build_in_child(module: str, function: str, args: Tuple[Any, ...], nice: int = 0,
                   timeout: Optional[float] = None) -> bytes:
    """``module.function(*args)`` (which returns bytes) computed in a fresh child process at
    ``nice`` (0: this process's priority), killed after ``timeout`` seconds.

    Raises the builder's own ``TypeError``/``ValueError`` (same type, same message) when
    it rejects the input, :class:`ChildStarved` when it ran out of time and
    :class:`ChildFailed` when the child gave no answer otherwise."""
    exe = sys.executable
    if not exe or not os.path.isfile(exe):
        raise ChildFailed(f"no Python executable to start (sys.executable={exe!r})")
    request = (pickle.dumps((_package_root(module), module, function))
               + pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL))
    # files, not pipes: a pipe moves 64 KiB at a time, and each chunk took the GIL back from the
    # training thread (a 1.4 MB trace: dozens of hand-overs); a file is written and read whole
    with tempfile.TemporaryFile() as req, tempfile.TemporaryFile() as ans, tempfile.TemporaryFile() as err:
        req.write(request)
        del request
        req.flush()
        req.seek(0)
        try:
            proc = subprocess.Popen([exe, "-c", _CHILD, str(nice)], stdin=req, stdout=ans, stderr=err,
                                    close_fds=True)
        except OSError as e:
            raise ChildFailed(f"could not start {exe}: {e}") from e
        watchdog = threading.Timer(timeout, proc.kill) if timeout is not None else None
        if watchdog is not None:
            watchdog.daemon = True
            watchdog.start()
        try:
            proc.wait()  # one blocking call, without the GIL
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
        ans.seek(0)
        out = ans.read()
        err.seek(max(err.seek(0, os.SEEK_END) - 2000, 0))
        err_tail = err.read()
    if proc.returncode == 0 and out[:1] == _OK:
        return out[1:]
    if proc.returncode == 0 and out[:1] == _INPUT_ERROR:
        kind, message = pickle.loads(out[1:])
        raise {e.__name__: e for e in INPUT_ERRORS}[kind](message)
    if watchdog is not None and watchdog.finished.is_set() and proc.returncode == -signal.SIGKILL:
        raise ChildStarved(f"no answer after {timeout} s at nice {nice}")
    tail = err_tail.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    raise ChildFailed(f"child exited with status {proc.returncode}: {tail[0]}")


def run_builder(fn: Callable[..., bytes], *args: Any, size: int, child_from: int) -> bytes:
    """``fn(*args)`` computed in a child process (:func:`build_in_child`) when the input's
    ``size`` (bytes) is at least ``child_from``, else in this thread, as when the child gives no
    answer (logged at debug): a child costs ~0.3 s of CPU and delays what is queued behind it by
    as much, worth it only for work that would hold the GIL for longer than a few ms. Bad input
    raises the same error either way.

    The child runs at the calling thread's kernel priority (``_common/threads.kernel_nice``:
    the writer's ``worker_nice``, or 0 while the CPU is saturated). One at a low priority that
    has not answered after :data:`STARVED_AFTER` s is killed, the CPU noted as saturated, and
    the work done again by a child at normal priority."""
    if size < child_from:
        return fn(*args)
    nice = kernel_nice()
    try:
        try:
            return build_in_child(fn.__module__, fn.__name__, args, nice,
                                  STARVED_AFTER if nice else None)
        except ChildStarved as e:
            log.debug("gluon_tb: %s.%s: %s; again at normal priority", fn.__module__, fn.__name__, e)
            cpu_saturated()
            return build_in_child(fn.__module__, fn.__name__, args)
    except ChildFailed as e:
        log.debug("gluon_tb: %s.%s in this thread: %s", fn.__module__, fn.__name__, e)
    return fn(*args)
