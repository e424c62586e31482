"""Argument checks and array conversion shared by every summary type.

MXNet is never imported here: an NDArray is recognised by its type's module,
so the writer works with numpy alone.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Optional

import numpy as np

MAX_TAG_LEN = 4096


def describe(x: Any) -> str:
    """A short description of a received value for error messages."""
    if isinstance(x, np.ndarray) or is_ndarray(x):
        return f"{type(x).__name__} of shape {tuple(x.shape)} and dtype {np.dtype(x.dtype).name}"
    r = repr(x)
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{type(x).__name__} {r}"


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


def host_view(nd: Any) -> np.ndarray:
    """A read-only numpy view of a CPU NDArray's memory (no copy), else ``asnumpy()``.

    Waits for MXNet's engine: worker side only. The view keeps the NDArray alive.
    """
    if getattr(nd, "context", None) is not None and nd.context.device_type == "cpu":
        try:
            return np.from_dlpack(_DLPackOf(nd))
        except Exception:  # an old numpy, a dtype DLPack lacks: copy instead
            pass
    return nd.asnumpy()


def check_tag(tag: Any, name: str = "tag") -> str:
    """A tag is a non-empty str of at most ``MAX_TAG_LEN`` characters."""
    if type(tag) is not str:
        if isinstance(tag, str):
            return check_tag(str(tag), name)
        raise TypeError(f"{name} must be a str, got {describe(tag)}")
    if not tag:
        raise ValueError(f"{name} must be a non-empty str, got ''")
    if len(tag) > MAX_TAG_LEN:
        raise ValueError(f"{name} must be at most {MAX_TAG_LEN} characters, got {len(tag)}")
    return tag


def check_step(step: Any, name: str = "global_step") -> Optional[int]:
    """``None`` or a non-negative int (numpy and 0-d integer arrays accepted).

    A finite non-negative float is truncated with ``int()``, as mxboard did (its own scalar
    demo passes ``global_step=x * 100``), with a ``UserWarning`` (shown once per calling line).
    """
    if step is None:
        return None
    if type(step) is int:
        if step < 0:
            raise ValueError(f"{name} must be a non-negative int, got {step}")
        return step
    if isinstance(step, bool):
        raise TypeError(f"{name} must be a non-negative int, got bool {step!r}")
    if isinstance(step, numbers.Integral):
        return check_step(int(step), name)
    if isinstance(step, np.ndarray) and step.shape == () and step.dtype.kind in "iu":
        return check_step(int(step), name)
    if isinstance(step, (float, np.floating)):
        if not (math.isfinite(step) and step >= 0):
            raise ValueError(f"{name} must be a non-negative int, got {step!r}")
        # one message text: Python's default filter shows it once per calling line
        warnings.warn(f"{name} is a float: it is truncated to an int (as mxboard did); pass an int",
                      UserWarning, stacklevel=3)
        return int(step)
    raise TypeError(f"{name} must be a non-negative int, got {describe(step)}")


def check_walltime(walltime: Any) -> Optional[float]:
    if walltime is None:
        return None
    if isinstance(walltime, bool) or not isinstance(walltime, numbers.Real):
        raise TypeError(f"walltime must be a number of seconds since the epoch, got {describe(walltime)}")
    return float(walltime)
