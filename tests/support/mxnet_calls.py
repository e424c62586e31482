"""Count the calls into MXNet's C library that a piece of code makes on the calling thread.

Every MXNet C API call from Python goes through ``mxnet.base.check_call`` (each module binds its
own name for it, so each binding is replaced). Freeing an NDArray (``__del__``) is left out: when
it happens is up to the garbage collector, not to the code being measured.

Example::

    with MXNetCalls() as calls:
        nd.dot(v, v)
    assert calls.names == ["_imperative_invoke"]
"""
from __future__ import annotations

import sys
import threading
from typing import Any, List


class MXNetCalls:
    def __init__(self) -> None:
        self.names: List[str] = []  # the Python function that made each call, in order

    def __enter__(self) -> "MXNetCalls":
        import mxnet.base

        self._real = real = mxnet.base.check_call
        me = threading.current_thread()

        def counting(ret: Any) -> Any:
            if threading.current_thread() is me:
                name = sys._getframe(1).f_code.co_name
                if name != "__del__":
                    self.names.append(name)
            return real(ret)

        self._patched = [m for m in list(sys.modules.values())
                         if m is not None and getattr(m, "check_call", None) is real]
        for m in self._patched:
            m.check_call = counting
        return self

    def __exit__(self, *exc: Any) -> None:
        for m in self._patched:
            m.check_call = self._real
