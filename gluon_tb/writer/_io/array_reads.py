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
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

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


class _Calls(NamedTuple):
    """What reading needs of MXNet, looked up once: its dense NDArray types, the addresses of
    ``MXNDArrayGetDType`` and ``MXNDArraySyncCopyToCPU``, and numpy's dtype of each MXNet dtype code
    (MXNet's own table; bfloat16, a structured dtype there, is left out)."""

    types: Tuple[type, ...]
    get_dtype: int
    sync_copy: int
    dtypes: Dict[int, np.dtype]


_calls: Optional[_Calls] = None


def _mxnet_calls() -> _Calls:
    global _calls
    if _calls is None:
        import mxnet as mx  # imported already: there are NDArrays
        from mxnet.base import _LIB
        from mxnet.ndarray.ndarray import _DTYPE_MX_TO_NP

        types: Tuple[type, ...] = (mx.nd.NDArray,)
        np_type = getattr(getattr(mx, "np", None), "ndarray", None)
        if isinstance(np_type, type):
            types += (np_type,)
        addr = [ctypes.cast(getattr(_LIB, f), ctypes.c_void_p).value or 0
                for f in ("MXNDArrayGetDType", "MXNDArraySyncCopyToCPU")]
        dtypes = {code: np.dtype(t) for code, t in _DTYPE_MX_TO_NP.items()
                  if t is not None and np.dtype(t).names is None}
        _calls = _Calls(types, int(addr[0]), int(addr[1]), dtypes)
    return _calls


def prefetch(means: List[Mean]) -> None:
    """Read the small NDArray parts of ``means`` together (writer thread; waits for MXNet's engine);
    each Mean's ``read`` then holds its parts' host values (``None`` where a part is left to it)."""
    if _read_arrays is None:
        return
    calls = None
    wanted: List[Tuple[Mean, int, Any, int]] = []  # (mean, part index, dense array, values to copy)
    for m in means:
        if m.read is not None:
            continue
        for i, (arr, n, reduced) in enumerate(m.parts):
            size = 1 if reduced else n
            if 0 < size <= MAX_VALUES and type(arr).__module__.startswith("mxnet."):
                calls = calls or _mxnet_calls()
                if type(arr) in calls.types:  # dense (sparse types are subclasses: left to the Mean)
                    wanted.append((m, i, arr, size))
    if calls is None or not wanted or not calls.get_dtype or not calls.sync_copy:
        return
    start = 0
    while start < len(wanted):  # chunks of at most MAX_BYTES of scratch (one part at least)
        end, nbytes = start + 1, 8 * wanted[start][3]
        while end < len(wanted) and nbytes + 8 * wanted[end][3] <= MAX_BYTES:
            nbytes += 8 * wanted[end][3]
            end += 1
        _read_chunk(wanted[start:end], nbytes, calls)
        start = end


def _read_chunk(chunk: List[Tuple[Mean, int, Any, int]], nbytes: int, calls: _Calls) -> None:
    buf = np.empty(nbytes, np.uint8)
    offsets = []
    offset = 0
    for _m, _i, _arr, size in chunk:
        offsets.append(offset)
        offset += 8 * size
    codes = _read_arrays([(arr.handle.value, size, at) for (_m, _i, arr, size), at in zip(chunk, offsets)],
                         buf, calls.get_dtype, calls.sync_copy)
    for (m, i, _arr, size), at, code in zip(chunk, offsets, codes):
        dtype = calls.dtypes.get(code)  # -1 (refused) and codes numpy cannot read: None
        if dtype is None:
            continue
        view = np.frombuffer(buf, dtype, size, at)
        got = m.read
        if got is None:
            got = m.read = [None] * len(m.parts)
        got[i] = float(view[0]) if m.parts[i][2] else float(view.sum(dtype=np.float64))
