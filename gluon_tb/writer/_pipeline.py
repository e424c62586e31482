"""The background pipeline: a queue bounded in bytes, drained by one worker.

The training thread only appends small tuples to a deque (no lock, no
wake-up for scalars); the worker wakes every ``flush_secs`` or when enough has
queued, drains everything in one go, builds and frames the events and writes
each run's records with one ``os.write``. ``flush()`` puts a marker in the
queue and waits until the worker has written everything before it.

The worker runs at the lowest CPU priority (``nice`` 19, on Linux, where a nice value
belongs to one thread), so it takes the CPU that training leaves idle rather than
the cores of MXNet's OpenMP operators: in the MLP benchmark its histogram counting
cost the training loop 1.5 ms per histogram batch at normal priority and 0.4 ms at
nice 19 (nice 10 helped nothing; ``benchmarks/RESULTS.md``). It still gets a share of a
busy CPU, and whoever waits for it (``flush()``, a full queue) leaves it a core.

Errors of the worker (an OSError from a full disk, a builder that failed) are
kept and raised on the producer's next call, ``flush()`` or ``close()`` — once,
after which the writer carries on.

A URL as ``logdir`` (``s3://...``) writes to a :class:`~._storage.Store` instead:
:class:`~._storage.RemoteEventFile` parts, uploaded when due, on ``flush()`` and
on ``close()`` (see ``_storage`` for why parts).
"""
from __future__ import annotations

import collections
import logging
import os
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from . import _proto
from ._event_file import EventFile
from ._record import frame_many
from ._storage import RemoteEventFile, RemoteOptions, Store, flush_before_shutdown, is_remote
from ._storage import local_path

log = logging.getLogger("gluon_tb")

SCALAR, SUMMARY, ACTION, FLUSH, STOP = range(5)
SCALAR_COST = 176  # bytes one queued scalar costs: its tuple, float, int and deque slot (tracemalloc)
DEFAULT_MAX_QUEUE_BYTES = 64 << 20
DEFAULT_WORKER_NICE = 19
_BATCH = 16384  # most items the worker takes per round
DROPPED_TAG = "gluon_tb/dropped_events"
_prefixes: Dict[str, bytes] = {}  # tag -> constant part of its scalar events
_pack_head = struct.Struct("<Bd").pack


class WriterClosedError(RuntimeError):
    """Raised when a closed writer is used."""


def _scalar_of(value: Any) -> float:
    """Turn a queued scalar (float, numpy scalar, NDArray) into a float, on the worker."""
    if hasattr(value, "asscalar"):  # MXNet NDArray: waits on MXNet's engine, here, not in training
        return float(value.asnumpy().reshape(-1)[0])
    if hasattr(value, "reshape"):
        return float(value.reshape(-1)[0])
    return float(value)


