"""The background pipeline: a queue bounded in bytes, drained by one worker.

The training thread only appends small tuples to a deque (no lock, no
wake-up for scalars); the worker (``worker.py``) wakes every ``flush_secs / 2`` or
when enough has queued, drains everything in one go, builds and frames the
events and writes each run's records with one ``os.write``. Other items wake it at
once, except those queued with ``put(wake=False)``: a handler's histograms of every
batch, which MXNet is still copying when they are queued; for those the worker waits
0.1 s before it drains, by when the copies are done (``put``). ``flush()`` puts a
marker in the queue and waits until the worker has written everything before it.

Every producer method is safe from several threads at once, beside ``flush`` and
``close`` on others (the rules are above ``put_scalar``): in
``on_full="block"`` every accepted item is written; in ``"drop"`` an item is
refused before it is queued and counted in ``gluon_tb/dropped_events``; an item
racing ``close()`` is either written or refused with :class:`WriterClosedError`.
No call waits on anything but the worker, and every wait ends when it dies.

Errors of the worker (an OSError from a full disk, a builder that failed) are
kept and raised on the producer's next call, ``flush()`` or ``close()`` — once,
after which the writer carries on.

Where the records go is the :class:`~.output.Output` the pipeline is handed: a local
directory, or for a URL ``logdir`` (``s3://...``) an object store written in parts,
uploaded when due, on ``flush()`` and on ``close()`` (``remote.py`` says why parts).

The items on the queue are described in ``items.py``.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Dict, List, Optional, Union

from .items import Action, ScalarItem, Summary, Sync
from .._common.threads import BACKGROUND_NICE, batch_scheduling, start_batch_thread
from .output import Output
from .queue_bound import DEFAULT_MAX_QUEUE_BYTES, SCALAR_BOUND, SCALAR_COST
from .worker import Worker

log = logging.getLogger("gluon_tb")

__all__ = ["Pipeline", "WriterClosedError", "DEFAULT_MAX_QUEUE_BYTES", "DEFAULT_WORKER_NICE",
           "SCALAR_COST", "SCALAR_BOUND"]

DEFAULT_WORKER_NICE = BACKGROUND_NICE


#: a ``put(wake=False)`` wakes the worker at once all the same when the queue holds over 1/this
#: of its bound, or over LAZY_MAX_BYTES
LAZY_BYTES_SHARE = 8
LAZY_MAX_BYTES = 32 << 20
#: the most seconds a finished close() waits for the writer's threads to end (they end at once:
#: they return when the stop marker is written)
JOIN_SECONDS = 5.0


class WriterClosedError(RuntimeError):
    """Raised when a closed writer is used."""


class Pipeline:
    """Queue + worker, writing one event file per run to ``output``.

    Example::

        p = Pipeline(open_output("logs/train"), flush_secs=2.0)
        p.put_scalar((None, "loss", 0.5, 1, time.time()))
        p.close()
    """

    def __new__(cls, *args: Any, on_full: str = "block", **kwargs: Any) -> "Pipeline":
        if cls is Pipeline and on_full == "drop":
            cls = DropPipeline  # its own put_scalar, still looked up on the class: the fast call
        return super().__new__(cls)

    def __init__(self, output: Output, *, flush_secs: float = 2.0,
                 max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES, wake_items: int = 4096,
                 on_full: str = "block", nice: Optional[int] = DEFAULT_WORKER_NICE) -> None:
        self._output = output
        self.logdir = output.logdir
        self.flush_secs = flush_secs
        self.max_queue_bytes = max_queue_bytes
        self._scalar_bound = bound = min(max_queue_bytes, SCALAR_BOUND)
        self.on_full = on_full
        self._wake_items = wake_items
        # scalars look at their bound every this many (at most 1/64 of it past it): a look costs
        # more than queueing the scalar itself
        self._check_every = max(1, min(256, bound // (SCALAR_COST * 64)))
        # the first look: wake_items queued, or as many scalars as the bound holds if fewer
        self._first_check = min(wake_items, max(1, bound // SCALAR_COST))
        self.nice = nice
        self.dropped = 0
        self.closed = False
        self.abandoned = False  # close() gave up waiting for a stuck worker (give_up)
        self._reset_runtime(reported=0)
        # the worker starts now, not at the first call: starting a thread waits until it runs,
        # ~1-2 ms that would otherwise land on the training thread's first add_*
        self._start()

    def _reset_runtime(self, reported: int) -> None:
        self._q: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._lazy = threading.Event()  # a put(wake=False) woke the worker, which waits a little (worker.py)
        self._space = threading.Condition(threading.Lock())
        # closing, drop counts, worker errors and every write of _check_at. Re-entrant: a
        # SIGTERM handler closes writers on the thread it interrupted, which may hold it.
        self._lock = threading.RLock()
        self._finished = threading.Event()  # set once the worker takes nothing more from the queue
        self._big_bytes = 0
        self._check_at = 0  # queue length at which a scalar next takes the slow path (0: every one)
        self._thread: Optional[threading.Thread] = None
        self._launched = threading.Event()  # the worker's start() has returned (or failed)
        self._catcher: Optional[threading.Thread] = None  # the catch-up thread (worker.py)
        self._start_lock = threading.RLock()  # re-entrant for the same reason
        self.error: Optional[BaseException] = None
        # new event files too: after a fork the child never writes the parent's
        self._worker = Worker(self._q, self._wake, self._finished, self._output, self,
                              self.flush_secs, self.nice, reported, self._lazy)

    # ------------------------------------------------------------ producer side
    # Several threads may call every producer method at once. The rules that make that safe:
    # * a queued item is never taken back out: in drop mode a scalar is refused *before* it is
    #   appended (an item popped from the right could be another thread's, or a flush marker);
    # * close() sets ``closed`` and ``_check_at = 0`` under ``_lock`` before it queues its stop
    #   marker, and nobody writes a non-zero ``_check_at`` once ``closed`` (all writes hold
    #   ``_lock``); so a producer that reads ``closed`` false *after* appending knows its item is
    #   ahead of the stop marker and will be written, and one that reads it true settles its item
    #   in ``_late``;
    # * drops are counted under ``_lock`` only while open, so the report written at the stop has
    #   them all.
    def put_scalar(self, item: ScalarItem) -> None:
        q = self._q
        q.append(item)
        if len(q) >= self._check_at:  # the first scalar, the bound worth a look, or closed
            if self.closed:
                self._late(item)
            else:
                self._next_check()
                self._make_room(0, scalar=True)

    def _put_scalar_drop(self, item: ScalarItem) -> None:
        """``put_scalar`` of a :class:`DropPipeline`: a scalar over the bound is never queued."""
        q = self._q
        if len(q) >= self._check_at and not self._scalar_fits():
            return  # dropped and counted
        q.append(item)
        if self.closed:
            self._late(item)

    def _scalar_fits(self) -> bool:
        """Drop mode, before a scalar is queued: True if it may be; else it is counted dropped."""
        if self._make_room(SCALAR_COST, scalar=True):
            self._next_check()
            return True
        return False

    def _next_check(self) -> None:
        with self._lock:
            if not self.closed:
                self._check_at = max(len(self._q) + self._check_every, self._first_check)

    def put(self, item: Union[Summary, Action], wake: bool = True) -> bool:
        """Queue a non-scalar item; False when dropped (on_full='drop').

        ``wake=False``: for payloads that MXNet is still copying when they are queued (a
        handler's histograms, every batch). Read at once, each made the worker wait for MXNet's
        engine (a ``WaitForVar`` operation on the engine's worker thread, two thread wake-ups);
        so the worker is woken only for the first such item since its last drain, and then
        waits ``worker.LAZY_DELAY`` (0.1 s, at most ``flush_secs / 4``) before it drains: the
        copies are done by then, and the items of several batches are read in one round. Past
        1/:data:`LAZY_BYTES_SHARE` of the bound (or :data:`LAZY_MAX_BYTES`) it is woken at once."""
        if self._thread is None:
            self._start()
        nbytes = item.nbytes
        if nbytes:
            if wake or not self._fits(nbytes, False):
                if not self._make_room(nbytes):
                    return False
            with self._space:
                self._big_bytes += nbytes
        self._q.append(item)
        if self.closed:
            self._late(item)
        if wake or self._big_bytes > min(self.max_queue_bytes // LAZY_BYTES_SHARE, LAZY_MAX_BYTES):
            self._wake.set()
        elif not self._lazy.is_set():  # the first since the worker's last drain
            self._lazy.set()
            self._wake.set()
        return True

    def queued_bytes(self) -> int:
        """What the queue holds, as counted against ``max_queue_bytes``."""
        return len(self._q) * SCALAR_COST + self._big_bytes

    def _fits(self, nbytes: int, scalar: bool) -> bool:
        """Whether ``nbytes`` more fit the bound (and, for a scalar, the scalars' own bound)."""
        items = len(self._q) * SCALAR_COST
        if scalar and items + nbytes > self._scalar_bound:
            return False
        return items + self._big_bytes + nbytes <= self.max_queue_bytes

    def _make_room(self, nbytes: int, scalar: bool = False) -> bool:
        """Start and wake the worker; past the bound wait for room (block) or count a drop and
        return False (drop). A closed pipeline never counts a drop: its late item is refused."""
        if self._thread is None:
            self._start()
        wake = self._wake
        if not wake.is_set():  # setting an Event takes its lock: skip when already set
            wake.set()
        if self._fits(nbytes, scalar):
            return True
        if self.on_full == "drop":
            if nbytes > self.max_queue_bytes and self.queued_bytes() == 0:
                return True  # larger than the whole bound: queued alone, as "block" queues it once empty
            with self._lock:
                if self.closed:
                    return True
                self.dropped += 1
                self._check_at = 0  # full: every scalar looks until the worker has drained
            return False
        with self._space:
            while not self._fits(nbytes, scalar) and self.queued_bytes() > 0 and self.running:
                self._wake.set()
                self._space.wait(0.05)
        return True

    def _late(self, item: Union[ScalarItem, Summary, Action]) -> None:
        """``item`` was queued while the pipeline closed: it is written if it went in ahead
        of the stop marker; otherwise it is still in the queue once the worker has stopped, and refused."""
        while not self._finished.wait(0.05):
            if self._thread is not None and not self.running:
                break  # the worker died: nothing more is taken from the queue
        if any(x is item for x in list(self._q)):  # list(): one C call, safe beside appends
            raise WriterClosedError("SummaryWriter was closed while this call ran; "
                                    "the event was not logged")

    @property
    def running(self) -> bool:
        """The worker was started (or is being started) and has not stopped (``close()`` stops it)."""
        t = self._thread
        return t is not None and (t.is_alive() or not self._launched.is_set())

    def on_worker(self) -> bool:
        """The calling thread is this pipeline's worker (or its catch-up thread)."""
        me = threading.current_thread()
        return self._thread is not None and (me is self._thread or me is self._catcher)

    @property
    def is_remote(self) -> bool:
        """The log directory is a URL, written to an object store."""
        return self._output.remote

    def _start(self, even_closed: bool = False) -> None:
        with self._start_lock:
            if self._thread is None and (even_closed or not self.closed):
                c = threading.Thread(target=self._worker.catch_up, name="gluon_tb-writer-catch-up",
                                     daemon=True)
                t = threading.Thread(target=self._run_worker, args=(c,), name="gluon_tb-writer", daemon=True)
                self._catcher, self._thread = c, t
                if self._worker.nice:  # not preempting training's threads when it wakes: born under
                    start_batch_thread(t, self._launched, self._not_launched)  # SCHED_BATCH, not waited for
                    return
                try:
                    t.start()
                except BaseException:
                    self._thread = None
                    raise
                finally:
                    self._launched.set()

    def _not_launched(self, e: BaseException) -> None:
        """The starter thread could not start the worker: the next call raises ``e``."""
        log.warning("gluon_tb: the writer thread of %s could not be started: %r", self._output.location, e)
        self.failed(e)

    def _run_worker(self, catcher: threading.Thread) -> None:
        """The worker thread: starts the catch-up thread, then works. ``Thread.start`` waits until
        the new thread runs (a hand-over of the GIL, ~0.5 ms on a VM): here the worker waits, not
        the thread that made the writer (a handler makes its writers inside the first batch); the
        worker itself was started by the starter thread (``start_batch_thread``). The catch-up
        thread inherits the worker's ``SCHED_BATCH`` and is put back under the process's
        scheduling before the worker writes anything."""
        try:
            catcher.start()
        except RuntimeError:  # pragma: no cover - no thread can be made: the worker writes alone
            log.warning("gluon_tb: the writer's catch-up thread could not be started")
        else:  # at the process's scheduling
            batch_scheduling(catcher, batch=False)
        self._worker.run()

    def flush(self, timeout: Optional[float] = None, fsync: bool = False) -> bool:
        """Wait until the worker has written everything queued before this call (and, with
        ``fsync``, asked the OS to put it on stable storage); False when the worker
        stopped (or ``timeout`` passed) first."""
        return self._sync(Sync(threading.Event(), fsync=fsync), timeout)

    def _sync(self, marker: Sync, timeout: Optional[float]) -> bool:
        if self._thread is None:
            self._start()
        self._q.append(marker)
        self._wake.set()
        return self._wait(marker.done, timeout)

    def _wait(self, done: threading.Event, timeout: Optional[float]) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.05):
            if not self.running or (deadline is not None and time.monotonic() > deadline):
                return done.is_set()
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Write everything queued before this call, close the files, stop the worker.

        Safe beside producers on other threads (see ``_late``) and a second ``close``
        (which waits for the first); True when everything was written in time. On the
        worker's own thread it only queues the stop and returns False (see below).
        """
        with self._lock:
            first, self.closed, self._check_at = not self.closed, True, 0
        if self.on_worker():
            # The cyclic collector freed a forgotten writer on its own worker thread, which may
            # hold _wake's lock right now (inside Event.wait): neither wake it nor wait for it.
            # It takes the stop marker when it goes on, within flush_secs.
            if first:
                self._q.append(Sync(threading.Event(), stop=True))
            return False
        if not first:
            return self._joined(self._wait(self._finished, timeout))
        with self._start_lock:  # from here on no producer starts a worker (``_start``)
            if self._q:  # queued, but the worker not started yet: start it to write them
                self._start(even_closed=True)
            started = self._thread is not None
        if not started:
            self._finished.set()
            return True
        return self._joined(self._sync(Sync(threading.Event(), stop=True), timeout))

    def _joined(self, done: bool) -> bool:
        """After a close that got everything written: wait for the worker and catch-up threads to
        end, so that a closed pipeline leaves no thread behind (``running`` is False)."""
        if done:
            me = threading.current_thread()
            for t in (self._thread, self._catcher):
                if t is not None and t is not me and t.ident is not None:
                    t.join(JOIN_SECONDS)
        return done

    @property
    def close_timeout(self) -> Optional[float]:
        """The most seconds ``close()`` waits by default: ``RemoteOptions.close_timeout`` for a
        URL log directory; None (until everything is written) for a local one."""
        return self._output.close_timeout

    def give_up(self, waited: float) -> OSError:
        """``close()`` waited ``waited`` seconds and the worker is still busy (a store that does
        not answer): stop the store's requests and return the error naming what is lost."""
        lost = self._worker.unwritten()
        self._output.abandon()
        with self._lock:
            self.abandoned = True
            self.dropped += sum(lost.values())
        what = ", ".join(f"{n} {'whole files or graphs' if k == 'files' else 'events of ' + k}"
                         for k, n in sorted(lost.items())) or "what the writer thread was writing"
        msg = (f"gluon_tb: the writer of {self._output.location} "
               f"was still writing {waited:g} s after close(): {what} not written and given up on")
        return self._output.given_up(msg, sum(lost.values()))

    def take_error(self) -> Optional[BaseException]:
        """The error the worker met (raised once: it is forgotten here), or None."""
        if self.error is None:  # the common case, without the lock (the worker may hold it)
            return None
        with self._lock:
            err, self.error = self.error, None
        return err

    def reopened(self) -> "Pipeline":
        """A new pipeline with this one's settings, for a writer reopened after ``close()``:
        new event files and a new worker; ``dropped_events`` counts on from this one's."""
        new = Pipeline(self._output.reopened(), flush_secs=self.flush_secs,
                       max_queue_bytes=self.max_queue_bytes, wake_items=self._wake_items,
                       on_full=self.on_full, nice=self.nice)
        new.dropped = new._worker.reported = self.dropped
        return new

    # ------------------------------------------------------------ what the worker reports (worker.Owner)
    def drained(self) -> None:
        with self._lock:
            if not self.closed:  # look again once this many queue
                self._check_at = self._first_check

    def freed(self, nbytes: int) -> None:
        with self._space:
            self._big_bytes -= nbytes
            self._space.notify_all()

    def failed(self, e: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = e
        log.debug("gluon_tb writer error: %r", e)

    def lost(self, n: int) -> None:
        with self._lock:
            self.dropped += n

    def resumed(self, run: Optional[str]) -> None:
        """``run`` appends to an earlier process's files on purpose: no warning about them (before
        anything of ``run`` is queued)."""
        self._output.resumed(run)

    # ------------------------------------------------------------ lifecycle
    def event_paths(self) -> Dict[Optional[str], List[str]]:
        return self._output.event_paths(self._worker.files)

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's queue, thread and files.

        The child's own later calls start a new worker and new event files
        (named with the child's pid), so parent and child never share a file.
        """
        for f in self._worker.files.values():
            try:
                f.discard()  # the parent writes these, not the child
            except OSError:
                pass
        self._reset_runtime(self._worker.reported)
        if self.closed:  # forked while the parent closed it (a SIGTERM handler, say): nothing is
            self._finished.set()  # left to write here, and a close at the child's exit waits for nothing


class DropPipeline(Pipeline):
    """A :class:`Pipeline` with ``on_full="drop"`` (made by ``Pipeline(..., on_full="drop")``)."""

    put_scalar = Pipeline._put_scalar_drop
