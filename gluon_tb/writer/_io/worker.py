"""The worker side of the pipeline: drain the queue, build, frame and write.

One thread (started by :class:`~.pipeline.Pipeline`) wakes every ``flush_secs / 2``
or when enough has queued, takes everything queued in batches, turns scalars
into event records in one flat loop, runs the builders and actions of other
items (``items.py``), and writes each run's records, in one write, to the event file
that its :class:`~.output.Output` opened for the run (a local file: one ``os.write``; a
remote run: a buffered part). It and the catch-up thread (below), one at a time
under ``_drain_lock``, are the only threads that touch the event files, ``_pending``
and the projector state. It meets a flush marker (a
:class:`~.items.Sync`) by writing what came before and setting the marker's
event; a stop marker by writing what came before, closing the files and putting
back, untouched, whatever was queued after it (those came after ``close()`` and
their producers refuse them).

The worker runs at the process's priority, as every thread that takes the GIL must (under
``SCHED_BATCH``, so that waking it does not preempt MXNet's OpenMP threads); only its
C kernels (the histogram counting) run at ``nice`` 19, on a thread of their own that never
touches the GIL (``_common/threads.py`` has the measurements: a nice-19 writer thread holding
the GIL on a CPU that MXNet keeps busy stalled the training thread for up to a second).

When the worker ran at nice 19 and other work kept every core busy (DataLoader workers, a
second training), it got about 1% of a core and fell a minute behind: a kill lost that
minute. Its kernels can still fall behind that way, so a second thread, the **catch-up**
thread, keeps the promise that what was logged is on disk within ``flush_secs`` (plus the
time to write it). It wakes every ``flush_secs / 8`` and does nothing while the worker keeps up; when
something unwritten may have waited ``3/4 flush_secs`` (the worker itself writes every
``flush_secs / 2``), it asks the worker to step aside (``_yield``: the worker puts back
what it has not processed, at the front of the queue, at the next item) and drains the
queue itself, with its kernels at its own priority. One lock (``_drain_lock``) makes sure
one thread at a time touches the files, ``_pending`` and the projector state, in queue order.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Protocol

from .._common.arrays import Mean, host_float
from .._common.threads import niced_kernels
from .._format import proto as _proto
from .._format.chain import Chain
from .array_reads import prefetch
from .items import Action, ScalarItem, Summary
from .output import EventOutput, Output
from .sink import Sink

log = logging.getLogger("gluon_tb")

_BATCH = 2048  # most items the worker takes per round (then it looks whether to step aside)
#: woken by an item queued with put(wake=False) (a handler's histograms, which MXNet is still
#: copying), the worker waits this long first (at most flush_secs / 4), unless woken again
LAZY_DELAY = 0.1
DROPPED_TAG = "gluon_tb/dropped_events"
_prefixes: Dict[Optional[str], bytes] = {}  # tag -> constant part of its scalar events


class Owner(Protocol):
    """What the worker reports to the producer side (:class:`~.pipeline.Pipeline`), which
    owns the queue's bound, the drop count and the error kept for the producer's next call."""

    dropped: int  # refused and lost items, as ``gluon_tb/dropped_events`` reports them

    def drained(self) -> None:
        """The worker drained the queue (or stepped aside for the catch-up thread): producers
        look at the bound again from the first check on (``Pipeline._first_check``)."""

    def freed(self, nbytes: int) -> None:
        """The worker is done with ``nbytes`` of queued payloads: room for waiting producers."""

    def failed(self, e: BaseException) -> None:
        """Keep ``e`` (the first one) for the producer's next call."""

    def lost(self, n: int) -> None:
        """``n`` records could not be written: count them as dropped."""


def _timeout(seconds: float) -> float:
    """``seconds`` as a lock's timeout: a very long ``flush_secs`` (``float("inf")``: no time
    bound) waits as long as a lock can."""
    return min(seconds, threading.TIMEOUT_MAX)


