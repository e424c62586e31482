"""Histogram summaries: ``capture_histogram`` (caller) and ``build_histogram`` (worker).

The worker counts buckets exactly as ``numpy.histogram(finite_values, edges)``
does (bucket ``i`` holds ``edges[i] <= x < edges[i+1]``, the last one closed),
but without numpy's sort + searchsorted. The top 16 bits of a float32/float64
(sign, exponent, first mantissa bits) pick one of 65,536 *cells*, each an
interval of values. Every float64 edge is replaced by the smallest float of the
data's type that is ``>=`` it (so comparisons stay exact), and a table gives
each cell its first bucket and the (at most one) edge inside it: a value's
bucket is ``base[cell] + (x >= inner[cell])``: two gathers, one comparison and
a ``bincount`` of buckets per value, a cache-sized block at a time. NaN and +-Inf land in cells whose buckets
are dropped. Edges with two or more in one cell fall back to ``np.histogram``.

Where the optional C kernel ``_fasthist`` is built (``setup.py``), it does the same
counting, and min, max and the sums, in one pass without the GIL: about 8x faster.
"""
from __future__ import annotations

import logging
import math
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _proto
from ._buffers import NO_POOL, BufferPool
from ._convert import check_tag, describe, host_view, is_ndarray

__all__ = ["HistogramPayload", "HistogramGroup", "capture_histogram", "capture_histograms",
           "build_histogram", "build_histograms", "default_edges", "STRATEGIES"]

_LOG = logging.getLogger("gluon_tb")
try:  # the optional C kernel (setup.py builds it where a compiler is found)
    from . import _fasthist as _fast
except ImportError:  # pragma: no cover - depends on the build
    _fast = None
STRATEGIES = frozenset({"auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"})
Bins = Union[str, int, np.ndarray]
_CELL_BITS = 16
_BLOCK = 1 << 14  # values per pass: every buffer stays small enough to be reused, not page-faulted in


@dataclass
class HistogramPayload:
    """What ``capture_histogram`` hands to the worker.

    ``data`` is a private numpy copy or an MXNet NDArray copied on MXNet's
    engine; ``bins`` is ``"default"``, an int, a numpy strategy name or a float64
    array of edges; ``nbytes`` the size of ``data`` (for the queue's bound).
    ``build_histogram`` sets ``nonfinite`` to the number of NaN/Inf values it
    left out, and gives ``data`` back to ``pool`` (if any) when it has read it.
    """

    data: Any
    bins: Bins
    nonfinite: Optional[int] = None
    pool: Optional[BufferPool] = None
    nbytes: int = 0


@dataclass
class HistogramGroup:
    """What ``capture_histograms`` hands to the worker: ``(tag, payload)`` of one step, in order."""

    items: List[Tuple[str, HistogramPayload]]
    nbytes: int = 0


# ---------------------------------------------------------------- caller side
def capture_histogram(values: Any, bins: Any = "default",
                      pool: Optional[BufferPool] = None) -> HistogramPayload:
    """Validate ``values``/``bins`` and take a private copy (cheap; caller thread).

    NDArrays are copied on MXNet's engine (asynchronously); with ``pool``, arrays are
    copied into its idle buffers where it has one of their kind.
    """
    return _capture([values], _check_bins(bins), pool)[0]


def capture_histograms(values: Any, bins: Any = "default",
                       pool: Optional[BufferPool] = None) -> HistogramGroup:
    """Validate ``{tag: values}`` and capture each: a private copy, as ``capture_histogram``.

    The NDArrays are copied together (``BufferPool.copy_ndarrays``: one MXNet operation for
    the float32 ones on the CPU). Not one ``mx.nd.concat`` of them all: MXNet's CPU concat
    took 6.3 ms for the six parameters of a 784-512-512-10 MLP, six copies 0.2 ms.
    """
    bins = _check_bins(bins)
    if not isinstance(values, Mapping) or not values:
        raise TypeError(f"values must be a non-empty dict of tag -> array, got {describe(values)}")
    tags = [check_tag(tag, "values key") for tag in values]
    payloads = _capture(list(values.values()), bins, pool)
    return HistogramGroup(list(zip(tags, payloads)), sum(p.nbytes for p in payloads))


def _capture(values: List[Any], bins: Bins, pool: Optional[BufferPool]) -> List[HistogramPayload]:
    """Validate every value, then copy each; an NDArray's shape and dtype are read once
    (each read is a call into MXNet, which waits for the GIL behind the writer thread)."""
    pool = pool if pool is not None else NO_POOL
    out: List[Any] = [None] * len(values)
    nds = []
    for i, v in enumerate(values):
        if is_ndarray(v):
            shape, dtype = v.shape, np.dtype(v.dtype)
            _check_array(dtype, shape, v)
            nds.append((i, (v, shape, dtype), math.prod(shape) * dtype.itemsize))
        elif isinstance(v, np.ndarray):
            _check_array(v.dtype, v.shape, v)
            out[i] = HistogramPayload(pool.copy_numpy(v), bins, pool=pool, nbytes=v.nbytes)
        else:
            arr = _array_like(v)  # a new array: private already
            out[i] = HistogramPayload(arr, bins, nbytes=arr.nbytes)
    copies = pool.copy_ndarrays([nd for _, nd, _ in nds])  # queued on MXNet's engine
    for (i, _, nbytes), c in zip(nds, copies):
        out[i] = HistogramPayload(c, bins, pool=pool, nbytes=nbytes)
    return out


