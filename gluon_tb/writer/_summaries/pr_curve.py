"""Precision-recall curves in the format of TensorBoard's ``pr_curves`` plugin.

The value is a float32 tensor of shape ``[6, num_thresholds]`` holding, per
threshold ``i / (num_thresholds - 1)``: true positives, false positives, true
negatives, false negatives, precision and recall; the metadata carries a
``PrCurvePluginData{version=0, num_thresholds}``. The counts are computed as
``tensorboard.plugins.pr_curve.summary.pb`` does (a prediction ``p`` falls in
bucket ``floor(p * (num_thresholds - 1))``, computed in ``p``'s dtype).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .._format import proto as _proto
from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import as_float, describe, is_int, is_real
from .._format.wire import f_varint

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
        else:
            weights = _take(weights, "weights")
            if np.dtype(weights.dtype).kind not in "iuf":
                raise TypeError(f"weights must be a number or a numeric array, got {describe(weights)}")
            if weights.size != predictions.size:
                raise ValueError(f"weights must have as many elements as predictions "
                                 f"({predictions.size}), got {describe(weights)}")
    if isinstance(predictions, np.ndarray):
        _check_predictions(predictions)
    if isinstance(labels, np.ndarray):
        _check_labels(labels)
    return PrCurvePayload(labels, predictions, int(num_thresholds), weights)


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


def pr_curve_data(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                  weights: Union[None, float, np.ndarray] = None) -> np.ndarray:
    """The ``[6, num_thresholds]`` float32 array TensorBoard's ``pr_curve.summary.pb`` makes."""
    labels = np.asarray(labels).reshape(-1)
    predictions = np.asarray(predictions).reshape(-1)
    w = 1.0 if weights is None else (weights if isinstance(weights, float)
                                      else np.asarray(weights, dtype=np.float64).reshape(-1))
    idx = np.floor(predictions * (num_thresholds - 1)).astype(np.int32)
    float_labels = labels.astype(np.float64)
    tp_buckets = np.bincount(idx, weights=float_labels * w, minlength=num_thresholds)
    fp_buckets = np.bincount(idx, weights=(1.0 - float_labels) * w, minlength=num_thresholds)
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(_MINIMUM_COUNT, tp + fp)
    recall = tp / np.maximum(_MINIMUM_COUNT, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall)).astype(np.float32)


def metadata(tag: str, num_thresholds: int, description: str = "") -> bytes:
    """``SummaryMetadata`` for the ``pr_curves`` plugin (``PrCurvePluginData`` hand-encoded)."""
    content = f_varint(2, num_thresholds)  # version (field 1) is 0: omitted
    return _proto.metadata(PLUGIN_NAME, content, display_name=tag, description=description)


def build_pr_curve(tag: str, payload: PrCurvePayload) -> bytes:
    """Encode ``payload`` as a ``pr_curves`` ``Summary.Value`` (worker thread)."""
    labels = to_numpy(payload.labels, "labels")
    predictions = to_numpy(payload.predictions, "predictions")
    weights = payload.weights
    if weights is not None and not isinstance(weights, float):
        weights = to_numpy(weights, "weights")
    _check_predictions(predictions)
    _check_labels(labels)
    data = pr_curve_data(labels, predictions, payload.num_thresholds, weights)
    return _proto.value(tag, tensor=_proto.tensor_array(data),
                        metadata=metadata(tag, payload.num_thresholds))
