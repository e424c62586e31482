"""Taking an array from the caller: a cheap check on the caller's thread, then a private copy.

Every summary of an array (image, audio, video, embedding) returns at once and still logs the
values as they were at the call: :func:`check_array` looks at the type and dtype without
copying, :func:`snapshot` takes the copy (numpy now, an NDArray on MXNet's engine, without
waiting for it), and :func:`array_nbytes` tells the writer's queue what the copy holds.
"""
from __future__ import annotations

import numbers
from typing import Any, Tuple

import numpy as np

from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import describe


def check_array(x: Any, name: str) -> Tuple[Any, Tuple[int, ...]]:
    """Cheap type/dtype check; returns ``(array_like, shape)`` without copying numpy/NDArray.

    Lists are converted here (that conversion is their copy).
    """
    if not (isinstance(x, np.ndarray) or is_ndarray(x)):
        if isinstance(x, (str, bytes, dict)) or x is None or isinstance(x, numbers.Number):
            raise TypeError(f"{name} must be an array (numpy, MXNet NDArray or nested list of "
                            f"numbers), got {describe(x)}")
        x = to_numpy(x, name)
    kind = np.dtype(x.dtype).kind
    if kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (bool, int or float), got {describe(x)}")
    return x, tuple(int(d) for d in x.shape)


def snapshot(x: Any) -> Any:
    """A private copy: numpy is copied now, an NDArray asynchronously on MXNet's engine."""
    if is_ndarray(x):
        return x.copy()
    return np.array(x, copy=True)


def array_nbytes(x: Any) -> int:
    """Bytes held by a numpy array or NDArray (for the writer's queue budget)."""
    return int(np.prod(x.shape, dtype=np.int64)) * np.dtype(x.dtype).itemsize
