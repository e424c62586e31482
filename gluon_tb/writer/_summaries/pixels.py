"""Pixels: numbers made into uint8 pixels, images tiled into one, PNG bytes (worker thread).

Value policy of every image summary (images, video frames, embedding sprites):

* floating point: ``[0, 1]`` is scaled to ``0..255`` and rounded to nearest;
  values below 0 become 0, above 1 become 255; NaN becomes 0, +inf 255.
* uint8: taken as is.
* other integers (int8/16/32/64, uint16/32/64): taken as ``0..255`` values
  and clipped to that range (they are *not* rescaled).
* bool: False is 0, True is 255.
"""
from __future__ import annotations

import io
import math
from typing import Any, Optional

import numpy as np

from .._common.arrays import to_numpy
from .._common.checks import describe, is_int, is_real

#: zlib level for PNG: level 1 comes within a few per cent of the default level's size in less
#: time, level 0 does not compress and level 9 takes much longer for nothing more; most of the
#: time is Pillow's PNG filtering (figures in benchmarks/RESULTS-notes.md).
PNG_COMPRESS_LEVEL = 1


def to_uint8(arr: np.ndarray) -> np.ndarray:
    """Apply the module's value policy (see the module docstring)."""
    kind = arr.dtype.kind
    if arr.dtype == np.uint8:
        return arr
    if kind == "b":
        return arr.astype(np.uint8) * np.uint8(255)
    if kind in "iu":
        return np.clip(arr, 0, 255).astype(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.multiply(arr, 255.0, dtype=np.float32)
        f += 0.5
        np.nan_to_num(f, copy=False, nan=0.0, posinf=255.0, neginf=0.0)
        np.clip(f, 0.0, 255.0, out=f)
    return f.astype(np.uint8)


def encode_png(hwc: np.ndarray, compress_level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """PNG bytes of a uint8 H×W×C image (C in 1, 3, 4)."""
    from PIL import Image

    img = Image.fromarray(np.ascontiguousarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


def tile_images(images: Any, nrow: Optional[int] = None, padding: int = 2,
                pad_value: float = 0) -> np.ndarray:
    """Tile an N×C×H×W batch into one H×W×C image: the grids of ``add_image(s)`` and video.

    Not mxboard's ``make_image_grid`` (``grid.py``: C×H×W, 8 per row, gray made RGB).

    ``nrow`` is the number of images per row; ``None`` gives a square-ish grid
    (``ceil(sqrt(N))`` per row). Images are separated and framed by ``padding``
    pixels of ``pad_value``. A single image is returned without padding. The
    result has the input's dtype (numpy or NDArray in; an NDArray is read with
    ``asnumpy()``, which waits for MXNet).

    >>> tile_images(np.zeros((6, 3, 4, 4), np.uint8)).shape
    (14, 20, 3)
    """
    arr = to_numpy(images, "images")
    if arr.ndim != 4:
        raise ValueError(f"images must be 4-D (N, C, H, W), got {describe(arr)}")
    if nrow is not None and (not is_int(nrow) or nrow < 1):
        raise ValueError(f"nrow must be a positive int or None, got {describe(nrow)}")
    if not is_int(padding) or padding < 0:
        raise ValueError(f"padding must be a non-negative int, got {describe(padding)}")
    if not is_real(pad_value):
        raise TypeError(f"pad_value must be a number, got {describe(pad_value)}")
    n, c, h, w = arr.shape
    if n == 0:
        raise ValueError(f"images must hold at least one image, got {describe(arr)}")
    if n == 1:
        return np.ascontiguousarray(arr[0].transpose(1, 2, 0))
    ncol = min(n, int(nrow) if nrow is not None else math.ceil(math.sqrt(n)))
    nrows = math.ceil(n / ncol)
    p = int(padding)
    grid = np.full((nrows * (h + p) + p, ncol * (w + p) + p, c), pad_value, dtype=arr.dtype)
    hwc = arr.transpose(0, 2, 3, 1)
    for i in range(n):
        r, k = divmod(i, ncol)
        y, x = p + r * (h + p), p + k * (w + p)
        grid[y:y + h, x:x + w] = hwc[i]
    return grid
