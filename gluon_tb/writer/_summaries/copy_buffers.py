"""``BufferPool``: host buffers that captured arrays are copied into, reused once the worker is done.

Taking a private copy of an array is what lets ``add_histogram`` return at once and still log
the values as they were at the call. A *fresh* copy of a large array is mostly the cost of
fresh memory: MXNet's CPU allocator and numpy both map new pages for it, and the kernel
faults in and zeroes every page on first touch; the same copies into buffers that exist
already take a fraction of that time (figures in ``benchmarks/RESULTS-notes.md``). Training
logs the same arrays again and again, so the worker hands each buffer back here when it has
read it, and the next capture of an array of the same kind reuses it.

A buffer is handed out again only after :meth:`BufferPool.give`, which the worker calls when
nothing reads the buffer any more, so reuse never overwrites values still being read. MXNet
orders the copy into a buffer after earlier engine operations on it, and before later writes
to the source array, exactly as for a fresh copy. The pool keeps at most ``max_bytes`` of idle
buffers (least recently used go first); past that, buffers are simply freed as before.

Example::

    pool = BufferPool(64 << 20)
    buf = pool.copy_numpy(values)   # caller thread: values as they are now
    ...                             # worker thread: read buf
    pool.give(buf)                  # worker thread: buf may be reused
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, Hashable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["BufferPool", "NO_POOL", "POOL_BYTES"]

_F32 = np.dtype(np.float32)
POOL_BYTES = 64 << 20  # a writer's idle buffers, at most (less when its max_queue_bytes is less)


class BufferPool:
    """Idle copy buffers by kind (type, shape, dtype), at most ``max_bytes`` of them."""

    __slots__ = ("max_bytes", "_free", "_bytes", "_lock")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._free: "OrderedDict[Hashable, List[Any]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def idle_bytes(self) -> int:
        """Bytes of the buffers waiting to be reused."""
        return self._bytes

    def copy_ndarrays(self, nds: Sequence[Tuple[Any, Tuple[int, ...], np.dtype]],
                      contexts: Optional[Sequence[Any]] = None) -> List[Any]:
        """CPU copies of NDArrays given as ``(array, its shape, its dtype)``, queued on MXNet's
        engine (caller thread). ``contexts``: each array's context, or ``None`` where it is not
        known (reading it is a call into MXNet).

        The float32 ones on ``cpu(0)`` are copied by *one* MXNet operation (``amp_multicast``,
        which copies when no cast is needed) into buffers of the pool or new ones: every
        operation the training thread pushes costs it tens of microseconds while the engine is
        busy, and a handler copies every parameter. Only float32: MXNet 1.9.1's CPU build runs
        the operator through MKLDNN, which fails on float16 and float64 arrays ("unknown type
        for MKLDNN"), and only later, when the copy is read.
        """
        if not nds:  # numpy input only: never import MXNet (a slow import in a fresh process)
            return []
        import mxnet as mx  # already imported by whoever made the NDArrays

        cpu = mx.cpu()
        out: List[Any] = [None] * len(nds)
        together: List[int] = []  # dense float32 on cpu(0)
        for i, (nd, shape, dtype) in enumerate(nds):
            ctx = contexts[i] if contexts is not None else None
            if type(nd) is mx.nd.NDArray and dtype == _F32 and (nd.context if ctx is None else ctx) == cpu:
                together.append(i)
            elif type(nd) is mx.nd.NDArray:  # on a GPU, or not float32: a copy of its own
                buf = self._take((mx.nd.NDArray, shape, dtype))
                out[i] = nd.copyto(cpu if buf is None else buf)
            else:  # sparse, mx.np: fresh copies, never pooled
                out[i] = nd.copyto(cpu)
        if not together:
            return out
        srcs = [nds[i][0] for i in together]
        bufs = [self._take((mx.nd.NDArray, nds[i][1], _F32)) for i in together]
        bufs = [b if b is not None else mx.nd.empty(nds[i][1], ctx=cpu, dtype=_F32)
                for i, b in zip(together, bufs)]
        try:
            if len(srcs) == 1:
                srcs[0].copyto(bufs[0])
            else:
                mx.nd.amp_multicast(*srcs, num_outputs=len(srcs), out=bufs)
        except (AttributeError, mx.base.MXNetError):  # no such operator here: one copy each
            for a, b in zip(srcs, bufs):
                a.copyto(b)
        for i, b in zip(together, bufs):
            out[i] = b
        return out

    def copy_numpy(self, arr: np.ndarray) -> np.ndarray:
        """A copy of numpy array ``arr`` (caller thread)."""
        buf = self._take((np.ndarray, arr.shape, arr.dtype.str))
        if buf is None:
            return np.array(arr, copy=True, order="C")
        np.copyto(buf, arr)
        return buf

    def give(self, buf: Any, kind: Optional[Tuple[Tuple[int, ...], np.dtype]] = None) -> None:
        """``buf`` (from a ``copy_*`` call) is no longer read: it may be reused (worker thread).

        ``kind``: the ``(shape, dtype)`` of an NDArray ``buf`` where the caller knows them (each
        read of them is a call into MXNet)."""
        if isinstance(buf, np.ndarray):
            if not (buf.flags.c_contiguous and buf.flags.owndata and buf.flags.writeable):
                return
            key: Hashable = (np.ndarray, buf.shape, buf.dtype.str)
            nbytes = buf.nbytes
        else:
            import mxnet as mx

            if type(buf) is not mx.nd.NDArray:  # sparse, mx.np: not pooled
                return
            shape, dtype = kind if kind is not None else (buf.shape, np.dtype(buf.dtype))
            key = (mx.nd.NDArray, shape, dtype)
            nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > self.max_bytes:
            return
        with self._lock:
            self._free.setdefault(key, []).append((buf, nbytes))
            self._free.move_to_end(key)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:  # least recently used kinds first
                old_key, bufs = next(iter(self._free.items()))
                _, n = bufs.pop(0)
                self._bytes -= n
                if not bufs:
                    del self._free[old_key]

    def clear(self) -> None:
        """Free every idle buffer."""
        with self._lock:
            self._free.clear()
            self._bytes = 0

    def _take(self, key: Tuple[Any, ...]) -> Any:
        with self._lock:
            bufs = self._free.get(key)
            if not bufs:
                return None
            buf, n = bufs.pop()
            if not bufs:
                del self._free[key]
            self._bytes -= n
            return buf


NO_POOL = BufferPool(0)  # keeps nothing: every copy is a fresh one
