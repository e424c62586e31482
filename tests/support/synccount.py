"""Count host reads of NDArrays made by gluon_tb's code on the training thread.

A host read (``asnumpy``, ``asscalar``, ``__bool__``, ``wait_to_read``) blocks the calling
thread until MXNet's engine has computed the array: on the training thread that is a
pipeline stall. gluon_tb hands NDArrays to ``SummaryWriter``, whose worker thread reads
them; this helper proves that nothing else reads them on the way.

Example::

    from synccount import count_host_reads

    with count_host_reads() as c:
        mod.fit(...)
    assert c.calls == []

A call is recorded when it happens on the thread that entered the ``with`` block and the
first frame of its call stack outside MXNet's package, numpy and Python's standard library
(MXNet's own methods call each other: ``__bool__`` -> ``asscalar`` -> ``asnumpy``; a numpy or
standard-library function given an NDArray by gluon_tb reads it for gluon_tb) is in a file
under ``gluon_tb/``.
Nested reads count once, as the outermost method: ``bool(x)`` is one ``__bool__`` call, not
three. So a read inside MXNet counts when gluon_tb called into MXNet (a metric's ``update``
that gluon_tb calls reads its inputs: gluon_tb made the sync), and does not when MXNet's
own loop did (``Module.fit`` updating its metric: the first frame outside MXNet is the
caller of ``fit``).
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, List

METHODS = ("asnumpy", "asscalar", "__bool__", "wait_to_read")

_GLUON_TB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "gluon_tb") + os.sep


@dataclass(frozen=True)
class HostRead:
    """One counted call: the NDArray method and the gluon_tb frame that made it."""

    method: str
    where: str  # "<path under gluon_tb/>:<line> in <function>"

    def __str__(self) -> str:
        return f"{self.method} from {self.where}"


@dataclass
class Counter:
    """What :func:`count_host_reads` collected; ``calls`` is empty when gluon_tb never synced."""

    calls: List[HostRead] = field(default_factory=list)
    other: int = 0  # reads on the thread by other code (MXNet, the test itself), for information

    def __str__(self) -> str:
        return "\n".join(map(str, self.calls)) or "no host reads by gluon_tb"


def _skipped() -> tuple:
    """Path prefixes of the code that reads on someone else's behalf: MXNet, numpy, the stdlib."""
    import sysconfig

    import mxnet
    import numpy

    dirs = [os.path.dirname(os.path.abspath(m.__file__)) for m in (mxnet, numpy)]
    dirs.append(os.path.abspath(sysconfig.get_paths()["stdlib"]))
    return tuple(d + os.sep for d in dirs) + (os.path.abspath(__file__),)


def _caller(frame, skip: tuple) -> str:
    """File:line of the first frame outside ``skip`` (path prefixes); '' if none."""
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(skip):
            return f"{path}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return ""


@contextmanager
def count_host_reads() -> Iterator[Counter]:
    """Wrap the four host-read methods of ``mxnet.ndarray.NDArray`` while the block runs."""
    from mxnet.ndarray import NDArray

    counter = Counter()
    thread = threading.get_ident()
    skip = _skipped()
    local = threading.local()
    saved = {name: NDArray.__dict__[name] for name in METHODS}

    def make(name: str, original):
        def wrapped(self, *args, **kwargs):
            if threading.get_ident() != thread or getattr(local, "inside", False):
                return original(self, *args, **kwargs)
            where = _caller(sys._getframe(1), skip)
            local.inside = True
            try:
                return original(self, *args, **kwargs)
            finally:
                local.inside = False
                if where.startswith(_GLUON_TB):
                    counter.calls.append(HostRead(name, os.path.relpath(where, os.path.dirname(_GLUON_TB[:-1]))))
                else:
                    counter.other += 1

        wrapped.__name__ = name
        return wrapped

    for name, fn in saved.items():
        setattr(NDArray, name, make(name, fn))
    try:
        yield counter
    finally:
        for name, fn in saved.items():
            setattr(NDArray, name, fn)
