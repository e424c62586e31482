"""What an action (an :class:`~.items.Action` item) sees of the worker: event records by run, and whole files.

Actions write what is not one ``Summary.Value``: the graph event, the projector's
files, a profile. They run on the worker thread, between two writes of the queued
events, so their events keep their place in the order of the queue.

Whole files are written under a temporary name first, then renamed into place, so a
reader never sees half a file. The temporary file is created exclusively
(``O_CREAT | O_EXCL | O_NOFOLLOW``): never through a name that already exists, so a
symlink planted at it cannot redirect the write outside the log directory. A write that
fails (ENOSPC, say) removes its temporary files and the directories it made, so a full
disk leaves no space taken by half-written files. :meth:`Sink.write_files` writes several
files as one: all appear, or none (an embedding step's tensors, labels, sprite and config).
"""
from __future__ import annotations

import os
import secrets
import threading
from typing import Dict, List, Mapping, Optional, Tuple

from .._common.checks import NAME_MAX
from .remote import Store

_os_write = os.write  # every byte of a whole file goes through here (tests inject faults)
NEW_FILE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                  | getattr(os, "O_CLOEXEC", 0))
NEW_FILE_MODE = 0o644


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _makedirs(directory: str) -> List[str]:
    """``os.makedirs(directory, exist_ok=True)``; returns the directories it created, deepest last."""
    missing: List[str] = []
    d = directory
    while d and not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    os.makedirs(directory, exist_ok=True)
    return missing[::-1]


def write_new_file(path: str, data: bytes) -> str:
    """Write ``data`` to a new temporary file beside ``path`` and return its name.

    Its name is ``<path>.tmp.<pid>.<thread id>`` (two writers, one log directory), or
    ``.tmp.<pid>.<thread id>`` beside it when that would not fit in a file name; if that name
    exists (a leftover, or a planted symlink), the same with a random part added.
    On any error the temporary file is removed before the error is raised.
    """
    base = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    if len(os.fsencode(os.path.basename(base))) > NAME_MAX - 17:  # no room for the random part
        base = os.path.join(os.path.dirname(path), f".tmp.{os.getpid()}.{threading.get_ident()}")
    tmp = base
    for _ in range(100):
        try:
            fd = os.open(tmp, NEW_FILE_FLAGS, NEW_FILE_MODE)
            break
        except FileExistsError:
            tmp = f"{base}.{secrets.token_hex(8)}"
    else:  # pragma: no cover - 100 random names all taken
        raise FileExistsError(f"cannot create a temporary file beside {path}")
    try:
        view = memoryview(data)
        while view:
            view = view[_os_write(fd, view):]
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    try:
        os.close(fd)
    except OSError:
        _unlink_quietly(tmp)
        raise
    return tmp


class Sink:
    """Event records go to ``pending`` (the worker's records by run, written after the
    action); files to ``logdir`` or, for a URL, to ``store``."""

    def __init__(self, logdir: str, store: Optional[Store] = None,
                 pending: Optional[Dict[Optional[str], List[bytes]]] = None) -> None:
        self.logdir = logdir
        self._store = store
        self._pending: Dict[Optional[str], List[bytes]] = {} if pending is None else pending

    def write_event(self, event: bytes, run: Optional[str] = None) -> None:
        self._pending.setdefault(run, []).append(event)

    def write_file(self, relpath: str, data: bytes) -> None:
        """Write ``data`` to ``logdir/relpath`` atomically (temp file, then rename)."""
        self.write_files({relpath: data})

    def write_files(self, files: Mapping[str, bytes]) -> None:
        """Write every ``{relpath: data}`` under the log directory: all of them, or none.

        Each is written to a temporary file first; only when all are written are they
        renamed into place. On an error every temporary file, every file this call
        already renamed into place and every directory it made are removed, and the
        error is raised. In an object store (a URL ``logdir``) each file is one put.
        """
        if self._store is not None:  # a whole object: atomic in an object store
            for rel, data in files.items():
                self._store.put_file(rel, data)
            return
        root = os.path.realpath(self.logdir)
        staged: List[Tuple[str, str]] = []  # (temporary name, final path)
        made: List[str] = []
        placed: List[str] = []
        try:
            for rel, data in files.items():
                path = os.path.realpath(os.path.join(root, rel))
                if os.path.commonpath([root, path]) != root:
                    raise ValueError(f"refusing to write outside the log directory: {rel!r}")
                made += _makedirs(os.path.dirname(path))
                staged.append((write_new_file(path, data), path))
            for tmp, path in staged:
                os.replace(tmp, path)
                placed.append(path)
        except BaseException:
            for tmp, path in staged:
                _unlink_quietly(path if path in placed else tmp)
            for d in reversed(made):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            raise
