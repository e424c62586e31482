"""Histogram buckets, counted exactly as ``numpy.histogram(finite_values, edges)`` counts them.

Bucket ``i`` holds ``edges[i] <= x < edges[i+1]``, the last one closed; but no sort and
no searchsorted. The top 16 bits of a float32/float64 (sign, exponent, first mantissa
bits) pick one of 65,536 *cells*, each an interval of values. Every float64 edge is
replaced by the smallest float of the data's type that is ``>=`` it (so comparisons stay
exact), and a table gives each cell its first bucket and the (at most one) edge inside
it: a value's bucket is ``base[cell] + (x >= inner[cell])``: two gathers, one comparison
and a ``bincount`` per value, a cache-sized block at a time. NaN and +-Inf land in cells
whose buckets are dropped. Edges with two or more in one cell fall back to ``np.histogram``.

Where the optional C kernel ``_fasthist`` is built (``setup.py``), it does the same
counting, and min, max and the sums, in one pass without the GIL: several times faster.
Everything here runs on the worker thread.

Example::

    counts, right_edges = bucket_counts(x, x, x, "default")  # float32/float64 x, all finite
"""
from __future__ import annotations

import sys
import time
from functools import lru_cache
from typing import Any, Optional, Tuple, Union, cast

import numpy as np

from .._common.threads import KERNEL_MIN_VALUES, kernel_nice, kernel_took

try:  # the optional C kernel (setup.py builds it where a compiler is found)
    # a C extension without a stub: mypy sees no such submodule (with or without it built)
    from . import _fasthist as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

__all__ = ["default_edges", "cell_table", "fast_counts", "finite_values", "bucket_counts", "sums"]

Bins = Union[str, int, np.ndarray]
_CELL_BITS = 16
_BLOCK = 1 << 14  # values per pass: every buffer stays small enough to be reused, not page-faulted in


@lru_cache(maxsize=None)
def default_edges() -> np.ndarray:
    """TensorFlow's default histogram edges (``tensorflow/core/lib/histogram``).

    ``1e-12`` grown by ``*= 1.1`` while ``< 1e20``, their negatives, ``0``, and
    ``-DBL_MAX``/``DBL_MAX`` at the ends so that no finite value is left out.
    """
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    big = float(np.finfo(np.float64).max)
    edges = np.array([-big] + [-p for p in reversed(pos)] + [0.0] + pos + [big])
    edges.setflags(write=False)
    return edges


_UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


def _ceil_floats(edges: np.ndarray, ftype: type) -> np.ndarray:
    """For each edge the smallest ``ftype`` value ``f >= edge`` (``f > edge`` for the last:
    numpy's last bucket is closed), as float64. Vectorised: one scalar call per edge made the
    writer thread's first default histogram slow, holding the GIL against the caller."""
    with np.errstate(over="ignore"):
        f: np.ndarray = edges.astype(ftype)
        f64 = f.astype(np.float64)
        up = f64 < edges
        up[-1] |= f64[-1] == edges[-1]
        f = np.where(up, np.nextafter(f, ftype(np.inf)), f)
    return f.astype(np.float64)


class _Table:
    """The cells of a set of edges (a plain class: a dataclass costs ~0.5 ms at import)."""

    __slots__ = ("base", "inner", "nbuckets", "cells")

    def __init__(self, base: np.ndarray, inner: np.ndarray, nbuckets: int, cells: np.ndarray) -> None:
        self.base = base  # int64 [65536]: 1 + bucket of the cell's smallest value (0: below edges[0])
        self.inner = inner  # float [65536]: the cell's value from which on the next bucket starts, or inf
        self.nbuckets = nbuckets
        self.cells = cells  # bytes of {inner, base} per cell, as the C kernel reads them (one load each)


