"""Remote log directories: any fsspec URL (``s3://``, ``gs://``, ``memory://``...) as ``logdir``.

Object stores cannot append, and rewriting a growing event file on every flush
sends O(n²) bytes. So a remote run is written as a sequence of **parts**: each
part is a new, complete event file object (its own ``file_version`` event
first) holding the records logged since the previous part, and no object is
ever written twice. Bytes sent = bytes logged + one small header (~30 bytes)
per part: linear.

A part is uploaded when the records buffered for it reach ``part_bytes``, when
the oldest of them is ``part_secs`` old, on ``flush()`` and on ``close()``.
Part names sort in write order (TensorBoard reads a run's files in name
order): ``events.out.tfevents.<10-digit secs>.<host>.<pid>.<8-digit n>`` with
the seconds never going back within a run and ``n`` the process's increasing
counter. The trade-off is objects against latency: a small ``part_secs``
shows data sooner but makes more objects to list (30 s: 120 per run per hour).
Multipart uploads were not chosen: an S3 multipart object is invisible until
completed and its parts must be >= 5 MiB, so TensorBoard would see nothing
live.

Every request carries a deadline (``RemoteOptions.timeout``, for fsspec's asynchronous
file systems), and ``close()`` waits at most ``close_timeout`` for the uploads: a store
that accepts connections and never answers holds neither the writer thread nor the
caller longer than that. A store whose writer gave up (:meth:`Store.abandon`) fails
every later request at once.

A failed upload is retried a bounded number of times, then reported as
:class:`RemoteWriteError` at the next call, ``flush()`` or ``close()``; the
records stay in memory for a later attempt (every ``part_secs``) up to
``max_buffer_bytes``, past which they are dropped and counted.

fsspec (and the backend of the URL's protocol, ``s3fs`` for ``s3://``) is
imported only when a URL is used. Credentials and endpoints come from
``storage_options`` or fsspec's own configuration (``fsspec.config.conf``,
``FSSPEC_S3_*`` environment variables).
"""
from __future__ import annotations

import os
import posixpath
import struct
import time
from typing import Any, Callable, List, Mapping, Optional

from .._format import proto as _proto
from .._format.record import frame, frame_many
from .event_file import FILE_VERSION, event_file_name, next_number
from .._common.checks import URL
from .remote_options import RemoteOptions

_PERMANENT = (PermissionError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
              ValueError, TypeError)
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"}
_len_at = struct.Struct("<Q").unpack_from


class RemoteWriteError(OSError):
    """Writing to a remote log directory failed (after bounded retries).

    ``lost_records`` counts the event records that were given up on.
    """

    def __init__(self, message: str, lost_records: int = 0) -> None:
        super().__init__(message)
        self.lost_records = lost_records


def _url_to_fs(url: str, storage_options: Mapping[str, Any]) -> Any:
    try:
        import fsspec.core
    except ImportError as e:
        raise ImportError(f"logdir {url!r} is a URL, which needs fsspec: pip install fsspec "
                          "(from gluon_tb's checkout: pip install '.[remote]')") from e
    protocol = URL.match(url).group(1)  # type: ignore[union-attr]
    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except ImportError as e:
        hint = "pip install s3fs (from gluon_tb's checkout: pip install '.[s3]')" if protocol in ("s3", "s3a") \
            else "install the fsspec implementation its error names"
        raise ImportError(f"logdir {url!r} needs fsspec's backend for {protocol}:// ({e}); {hint}") from e
    except ValueError as e:
        raise ValueError(f"logdir {url!r}: fsspec cannot open it ({e})") from e


