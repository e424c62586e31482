"""What the queue carries from the producers to the worker, and what each item costs it.

A **scalar** is a plain tuple ``(run, tag, value, step, wall)``; every other item is
one of the named tuples below, and the worker tells them apart by their type (a plain
``tuple`` is a scalar). Scalars stay plain because they are the hot path: building a
named tuple calls its ``__new__``, a Python function, and that call alone made
``add_scalar`` much slower when measured (figures in ``benchmarks/RESULTS-notes.md``);
a tuple literal is built inline. The one place that unpacks a scalar by its field
names is the worker's ``_scalars``.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Tuple

import numpy as np

if TYPE_CHECKING:
    from .sink import Sink

# (run, tag, value, step, wall): ``run`` None for the writer's own directory; ``tag`` None: read, not
# written (a handler's loss added into a running Mean); ``value`` a
# float, or what the worker reads with ``host_float`` (an NDArray, a one-element array)
ScalarItem = Tuple[Optional[str], Optional[str], Any, int, float]


class Summary(NamedTuple):
    """``builder(tag, payload)`` run by the worker, its ``Summary.Value`` bytes written as one event."""

    run: Optional[str]
    tag: str
    builder: Callable[[str, Any], Any]
    payload: Any
    step: int
    wall: float
    nbytes: int  # what it counts against the queue's bound until the worker is done with it


class Action(NamedTuple):
    """``fn(sink)`` run by the worker (whole files, graph events: see ``sink.py``), its events and
    files in ``run`` (None: the log directory itself)."""

    fn: Callable[["Sink"], object]
    nbytes: int
    run: Optional[str] = None


class Sync(NamedTuple):
    """A marker: the worker writes what came before and sets ``done``.

    ``stop``: then closes the files and takes nothing more (``close()``);
    ``fsync``: asks the OS to put the files on stable storage first (``flush(fsync=True)``).
    """

    done: threading.Event
    fsync: bool = False
    stop: bool = False


def payload_nbytes(payload: Any, _depth: int = 0) -> int:
    """Bytes of the arrays a captured payload holds (an estimate for the queue bound)."""
    if payload is None or _depth > 3:
        return 0
    nbytes = getattr(payload, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(payload, np.ndarray):
        return payload.nbytes
    shape = getattr(payload, "shape", None)
    if shape is not None and hasattr(payload, "dtype") and hasattr(payload, "asnumpy"):
        return int(np.prod(shape)) * np.dtype(payload.dtype).itemsize
    if isinstance(payload, (bytes, str)):
        return len(payload)
    if isinstance(payload, (list, tuple)):
        return sum(payload_nbytes(p, _depth + 1) for p in payload) + 64
    if isinstance(payload, dict):
        return sum(payload_nbytes(p, _depth + 1) for p in payload.values()) + 64
    d = getattr(payload, "__dict__", None)
    if d is not None:
        return sum(payload_nbytes(p, _depth + 1) for p in d.values()) + 64
    return 64
