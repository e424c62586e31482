"""An :class:`~.output.Output` that keeps everything in memory: for tests.

A test hands it to the writer (``WriterBase._open_output``) or to a
:class:`~.pipeline.Pipeline`, makes it fail or stall (:meth:`MemoryOutput.fail`,
``delay``) as a full or slow disk would, and reads back exactly what the worker wrote:
each run's event files as the bytes a local file would hold (the ``file_version`` event
first), and whole files by path. It lives beside the real outputs, not in ``tests/``,
so that the type checker holds it to the same interface (the way httpx ships its
``MockTransport``).
"""
from __future__ import annotations

import io
import os
import threading
import time
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Union

from .._format import proto as _proto
from .._format.record import frame, frame_many, read_records
from .event_file import FILE_VERSION
from .output import Output


class MemoryEventFile:
    """One event file of a :class:`MemoryOutput`: its bytes in ``data``."""

    def __init__(self, output: "MemoryOutput", run: Optional[str]) -> None:
        self._output = output
        self.run = run
        self.path: Optional[str] = None
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        """Append whole framed records; a failure keeps none of them (as ``EventFile``)."""
        if not data:
            return
        self._output._writing()
        if not self.data:
            self.data += frame(_proto.event(time.time(), 0, file_version=FILE_VERSION))
            self.path = f"{self._output.location}/{self.run or '.'}/events.memory.{id(self)}"
        self.data += data

    def write_records(self, records: List[bytes]) -> None:
        """``write(frame_many(records))``."""
        self.write(frame_many(records))

    def sync(self) -> None:
        """Nothing to put on stable storage."""

    def due(self, now: float) -> bool:
        return False

    def upload(self) -> None:
        """Nothing to send: every write is kept at once."""

    def pending_records(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def discard(self) -> None:
        self.closed = True


class MemoryOutput:
    """Event files and whole files in memory (see the module docstring).

    Example::

        out = MemoryOutput()
        p = Pipeline(out)
        p.put_scalar((None, "loss", 0.5, 1, 0.0))
        p.close()
        out.records(None)  # [file_version event, loss event] as serialized Event protos
    """

    remote = False
    close_timeout: Optional[float] = None

    def __init__(self, logdir: str = "memory", delay: float = 0.0) -> None:
        self.logdir = self.location = logdir
        self.delay = delay  # seconds every write takes (a slow disk)
        self.event_files: Dict[Optional[str], List[MemoryEventFile]] = {}
        self.files: Dict[str, bytes] = {}
        self.writes = 0  # writes of event records or of whole files, failed ones too
        self._lock = threading.Lock()
        self._err_no: Optional[int] = None
        self._fail_after = 0

    # -- what a test controls and reads ------------------------------------------------
    def fail(self, err_no: int, after: int = 0) -> None:
        """Write number ``after + 1`` from now, and every later one, raise ``OSError(err_no)``
        and keep nothing, until :meth:`heal`."""
        with self._lock:
            self._err_no, self._fail_after = err_no, self.writes + after

    def heal(self) -> None:
        with self._lock:
            self._err_no = None

    def records(self, run: Optional[str] = None) -> List[bytes]:
        """The serialized ``Event`` protos of ``run``'s event files, file after file, read
        strictly (a torn record raises)."""
        out: List[bytes] = []
        for f in list(self.event_files.get(run, [])):
            out += read_records(io.BytesIO(bytes(f.data)), strict=True)
        return out

    def _writing(self) -> None:
        with self._lock:
            self.writes += 1
            failing = self._err_no is not None and self.writes > self._fail_after
            err_no = self._err_no
        if self.delay:
            time.sleep(self.delay)
        if failing and err_no is not None:
            raise OSError(err_no, os.strerror(err_no))

    # -- the Output interface ----------------------------------------------------------
    def make_logdir(self) -> None:
        """Nothing to make."""

    def event_file(self, run: Optional[str]) -> MemoryEventFile:
        f = MemoryEventFile(self, run)
        self.event_files.setdefault(run, []).append(f)
        return f

    def resumed(self, run: Optional[str]) -> None:
        """Nothing to do: only a local directory looks for other writers."""

    def write_files(self, files: Mapping[str, Union[bytes, memoryview]]) -> None:
        """All of ``files`` or, when a write fails, none of them."""
        staged = {}
        for rel, data in files.items():
            self._writing()
            staged[rel] = bytes(data)
        self.files.update(staged)

    def event_paths(self, files: Mapping[Optional[str], object]) -> Dict[Optional[str], List[str]]:
        raise NotImplementedError(f"reading event files back needs a local logdir, got {self.logdir!r}")

    def abandon(self) -> None:
        """Nothing to stop."""

    def given_up(self, message: str, lost: int) -> OSError:
        return TimeoutError(message)

    def reopened(self) -> "MemoryOutput":
        """This same output: a reopened writer's new event files are kept beside the first ones."""
        return self


if TYPE_CHECKING:  # the type checker holds it to the interface the worker uses
    def _is_an_output(o: MemoryOutput) -> Output:
        return o
