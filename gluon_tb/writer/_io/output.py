"""Where the worker's output goes: one interface, whatever the storage.

The worker (``worker.py``) writes each run's framed records to an event file and an
action's whole files (projector, profile) through the :class:`Output` it is handed; it
never asks which storage that is. Two implement it: a local directory
(``local_output.py``: one appended file per run, whole files renamed into place) and an
object store (``remote_output.py``: a run as a series of uploaded parts, whole files as
single objects). ``memory_output.py`` keeps everything in memory, for tests: a failing
or slow disk is an output object handed to the writer, not a patched ``os.write``.

:func:`open_output` is the one place that chooses, from the ``logdir`` a user gave.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Protocol, Union

from .._common.checks import is_remote
from .local_output import LocalOutput
from .logdir import local_path
from .remote_options import RemoteOptions
from .remote_output import RemoteOutput


class EventOutput(Protocol):
    """The event file of one run, as the worker sees it (``EventFile``, ``RemoteEventFile``)."""

    path: Optional[str]  # where its records are (a local path, the URL of the last part); None before any

    def write(self, data: bytes) -> None:
        """Append whole framed records; on error keep nothing torn and raise."""

    def write_records(self, records: List[bytes]) -> None:
        """Frame ``records`` and append them: ``write(frame_many(records))``."""

    def sync(self) -> None:
        """Put what was written on stable storage (``flush(fsync=True)``)."""

    def due(self, now: float) -> bool:
        """Something buffered should be sent now (``now``: ``time.monotonic()``)."""

    def upload(self) -> None:
        """Send what is buffered (a local file buffers nothing: it does nothing)."""

    def pending_records(self) -> int:
        """Records buffered and not yet sent (safe from another thread)."""

    def close(self) -> None:
        """Send what is buffered and let the file go."""

    def discard(self) -> None:
        """In a forked child: let go of the parent's file without writing anything."""


class Output(Protocol):
    """A log directory the worker writes to (see the module docstring).

    Example::

        out = open_output("logs/train")
        f = out.event_file(None)        # the run of the log directory itself
        f.write(frame_many(records))
        out.write_files({"projector_config.pbtxt": b"..."})
        f.close()
    """

    logdir: str  # the log directory as the writer was given it (a URL, or a path without file://)
    location: str  # how messages name it
    remote: bool  # an object store: flushed while Python's thread pools still run (lifecycle.py)

    @property
    def close_timeout(self) -> Optional[float]:
        """The most seconds ``close()`` waits by default; None: until everything is written."""

    def make_logdir(self) -> None:
        """Create the log directory now where the storage has directories (best effort)."""

    def event_file(self, run: Optional[str]) -> EventOutput:
        """A new event file for ``run`` (a relative run name; None: the log directory itself)."""

    def resumed(self, run: Optional[str]) -> None:
        """``run``'s writer appends to an earlier process's files on purpose (``purge_step``): its
        event files are opened without looking for other writers (a local directory's warning)."""

    def write_files(self, files: Mapping[str, Union[bytes, memoryview]]) -> None:
        """Write every ``{relpath: data}`` under the log directory: all of them, or none."""

    def event_paths(self, files: Mapping[Optional[str], EventOutput]) -> Dict[Optional[str], List[str]]:
        """``{run: local paths}`` of the event files ``files`` opened (in order), for reading them back."""

    def abandon(self) -> None:
        """``close()`` gave up waiting: make every later request fail at once."""

    def given_up(self, message: str, lost: int) -> OSError:
        """The error ``close()`` raises when it gave up waiting, ``lost`` events unwritten."""

    def reopened(self) -> "Output":
        """A new output with the same settings (a writer reopened after ``close()``)."""


def open_output(logdir: str, remote: Optional[RemoteOptions] = None, suffix: str = "",
                look_for_others: bool = False) -> Output:
    """The output for ``logdir``: an object store for a URL (tuned by ``remote``), else a
    local directory (``look_for_others``: warn when another writer appends to a run)."""
    if is_remote(logdir):
        return RemoteOutput(logdir, remote, suffix)
    return LocalOutput(local_path(logdir), suffix, look_for_others)
