"""Other writers of a run directory: two trainings logging into one run draw their curves over
each other (each appends its own points at the same steps) with no word, so say it.

When an :class:`~.event_file.EventFile` creates its file, it looks for another writer
appending to the same directory: an event file open in this process (by another
``SummaryWriter``: :func:`opened`/:func:`closed` keep count), or an event file named after
a live process of this host (``events.out.tfevents.<secs>.<host>.<pid>.<n>``: the process
``pid`` exists, by ``os.kill(pid, 0)``, and the file was written in the last
:data:`RECENT_SECS`). One ``RuntimeWarning`` per run directory and process. A writer that
resumes a run (``purge_step``, which the handlers pass when they detect a resume) does not
look: the run's earlier writer is expected there. Nor are this process's ``multiprocessing``
parent and children counted: a worker writing with its parent's writer is the documented use of
a writer after fork. Event files of other hosts are not judged (their pid says nothing here).
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time
import warnings
from typing import Dict, Optional, Set

RECENT_SECS = 300.0  # an event file written this recently by a live process is being appended to

_open: Dict[str, int] = {}  # real path of a directory -> event files this process has open in it
_warned: Set[str] = set()
_lock = threading.Lock()


def _key(directory: str) -> str:
    return os.path.realpath(directory)


def opened(directory: str) -> str:
    """Count an event file of this process opened in ``directory``; the key for :func:`closed`."""
    key = _key(directory)
    with _lock:
        _open[key] = _open.get(key, 0) + 1
    return key


def closed(key: str) -> None:
    with _lock:
        n = _open.get(key, 0) - 1
        if n > 0:
            _open[key] = n
        else:
            _open.pop(key, None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return False
    return True


def _multiprocessing_family() -> Set[int]:
    """This process's ``multiprocessing`` parent and live children: a worker writing into its
    parent's run (a writer used after fork, as documented) is not a second training. A process
    started otherwise (``subprocess``, a shell) is counted."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return set()
    try:
        parent = mp.parent_process()
        # its children as multiprocessing lists them, read without active_children()'s reaping
        # (this runs on the writer thread; the caller's threads may be joining them)
        pids = {p.pid for p in list(getattr(mp.process, "_children", ())) if p.pid is not None}
        if parent is not None and parent.pid is not None:
            pids.add(parent.pid)
        return pids
    except Exception:  # noqa: BLE001 - no exemption, the check goes on
        return set()


def other_writer(directory: str, key: str, host: str) -> Optional[str]:
    """A sentence naming another writer appending to ``directory`` (this process's event file,
    counted under ``key``, aside), or None."""
    with _lock:
        if _open.get(key, 0) > 1:
            return "another SummaryWriter of this process has an event file open there"
    name = re.compile(r"events\.out\.tfevents\.\d+\." + re.escape(host) + r"\.(\d+)\.\d+")
    me, now = os.getpid(), time.time()
    family = _multiprocessing_family()
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for n in names:
        m = name.match(n)
        if m is None or int(m.group(1)) == me or int(m.group(1)) in family:
            continue
        pid = int(m.group(1))
        try:
            age = now - os.stat(os.path.join(directory, n)).st_mtime
        except OSError:
            continue
        if age <= RECENT_SECS and _alive(pid):
            return f"process {pid} is appending to {n} (written {max(age, 0):.0f} s ago)"
    return None


def warn_if_shared(directory: str, key: str, host: str) -> None:
    """Warn once per directory and process when another writer appends to ``directory``."""
    with _lock:
        if key in _warned:
            return
    who = other_writer(directory, key, host)
    if who is None:
        return
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(f"gluon_tb: two writers are logging into the run directory {directory}: {who}. "
                  f"Their curves are drawn over each other. Give each training its own log "
                  f"directory (a resumed training passes purge_step, as the handlers do when "
                  f"they detect a resume, and is not warned about)", RuntimeWarning, stacklevel=2)


def forget_in_child() -> None:
    """After fork: the parent's open files are not the child's."""
    global _lock
    _lock = threading.Lock()
    _open.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=forget_in_child)
