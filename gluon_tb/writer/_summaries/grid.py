"""``make_image_grid``: mxboard's function (``mxboard.utils.make_image_grid``), same contract.

mxboard's is an MXNet port of torchvision's ``make_grid``, and gluon_tb exports it
under the same name, so it must do what mxboard's did: take HW, CHW or NCHW, turn
gray into RGB, put ``nrow`` (default 8) images per row, frame and separate them with
``padding`` pixels of ``pad_value``, and return **CHW**. A single image comes back
as it is (CHW, gray made RGB), without padding. Facts taken from mxboard 0.1.0's
``utils.py``; where this one differs, it is where mxboard failed or gave garbage:

* numpy arrays are taken as well as NDArrays (the result has the input's kind: an
  NDArray on the input's context, or a numpy array), and so is a list of
  equal-shaped images (mxboard's documentation promised it, its type check refused it);
* a batch may have 4 channels (RGBA; mxboard's grid was always 3-channel);
* ``normalize=True`` of an image whose values are all equal gives zeros, not NaN,
  and of integers gives float32, not integer division;
* bad arguments are ``TypeError``/``ValueError`` naming the argument.

The writer does not use it: ``add_image``/``add_images`` tile batches with
``pixels.tile_images`` (H×W×C, ``ceil(sqrt(N))`` per row, gray stays gray).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import describe, is_int, is_real
from .capture import check_array
from .layouts import CHANNELS, to_nchw


def _check_int(value: Any, name: str, low: int) -> int:
    if not is_int(value):
        raise TypeError(f"{name} must be an int >= {low}, got {describe(value)}")
    if value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value}")
    return int(value)


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {describe(value)}")
    return bool(value)


def _as_nchw(tensor: Any) -> np.ndarray:
    """numpy N×C×H×W (C: 1 made 3, 3 or 4) of HW, CHW, NCHW or a list of HW/CHW images."""
    if isinstance(tensor, (list, tuple)):
        if not tensor:
            raise ValueError("tensor must be an image, a batch or a non-empty list of images, got []")
        items = [to_numpy(check_array(t, "tensor")[0], "tensor") for t in tensor]
        shapes = {t.shape for t in items}
        if len(shapes) != 1 or items[0].ndim not in (2, 3):
            raise ValueError(f"tensor as a list must hold images of one shape, HW or CHW, "
                             f"got shapes {[t.shape for t in items]}")
        arr = np.stack(items)
        arr = to_nchw(arr, "NHW" if arr.ndim == 3 else "NCHW")
    else:
        x, shape = check_array(tensor, "tensor")
        if len(shape) not in (2, 3, 4):
            raise ValueError(f"tensor must be 2-D (HW), 3-D (CHW) or 4-D (NCHW), got {describe(tensor)}")
        arr = to_numpy(x, "tensor")
        arr = to_nchw(arr, ("HW", "CHW", "NCHW")[arr.ndim - 2])
    n, c, h, w = arr.shape
    if c not in CHANNELS:
        raise ValueError(f"tensor must have 1, 3 or 4 channels on its C axis (HW, CHW or NCHW), "
                         f"got {describe(tensor)}; a channels-last array must be transposed first")
    if n == 0 or h == 0 or w == 0:
        raise ValueError(f"tensor must hold at least one image of non-zero size, got {describe(tensor)}")
    if c == 1:
        arr = np.repeat(arr, 3, axis=1)
    return arr


def _normalize(arr: np.ndarray, norm_range: Optional[Sequence[float]], scale_each: bool) -> np.ndarray:
    if norm_range is not None:
        if not isinstance(norm_range, (tuple, list)) or not all(is_real(v) for v in norm_range):
            raise TypeError(f"norm_range must be a tuple (min, max) of two numbers or None, "
                            f"got {describe(norm_range)}")
        if len(norm_range) != 2:  # numbers, but not two
            raise ValueError(f"norm_range must be a tuple (min, max) of two numbers or None, "
                             f"got {describe(norm_range)}")
        if not norm_range[0] < norm_range[1]:
            raise ValueError(f"norm_range must be (min, max) with min < max, got {tuple(norm_range)}")
    out = arr.astype(arr.dtype if arr.dtype.kind == "f" else np.float32)  # a copy
    for img in (out if scale_each else [out]):
        low, high = (norm_range if norm_range is not None else (img.min(), img.max()))
        np.clip(img, low, high, out=img)
        img -= low
        img /= max(float(high) - float(low), 1e-5)  # torchvision's guard; mxboard divided by 0
    return out


def make_image_grid(tensor: Any, nrow: int = 8, padding: int = 2, normalize: bool = False,
                    norm_range: Optional[Sequence[float]] = None, scale_each: bool = False,
                    pad_value: float = 0, square_image: bool = False) -> Any:
    """Tile images into one C×H×W grid, as mxboard's ``make_image_grid`` (see module docstring).

    Args:
        tensor: an image HW or CHW, a batch NCHW (numpy or NDArray), or a list of
            equal-shaped HW/CHW images. 1 channel (gray) is repeated into 3; 3 or 4 stay.
        nrow: images per row (the grid is ``ceil(N / nrow)`` rows; fewer columns for N < nrow).
        padding: pixels of ``pad_value`` around and between the images.
        normalize: shift and scale to [0, 1] by ``norm_range`` (values outside are
            clipped) or by the minimum and maximum (of each image with ``scale_each``).
        square_image: as many rows as columns (mxboard after 0.1.0), the last ones blank.

    Returns:
        C×H×W with C 3 (or 4), the input's dtype (float32 for normalized integers), an
        NDArray on the input's context for NDArray input, else numpy. A single image
        is returned without padding.

    >>> make_image_grid(np.zeros((10, 1, 4, 5), np.uint8)).shape   # 8 per row, 2 rows
    (3, 14, 58)
    """
    nrow = _check_int(nrow, "nrow", 1)
    padding = _check_int(padding, "padding", 0)
    normalize = _check_bool(normalize, "normalize")
    scale_each = _check_bool(scale_each, "scale_each")
    square_image = _check_bool(square_image, "square_image")
    if not is_real(pad_value):
        raise TypeError(f"pad_value must be a number, got {describe(pad_value)}")
    ctx = getattr(tensor[0] if isinstance(tensor, (list, tuple)) and tensor else tensor, "ctx", None)
    nd_out = is_ndarray(tensor) or (isinstance(tensor, (list, tuple)) and bool(tensor)
                                    and is_ndarray(tensor[0]))
    arr = _as_nchw(tensor)
    if normalize:
        arr = _normalize(arr, norm_range, scale_each)
    n, c, h, w = arr.shape
    if n == 1:
        grid = np.ascontiguousarray(arr[0])
    else:
        if arr.dtype.kind in "iu":
            info = np.iinfo(arr.dtype)
            if not info.min <= pad_value <= info.max:
                raise ValueError(f"pad_value must fit the images' dtype {arr.dtype} "
                                 f"({info.min}..{info.max}), got {pad_value}")
        cols = min(nrow, n)
        rows = cols if square_image else math.ceil(n / cols)
        hp, wp = h + padding, w + padding
        grid = np.full((c, rows * hp + padding, cols * wp + padding), pad_value, dtype=arr.dtype)
        for k in range(min(n, rows * cols)):
            y, x = divmod(k, cols)
            grid[:, y * hp + padding:(y + 1) * hp, x * wp + padding:(x + 1) * wp] = arr[k]
    if nd_out:
        import mxnet as mx

        return mx.nd.array(grid, ctx=ctx, dtype=grid.dtype)
    return grid
