"""A URL log directory as the worker's :class:`~.output.Output`: a :class:`~.remote.Store`.

Each run's event file is a :class:`~.remote.RemoteEventFile` (parts uploaded when due, on
``flush()`` and on ``close()``; ``remote.py`` says why parts); a whole file is one object,
which an object store replaces atomically.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

from .remote import RemoteEventFile, RemoteWriteError, Store
from .remote_options import RemoteOptions


class RemoteOutput:
    """The log directory at the fsspec URL ``logdir`` (``s3://...``), tuned by ``options``.

    Example::

        out = RemoteOutput("memory://logs/train")
        out.event_file(None).write(frame_many(records))  # buffered; uploaded as a part when due
    """

    remote = True

    def __init__(self, logdir: str, options: Optional[RemoteOptions] = None, suffix: str = "") -> None:
        self.store = Store(logdir, options)
        self.logdir = logdir
        self.location = self.store.url
        self.suffix = suffix

    @property
    def close_timeout(self) -> Optional[float]:
        """``RemoteOptions.close_timeout``: a store that never answers holds close() no longer."""
        return self.store.options.close_timeout

    def make_logdir(self) -> None:
        """Nothing to make: an object store has no directories."""

    def event_file(self, run: Optional[str]) -> RemoteEventFile:
        return RemoteEventFile(self.store, run, self.suffix)

    def resumed(self, run: Optional[str]) -> None:
        """Nothing to do: only a local directory looks for other writers."""

    def write_files(self, files: Mapping[str, Union[bytes, memoryview]]) -> None:
        """Each file one put (a whole object: atomic in an object store). A view (an embedding's
        float32 values) is copied to bytes, which every file system's ``pipe_file`` takes."""
        for rel, data in files.items():
            self.store.put_file(rel, data if isinstance(data, bytes) else bytes(data))

    def event_paths(self, files: Mapping[Optional[str], Any]) -> Dict[Optional[str], List[str]]:
        raise NotImplementedError(f"reading event files back needs a local logdir, got {self.logdir!r}")

    def abandon(self) -> None:
        self.store.abandon()

    def given_up(self, message: str, lost: int) -> OSError:
        return RemoteWriteError(message, lost)

    def reopened(self) -> "RemoteOutput":
        return RemoteOutput(self.logdir, self.store.options, self.suffix)
