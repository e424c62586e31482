"""NDArray or numpy: recognising, converting and reading arrays and single values.

MXNet is never imported here: an NDArray is recognised by its type's module,
so the writer works with numpy alone. The functions that read an NDArray wait for
MXNet's engine: they run on the writer thread, never on the training thread.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import numpy as np


def is_ndarray(x: Any) -> bool:
    """True for an MXNet NDArray (legacy ``mx.nd`` or ``mx.np``), without importing mxnet."""
    mod = type(x).__module__
    return mod.startswith("mxnet.") and hasattr(x, "asnumpy")


def to_numpy(x: Any, name: str) -> np.ndarray:
    """Convert an array-like (numpy, NDArray, list, scalar) to a numpy array.

    This synchronises on MXNet's engine for an NDArray; call it on the worker,
    not the training thread.
    """
    if isinstance(x, np.ndarray):
        return x
    if is_ndarray(x):
        return x.asnumpy()
    from .checks import describe  # error paths only: checks builds on this module

    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array (numpy, MXNet NDArray or list of numbers), "
                        f"got {describe(x)}")
    try:
        return np.asarray(x)
    except Exception as e:  # ragged lists and the like
        raise TypeError(f"{name} must be an array, got {describe(x)}: {e}") from None


class _DLPackOf:
    """What ``np.from_dlpack`` asks of a producer, for an MXNet 1.x NDArray on the CPU."""

    __slots__ = ("nd",)

    def __init__(self, nd: Any) -> None:
        self.nd = nd

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.nd.to_dlpack_for_read()  # waits for pending writes on MXNet's engine

    def __dlpack_device__(self) -> tuple:
        return (1, 0)  # kDLCPU


def host_float(value: Any) -> float:
    """A queued single value (float, numpy scalar, one-element NDArray) as a float.

    Waits for MXNet's engine for an NDArray: worker side only.
    """
    if hasattr(value, "asscalar"):  # MXNet NDArray
        return float(value.asnumpy().reshape(-1)[0])
    if hasattr(value, "reshape"):
        return float(value.reshape(-1)[0])
    return float(value)


def host_view(nd: Any, on_cpu: bool = False) -> np.ndarray:
    """A read-only numpy view of a CPU NDArray's memory (no copy), else ``asnumpy()``.

    Waits for MXNet's engine: worker side only. The view keeps the NDArray alive. ``on_cpu``:
    the caller knows ``nd`` is a dense NDArray on the CPU (reading its context is a call into
    MXNet).
    """
    if on_cpu or getattr(nd, "context", None) is not None and nd.context.device_type == "cpu":
        try:
            return np.from_dlpack(_DLPackOf(nd))
        except Exception:  # an old numpy, a dtype DLPack lacks: copy instead
            pass
    return nd.asnumpy()


class Mean:
    """NDArrays to average, read by ``float()`` on the writer thread.

    Each part is ``(NDArray, n, reduced)``: with ``reduced``, the array holds the mean of ``n``
    values (one mean queued on MXNet's engine: a fresh array nobody else holds, so unlike an
    NDArray given to ``add_scalar`` it needs no copy); without, it holds values whose sum counts
    as ``n`` of them (the caller's array itself, from ``add_mean(copy=False)``, or an ``add_n`` of
    several such arrays: a handler's loss sums). ``add_scalar`` and ``add_hparams`` queue a Mean
    as it is, unread.

    ``into``: another Mean (``Mean([], (0.0, 0))``, a running sum), or a tuple of them, that the sum
    and count of this one are added to when it is read, once: a handler's epoch loss is the sum of
    the batch losses the writer thread reads for ``batch_loss`` anyway, read by ``float()`` of that
    running Mean queued after them (and ``batch_loss`` with ``batch_period=k``, the window of batches
    since the previous point, another). A Mean without values reads as NaN.

    Example::

        m = Mean([(loss_a, 64, False), (loss_b, 64, False)], (0.0, 0))
        float(m)  # on the writer thread: the mean of the 128 values (waits for MXNet's engine)
    """

    __slots__ = ("parts", "known", "into", "read")

    def __init__(self, parts: List[tuple], known: tuple,
                 into: Union[None, "Mean", Tuple["Mean", ...]] = None) -> None:
        self.parts = parts  # [(NDArray, element count, whether it holds the mean already)]
        self.known = known  # (sum, count) of the host values (numbers, numpy arrays) among them
        self.into = into
        #: each part's host value (its sum; the mean it holds, when reduced) where the writer read
        #: several Means' arrays together (``_io/array_reads.py``), else None: read here
        self.read: Optional[List[Optional[float]]] = None

    def __float__(self) -> float:
        total, count = self.known
        read = self.read
        for i, (arr, n, reduced) in enumerate(self.parts):
            got = read[i] if read is not None else None
            if got is not None:
                total += got * n if reduced else got
            elif reduced:
                total += host_float(arr) * n
            else:
                total += float(host_view(arr).sum(dtype=np.float64))
            count += n
        into = self.into
        if into is not None:  # added once, even if read again
            self.into = None
            for target in into if isinstance(into, tuple) else (into,):
                target.known = (target.known[0] + total, target.known[1] + count)
        return total / count if count else float("nan")
