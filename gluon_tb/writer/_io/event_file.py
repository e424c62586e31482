"""One TensorBoard event file: its name, its first event, and raw appends.

The file is opened lazily (on the first write), so a run that logs nothing
leaves no empty event file behind. Every write is one ``os.write`` of whole
framed records straight to the OS: a process killed right after loses
nothing that was written, and a failed (for example ENOSPC) write is cut back
to the last whole record so the file never keeps a torn record in the middle.
"""
from __future__ import annotations

import errno
import itertools
import os
import socket
import threading
import time
from typing import Any, Callable, List, Optional

from .._format import proto as _proto
from .._format.record import frame, frame_append, frame_many
from . import neighbours as _neighbours

FILE_VERSION = "brain.Event:2"
_counter = itertools.count()
_counter_lock = threading.Lock()


def _new_lock_in_child() -> None:  # a thread of the parent may have held it at fork()
    global _counter_lock
    _counter_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


class EventFileDeletedError(OSError):
    """The event file being written was deleted by someone else."""


_NO_ROOM = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, n)}


def _named(e: OSError, path: str, lost: int, doing: str = "cannot write to") -> OSError:
    """``e`` again (same type and errno), its message naming the event file (or directory) and the
    records lost (``lost_records``; 0: none counted here)."""
    what = f" ({lost} event record{'s' if lost != 1 else ''} not written)" if lost else ""
    named = type(e)(e.errno, f"{doing} {path}: {e.strerror or e}{what}") if e.errno is not None \
        else type(e)(f"{doing} {path}: {e}{what}")
    if lost:
        named.lost_records = lost  # type: ignore[attr-defined]
    return named


def _hostname() -> str:
    host = socket.gethostname() or "localhost"
    return host.replace(os.sep, "_").replace("/", "_")


def next_number() -> int:
    """The process-wide counter of event files (the last part of their names)."""
    with _counter_lock:
        return next(_counter)


#: digits of the counter in an event file's name: TensorBoard reads a run's files in the order of
#: their names, so two files of one process made in the same second (a second ``fit`` right after
#: one that ended early) must sort by their counter (unpadded, ``.10`` sorted before ``.9``)
NUMBER_WIDTH = 8


def event_file_name(secs: int, n: int, suffix: str = "", width: int = NUMBER_WIDTH) -> str:
    """``events.out.tfevents.<10-digit secs>.<host>.<pid>.<n><suffix>``; ``n`` zero-padded to ``width``."""
    return (f"events.out.tfevents.{secs:010d}.{_hostname()}."
            f"{os.getpid()}.{n:0{width}d}{suffix}")