def _array_like(values: Any) -> np.ndarray:
    if isinstance(values, (str, bytes)) or values is None:
        raise TypeError(f"values must be a numeric array, got {describe(values)}")
    try:
        arr = np.array(values, copy=True)
    except Exception as e:  # ragged lists and the like
        raise TypeError(f"values must be a numeric array, got {describe(values)}: {e}") from None
    _check_array(arr.dtype, arr.shape, values)
    return arr


def _check_array(dtype: np.dtype, shape: Tuple[int, ...], values: Any) -> None:
    if dtype.kind not in "biuf":
        raise TypeError(f"values must be a numeric array (bool, int or float), got {describe(values)}")
    if 0 in shape:
        raise ValueError(f"values must be a non-empty array, got {describe(values)}")


def build_histograms(tag: str, group: HistogramGroup) -> List[bytes]:
    """One ``Summary.Value`` per tag of ``group``, in the order given (worker thread)."""
    return [build_histogram(t, p) for t, p in group.items]


def _check_bins(bins: Any) -> Bins:
    if isinstance(bins, str):
        if bins == "default" or bins in STRATEGIES:
            return bins
        raise ValueError(f"bins must be 'default', a positive int, one of {sorted(STRATEGIES)} "
                         f"or a sequence of edges, got {bins!r}")
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
        if bins < 1:
            raise ValueError(f"bins must be a positive int, got {bins!r}")
        return int(bins)
    if isinstance(bins, (bool, np.bool_, float, bytes)) or bins is None or is_ndarray(bins):
        raise TypeError(f"bins must be 'default', a positive int, a strategy name or a "
                        f"sequence of edges, got {describe(bins)}")
    try:
        edges = np.array(bins, dtype=np.float64)
    except Exception:
        raise TypeError(f"bins must be a sequence of numbers, got {describe(bins)}") from None
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError(f"bins must be a 1-D sequence of at least 2 edges, got {describe(bins)}")
    if not np.isfinite(edges).all():
        raise ValueError(f"bins edges must be finite, got {describe(bins)}")
    if not (np.diff(edges) > 0).all():
        raise ValueError(f"bins edges must be strictly increasing, got {describe(bins)}")
    return edges


# ---------------------------------------------------------------- edges and tables
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


def _ceil_float(edge: float, ftype: type, strict: bool) -> float:
    """The smallest ``ftype`` value ``f`` with ``f >= edge`` (``f > edge`` if strict)."""
    with np.errstate(over="ignore"):
        f = ftype(edge)
        if float(f) < edge or (strict and float(f) == edge):
            f = np.nextafter(f, ftype(np.inf))
    return float(f)


@dataclass(frozen=True)
class _Table:
    base: np.ndarray   # int64 [65536]: 1 + bucket of the cell's smallest value (0: below edges[0])
    inner: np.ndarray  # float [65536]: the cell's value from which on the next bucket starts, or inf
    nbuckets: int
    cells: np.ndarray  # bytes of {inner, base} per cell, as the C kernel reads them (one load each)


@lru_cache(maxsize=32)
def _table(edges_bytes: bytes, dtype: str) -> Optional[_Table]:
    """The cell table of ``edges`` for floats of ``dtype``; ``None`` if a cell holds 2+ edges.

    A cell is the set of floats sharing the top 16 bits of their bit pattern: a
    sign, the exponent and the first mantissa bits, i.e. an interval of values.
    """
    edges = np.frombuffer(edges_bytes, dtype=np.float64)
    dt = np.dtype(dtype)
    ftype, utype = dt.type, _UINT[dt]
    nbits = dt.itemsize * 8
    thr = [_ceil_float(e, ftype, False) for e in edges[:-1]]
    thr.append(_ceil_float(edges[-1], ftype, True))  # numpy's last bucket is closed
    t = np.array(thr, dtype=np.float64)
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
        # fancy indexing, not np.take, which is 4x slower here; no 65,536-long per-cell
        # counts either: allocating and faulting them in cost more than all the rest
        np.greater_equal(xs, table.inner[c], out=a)
        np.add(table.base[c], a, out=w)
        counts += np.bincount(w, minlength=n + 3)
    return counts[1:n + 1]


# ---------------------------------------------------------------- worker side
_warned: set = set()
_warned_lock = threading.Lock()


def build_histogram(tag: str, payload: HistogramPayload) -> bytes:
    """Encode ``payload`` as a ``Summary.Value`` with a ``HistogramProto`` (worker thread)."""
    try:
        return _build(tag, payload)
    finally:  # nothing reads payload.data any more
        if payload.pool is not None:
            payload.pool.give(payload.data)


