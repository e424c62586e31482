"""Precision-recall curves in the format of TensorBoard's ``pr_curves`` plugin.

The value is a float32 tensor of shape ``[6, num_thresholds]`` holding, per
threshold ``i / (num_thresholds - 1)``: true positives, false positives, true
negatives, false negatives, precision and recall; the metadata carries a
``PrCurvePluginData{version=0, num_thresholds}``. The counts are computed as
``tensorboard.plugins.pr_curve.summary.pb`` does (a prediction ``p`` falls in
bucket ``floor(p * (num_thresholds - 1))``, computed in ``p``'s dtype).

The worker checks the values and counts the buckets in one pass of the C kernel
(``_fasthist.pr_counts``) where it is built and the dtypes allow (float32/float64
predictions, any bool, int or float labels): numpy's dozen calls over the values each released
the GIL and took it back, and each time the training thread had to hand it over (0.6 ms of the
training thread's time per 100k-value curve, measured by ``benchmarks/bench_gil.py``).
Otherwise numpy computes the same buckets (tests compare the two).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Tuple, Union

import numpy as np

from .._format import proto as _proto
from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import as_float, describe, is_int, is_real
from .._format.chain import CHAINS, Chain, Message
from .._format.wire import f_varint

try:  # the optional C kernel (setup.py builds it where a compiler is found)
    from . import _fasthist as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None

__all__ = ["PrCurvePayload", "capture_pr_curve", "build_pr_curve", "PLUGIN_NAME"]

PLUGIN_NAME = "pr_curves"
_MINIMUM_COUNT = 1e-7  # as TensorBoard: keeps precision/recall finite on empty denominators


@dataclass
class PrCurvePayload:
    """Private copies (numpy, or NDArrays copied on MXNet's engine) for the worker."""

    labels: Any
    predictions: Any
    num_thresholds: int
    weights: Union[None, float, Any] = None
    checked: bool = False  # labels and predictions are numpy arrays whose values were checked


def capture_pr_curve(labels: Any, predictions: Any, num_thresholds: int = 127,
                     weights: Any = None) -> PrCurvePayload:
    """Validate the arguments and copy the arrays (caller thread).

    Value checks of NDArrays (labels 0/1, predictions in [0, 1]) would need a
    sync, so they run in ``build_pr_curve`` on the worker instead.
    """
    if not is_int(num_thresholds):
        raise TypeError(f"num_thresholds must be an int >= 2, got {describe(num_thresholds)}")
    if num_thresholds < 2:
        raise ValueError(f"num_thresholds must be an int >= 2, got {num_thresholds}")
    labels = _take(labels, "labels")
    predictions = _take(predictions, "predictions")
    if labels.size != predictions.size:
        raise ValueError(f"labels and predictions must have the same number of elements, got "
                         f"labels {describe(labels)} and predictions {describe(predictions)}")
    if predictions.size == 0:
        raise ValueError(f"predictions must be non-empty, got {describe(predictions)}")
    if np.dtype(labels.dtype).kind not in "biuf":
        raise TypeError(f"labels must be a bool or 0/1 array, got {describe(labels)}")
    if np.dtype(predictions.dtype).kind != "f":
        raise TypeError(f"predictions must be a float array in [0, 1], got {describe(predictions)}")
    if weights is not None:
        if is_real(weights):
            weights = as_float(weights, "weights")
            if not (math.isfinite(weights) and weights >= 0):
                raise ValueError(f"weights must be finite and >= 0 (a sample's weight), got {weights!r}")
        else:
            weights = _take(weights, "weights")
            if np.dtype(weights.dtype).kind not in "iuf":
                raise TypeError(f"weights must be a number or a numeric array, got {describe(weights)}")
            if weights.size != predictions.size and not _broadcasts(tuple(weights.shape), tuple(labels.shape)):
                raise ValueError(f"weights must be a number or an array broadcastable to labels "
                                 f"{tuple(labels.shape)} (as mxboard's), got {describe(weights)}")
    if isinstance(predictions, np.ndarray):
        _check_predictions(predictions)
    if isinstance(labels, np.ndarray):
        _check_labels(labels)
    if isinstance(weights, np.ndarray):
        _check_weights(weights)
    checked = isinstance(predictions, np.ndarray) and isinstance(labels, np.ndarray)
    return PrCurvePayload(labels, predictions, int(num_thresholds), weights, checked)


def _take(x: Any, name: str) -> Any:
    """A private copy: numpy copy, or an async copy on MXNet's engine.

    Not :func:`.capture.snapshot`: an NDArray is copied to the CPU (the worker compares
    labels and predictions there, and a GPU copy would hold device memory until it does),
    and the messages name what a curve needs, not an image's "nested list of numbers"."""
    if is_ndarray(x):
        import mxnet as mx

        return x.copyto(mx.cpu())
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array, got {describe(x)}")
    try:
        return np.array(x, copy=True)
    except Exception as e:
        raise TypeError(f"{name} must be an array, got {describe(x)}: {e}") from None


def _check_predictions(p: np.ndarray) -> None:
    if not ((p >= 0) & (p <= 1)).all():
        bad = p[~((p >= 0) & (p <= 1))].ravel()[0]
        raise ValueError(f"predictions must be in [0, 1], got a value {bad!r}")


def _check_labels(labels: np.ndarray) -> None:
    if labels.dtype.kind != "b" and not ((labels == 0) | (labels == 1)).all():
        bad = labels[~((labels == 0) | (labels == 1))].ravel()[0]
        raise ValueError(f"labels must be bool or 0/1, got a value {bad!r}")


def _broadcasts(shape: Tuple[int, ...], to: Tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to ``to`` (numpy's rules)."""
    if len(shape) > len(to):
        return False
    return all(a in (1, b) for a, b in zip(shape[::-1], to[::-1]))


def pr_curve_data(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                  weights: Union[None, float, np.ndarray] = None) -> np.ndarray:
    """The ``[6, num_thresholds]`` float32 array TensorBoard's ``pr_curve.summary.pb`` makes."""
    labels = np.asarray(labels)
    w: Any = 1.0 if weights is None else weights
    if not isinstance(w, float):  # one weight a value in order (any shape, as before), else broadcast to labels
        w = np.asarray(w, dtype=np.float64)
        w = (w if w.size == labels.size else np.broadcast_to(w, labels.shape)).reshape(-1)
    labels = labels.reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    idx = np.floor(predictions * (num_thresholds - 1)).astype(np.int32)
    float_labels = labels.astype(np.float64)
    tp_buckets = np.bincount(idx, weights=float_labels * w, minlength=num_thresholds)
    fp_buckets = np.bincount(idx, weights=(1.0 - float_labels) * w, minlength=num_thresholds)
    return _curves(tp_buckets, fp_buckets)


def _kernel_inputs(labels: np.ndarray, predictions: np.ndarray,
                   weights: Union[None, float, np.ndarray]) -> Any:
    """``(predictions, labels, weights)`` flat and contiguous as the C kernels take them; None
    where they do not apply (not built, or dtypes they do not read)."""
    p = predictions.reshape(-1)
    y = labels.reshape(-1)
    if (_fast is None or p.dtype not in (np.float32, np.float64) or not p.dtype.isnative
            or not y.dtype.isnative or y.dtype.kind not in "biuf" or y.dtype == np.float16):
        return None
    w: Any = 1.0 if weights is None else weights
    if isinstance(w, np.ndarray):
        w = np.ascontiguousarray(w, dtype=np.float64).reshape(-1)
        if w.size != p.size:
            return None  # numpy's broadcasting rules, and errors, apply
    elif not isinstance(w, float):
        return None
    if y.size != p.size:
        return None
    return np.ascontiguousarray(p), np.ascontiguousarray(y), w


def _fast_buckets(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                  weights: Union[None, float, np.ndarray]) -> Any:
    """``(tp_buckets, fp_buckets)`` from the C kernel, after its checks (the ValueErrors of
    :func:`_check_predictions` and :func:`_check_labels`); None where it does not apply."""
    inputs = _kernel_inputs(labels, predictions, weights)
    if inputs is None:
        return None
    p, y, w = inputs
    tp = np.zeros(num_thresholds, np.float64)
    fp = np.zeros(num_thresholds, np.float64)
    bad, at = _fast.pr_counts(p, y, w, tp, fp)
    if bad == 1:
        raise ValueError(f"predictions must be in [0, 1], got a value {p[at]!r}")
    if bad == 2:
        raise ValueError(f"labels must be bool or 0/1, got a value {y[at]!r}")
    return tp, fp


def _curve_piece(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                 weights: Union[None, float, np.ndarray]) -> Any:
    """The ``[6, num_thresholds]`` float32 content as a Chain whose values are counted and
    computed while its record is framed and written (``_fasthist.pr_curve_piece``): the worker
    takes the GIL back once for all of it (a separate kernel call cost the training thread one
    more hand-over). For values checked already; None where the kernels do not apply."""
    if not CHAINS or not hasattr(_fast, "pr_curve_piece"):
        return None
    inputs = _kernel_inputs(labels, predictions, weights)
    if inputs is None:
        return None
    return Chain((_fast.pr_curve_piece(*inputs, num_thresholds),), 24 * num_thresholds)


def _curves(tp_buckets: np.ndarray, fp_buckets: np.ndarray) -> np.ndarray:
    """The ``[6, num_thresholds]`` float32 array of the buckets. Every step is a ufunc on a few
    hundred values, which numpy runs holding the GIL; a copy (``np.stack``, ``astype``) drops it
    and takes it back whatever its size, a hand-over each (``_io/_fastio.c``), so the rows are
    written in place by ufuncs that cast to float32 as ``astype`` does."""
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(_MINIMUM_COUNT, tp + fp)
    recall = tp / np.maximum(_MINIMUM_COUNT, tp + fn)
    out = np.empty((6, tp.shape[0]), np.float32)
    for row, values in zip(out, (tp, fp, tn, fn, precision, recall)):
        np.positive(values, out=row, casting="same_kind")
    return out


def _check_weights(w: np.ndarray) -> None:
    """Weights count samples: a negative one (or NaN, inf) gives counts and a precision TensorBoard
    cannot mean (-1e7)."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(w) & (w >= 0)) if np.dtype(w.dtype).kind == "f" else np.asarray(w) < 0
    n = int(np.count_nonzero(bad))
    if n:
        first = np.asarray(w).reshape(-1)[int(np.argmax(np.asarray(bad).reshape(-1)))]
        raise ValueError(f"weights must be finite and >= 0 (a sample's weight), got {n} of {w.size} that are "
                         f"not (the first: {first!r})")


def metadata(tag: str, num_thresholds: int, description: str = "") -> bytes:
    """``SummaryMetadata`` for the ``pr_curves`` plugin (``PrCurvePluginData`` hand-encoded)."""
    content = f_varint(2, num_thresholds)  # version (field 1) is 0: omitted
    return _proto.metadata(PLUGIN_NAME, content, display_name=tag, description=description)


def build_pr_curve(tag: str, payload: PrCurvePayload) -> Message:
    """Encode ``payload`` as a ``pr_curves`` ``Summary.Value`` (worker thread)."""
    labels = to_numpy(payload.labels, "labels")
    predictions = to_numpy(payload.predictions, "predictions")
    weights = payload.weights
    if weights is not None and not isinstance(weights, float):
        unchecked = not isinstance(weights, np.ndarray)  # an NDArray's values, read here (numpy's at capture)
        weights = to_numpy(weights, "weights")
        if unchecked:
            _check_weights(weights)
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    meta = metadata(tag, payload.num_thresholds)
    if payload.checked:
        piece = _curve_piece(labels, predictions, payload.num_thresholds, weights)
        if piece is not None:
            tensor = _proto.tensor_content(_proto.DT_FLOAT, (6, payload.num_thresholds), piece)
            return _proto.value(tag, tensor=tensor, metadata=meta)
    fast = _fast_buckets(labels, predictions, payload.num_thresholds, weights)
    if fast is not None:
        data = _curves(*fast)
    else:
        _check_predictions(predictions)
        _check_labels(labels)
        data = pr_curve_data(labels, predictions, payload.num_thresholds, weights)
    return _proto.value(tag, tensor=_proto.tensor_array(data), metadata=meta)
