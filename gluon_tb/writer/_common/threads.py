"""Thread priority without priority inversion: the GIL is only ever held at normal priority.

The writer's heavy work is of two kinds. Python (building protobufs, queue handling) holds the
GIL; C kernels (the histogram counter) release it. A thread at a low priority that holds the GIL
is a priority inversion: on a CPU that MXNet's operators (or DataLoader workers, or other jobs)
keep busy, the scheduler leaves it off the CPU *while it holds the GIL*, and the training thread
waits for it. Measured (2 cores, two busy nice-0 processes, a pure-Python loop timed in 1 ms
chunks while a writer works): with the writer thread at nice 19 the loop's longest stall was
250-1000 ms; with it at normal priority 11-12 ms, as with the writer idle (10 ms).

Not even *waiting* for the GIL at a low priority is safe: CPython hands the GIL to the thread
that asked for it, and the thread dropping it waits until that thread has taken it, so a
low-priority Python thread that only returns from a C call (re-taking the GIL) stalls the thread
that holds it. A Python thread at nice 19 that handed the histogram kernel to a second Python
thread still left the loop stalls of 170 ms.

So every thread that runs Python stays at the process's priority (the writer thread under
``SCHED_BATCH``, :func:`batch_scheduling`: a fair share of the CPU, but no preempting MXNet's
OpenMP threads when it wakes; under contention its stalls stayed at 15-20 ms), and only the C
kernels run at a low one, on a thread of their own that never touches the GIL: a kernel of
``_summaries/_fasthist.c`` given ``nice`` runs its loop on a thread it creates for the call,
which lowers its own priority first, while the calling thread waits with the GIL released.
:func:`niced_kernels` sets that value for a thread's kernels (the writer thread sets it from
``worker_nice``); :func:`kernel_nice` reads it. The kernels still cost the training loop less
that way: in the MLP benchmark the histogram counting slowed a batch by 1.5 ms at normal
priority and 0.4 ms at nice 19 (``benchmarks/RESULTS-notes.md``).
"""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Callable, Optional, Tuple

__all__ = ["batch_scheduling", "start_batch_thread", "BACKGROUND_NICE", "niced_kernels", "kernel_nice", "kernel_took",
           "cpu_saturated", "KERNEL_MIN_VALUES"]

#: the nice value of the background kernels (measured in benchmarks/RESULTS-notes.md: on a CPU that
#: MXNet's operators keep busy, nice 15-19 keeps the writer's work out of the training loop's way)
BACKGROUND_NICE = 19
#: arrays smaller than this are counted on the calling thread (a thread for the kernel costs
#: ~20-50 us: the kernel's time for about this many values)
KERNEL_MIN_VALUES = 1 << 16


_local = threading.local()


def batch_scheduling(thread: Optional[threading.Thread] = None, batch: bool = True) -> bool:
    """Put a thread under ``SCHED_BATCH`` (Linux): at its normal nice value it gets its fair share
    of the CPU (so it never holds the GIL for long off the CPU), but waking, it does not preempt
    the thread running on its core (an OpenMP thread of MXNet's, whose parallel region would
    wait for it). ``thread``: a started thread, set by the thread that started it, right after
    ``start()`` (so that no one who sees the thread sees it at another policy); the calling thread
    by default. ``batch=False`` puts it back under ``SCHED_OTHER`` (a thread started by one under
    ``SCHED_BATCH`` inherits it). True if done; a sandbox that forbids it leaves it as it was."""
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_BATCH"):
        return False
    tid = 0 if thread is None else thread.native_id
    if tid is None:  # not started
        return False
    try:
        os.sched_setscheduler(tid, os.SCHED_BATCH if batch else os.SCHED_OTHER, os.sched_param(0))
        return True
    except OSError:  # forbidden, or the thread already ended
        return False


#: (pid, requests) of the process's starter thread (:func:`start_batch_thread`); None: not made yet
_starter: Optional[Tuple[int, "queue.SimpleQueue"]] = None
_starter_lock = threading.Lock()