@lru_cache(maxsize=32)
def cell_table(edges_bytes: bytes, dtype: str) -> Optional[_Table]:
    """The cell table of ``edges`` for floats of ``dtype``; ``None`` if a cell holds 2+ edges.

    A cell is the set of floats sharing the top 16 bits of their bit pattern: a
    sign, the exponent and the first mantissa bits, i.e. an interval of values.
    """
    edges = np.frombuffer(edges_bytes, dtype=np.float64)
    dt = np.dtype(dtype)
    ftype, utype = dt.type, _UINT[dt]
    nbits = dt.itemsize * 8
    t = _ceil_floats(edges, ftype)
    shift = nbits - _CELL_BITS
    first = np.arange(1 << _CELL_BITS, dtype=np.uint64) << np.uint64(shift)
    last = first + np.uint64((1 << shift) - 1)
    with np.errstate(invalid="ignore"):
        a = first.astype(utype).view(ftype).astype(np.float64)
        b = last.astype(utype).view(ftype).astype(np.float64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
    base = np.searchsorted(t, lo, side="right").astype(np.int64)
    n_in = np.searchsorted(t, hi, side="right") - base
    special = ~np.isfinite(a) | ~np.isfinite(b)  # the cells of +-inf and NaN
    if n_in[~special].max(initial=0) > 1:
        return None
    inner = np.where(n_in == 1, t[np.minimum(base, len(t) - 1)], np.inf).astype(ftype)
    n = len(edges) - 1
    positive = first < np.uint64(1 << (nbits - 1))
    base[special & positive] = n + 1  # +inf: n + 2 after ">= inf"; NaN: n + 1; both dropped
    base[special & ~positive] = 0      # -inf, -NaN: dropped
    inner[special] = np.inf
    cells = np.empty(1 << _CELL_BITS, [("inner", ftype), ("base", np.int32 if nbits == 32 else np.int64)])
    cells["inner"], cells["base"] = inner, base
    cells = cells.view(np.uint8)
    cells.setflags(write=False)
    return _Table(base, inner, n, cells)


def _count_keyed(x: np.ndarray, table: _Table) -> np.ndarray:
    """Bucket counts of float32/float64 ``x`` (1-D, native) via the cell table.

    Works a block at a time in reused buffers: no large temporaries (whose page
    faults cost more than the arithmetic) and every pass stays in cache.
    """
    n = table.nbuckets
    step = min(x.size, _BLOCK)
    cell = np.empty(step, np.intp)
    where = np.empty(step, np.intp)
    above = np.empty(step, np.bool_)
    counts = np.zeros(n + 3, np.int64)
    half = x.dtype.itemsize // 2
    top = slice(half - 1, None, half) if sys.byteorder == "little" else slice(0, None, half)
    for i in range(0, x.size, step):
        xs = x[i:i + step]
        m = xs.size
        c, w, a = cell[:m], where[:m], above[:m]
        np.copyto(c, xs.view(np.uint16)[top])  # top 16 bits of each float: its cell
        # fancy indexing, not np.take, which is several times slower here; no 65,536-long
        # per-cell counts either: allocating and faulting them in cost more than all the rest
        np.greater_equal(xs, table.inner[c], out=a)
        np.add(table.base[c], a, out=w)
        counts += np.bincount(w, minlength=n + 3)
    return counts[1:n + 1]


def fast_counts(x: np.ndarray, bins: Bins, orig: np.ndarray) -> Optional[tuple]:
    """Counts and statistics from the C kernel, when it is built and applies.

    ``(counts, right_edges, n_finite, min, max, sum, sum_sq)``, the same as the numpy
    code below computes (tests run both); None to use that code. ``x`` is ``orig``
    widened to float32/float64.
    """
    if _fast is None or not x.flags.c_contiguous or sys.byteorder != "little":
        return None
    if isinstance(bins, int):
        return _fast_uniform(x, bins, orig)
    edges, table = _edges_and_table(bins, x.dtype.str)
    if table is None:
        return None
    n = table.nbuckets
    counts = _zeros(n + 3)
    n_finite, lo, hi, total, total_sq = _kernel(_fast.count, x, table.cells, counts)
    right = cast(np.ndarray, edges)[1:]  # a table is only ever made for edges
    return counts[1:n + 1], right, n_finite, lo, hi, total, total_sq


def _zeros(n: int) -> np.ndarray:
    """``np.zeros(n, np.int64)`` zeroed with the GIL held: numpy's zeroed allocation (and ``fill``)
    of more than a few hundred values releases the GIL, and taking it back while the training
    thread runs Python is a forced hand-over (``_common/threads.py``); zeroing ~12 KB costs ~1 us."""
    return np.frombuffer(bytearray(8 * n), np.int64)


def _kernel(fn: Any, x: np.ndarray, *rest: Any) -> Any:
    """A C kernel call (it releases the GIL), for a large array at the calling thread's kernel
    priority (``_common/threads.py``: the writer's kernels run at nice 19 on a thread of their
    own, which never holds the GIL)."""
    nice = kernel_nice() if x.size >= KERNEL_MIN_VALUES else 0
    if not nice:
        return fn(x, *rest)
    start = time.perf_counter()
    try:
        return fn(x, *rest, nice)
    finally:
        kernel_took(time.perf_counter() - start, x.size)


_UNIFORM_MAX_BINS = 1 << 16  # numpy's one-step correction of a computed bucket is exact up to here


def _fast_uniform(x: np.ndarray, bins: int, orig: np.ndarray) -> Optional[tuple]:
    """``bins`` equal buckets over the finite values' range: numpy's own edges (from
    ``histogram_bin_edges``, given the range as numpy would find it), counted in C with
    numpy's rule, in two passes (statistics, counts) instead of numpy's many."""
    if orig.dtype != x.dtype or bins > _UNIFORM_MAX_BINS:  # float16 and ints: edges of their own dtype
        return None
    n_finite, lo, hi, total, total_sq = _kernel(_fast.stats, x)
    if n_finite == 0:
        return np.zeros(0, np.int64), np.zeros(0), 0, lo, hi, total, total_sq
    t = x.dtype.type  # numpy finds the range as scalars of the data's type: so must we
    edges = np.histogram_bin_edges(x[:1], bins, range=(t(lo), t(hi)))
    if not (edges[1:] > edges[:-1]).all():  # a range too narrow for the data's type: numpy's way
        return None
    counts = _zeros(bins)
    _kernel(_fast.uniform, x, edges.astype(np.float64), counts)
    return counts, edges[1:], n_finite, lo, hi, total, total_sq


def finite_values(x: np.ndarray) -> Tuple[np.ndarray, float, float]:
    """The finite values of ``x`` (``x`` itself when all are) and their min and max."""
    lo, hi = x.min(), x.max()
    if x.dtype.kind == "f" and not (np.isfinite(lo) and np.isfinite(hi)):
        x = x[np.isfinite(x)]
        if x.size == 0:
            return x, 0.0, 0.0
        lo, hi = x.min(), x.max()
    return x, float(lo), float(hi)


def bucket_counts(x: np.ndarray, finite: np.ndarray, orig: np.ndarray,
                  bins: Bins) -> Tuple[np.ndarray, np.ndarray]:
    """``(counts, right_edges)`` identical to ``np.histogram`` of the finite values.

    ``x`` is ``orig`` widened to float32/float64 and ``finite`` its finite values.
    """
    edges, table = _edges_and_table(bins, x.dtype.str)
    if table is not None:
        return _count_keyed(x, table), cast(np.ndarray, edges)[1:]  # a table is only ever made for edges
    if edges is not None:
        counts, used = np.histogram(finite, edges)
    else:  # numpy computes uniform edges in the data's own dtype (float16 included)
        if orig.dtype != x.dtype:
            finite = orig[np.isfinite(orig)] if orig.dtype.kind == "f" else orig
        try:
            with np.errstate(divide="ignore", invalid="ignore"):  # what fails is handled below
                counts, used = np.histogram(finite, bins=bins)
        except (IndexError, ValueError):  # numpy fails on a range its dtype cannot split (a
            used = np.histogram_bin_edges(finite, bins=bins)  # constant 4.5e15 in float32)
            counts = _count_sorted(finite, used)
    return counts.astype(np.int64), used[1:]


def _count_sorted(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts by ``edges[i] <= x < edges[i + 1]`` (the last bucket closed) for
    non-decreasing edges that may repeat, where numpy's uniform-bin code fails."""
    n = len(edges) - 1
    idx = np.searchsorted(edges, values, side="right") - 1
    idx[values == edges[-1]] = n - 1
    idx = idx[(idx >= 0) & (idx < n)]
    return np.bincount(idx, minlength=n)


def _edges_and_table(bins: Bins, dtype: str) -> Tuple[Optional[np.ndarray], Optional[_Table]]:
    """The edges ``bins`` stands for and their cell table for ``dtype`` (``None`` where
    ``bins`` is a count or a strategy, or no table fits the edges)."""
    if isinstance(bins, str) and bins == "default":
        return default_edges(), _default_table(dtype)
    if isinstance(bins, np.ndarray):
        return bins, cell_table(bins.tobytes(), dtype)
    return None, None


@lru_cache(maxsize=None)
def _default_table(dtype: str) -> Optional[_Table]:
    """The table of the default edges, found without hashing their 12 kB on every histogram."""
    return cell_table(default_edges().tobytes(), dtype)


def sums(x: np.ndarray) -> Tuple[float, float]:
    """Sum and sum of squares in float64, a cache-sized chunk at a time.

    Not ``np.dot``: that goes to OpenBLAS, whose threads then spin for a while on every
    core, which is CPU taken from the training loop (measured in the MLP benchmark).
    """
    buf = np.empty(min(x.size, _BLOCK), np.float64)
    total = total_sq = 0.0
    with np.errstate(over="ignore"):  # values past 1e154: the sums are inf, as TensorBoard's would be
        for i in range(0, x.size, _BLOCK):
            y = buf[:min(_BLOCK, x.size - i)]
            np.copyto(y, x[i:i + _BLOCK])
            total += float(y.sum())
            total_sq += float(np.square(y, out=y).sum())
    return total, total_sq