def _build(tag: str, payload: HistogramPayload) -> bytes:
    data = payload.data
    orig = np.asarray(host_view(data) if is_ndarray(data) else data).reshape(-1)
    if orig.dtype.kind == "b":
        orig = orig.view(np.uint8)
    if not orig.dtype.isnative:
        orig = orig.astype(orig.dtype.newbyteorder("="))
    # float16 and small ints widen exactly to float32, the others to float64
    small = orig.dtype.itemsize <= (4 if orig.dtype.kind == "f" else 2)
    x = orig.astype(np.float32 if small else np.float64, copy=False)
    fast = _fast_counts(x, payload.bins)
    if fast is not None:
        counts, right_edges, n_finite, lo, hi, total, total_sq = fast
    else:
        finite, lo, hi = _finite(x)
        n_finite = finite.size
    payload.nonfinite = x.size - n_finite
    if payload.nonfinite:
        _warn_nonfinite(tag, payload.nonfinite, x.size)
    if n_finite == 0:
        histo = _proto.histogram(0.0, 0.0, 0.0, 0.0, 0.0, [], [])
        return _proto.value(tag, histo=histo)
    if fast is None:
        counts, right_edges = _bucket(x, finite, orig, payload.bins)
        total, total_sq = _sums(finite)
    nz = np.flatnonzero(counts)
    if nz.size:
        start, end = int(nz[0]), int(nz[-1]) + 1
        counts, right_edges = counts[start:end], right_edges[start:end]
    else:  # every finite value outside user-given edges
        counts, right_edges = counts[:0], right_edges[:0]
    histo = _proto.histogram(lo, hi, float(n_finite), total, total_sq,
                             right_edges, counts.astype(np.float64))
    return _proto.value(tag, histo=histo)


def _fast_counts(x: np.ndarray, bins: Bins) -> Optional[tuple]:
    """Counts and statistics from the C kernel in one pass, when it is built and applies.

    ``(counts, right_edges, n_finite, min, max, sum, sum_sq)``, the same as the numpy
    code below computes (tests run both); None to use that code.
    """
    if _fast is None or not x.flags.c_contiguous or sys.byteorder != "little":
        return None
    edges = default_edges() if isinstance(bins, str) and bins == "default" else bins
    if not isinstance(edges, np.ndarray):
        return None
    table = _table(edges.tobytes(), x.dtype.str)
    if table is None:
        return None
    n = table.nbuckets
    counts = np.zeros(n + 3, np.int64)
    n_finite, lo, hi, total, total_sq = _fast.count(x, table.cells, counts)
    return counts[1:n + 1], edges[1:], n_finite, lo, hi, total, total_sq


def _finite(x: np.ndarray) -> Tuple[np.ndarray, float, float]:
    """The finite values of ``x`` (``x`` itself when all are) and their min and max."""
    lo, hi = x.min(), x.max()
    if x.dtype.kind == "f" and not (np.isfinite(lo) and np.isfinite(hi)):
        x = x[np.isfinite(x)]
        if x.size == 0:
            return x, 0.0, 0.0
        lo, hi = x.min(), x.max()
    return x, float(lo), float(hi)


def _bucket(x: np.ndarray, finite: np.ndarray, orig: np.ndarray,
            bins: Bins) -> Tuple[np.ndarray, np.ndarray]:
    """``(counts, right_edges)`` identical to ``np.histogram`` of the finite values.

    ``x`` is ``orig`` widened to float32/float64 and ``finite`` its finite values.
    """
    edges = default_edges() if isinstance(bins, str) and bins == "default" else bins
    if isinstance(edges, np.ndarray):
        table = _table(edges.tobytes(), x.dtype.str)
        if table is not None:
            return _count_keyed(x, table), edges[1:]
        counts, used = np.histogram(finite, edges)
    else:  # numpy computes uniform edges in the data's own dtype (float16 included)
        if orig.dtype != x.dtype:
            finite = orig[np.isfinite(orig)] if orig.dtype.kind == "f" else orig
        counts, used = np.histogram(finite, bins=edges)
    return counts.astype(np.int64), used[1:]


def _sums(x: np.ndarray) -> Tuple[float, float]:
    """Sum and sum of squares in float64, a cache-sized chunk at a time.

    Not ``np.dot``: that goes to OpenBLAS, whose threads then spin for a while on every
    core, which is CPU taken from the training loop (measured: 0.6 cores in the MLP
    benchmark).
    """
    buf = np.empty(min(x.size, _BLOCK), np.float64)
    total = total_sq = 0.0
    for i in range(0, x.size, _BLOCK):
        y = buf[:min(_BLOCK, x.size - i)]
        np.copyto(y, x[i:i + _BLOCK])
        total += float(y.sum())
        total_sq += float(np.square(y, out=y).sum())
    return total, total_sq


def _warn_nonfinite(tag: str, n: int, size: int) -> None:
    with _warned_lock:
        if tag in _warned:
            return
        _warned.add(tag)
    _LOG.warning("histogram %r: left out %d NaN/Inf value(s) of %d (warned once per tag)",
                 tag, n, size)
