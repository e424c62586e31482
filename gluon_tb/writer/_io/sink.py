"""What an action (an :class:`~.items.Action` item) sees of the worker: event records by run, and whole files.

Actions write what is not one ``Summary.Value``: the graph event, the projector's
files, a profile. They run on the worker thread, between two writes of the queued
events, so their events keep their place in the order of the queue.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional

from .remote import Store


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
        if self._store is not None:  # a whole object: atomic in an object store
            self._store.put_file(relpath, data)
            return
        root = os.path.realpath(self.logdir)
        path = os.path.realpath(os.path.join(root, relpath))
        if os.path.commonpath([root, path]) != root:
            raise ValueError(f"refusing to write outside the log directory: {relpath!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"  # two writers, one logdir
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
