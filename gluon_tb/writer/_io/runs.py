"""Run directories (made at once, names that cannot leave the log directory), and payload sizes."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._common.checks import describe


def make_logdir(path: str) -> bool:
    """Create a local log directory now, as mxboard did; False when it cannot be.

    Best effort: a read-only parent or a file in the way is not an error here but
    at the first write, where ``EventFile`` raises it naming the directory (so a
    handler's ``on_error="warn"`` policy, which wraps the writes, sees it too).
    """
    try:
        os.makedirs(path, exist_ok=True)
        return True
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return False


def check_run_name(name: Any, arg: str) -> str:
    """A relative run path made of plain components: no '', '.', '..', no leading '/',
    no backslash or NUL. Raises ValueError naming ``arg`` otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a str, got {describe(name)}")
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"{arg} must be a relative name without '..', empty parts or a "
                         f"leading '/', got {name!r}")
    return name


def payload_nbytes(payload: Any, _depth: int = 0) -> int:
    """Bytes of the arrays a captured payload holds (an estimate for the queue bound)."""
    if payload is None or _depth > 3:
        return 0
    nbytes = getattr(payload, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(payload, np.ndarray):
        return payload.nbytes
    shape = getattr(payload, "shape", None)
    if shape is not None and hasattr(payload, "dtype") and hasattr(payload, "asnumpy"):
        return int(np.prod(shape)) * np.dtype(payload.dtype).itemsize
    if isinstance(payload, (bytes, str)):
        return len(payload)
    if isinstance(payload, (list, tuple)):
        return sum(payload_nbytes(p, _depth + 1) for p in payload) + 64
    if isinstance(payload, dict):
        return sum(payload_nbytes(p, _depth + 1) for p in payload.values()) + 64
    d = getattr(payload, "__dict__", None)
    if d is not None:
        return sum(payload_nbytes(p, _depth + 1) for p in d.values()) + 64
    return 64
