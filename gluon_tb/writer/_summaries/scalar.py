"""Scalars as the caller hands them over: plain numbers, one-element arrays, NDArrays to read later.

``add_scalar`` and ``add_mean`` (``_summary_writer.py``) call these on the caller's thread; the
queued value is a float, or an object the worker turns into one with ``float()`` (an NDArray copy,
or a :class:`Mean`), never a host read on the caller's thread.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import numpy as np

from .._common.arrays import Mean, is_ndarray
from .._common.checks import as_float, describe

_UNREDUCED_MAX = 1 << 16  # add_mean(copy=False) reads arrays up to this size on the worker


def mean_of(values: Any, copy: bool = True, into: Union[None, Mean, Tuple[Mean, ...]] = None) -> Any:
    """Check ``values`` of ``add_mean``; returns a float or a :class:`Mean`. ``into``: the
    Mean's sum and count are added to that running Mean when it is read (a Mean is returned
    then, even of host values alone)."""
    arrays = values if isinstance(values, (list, tuple)) else [values]
    if not arrays:
        raise ValueError("values must be an array or a non-empty list of arrays, got an empty "
                         f"{type(values).__name__}")
    parts: List[tuple] = []
    total, count = 0.0, 0
    for a in arrays:
        if is_ndarray(a):
            # every NDArray dtype is numeric: only the size needs a look (a call into MXNet)
            n = a.size
            if n == 0:
                check_mean_part(np.dtype(a.dtype), n, a)
            if not copy and n <= _UNREDUCED_MAX:
                parts.append((a, n, False))
            elif a.shape:
                parts.append((a.mean(), n, True))
            else:  # 0-d (mx.np): no reduction op takes it without npx.set_np()
                total += float(a.asnumpy().reshape(-1)[0])
                count += 1
            continue
        if isinstance(a, (str, bytes)) or a is None:
            raise TypeError(f"values must be an array or a list of arrays, got {describe(a)}")
        try:
            arr = np.asarray(a)
        except Exception as e:  # ragged lists and the like
            raise TypeError(f"values must be numeric arrays, got {describe(a)}: {e}") from None
        check_mean_part(arr.dtype, arr.size, a)
        total += float(arr.sum(dtype=np.float64))
        count += arr.size
    if not parts and into is None:
        return total / count
    return Mean(parts, (total, count), into)


def check_mean_part(dtype: np.dtype, size: int, a: Any) -> None:
    if dtype.kind not in "biuf":
        raise TypeError(f"values must be numeric arrays (bool, int or float), got {describe(a)}")
    if size == 0:
        raise ValueError(f"values must be non-empty arrays, got {describe(a)}")


def scalar_value(value: Any, name: str = "value") -> Any:
    """Validate a non-float scalar; returns a float, or an NDArray copy (or a :class:`Mean`) read later."""
    if type(value) is Mean:  # made for the writer thread to read: queued as it is
        return value
    if isinstance(value, (bool, np.bool_)):
        return 1.0 if value else 0.0
    if isinstance(value, (np.floating, np.integer)):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":  # str, object, complex: not a number (as add_histogram's values)
            raise TypeError(f"{name} must be a single number, got {describe(value)}")
        if value.size != 1:
            raise ValueError(f"{name} must be a single number, got {describe(value)}")
        return float(value.reshape(-1)[0])
    if is_ndarray(value):
        if value.size != 1:
            raise ValueError(f"{name} must be a single number, got {describe(value)}")
        try:
            return value.copy()  # queued on MXNet's engine; read by the writer thread
        except Exception:  # 0-d mx.np arrays without npx.set_np(): no op accepts them
            return float(value.asnumpy().reshape(-1)[0])
    if isinstance(value, (complex, np.complexfloating)):  # float() would drop the imaginary part
        raise TypeError(f"{name} must be a real number, got {describe(value)}")
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number, got {describe(value)}")
    if isinstance(value, int):
        return as_float(value, name)
    return float(value)