class Store:
    """A remote log directory: whole objects written with bounded retries.

    Example::

        s = Store("memory://logs/run")
        s.put(s.join("train", "x.tsv"), b"...")
    """

    def __init__(self, url: str, options: Optional[RemoteOptions] = None) -> None:
        self.url = url.rstrip("/")
        self.options = options or RemoteOptions()
        fs, root = _url_to_fs(self.url, self.options.storage_options)
        self._fs, self._pid = fs, os.getpid()
        self.root = root.rstrip("/")
        self.protocol = URL.match(url).group(1).lower()  # type: ignore[union-attr]
        self._dirs: set = set()
        self.abandoned = False  # close() gave up waiting: fail every request from now on

    def abandon(self) -> None:
        """Give up on the store: every later request fails at once (the writer closed without it)."""
        self.abandoned = True

    def _call(self, method: str, path: str, *args: Any) -> Any:
        """``fs.<method>(path, *args)`` with a deadline where fsspec takes one (async file systems)."""
        fs = self.fs
        fn = getattr(fs, method)
        if getattr(fs, "async_impl", False):
            return fn(path, *args, timeout=self.options.timeout)
        return fn(path, *args)

    @property
    def fs(self) -> Any:
        if self._pid != os.getpid():  # forked child: a fresh client (fsspec's are not fork-safe)
            self._fs, _ = _url_to_fs(self.url, self.options.storage_options)
            self._pid = os.getpid()
        return self._fs

    def join(self, *parts: Optional[str]) -> str:
        return posixpath.join(self.root, *[p for p in parts if p])

    def url_of(self, path: str) -> str:
        return self.fs.unstrip_protocol(path)

    def _retrying(self, what: str, path: str, fn: Callable[..., Any], *args: Any) -> Any:
        o = self.options
        for attempt in range(o.retries):
            if self.abandoned:
                raise RemoteWriteError(f"could not {what} {self.url_of(path)}: the writer was closed "
                                       f"after waiting {o.close_timeout:g} s for the store")
            try:
                return fn(path, *args)
            except _PERMANENT as e:
                raise RemoteWriteError(f"could not {what} {self.url_of(path)}: "
                                       f"{type(e).__name__}: {e}") from e
            except Exception as e:
                if attempt + 1 == o.retries:
                    raise RemoteWriteError(
                        f"could not {what} {self.url_of(path)} after {o.retries} attempts: "
                        f"{type(e).__name__}: {e or f'no answer within timeout={o.timeout} s'}") from e
                time.sleep(o.retry_wait * 2 ** attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def exists(self, path: str) -> bool:
        return bool(self._retrying("check", path, lambda p: self._call("exists", p)))

    def put(self, path: str, data: bytes) -> None:
        """Write the whole object ``path`` (an object store replaces it atomically)."""
        parent = posixpath.dirname(path)
        if self.protocol not in _OBJECT_STORES and parent not in self._dirs:
            self._retrying("create", parent, lambda p: self.fs.makedirs(p, exist_ok=True))  # local-like
            self._dirs.add(parent)
        self._retrying("write", path, lambda p: self._call("pipe_file", p, data))

    def put_file(self, relpath: str, data: bytes) -> None:
        """Write ``data`` to ``<logdir>/<relpath>``, refusing paths that leave the log directory."""
        rel = posixpath.normpath(relpath.replace("\\", "/"))
        if rel.startswith("/") or rel == ".." or rel.startswith("../") or rel == ".":
            raise ValueError(f"refusing to write outside the log directory: {relpath!r}")
        self.put(self.join(rel), data)


def _count_records(chunks: List[bytes]) -> int:
    n = 0
    for buf in chunks:
        i, end = 0, len(buf)
        while i + 12 <= end:
            i += 16 + _len_at(buf, i)[0]
            n += 1
    return n


class RemoteEventFile:
    """The event file of one run in a :class:`Store`, written as a series of parts.

    The same interface as :class:`~.event_file.EventFile` (``write``,
    ``sync``, ``close``, ``path``), plus ``due(now)`` and ``upload()`` for the
    worker's timer, and ``discard()`` for a forked child.
    """

    def __init__(self, store: Store, directory: Optional[str] = None, suffix: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.directory = store.join(directory)
        self.suffix = suffix
        self.options = store.options
        self.path: Optional[str] = None  # URL of the last part written
        self.parts = 0
        self._clock = clock
        self._chunks: List[bytes] = []
        self._nbytes = 0
        self._since = 0.0
        self._retry_at = 0.0
        self._secs = 0

    @property
    def pending_bytes(self) -> int:
        return self._nbytes

    def pending_records(self) -> int:
        """Records buffered and not yet uploaded (safe to call from another thread)."""
        return _count_records(list(self._chunks))

    def write_records(self, records: List[bytes]) -> None:
        """``write(frame_many(records))``."""
        self.write(frame_many(records))

    def write(self, data: bytes) -> None:
        """Buffer ``data`` (whole framed records); upload a part when ``part_bytes`` are buffered."""
        if not data:
            return
        if not self._chunks:
            self._since = self._clock()
        self._chunks.append(bytes(data))
        self._nbytes += len(data)
        if self._nbytes >= self.options.part_bytes and (
                self._clock() >= self._retry_at or self._nbytes > self.options.max_buffer_bytes):
            self.upload()

    def due(self, now: float) -> bool:
        return (bool(self._chunks) and now >= self._retry_at
                and now - self._since >= self.options.part_secs)

    def upload(self, final: bool = False) -> None:
        """Write what is buffered as one new part; on failure keep it (bounded) and raise."""
        if not self._chunks:
            return
        data = b"".join(self._chunks)
        self._chunks = [data]
        secs = max(int(time.time()), self._secs)  # names never sort before an earlier part
        head = frame(_proto.event(time.time(), 0, file_version=FILE_VERSION))
        try:
            for _ in range(100):  # never overwrite (the same host, pid and counter elsewhere)
                path = posixpath.join(self.directory, event_file_name(secs, next_number(), self.suffix))
                if not self.store.exists(path):
                    break
            else:
                raise RemoteWriteError(f"no free event file name in {self.store.url_of(self.directory)}")
            self.store.put(path, head + data)
        except RemoteWriteError as e:
            if final or self._nbytes > self.options.max_buffer_bytes:
                lost = _count_records(self._chunks)
                self._drop()
                raise RemoteWriteError(f"{e}; {lost} events could not be written and are lost",
                                       lost) from e.__cause__
            self._retry_at = self._clock() + self.options.part_secs
            raise RemoteWriteError(f"{e}; the events are kept in memory and retried in "
                                   f"{self.options.part_secs:g} s") from e.__cause__
        self._secs = secs
        self.path = self.store.url_of(path)
        self.parts += 1
        self._drop()

    def _drop(self) -> None:
        self._chunks, self._nbytes, self._retry_at = [], 0, 0.0

    def sync(self) -> None:
        """Upload now what is buffered (``flush(fsync=True)``)."""
        self.upload()

    def close(self) -> None:
        self.upload(final=True)

    def discard(self) -> None:
        """Forget what is buffered without writing it (a forked child holds the parent's copy)."""
        self._drop()
