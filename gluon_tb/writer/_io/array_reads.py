"""The small NDArrays of a drain's :class:`~.._common.arrays.Mean` values, read in one release of the GIL.

A handler queues each batch's losses as a ``Mean`` of the loss arrays, and the writer thread reads
them when it drains the queue (every ~0.1 s: several batches at a time). Read one by one (the
array's context, ``wait_to_read``, a DLPack view, the view's deleter), each loss took the GIL back
four times, and each take while the training thread runs Python is a forced hand-over that costs
that thread a wait (``benchmarks/gil_takes.py fit``). :func:`prefetch` reads every small NDArray of
the given Means with one call of ``_fastio.read_arrays`` (MXNet's ``MXNDArrayGetDType`` and
``MXNDArraySyncCopyToCPU`` for each, the GIL released once) into one scratch buffer, and leaves each
part's host value in ``Mean.read``: the sum of its values in float64 by numpy, as ``Mean`` sums a
view of the array, so the value is the same to the bit.

Only dense CPU or GPU NDArrays of at most :data:`MAX_VALUES` values, :data:`MAX_BYTES` of scratch
a call; an array MXNet refuses (its error) or of a dtype numpy lacks is left to ``Mean``'s own read,
which raises what it raises there. Without the C kernel nothing is prefetched.

Example::

    prefetch([m for m in values if type(m) is Mean])   # writer thread
    float(m)                                           # from m.read: no call into MXNet
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._common.arrays import Mean

try:
    from ._fastio import read_arrays as _read_arrays
except ImportError:  # pragma: no cover - no C compiler where installed: each Mean reads its own
    _read_arrays = None

__all__ = ["prefetch", "MAX_VALUES", "MAX_BYTES"]

#: a part read together has at most this many values (a batch's losses; larger ones are reduced
#: on MXNet's engine by the caller, or read by ``Mean`` itself)
MAX_VALUES = 1 << 12
#: scratch bytes a call, at most (8 a value: no MXNet dtype is wider)
MAX_BYTES = 1 << 20

# MXNet's dtype codes that numpy reads as they are (bfloat16, 12, is not one)
_NUMPY_OF_CODE: Dict[int, np.dtype] = {0: np.dtype(np.float32), 1: np.dtype(np.float64), 2: np.dtype(np.float16),
                  3: np.dtype(np.uint8), 4: np.dtype(np.int32), 5: np.dtype(np.int8),
                  6: np.dtype(np.int64), 7: np.dtype(np.bool_), 8: np.dtype(np.int16),
                  9: np.dtype(np.uint16), 10: np.dtype(np.uint32), 11: np.dtype(np.uint64)}
_mxnet: Optional[Tuple[Tuple[type, ...], int, int]] = None  # (dense NDArray types, get_dtype, sync_copy)


def _mxnet_calls() -> Tuple[Tuple[type, ...], int, int]:
    global _mxnet
    if _mxnet is None:
        import mxnet as mx  # imported already: there are NDArrays
        from mxnet.base import _LIB

        types: Tuple[type, ...] = (mx.nd.NDArray,)
        np_type = getattr(getattr(mx, "np", None), "ndarray", None)
        if isinstance(np_type, type):
            types += (np_type,)
        addr = [ctypes.cast(getattr(_LIB, f), ctypes.c_void_p).value for f in ("MXNDArrayGetDType",
                                                                                  "MXNDArraySyncCopyToCPU")]
        _mxnet = (types, int(addr[0] or 0), int(addr[1] or 0))
    return _mxnet


def prefetch(means: List[Mean]) -> None:
    """Read the small NDArray parts of ``means`` together (writer thread; waits for MXNet's engine);
    each Mean's ``read`` then holds its parts' host values (``None`` where a part is left to it)."""
    if _read_arrays is None:
        return
    wanted: List[Tuple[Mean, int, Any, int]] = []  # (mean, part index, array, values to copy)
    for m in means:
        if m.read is not None:
            continue
        for i, (arr, n, reduced) in enumerate(m.parts):
            size = 1 if reduced else n
            if 0 < size <= MAX_VALUES and type(arr).__module__.startswith("mxnet."):
                wanted.append((m, i, arr, size))
    if not wanted:
        return
    types, get_dtype, sync_copy = _mxnet_calls()
    if not get_dtype or not sync_copy:
        return
    start = 0
    while start < len(wanted):
        parts: List[Tuple[int, int, int]] = []
        chunk = []
        offset = 0
        for entry in wanted[start:]:
            m, i, arr, size = entry
            if parts and offset + 8 * size > MAX_BYTES:
                break
            chunk.append(entry)
            if type(arr) in types:  # dense (sparse types are subclasses: left to Mean)
                parts.append((arr.handle.value, size, offset))
                offset += 8 * size
            else:
                parts.append((0, 0, 0))  # a placeholder: not read
        start += len(chunk)
        _read_chunk(chunk, parts, offset)


def _read_chunk(chunk: List[Tuple[Mean, int, Any, int]], parts: List[Tuple[int, int, int]], nbytes: int) -> None:
    _types, get_dtype, sync_copy = _mxnet_calls()
    real = [p for p in parts if p[0]]
    if not real:
        return
    buf = np.empty(max(nbytes, 8), np.uint8)
    codes = iter(_read_arrays(real, buf, get_dtype, sync_copy))
    for (m, i, _arr, size), (handle, _size, offset) in zip(chunk, parts):
        if not handle:
            continue
        dtype = _NUMPY_OF_CODE.get(next(codes))  # -1 (refused) and unknown codes: None
        if dtype is None:
            continue
        view = np.frombuffer(buf, dtype, size, offset)
        got = m.read
        if got is None:
            got = m.read = [None] * len(m.parts)
        got[i] = float(view[0]) if m.parts[i][2] else float(view.sum(dtype=np.float64))