class Sink:
    """What actions see of the worker: event records by run, and whole files."""

    def __init__(self, pipeline: "Pipeline") -> None:
        self._p = pipeline
        self.logdir = pipeline.logdir

    def write_event(self, event: bytes, run: Optional[str] = None) -> None:
        self._p._pending.setdefault(run, []).append(event)

    def write_file(self, relpath: str, data: bytes) -> None:
        """Write ``data`` to ``logdir/relpath`` atomically (temp file, then rename)."""
        store = self._p._store
        if store is not None:  # a whole object: atomic in an object store
            store.put_file(relpath, data)
            return
        root = os.path.realpath(self.logdir)
        path = os.path.realpath(os.path.join(root, relpath))
        if os.path.commonpath([root, path]) != root:
            raise ValueError(f"refusing to write outside the log directory: {relpath!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)


class Pipeline:
    """Queue + worker + one :class:`EventFile` per run directory.

    ``remote`` (a :class:`~._storage.RemoteOptions`) tunes how a URL ``logdir`` is
    written; it is ignored for a local one.
    """

    def __init__(self, logdir: str, *, flush_secs: float = 2.0, filename_suffix: str = "",
                 max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES, wake_items: int = 4096,
                 on_full: str = "block", remote: Optional[RemoteOptions] = None,
                 nice: Optional[int] = DEFAULT_WORKER_NICE) -> None:
        self._store: Optional[Store] = None
        if is_remote(logdir):
            self._store = Store(logdir, remote)
            flush_before_shutdown(self)
        else:
            logdir = local_path(logdir)
        self.logdir = logdir
        self.flush_secs = flush_secs
        self.suffix = filename_suffix
        self.max_queue_bytes = max_queue_bytes
        self.on_full = on_full
        self._wake_items = wake_items
        # scalars look at the bound every this many (at most 1/64 of it past it): a look costs
        # more than queueing the scalar itself
        self._check_every = max(1, min(256, max_queue_bytes // (SCALAR_COST * 64)))
        self.nice = nice
        self._files: Dict[Optional[str], EventFile] = {}
        self._pending: Dict[Optional[str], List[bytes]] = {}
        self.dropped = 0
        self._dropped_reported = 0
        self.closed = False
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self._q: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._space = threading.Condition(threading.Lock())
        self._big_bytes = 0
        self._check_at = 0  # queue length at which put_scalar next looks at the bound
        self._thread: Optional[threading.Thread] = None
        self._start_lock = threading.Lock()
        self.error: Optional[BaseException] = None

    # ------------------------------------------------------------ producer side
    def put_scalar(self, item: tuple) -> None:
        q = self._q
        q.append(item)
        if len(q) >= self._check_at:  # the first scalar, wake_items queued, or every few after
            self._check_at = max(len(q) + self._check_every, self._wake_items)
            self._make_room(0)

    def put(self, item: tuple, nbytes: int = 0) -> bool:
        """Queue a non-scalar item costing ``nbytes``; False when dropped (on_full='drop')."""
        if self._thread is None:
            self._start()
        if nbytes:
            if not self._make_room(nbytes):
                return False
            with self._space:
                self._big_bytes += nbytes
        self._q.append(item)
        self._wake.set()
        return True

    def _used(self) -> int:
        return len(self._q) * SCALAR_COST + self._big_bytes

    def _make_room(self, nbytes: int) -> bool:
        if self._thread is None:
            self._start()
            if not nbytes:
                return True  # first scalar: just start the worker, it wakes on its own
        wake = self._wake
        if not wake.is_set():  # setting an Event takes its lock: skip when already set
            wake.set()
        if self._used() + nbytes <= self.max_queue_bytes:
            return True
        if self.on_full == "drop":
            self.dropped += 1
            if nbytes == 0:  # the scalar is already queued: take one back out
                try:
                    self._q.pop()
                except IndexError:
                    pass
            return False
        with self._space:
            while (self._used() + nbytes > self.max_queue_bytes and self._used() > 0
                   and self._alive()):
                self._wake.set()
                self._space.wait(0.05)
        return True

    @property
    def started(self) -> bool:
        return self._thread is not None or bool(self._q)

    def _alive(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                t = threading.Thread(target=self._run, name="gluon_tb-writer", daemon=True)
                t.start()
                self._thread = t

    def sync(self, kind: int, timeout: Optional[float] = None, fsync: bool = False) -> bool:
        """Queue a FLUSH/STOP marker and wait until the worker reaches it."""
        done = threading.Event()
        if self._thread is None:
            self._start()
        self._q.append((kind, done, fsync))
        self._wake.set()
        while not done.wait(0.1):
            if not self._alive():
                return False
            if timeout is not None:
                timeout -= 0.1
                if timeout <= 0:
                    return False
        return True

    def take_error(self) -> Optional[BaseException]:
        err, self.error = self.error, None
        return err

    # ------------------------------------------------------------ worker side
    def _run(self) -> None:
        if self.nice:
            lower_thread_priority(self.nice)
        try:
            while True:
                self._wake.wait(self.flush_secs)
                self._wake.clear()
                if self._drain():
                    return
                self._check_at = self._wake_items  # drained: wake again once this many queue
                if self._store is not None:
                    self._upload(force=False)
        except BaseException as e:  # pragma: no cover - a bug in the worker itself
            self.error = e
            log.exception("gluon_tb writer thread died")

    def _drain(self) -> bool:
        """Process everything queued; True when a STOP marker was reached."""
        q = self._q
        while q:
            items = []
            pop = q.popleft
            try:
                for _ in range(_BATCH):
                    items.append(pop())
            except IndexError:
                pass
            freed = 0
            stop = False
            scalars: List[tuple] = []
            for item in items:
                kind = item[0]
                if kind == SCALAR:
                    scalars.append(item)
                    continue
                if scalars:
                    self._scalars(scalars)
                    scalars = []
                if kind == SUMMARY:
                    freed += item[7]
                    self._summary(item)
                elif kind == ACTION:
                    freed += item[2]
                    self._write_pending()
                    self._guard(item[1], Sink(self))
                elif kind == FLUSH:
                    self._write_pending()
                    if self._store is not None:
                        self._upload(force=True)
                    if item[2]:
                        self._guard(self._fsync_all)
                    item[1].set()
                else:  # STOP
                    self._write_pending()
                    self._close_files()
                    item[1].set()
                    stop = True
            if scalars:
                self._scalars(scalars)
            self._write_pending()
            with self._space:
                self._big_bytes -= freed
                self._space.notify_all()
            if stop:
                return True
        return False

    def _guard(self, fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
        log.debug("gluon_tb writer error: %r", e)

    def _scalars(self, items: List[tuple]) -> None:
        """Encode a run of queued scalars (the hot loop: kept flat on purpose)."""
        prefixes = _prefixes
        pending = self._pending
        pack_head, f32 = _pack_head, _proto.f32
        last_run, out = 0, None  # 0: no run seen yet (None is the root run)
        for _, run, tag, value, step, wall in items:
            if run is not last_run:
                out = pending.setdefault(run, [])
                last_run = run
            if type(value) is not float:
                try:
                    value = _scalar_of(value)
                except Exception as e:
                    self._fail(e)
                    continue
            prefix = prefixes.get(tag)
            if prefix is None:
                if len(prefixes) > 100_000:
                    prefixes.clear()
                prefix = prefixes[tag] = _proto.scalar_prefix(tag)
            if 0 < step < 0x80:  # Event.step as a varint, the common sizes inline
                sf = bytes((0x10, step))
            elif 0x80 <= step < 0x4000:
                sf = bytes((0x10, (step & 0x7F) | 0x80, step >> 7))
            elif 0x4000 <= step < 0x200000:
                sf = bytes((0x10, (step & 0x7F) | 0x80, ((step >> 7) & 0x7F) | 0x80, step >> 14))
            else:
                sf = _proto.step_field(step)
            out.append(pack_head(0x09, wall) + sf + prefix + f32(value))  # type: ignore[union-attr]

    def _summary(self, item: tuple) -> None:
        _, run, tag, builder, payload, step, wall, _n = item
        try:
            values = builder(tag, payload)
        except Exception as e:
            self._fail(e)
            return
        if isinstance(values, bytes):
            values = [values]
        self._pending.setdefault(run, []).append(
            _proto.event(wall, step, summary=_proto.summary(values)))

    def _write_pending(self) -> None:
        if self.dropped != self._dropped_reported:
            self._dropped_reported = self.dropped
            self._pending.setdefault(None, []).append(_proto.scalar_event(
                time.time(), self.dropped, _proto.scalar_prefix(DROPPED_TAG), float(self.dropped)))
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for run, records in pending.items():
            f = self._files.get(run)
            if f is None:
                f = self._files[run] = self._new_file(run)
            try:
                f.write(frame_many(records))
            except Exception as e:
                self._lost(e, len(records))

    def _lost(self, e: BaseException, default: int) -> None:
        """Count the records a failed write or upload lost (``e.lost_records`` when it
        says, else ``default``) and keep the error for the producer. The count is not
        logged as ``dropped_events``: that write would fail the same way."""
        self.dropped += getattr(e, "lost_records", default)
        self._dropped_reported = self.dropped
        self._fail(e)

    def _new_file(self, run: Optional[str]) -> Any:
        if self._store is not None:
            return RemoteEventFile(self._store, run, self.suffix)
        return EventFile(self.logdir if run is None else os.path.join(self.logdir, run), self.suffix)

    def _upload(self, force: bool) -> None:
        """Remote runs: upload the parts that are due (all of them when ``force``)."""
        now = time.monotonic()
        for f in self._files.values():
            if force or f.due(now):
                try:
                    f.upload()
                except Exception as e:
                    self._lost(e, 0)

    def _fsync_all(self) -> None:
        for f in self._files.values():
            f.sync()

    def _close_files(self) -> None:
        for f in self._files.values():
            try:
                f.close()
            except OSError as e:
                self._lost(e, 0)

    # ------------------------------------------------------------ lifecycle
    def event_paths(self) -> Dict[Optional[str], str]:
        if self._store is not None:
            raise NotImplementedError(f"reading event files back needs a local logdir, "
                                      f"got {self.logdir!r}")
        return {run: f.path for run, f in self._files.items() if f.path}

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's queue, thread and files.

        The child's own later calls start a new worker and new event files
        (named with the child's pid), so parent and child never share a file.
        """
        for f in self._files.values():
            try:
                if isinstance(f, RemoteEventFile):
                    f.discard()  # the parent uploads these, not the child
                else:
                    f.close()
            except OSError:
                pass
        self._files = {}
        self._pending = {}
        self._reset_runtime()


def lower_thread_priority(nice: int) -> bool:
    """Raise the calling thread's nice value to ``nice`` (never lower it); True if done.

    Linux only: there a nice value is a thread's own (``setpriority(PRIO_PROCESS, 0)``
    means the calling thread); elsewhere the same call would slow the whole process.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        return True
    except (AttributeError, OSError):  # a sandbox that forbids it: normal priority then
        return False
