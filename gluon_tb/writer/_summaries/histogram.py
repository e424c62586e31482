"""Histogram summaries: ``capture_histogram`` (caller) and ``build_histogram`` (worker).

The caller validates and takes a private copy (``copy_buffers.BufferPool``); the worker
counts the buckets (``histogram_counts``: exactly as ``numpy.histogram``, by a C kernel where
one is built), encodes the ``HistogramProto`` and hands the copy back for reuse.
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Any, Collection, List, Mapping, Optional, Tuple

import numpy as np

from .._format import proto as _proto
from .histogram_counts import Bins, bucket_counts, fast_counts, finite_values, sums
from .copy_buffers import NO_POOL, BufferPool
from .._common.arrays import host_view, is_ndarray
from .._common.checks import check_tag, describe, is_int

#: an NDArray's ``(shape, dtype, context)``, where its caller knows them
Known = Tuple[Tuple[int, ...], np.dtype, Any]

__all__ = ["HistogramPayload", "HistogramGroup", "capture_histogram", "capture_histograms",
           "build_histogram", "build_histograms", "STRATEGIES"]

_LOG = logging.getLogger("gluon_tb")
#: the most buckets one histogram may ask for: every one is an event field (10^8 made a 1.6 GB
#: event in 28 s and 6 GB of memory); TensorBoard draws about 30
MAX_BINS = 1 << 16
STRATEGIES = frozenset({"auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"})


class HistogramPayload:
    """What ``capture_histogram`` hands to the worker.

    ``data`` is a private numpy copy or an MXNet NDArray copied on MXNet's
    engine; ``bins`` is ``"default"``, an int, a numpy strategy name or a float64
    array of edges; ``nbytes`` the size of ``data`` (for the queue's bound);
    ``kind`` an NDArray copy's ``(shape, dtype)``. ``build_histogram`` sets
    ``nonfinite`` to the number of NaN/Inf values it left out, and gives ``data``
    back to ``pool`` (if any) when it has read it. (Plain classes, not dataclasses:
    making a dataclass costs about half a millisecond at import, on a first call.)
    """

    __slots__ = ("data", "bins", "nonfinite", "pool", "nbytes", "kind")

    def __init__(self, data: Any, bins: Bins, nonfinite: Optional[int] = None,
                 pool: Optional[BufferPool] = None, nbytes: int = 0,
                 kind: Optional[Tuple[Tuple[int, ...], np.dtype]] = None) -> None:
        self.data, self.bins, self.nonfinite = data, bins, nonfinite
        self.pool, self.nbytes, self.kind = pool, nbytes, kind


class HistogramGroup:
    """What ``capture_histograms`` hands to the worker: ``(tag, payload)`` of one step, in order."""

    __slots__ = ("items", "nbytes")

    def __init__(self, items: List[Tuple[str, HistogramPayload]], nbytes: int = 0) -> None:
        self.items, self.nbytes = items, nbytes


# ---------------------------------------------------------------- caller side
def capture_histogram(values: Any, bins: Any = "default",
                      pool: Optional[BufferPool] = None) -> HistogramPayload:
    """Validate ``values``/``bins`` and take a private copy (cheap; caller thread).

    NDArrays are copied on MXNet's engine (asynchronously); with ``pool``, arrays are
    copied into its idle buffers where it has one of their kind.
    """
    return _capture([values], _check_bins(bins), pool)[0]


def capture_histograms(values: Any, bins: Any = "default", pool: Optional[BufferPool] = None,
                       known: Optional[Mapping[str, Known]] = None,
                       private: Collection[str] = ()) -> HistogramGroup:
    """Validate ``{tag: values}`` and capture each: a private copy, as ``capture_histogram``.

    ``known``: ``(shape, dtype, context)`` of NDArray values, by tag, where the caller knows
    them (a handler, from the parameters): each read of them is a call into MXNet.
    ``private``: tags whose NDArray, known to be on ``cpu(0)``, is the caller's own new array,
    which nothing writes again (a handler's sample of a parameter): it is read as it is, not
    copied a second time.

    The NDArrays are copied together (``BufferPool.copy_ndarrays``: one MXNet operation for
    the float32 ones on the CPU). Not one ``mx.nd.concat`` of them all: MXNet's CPU concat of
    a model's parameters took many times as long as copying them one by one.
    """
    bins = _check_bins(bins)
    if not isinstance(values, Mapping):
        raise TypeError(f"values must be a non-empty dict of tag -> array, got {describe(values)}")
    if not values:
        raise ValueError(f"values must be a non-empty dict of tag -> array, got {describe(values)}")
    tags = [check_tag(tag, "values key") for tag in values]
    payloads = _capture(list(values.values()), bins, pool,
                        None if known is None else [known.get(tag) for tag in values],
                        [tag in private for tag in values] if private else None)
    return HistogramGroup(list(zip(tags, payloads)), sum(p.nbytes for p in payloads))


def _capture(values: List[Any], bins: Bins, pool: Optional[BufferPool],
             known: Optional[List[Optional[Known]]] = None,
             private: Optional[List[bool]] = None) -> List[HistogramPayload]:
    """Validate every value, then copy each; an NDArray's shape and dtype are read once, and
    not at all when ``known`` (each read is a call into MXNet, which waits for the GIL behind
    the writer thread). A ``private`` NDArray known to be on ``cpu(0)`` is kept, not copied."""
    pool = pool if pool is not None else NO_POOL
    out: List[Any] = [None] * len(values)
    nds = []
    contexts: List[Any] = []
    for i, v in enumerate(values):
        if is_ndarray(v):
            k = known[i] if known is not None else None
            if k is None:
                shape, dtype, ctx = v.shape, np.dtype(v.dtype), None
            else:
                shape, dtype, ctx = k
            _check_array(dtype, shape, v)
            nbytes = math.prod(shape) * dtype.itemsize
            if private is not None and private[i] and k is not None and _dense_on_cpu0(v, ctx):
                out[i] = HistogramPayload(v, bins, nbytes=nbytes, kind=(shape, dtype))  # no pool: not its buffer
                continue
            nds.append((i, (v, shape, dtype), nbytes))
            contexts.append(ctx)
        elif isinstance(v, np.ndarray):
            _check_array(v.dtype, v.shape, v)
            out[i] = HistogramPayload(pool.copy_numpy(v), bins, pool=pool, nbytes=v.nbytes)
        else:
            arr = _array_like(v)  # a new array: private already
            out[i] = HistogramPayload(arr, bins, nbytes=arr.nbytes)
    copies = pool.copy_ndarrays([nd for _, nd, _ in nds], contexts)  # queued on MXNet's engine
    for (i, (_, shape, dtype), nbytes), c in zip(nds, copies):
        out[i] = HistogramPayload(c, bins, pool=pool, nbytes=nbytes, kind=(shape, dtype))
    return out


def _dense_on_cpu0(nd: Any, ctx: Any) -> bool:
    import mxnet as mx  # an NDArray's context: MXNet is imported

    return type(nd) is mx.nd.NDArray and bool(ctx == mx.cpu())


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
        if bins == "tensorflow":  # tensorboardX's name for TensorBoard's exponential buckets
            return "default"
        raise ValueError(f"bins must be 'default' (or 'tensorflow'), a positive int, one of {sorted(STRATEGIES)} "
                         f"or a sequence of edges, got {bins!r}")
    if is_int(bins):
        if bins < 1:
            raise ValueError(f"bins must be a positive int, got {bins!r}")
        n = int(bins)
        if n > MAX_BINS:
            raise ValueError(f"bins must be at most {MAX_BINS:,}, got {n:,}")
        return n
    if isinstance(bins, (bool, np.bool_, float, bytes)) or bins is None or is_ndarray(bins):
        raise TypeError(f"bins must be 'default', a positive int, a strategy name or a "
                        f"sequence of edges, got {describe(bins)}")
    try:
        edges = np.array(bins, dtype=np.float64)
    except Exception:
        raise TypeError(f"bins must be a sequence of numbers, got {describe(bins)}") from None
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError(f"bins must be a 1-D sequence of at least 2 edges, got {describe(bins)}")
    if edges.size > MAX_BINS + 1:
        raise ValueError(f"bins must be at most {MAX_BINS + 1:,} edges, got {edges.size:,}")
    if not np.isfinite(edges).all():
        raise ValueError(f"bins edges must be finite, got {describe(bins)}")
    if not (np.diff(edges) > 0).all():
        raise ValueError(f"bins edges must be strictly increasing, got {describe(bins)}")
    return edges


# ---------------------------------------------------------------- worker side
_warned: set = set()
_warned_lock = threading.Lock()


def build_histogram(tag: str, payload: HistogramPayload) -> bytes:
    """Encode ``payload`` as a ``Summary.Value`` with a ``HistogramProto`` (worker thread)."""
    try:
        return _build(tag, payload)
    finally:  # nothing reads payload.data any more
        if payload.pool is not None:
            payload.pool.give(payload.data, payload.kind)


def _build(tag: str, payload: HistogramPayload) -> bytes:
    data = payload.data
    # an NDArray with a kind is a CPU copy of ours or a caller's private sample on the CPU
    orig = np.asarray(host_view(data, payload.kind is not None) if is_ndarray(data) else data).reshape(-1)
    if orig.dtype.kind == "b":
        orig = orig.view(np.uint8)
    if not orig.dtype.isnative:
        orig = orig.astype(orig.dtype.newbyteorder("="))
    # float16 and small ints widen exactly to float32, the others to float64
    small = orig.dtype.itemsize <= (4 if orig.dtype.kind == "f" else 2)
    x = orig.astype(np.float32 if small else np.float64, copy=False)
    fast = fast_counts(x, payload.bins, orig)
    if fast is not None:
        counts, right_edges, n_finite, lo, hi, total, total_sq = fast
    else:
        finite, lo, hi = finite_values(x)
        n_finite = finite.size
    payload.nonfinite = x.size - n_finite
    if payload.nonfinite:
        _warn_nonfinite(tag, payload.nonfinite, x.size)
    if n_finite == 0:
        histo = _proto.histogram(0.0, 0.0, 0.0, 0.0, 0.0, [], [])
        return _proto.value(tag, histo=histo)
    if fast is None:
        counts, right_edges = bucket_counts(x, finite, orig, payload.bins)
        total, total_sq = sums(finite)
    if isinstance(payload.bins, np.ndarray):  # user-given edges: numpy.histogram leaves out what is outside
        inside = int(np.sum(counts))
        if inside < n_finite:
            _warn_outside(tag, n_finite - inside, n_finite, payload.bins)
    # the buckets from the first non-empty one to the last (none: every finite value was
    # outside user-given edges)
    histo = _proto.trimmed_histogram(lo, hi, float(n_finite), total, total_sq, right_edges, counts)
    return _proto.value(tag, histo=histo)


def _warn_once(key: Any, msg: str, *args: Any) -> None:
    """``_LOG.warning(msg, *args)`` the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    _LOG.warning(msg, *args)


def _warn_outside(tag: str, n: int, size: int, edges: np.ndarray) -> None:
    _warn_once(("outside", tag), "histogram %r: left out %d of %d value(s) outside the given bins' edges "
               "[%g, %g], as numpy.histogram does (warned once per tag)", tag, n, size, edges[0], edges[-1])


def _warn_nonfinite(tag: str, n: int, size: int) -> None:
    _warn_once(tag, "histogram %r: left out %d NaN/Inf value(s) of %d (warned once per tag)", tag, n, size)
