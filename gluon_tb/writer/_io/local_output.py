"""A local log directory as the worker's :class:`~.output.Output`: event files appended, whole files renamed into place.

Each run's event file is an :class:`~.event_file.EventFile` (one ``os.write`` per drained
batch, a failed write cut back to the last whole record). Whole files are written under a
temporary name first, then renamed into place, so a reader never sees half a file. The
temporary file is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``): never through a
name that already exists, so a symlink planted at it cannot redirect the write outside the
log directory. A write that fails (ENOSPC, say) removes its temporary files and the
directories it made, so a full disk leaves no space taken by half-written files.
:meth:`LocalOutput.write_files` writes several files as one: all appear, or none (an
embedding step's tensors, labels, sprite and config).
"""
from __future__ import annotations

import os
import secrets
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple, Union

from .._common.checks import NAME_MAX
from .event_file import EventFile
from .logdir import make_logdir

try:  # the optional C kernel (POSIX): write_files in one release of the GIL
    from ._fastio import write_files as _fast_write_files
except ImportError:  # pragma: no cover - depends on the build
    _fast_write_files = None

Write = Callable[[int, Any], int]  # os.write's signature: (fd, bytes-like) -> bytes written
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


def _temporary_name(name: str) -> str:
    """The first-choice temporary name for a file named ``name``: ``<name>.tmp.<pid>.<thread id>``
    (two writers, one log directory), or ``.tmp.<pid>.<thread id>`` when that would leave no
    room in a file name for a random part."""
    tmp = f"{name}.tmp.{os.getpid()}.{threading.get_ident()}"
    return tmp if len(os.fsencode(tmp)) <= NAME_MAX - 17 else f".tmp.{os.getpid()}.{threading.get_ident()}"


def write_new_file(path: str, data: Union[bytes, memoryview], write: Write = os.write) -> str:
    """Write ``data`` to a new temporary file beside ``path`` and return its name.

    Its name is :func:`_temporary_name`'s; if that name exists (a leftover, or a planted
    symlink), the same with a random part added. On any error the temporary file is removed
    before the error is raised. ``write``: the ``os.write`` every byte goes through.
    """
    head, name = os.path.split(path)
    base = os.path.join(head, _temporary_name(name))
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
            view = view[write(fd, view):]
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


class LocalOutput:
    """The log directory ``logdir`` on a local file system (see the module docstring).

    ``look_for_others``: warn when another writer appends to one of its runs
    (``neighbours.py``). ``record_write`` is the ``os.write`` every event record goes
    through, ``file_write`` the one every byte of a whole file goes through: tests hand in
    ones that fail or stall, as a full or slow disk does.

    Example::

        out = LocalOutput("logs/train")
        out.event_file("validation").write(frame_many(records))
    """

    remote = False
    close_timeout: Optional[float] = None  # close() waits until everything is written

    def __init__(self, logdir: str, suffix: str = "", look_for_others: bool = False, *,
                 record_write: Write = os.write, file_write: Write = os.write) -> None:
        self.logdir = self.location = logdir
        self.suffix = suffix
        self.look_for_others = look_for_others
        self._resumed: Set[Optional[str]] = set()  # runs that append on purpose (resumed)
        self._record_write = record_write
        self._file_write = file_write

    def make_logdir(self) -> None:
        """Create the log directory now, as mxboard did (``logdir.make_logdir``)."""
        make_logdir(self.logdir)

    def event_file(self, run: Optional[str]) -> EventFile:
        return EventFile(self.logdir if run is None else os.path.join(self.logdir, run), self.suffix,
                         look_for_others=self.look_for_others and run not in self._resumed,
                         write=self._record_write)

    def resumed(self, run: Optional[str]) -> None:
        self._resumed.add(run)

    def event_paths(self, files: Mapping[Optional[str], Any]) -> Dict[Optional[str], List[str]]:
        return {run: list(f.paths) for run, f in list(files.items()) if f.paths}  # list(): beside the worker

    def abandon(self) -> None:
        """Nothing to stop: a local write does not wait on anyone."""

    def given_up(self, message: str, lost: int) -> OSError:
        return TimeoutError(message)

    def reopened(self) -> "LocalOutput":
        new = LocalOutput(self.logdir, self.suffix, self.look_for_others,
                          record_write=self._record_write, file_write=self._file_write)
        new._resumed = set(self._resumed)
        return new

    def write_files(self, files: Mapping[str, Union[bytes, memoryview]]) -> None:
        """Write every ``{relpath: data}`` under the log directory: all of them, or none.

        Each is written to a temporary file first; only when all are written are they
        renamed into place. On an error every temporary file, every file this call
        already renamed into place and every directory it made are removed, and the
        error is raised.

        With the C kernel (``_fastio.c``) and ``os.write``, all of it is done in one release
        of the GIL, walking each directory without following a symlink; where that walk
        meets a symlink or a leftover temporary file, it leaves nothing behind and the
        Python code below, which resolves symlinks, does it.
        """
        if _fast_write_files is not None and self._file_write is os.write and self._write_fast(files):
            return
        root = os.path.realpath(self.logdir)
        staged: List[Tuple[str, str]] = []  # (temporary name, final path)
        made: List[str] = []
        placed: List[str] = []
        real_dirs: Dict[str, str] = {}  # each directory resolved (and made) once: a projector
        # writes 2-4 files into one, and every lstat of realpath drops and re-takes the GIL
        try:
            for rel, data in files.items():
                head, name = os.path.split(os.path.normpath(rel))
                new_dir = head not in real_dirs
                real_dir = os.path.realpath(os.path.join(root, head)) if new_dir else real_dirs[head]
                path = os.path.join(real_dir, name)
                # the file's own name is not resolved: os.replace puts the file in place of a
                # symlink of that name, never through it
                if name in ("", os.curdir, os.pardir) or os.path.commonpath([root, path]) != root or path == root:
                    raise ValueError(f"refusing to write outside the log directory: {rel!r}")
                if new_dir:
                    made += _makedirs(real_dir)
                    real_dirs[head] = real_dir
                staged.append((write_new_file(path, data, self._file_write), path))
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

    def _write_fast(self, files: Mapping[str, Union[bytes, memoryview]]) -> bool:
        """``write_files`` by the C kernel; False: not done (nothing left behind)."""
        entries = []
        for rel, data in files.items():
            if os.path.isabs(rel):
                return False  # refused by the Python code
            head, name = os.path.split(os.path.normpath(rel))
            parts = tuple(os.fsencode(p) for p in head.split(os.sep) if p)
            entries.append((parts, os.fsencode(name), os.fsencode(_temporary_name(name)), data,
                            os.path.join(self.logdir, rel)))
        return bool(_fast_write_files(os.fsencode(self.logdir), entries))