class EventFile:
    """Appends framed records to ``events.out.tfevents.<secs>.<host>.<pid>.<n><suffix>``.

    ``write``: the ``os.write`` every record goes through (tests hand in one that fails as a
    full disk does). A local file buffers nothing: ``due``, ``upload`` and
    ``pending_records`` are those of :class:`~.output.EventOutput` with nothing to send.

    Example::

        f = EventFile("logs/train")
        f.write(frame_many([...]))
        f.close()
    """

    def __init__(self, directory: str, filename_suffix: str = "", look_for_others: bool = False,
                 write: Callable[[int, Any], int] = os.write) -> None:
        self.directory = directory
        self.suffix = filename_suffix
        self.path: Optional[str] = None
        self.paths: List[str] = []  # every file this one opened, in order (a new one after a failure)
        self._fd: Optional[int] = None
        self._size = 0
        self._look = look_for_others  # warn when another writer appends here (neighbours.py)
        self._key: Optional[str] = None
        self._os_write = write

    # -- opening ---------------------------------------------------------------
    def _open(self) -> None:
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))  # never through an existing name or link
        try:
            os.makedirs(self.directory, exist_ok=True)
            while True:
                name = event_file_name(int(time.time()), next_number(), self.suffix)
                path = os.path.join(self.directory, name)
                try:
                    # 0o666 & ~umask: never more permissive than the process allows
                    fd = os.open(path, flags, 0o666)
                    break
                except FileExistsError:  # another process with our pid and counter: try the next
                    continue
        except OSError as e:  # read-only, vanished, not a directory: name the directory
            raise type(e)(e.errno, f"cannot create an event file in {self.directory}: "
                                   f"{e.strerror or e}", e.filename) from e
        self._fd, self.path, self._size = fd, path, 0
        try:
            self._write_all(frame(_proto.event(time.time(), 0, file_version=FILE_VERSION)))
        except OSError as e:  # ENOSPC, say: no file without its first event (TensorBoard would read
            self._fd, self.path = None, None  # it as an old-format file); the next write starts anew
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
            raise _named(e, self.directory, 0, "cannot start an event file in") from e
        self.paths.append(path)
        if self._key is None:
            self._key = _neighbours.opened(self.directory)
        if self._look:
            _neighbours.warn_if_shared(self.directory, self._key, _hostname())

    # -- writing ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Append ``data`` (whole framed records); on error cut back and raise.

        If the file was deleted while open (its directory removed by hand, say),
        a new file is started for ``data`` and :class:`EventFileDeletedError`
        is raised so the loss of what was in the old file is reported.
        """
        if not data:
            return
        lost = None
        if self._fd is None:
            self._open()
        elif os.fstat(self._fd).st_nlink == 0:
            lost = self.path
            self.close()
            try:
                self._open()
            except OSError as e:
                raise EventFileDeletedError(
                    e.errno, f"event file {lost} was deleted while in use and what it held is "
                             f"lost; {e.strerror}", e.filename) from e
        self._write_all(data)
        if lost is not None:
            raise EventFileDeletedError(
                f"event file {lost} was deleted while in use; what it held is lost, "
                f"logging goes on in {self.path}")

    def write_records(self, records: List[bytes]) -> None:
        """``write(frame_many(records))``. With the C kernel and ``os.write``, the framing, the
        check that the file was not deleted and the write happen in one release of the GIL
        (``frame_append``), not three: each time the worker takes the GIL back while the
        training thread runs Python, that thread is made to hand it over.

        A write the disk has no room for (ENOSPC, EDQUOT, EFBIG) is tried again one record at a
        time, so that what fits is kept; the error raised then names the file and counts the
        records lost (``lost_records``)."""
        if not records:
            return
        try:
            self._append(records)
        except EventFileDeletedError:
            raise
        except OSError as e:
            if self._fd is None:  # no file could be made: the error names its directory
                raise
            lost = len(records)
            if lost > 1 and e.errno in _NO_ROOM:
                lost = self._append_each(records)
                if not lost:  # the room was there one record at a time (freed meanwhile)
                    return
            raise _named(e, self.path or self.directory, lost) from e

    def _append(self, records: List[bytes]) -> None:
        if self._fd is not None and frame_append is not None and self._os_write is os.write:
            n = frame_append(self._fd, records, self._size)  # a failed write is cut back, and raised
            if n >= 0:
                self._size += n
                return
        self.write(frame_many(records))  # the first write, or the file was deleted: write() says

    def _append_each(self, records: List[bytes]) -> int:
        """Append the records one at a time, skipping any that does not fit; how many did not."""
        lost = 0
        for r in records:
            try:
                self._append([r])
            except OSError:
                lost += 1
        return lost

    def _write_all(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            raise ValueError("I/O operation on a closed event file")
        view = memoryview(data)
        start = self._size
        write = self._os_write
        try:
            while view:
                n = write(fd, view)
                view = view[n:]
        except OSError:
            try:  # drop the partial record so later appends stay readable
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise
        self._size = start + len(data)

    def sync(self) -> None:
        """Ask the OS to put the file on stable storage (``fsync``)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def due(self, now: float) -> bool:
        return False

    def upload(self) -> None:
        """Nothing to send: every write reached the OS."""

    def pending_records(self) -> int:
        return 0

    def discard(self) -> None:
        """In a forked child: close the child's copy of the file (the parent goes on with its own)."""
        self.close()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        key, self._key = self._key, None
        if key is not None:
            _neighbours.closed(key)
        if fd is not None:
            os.close(fd)