class Worker:
    """Drains ``q`` into ``output`` on two threads (see the module docstring); ``owner`` is
    told what it drained, freed, met and lost.

    ``wake`` is set by producers when there is work, ``finished`` set here once nothing
    more is taken from the queue; ``reported``: the drops ``gluon_tb/dropped_events``
    already counts. :class:`~.pipeline.Pipeline` makes one and runs :meth:`run` and
    :meth:`catch_up` on threads of their own.
    """

    def __init__(self, q: Deque[Any], wake: threading.Event, finished: threading.Event,
                 output: Output, owner: Owner, flush_secs: float, nice: Optional[int],
                 reported: int, lazy: threading.Event) -> None:
        self._q = q
        self._wake = wake
        self._lazy = lazy  # set with ``wake`` by a put(wake=False): wait LAZY_DELAY before draining (run)
        self._finished = finished
        self._output = output
        self._owner = owner
        self.flush_secs = flush_secs
        self.nice = nice
        self.reported = reported
        self.files: Dict[Optional[str], EventOutput] = {}  # by run
        self._pending: Dict[Optional[str], List[bytes]] = {}  # event records by run, not yet framed and written
        self._drain_lock = threading.Lock()  # held by whichever of the two threads is writing
        self._yield = False  # the catch-up thread asks the worker to step aside
        self._in_flight = False  # a batch is taken from the queue and not yet written
        self._written_upto = time.monotonic()  # everything accepted before this is written
        self.caught_up = 0  # times the catch-up thread wrote in the worker's place

    def run(self) -> None:
        """The worker thread."""
        niced_kernels(self.nice)  # this thread holds the GIL: it stays at normal priority
        # (under SCHED_BATCH with a nice: set by Pipeline._start, so that it never runs otherwise)
        try:
            delay = min(LAZY_DELAY, self.flush_secs / 4)
            while True:
                self._wake.wait(_timeout(self.flush_secs / 2))
                self._wake.clear()
                if self._lazy.is_set() and not self._finished.is_set():  # woken for items MXNet may still
                    self._wake.wait(delay)  # be copying: give it time (a flush, close or other item cuts it short)
                self._lazy.clear()  # before draining: a lazy item queued meanwhile wakes us again
                with self._drain_lock:
                    if self._finished.is_set():  # the catch-up thread met the stop marker
                        return
                    if self._drain(yielding=True):
                        return
                    self._owner.drained()
                    self._upload(force=False)
        except BaseException as e:  # pragma: no cover - a bug in the worker itself
            self._fail(e)
            log.exception("gluon_tb writer thread died")
        finally:
            self._finished.set()

    def catch_up(self) -> None:
        """The catch-up thread (normal priority; see the module docstring)."""
        period = _timeout(self.flush_secs / 8)
        clear = time.monotonic()  # everything accepted before this is written
        try:
            while not self._finished.wait(period):
                now = time.monotonic()
                if not self._q and not self._in_flight:
                    clear = now  # nothing unwritten (read in this order: see _drain)
                    continue
                clear = max(clear, self._written_upto)
                if now - clear < 0.75 * self.flush_secs:
                    continue
                self._yield = True
                with self._drain_lock:
                    self._yield = False
                    if self._finished.is_set():
                        return
                    self.caught_up += 1
                    if self._drain(yielding=False):
                        return
        except BaseException as e:  # pragma: no cover - a bug in the writer itself
            self._fail(e)
            log.exception("gluon_tb writer catch-up thread died")

    def _drain(self, yielding: bool = False) -> bool:
        """Process everything queued; True when a stop marker was reached. Called with
        ``_drain_lock`` held. ``yielding``: stop early, leaving the rest queued in order,
        when the catch-up thread asks (``_yield``)."""
        q = self._q
        while q:
            if yielding and self._yield:
                return False
            self._in_flight = True
            items = []
            pop = q.popleft
            emptied = False
            try:
                for _ in range(_BATCH):
                    items.append(pop())
            except IndexError:
                emptied = True
            emptied_at = time.monotonic()
            freed = 0
            stop = None
            scalars: List[ScalarItem] = []
            for i, item in enumerate(items):
                kind = type(item)
                if kind is tuple:  # a scalar (see items.py)
                    scalars.append(item)
                    continue
                if yielding and self._yield:  # step aside: the rest goes back, in order;
                    q.extendleft(reversed(scalars + items[i:]))  # the catch-up thread writes
                    self._owner.freed(freed)  # what was built (_pending) with what follows
                    self._in_flight = False
                    return False
                if scalars:
                    self._scalars(scalars)
                    scalars = []
                if kind is Summary:
                    freed += item.nbytes
                    self._summary(item)
                elif kind is Action:
                    freed += item.nbytes
                    self._write_pending()
                    self._guard(item.fn, Sink(self._output, self._pending, item.run))
                elif not item.stop:  # a flush
                    self._write_pending()
                    self._upload(force=True)
                    if item.fsync:
                        self._guard(self._fsync_all)
                    item.done.set()
                else:  # the stop. What follows came after close(): it stays queued, refused by _late
                    q.extendleft(reversed(items[i + 1:]))
                    stop = item
                    break
            if scalars:
                self._scalars(scalars)
            self._write_pending()
            if emptied:  # everything accepted before the queue was seen empty is written
                self._written_upto = emptied_at
            self._in_flight = False
            if stop is not None:
                self._close_files()
                self._finished.set()
                stop.done.set()
                self._wake.set()  # the catch-up thread wrote it: the worker, asleep, ends now
            self._owner.freed(freed)
            if stop is not None:
                return True
        return False

    def _guard(self, fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        self._owner.failed(e)

    def _scalars(self, items: List[ScalarItem]) -> None:
        """Encode a run of queued scalars (the hot loop: kept flat on purpose)."""
        prefixes = _prefixes
        pending = self._pending
        scalar_event = _proto.scalar_event
        last_run: Any = 0  # no run seen yet (None is the root run)
        out: List[bytes] = []
        prefetched = False
        for run, tag, value, step, wall in items:
            if run is not last_run:
                out = pending.setdefault(run, [])
                last_run = run
            if type(value) is not float:
                if not prefetched and type(value) is Mean:  # the Means' arrays, in one release of the GIL
                    prefetched = True
                    try:
                        prefetch([v for _r, _t, v, _s, _w in items if type(v) is Mean])
                    except Exception:  # noqa: BLE001 - each Mean then reads its own, and says what fails
                        log.debug("gluon_tb: reading the queued arrays together failed", exc_info=True)
                try:
                    value = host_float(value)  # an NDArray waits on MXNet's engine here
                except Exception as e:
                    self._fail(e)
                    continue
                if tag is None:  # only to be read (added into a running Mean): no event
                    continue
            prefix = prefixes.get(tag)
            if prefix is None:
                if tag is None:  # a read-only item whose value was a float already
                    continue
                if len(prefixes) > 100_000:
                    prefixes.clear()
                try:
                    prefix = prefixes[tag] = _proto.scalar_prefix(tag)
                except Exception as e:  # a tag the producer's check let through: lose this one only
                    self._fail(e)
                    continue
            out.append(scalar_event(wall, step, prefix, value))

    def _summary(self, item: Summary) -> None:
        try:
            values = item.builder(item.tag, item.payload)
        except Exception as e:
            self._fail(e)
            return
        if isinstance(values, (bytes, Chain)):  # one value (a Chain: one value as pieces)
            values = [values]
        self._pending.setdefault(item.run, []).append(
            _proto.event(item.wall, item.step, summary=_proto.summary(values)))

    def _write_pending(self) -> None:
        n = self._owner.dropped  # read once: producers may count more meanwhile
        if n != self.reported:
            self.reported = n
            self._pending.setdefault(None, []).append(_proto.scalar_event(
                time.time(), n, _proto.scalar_prefix(DROPPED_TAG), float(n)))
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for run, records in pending.items():
            f = self.files.get(run)
            if f is None:
                f = self.files[run] = self._output.event_file(run)
            try:
                f.write_records(records)
            except Exception as e:
                self._lost(e, len(records))

    def _lost(self, e: BaseException, default: int) -> None:
        """Count the records a failed write or upload lost (``e.lost_records`` when it
        says, else ``default``) and keep the error for the producer. The count is not
        logged as ``dropped_events``: that write would fail the same way."""
        lost = getattr(e, "lost_records", default)
        self.reported += lost  # under _drain_lock, as every write of it
        self._owner.lost(lost)
        self._fail(e)

    def _upload(self, force: bool) -> None:
        """Send what the event files buffer and is due (all of it when ``force``): a remote
        run's parts; a local file buffers nothing."""
        now = time.monotonic()
        for f in self.files.values():
            if force or f.due(now):
                try:
                    f.upload()
                except Exception as e:
                    self._lost(e, 0)

    def _fsync_all(self) -> None:
        for f in self.files.values():
            f.sync()

    def unwritten(self) -> Dict[str, int]:
        """What is not written yet, read from another thread while the worker is stuck (a
        store that does not answer): ``{run URL or path: events}``, with the whole files
        (projector, profile) and graphs queued under ``"files"``. Counts what is queued,
        framed and, for a remote run, buffered for its next part."""
        out: Dict[str, int] = {}

        base = self._output.location

        def where(run: Optional[str]) -> str:
            return base if run is None else f"{base.rstrip('/')}/{run}"

        for item in list(self._q):
            kind = type(item)
            if kind is tuple:
                if item[1] is None:  # read, never written (_add_values without a tag)
                    continue
                key = where(item[0])
            elif kind is Summary:
                key = where(item.run)
            elif kind is Action:
                key = "files"
            else:
                continue
            out[key] = out.get(key, 0) + 1
        for run, records in list(self._pending.items()):
            out[where(run)] = out.get(where(run), 0) + len(records)
        for run, f in list(self.files.items()):
            n = f.pending_records()
            if n:
                out[where(run)] = out.get(where(run), 0) + n
        return out

    def _close_files(self) -> None:
        for f in self.files.values():
            try:
                f.close()
            except OSError as e:
                self._lost(e, 0)