def _forget_starter() -> None:
    """In a forked child: the parent's starter thread is not there, and its lock may have been
    held by another thread at the fork."""
    global _starter, _starter_lock
    _starter, _starter_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_starter)


def start_batch_thread(thread: threading.Thread, launched: threading.Event,
                       failed: Callable[[BaseException], None]) -> None:
    """Start ``thread`` under ``SCHED_BATCH`` without waiting for it to run.

    ``Thread.start`` waits until the new thread runs, a hand-over of the GIL and a wake-up
    (~0.4-0.6 ms on a busy VM, three writers a fit, on the training thread). Here one starter
    thread per process, itself under ``SCHED_BATCH``, starts it: the new thread is born under its
    policy (Linux threads inherit it), so no one ever sees it under another. ``launched`` is set
    once ``start`` has returned or failed (``failed(error)`` is called then, on the starter
    thread). Until then ``thread.is_alive()`` is False and ``join`` raises: wait for ``launched``
    first. The first call in a process starts the starter, which waits as ``Thread.start`` does;
    if it cannot be made the thread is started here."""
    global _starter
    with _starter_lock:
        if _starter is None or _starter[0] != os.getpid():  # none yet, or a forked child's copy
            made: "queue.SimpleQueue" = queue.SimpleQueue()
            t = threading.Thread(target=_run_starter, args=(made,), name="gluon_tb-starter", daemon=True)
            try:
                t.start()
                _starter = (os.getpid(), made)
            except RuntimeError:  # no thread can be made now (the interpreter is shutting down)
                _starter = None
        requests = _starter[1] if _starter is not None else None
    if requests is None:
        try:
            thread.start()
            batch_scheduling(thread)
        finally:
            launched.set()
        return
    requests.put((thread, launched, failed))


def _run_starter(requests: "queue.SimpleQueue") -> None:
    batch_scheduling()  # before any thread is started from here: they inherit it
    while True:
        thread, launched, failed = requests.get()
        try:
            thread.start()
        except BaseException as e:  # noqa: BLE001 - reported to the thread's owner
            try:
                failed(e)
            except BaseException:  # noqa: BLE001 - the starter goes on for the others
                pass
        finally:
            launched.set()
        del thread, launched, failed  # not kept alive until the next request


def niced_kernels(nice: Optional[int]) -> None:
    """From now on, the calling thread's C kernels run at ``nice`` (:func:`kernel_nice`; Linux;
    ``None`` or 0, or elsewhere: at the calling thread's own priority)."""
    _local.nice = nice if nice and sys.platform.startswith("linux") else 0


#: a low-priority kernel that took this much longer than its work needs found no idle CPU ...
SATURATED_AFTER = 0.1
#: ... and the kernels run at normal priority for this long, so that what was logged still reaches
#: the disk within flush_secs (``_io/worker.py``): at about 1% of a core, the counting of a
#: 10M-value histogram would take a second
SATURATED_FOR = 60.0
_saturated_until = 0.0


def kernel_nice() -> int:
    """The nice value at which the calling thread's C kernels run now (0: its own priority):
    :func:`niced_kernels`'s, unless a recent low-priority kernel found the CPU saturated."""
    nice: int = getattr(_local, "nice", 0)
    return nice if nice and time.monotonic() >= _saturated_until else 0


def kernel_took(seconds: float, values: int) -> None:
    """Report that a low-priority kernel over ``values`` values took ``seconds``: far more than
    its work needs (about 1 ns a value) means that the CPU has no idle time to give it."""
    if seconds > SATURATED_AFTER + values * 1e-8:
        cpu_saturated()


def cpu_saturated() -> None:
    """Low-priority work found no idle CPU: :func:`kernel_nice` says 0 for ``SATURATED_FOR`` s."""
    global _saturated_until
    _saturated_until = time.monotonic() + SATURATED_FOR
