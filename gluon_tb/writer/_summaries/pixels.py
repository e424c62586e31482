"""Pixels: numbers made into uint8 pixels, images tiled into one, PNG bytes (worker thread).

Value policy of every image summary (images, video frames, embedding sprites), the one rule
of the writer and the handlers alike:

* floating point whose finite values all lie in ``[0, 1]``: scaled to ``0..255`` and rounded to
  nearest. Finite values outside ``[0, 1]`` (0..255 floats, normalised inputs with mean 0):
  the whole image (a batch, a clip, a sprite's images together) is first rescaled by its finite
  min and max to ``[0, 1]``, and the writer warns once per tag (:func:`checked_uint8`); a constant
  image outside ``[0, 1]`` is clipped instead. NaN becomes 0, +inf 255, -inf 0.
* uint8: taken as is.
* other integers (int8/16/32/64, uint16/32/64): taken as ``0..255`` values
  and clipped to that range (they are *not* rescaled).
* bool: False is 0, True is 255.
"""
from __future__ import annotations

import io
import math
import threading
import warnings
from typing import Any, Optional, Set, Tuple

import numpy as np

from .._common.arrays import to_numpy
from .._common.checks import describe, is_int, is_real

try:  # the optional C kernels (setup.py builds them where a compiler is found): same values
    from . import _fastconvert as _fast  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fast = None
try:  # where zlib's header was found too
    from . import _fastpng  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _fastpng = None

#: zlib level for PNG: level 1 comes within a few per cent of the default level's size in less
#: time, level 0 does not compress and level 9 takes much longer for nothing more; most of the
#: time is the PNG filtering (figures in benchmarks/RESULTS-notes.md).
PNG_COMPRESS_LEVEL = 1


def kernel_input(arr: np.ndarray) -> Optional[np.ndarray]:
    """``arr`` C-contiguous (copied only if it is not), for the C kernels of ``_fastconvert``; None
    where they are not built or do not take its dtype (float32 and float64 in native byte order).
    One kernel call holds the GIL once, where the numpy code releases and re-takes it per call
    (``_fastconvert.c`` says why that matters)."""
    if _fast is None or arr.dtype.char not in "fd" or not arr.dtype.isnative:
        return None
    return np.ascontiguousarray(arr)


def display_range(arr: np.ndarray) -> Optional[Tuple[float, float]]:
    """``None`` when ``arr`` needs no rescaling, else the finite ``(min, max)`` to rescale it by."""
    if arr.dtype.kind != "f" or arr.size == 0:
        return None
    src = kernel_input(arr)
    if src is not None:
        finite, lo, hi = _fast.finite_range(src)
        if not finite:
            return None
    else:
        ok = np.isfinite(arr)
        vals = arr if ok.all() else arr[ok]
        if vals.size == 0:
            return None
        lo, hi = float(vals.min()), float(vals.max())
    if (lo >= 0.0 and hi <= 1.0) or hi == lo:
        return None
    return lo, hi


_warned: Set[str] = set()
_warned_lock = threading.Lock()


def warn_rescaled(tag: str, rng: Tuple[float, float]) -> None:
    """The float rule's warning, once per ``tag`` in the process."""
    with _warned_lock:
        if tag in _warned:
            return
        _warned.add(tag)
    lo, hi = rng[0] + 0.0, rng[1] + 0.0  # -0.0 reads 0: numpy's min and the C kernel's may differ in its sign
    warnings.warn(f"gluon_tb: image {tag!r}: float values span [{lo:.6g}, {hi:.6g}], outside [0, 1]; "
                  "rescaled by their min and max (pass floats in [0, 1] or uint8 0..255 to keep them as they "
                  "are)", UserWarning, stacklevel=3)


def checked_uint8(arr: np.ndarray, tag: str) -> np.ndarray:
    """:func:`to_uint8` with the float rule applied, warning once per ``tag`` when it rescales."""
    rng = display_range(arr)
    if rng is not None:
        warn_rescaled(tag, rng)
    return to_uint8(arr, rng)


def checked_png(nchw: np.ndarray, nrow: Optional[int], tag: str,
                compress_level: int = PNG_COMPRESS_LEVEL) -> Optional[Tuple[bytes, Tuple[int, int, int]]]:
    """``encode_png(tile_images(checked_uint8(nchw, tag), nrow=nrow))`` and the grid's ``(h, w, c)``, by
    one kernel call (``_fastpng.png_grid``: one release of the GIL where the numpy code takes it back
    for the range, the conversion, the transposing copy or each image of a grid, and the encoding);
    None where the kernel does not apply (not built, not float32/float64, empty, more than 4
    channels, or an ``nrow`` that :func:`tile_images` would refuse): the caller takes that way."""
    if (_fastpng is None or nchw.ndim != 4 or nchw.size == 0 or nchw.dtype.char not in "fd"
            or not nchw.dtype.isnative or not 1 <= nchw.shape[1] <= 4
            or not (nrow is None or (is_int(nrow) and nrow >= 1))):
        return None
    n, c, h, w = nchw.shape
    ncol, p, gh, gw = grid_layout(n, h, w, nrow, 2)
    png, _finite, lo, hi, rescaled = _fastpng.png_grid(np.ascontiguousarray(nchw), n, c, h, w, ncol, p,
                                                       compress_level)
    if rescaled and nchw.dtype.char == "d" and _beyond_float32((lo, hi)):  # the kernel rescaled in float32:
        return None  # float64 values past its range go numpy's way (to_uint8 maps them in float64)
    if rescaled:
        warn_rescaled(tag, (lo, hi))
    return png, (gh, gw, c)


def _beyond_float32(rng: Optional[Tuple[float, float]]) -> bool:
    """A ``display_range`` that float32 arithmetic (the kernels', numpy's below) cannot rescale by:
    values or a span past float32's range, or a span so narrow its inverse is."""
    if rng is None:
        return False
    lo, hi = rng
    return max(abs(lo), abs(hi)) > 1e37 or (hi - lo) < 1e-30


def to_uint8(arr: np.ndarray, rescale: Optional[Tuple[float, float]] = None) -> np.ndarray:
    """Apply the module's value policy (see the module docstring); ``rescale``: the ``(min, max)``
    of :func:`display_range`, mapped to ``[0, 1]`` first."""
    if arr.dtype == np.float64 and _beyond_float32(rescale):  # values float32 cannot hold (1e300): in float64
        lo, hi = rescale  # type: ignore[misc]
        with np.errstate(all="ignore"):  # halves: hi - lo itself may overflow float64
            arr = (arr / 2 - lo / 2) / (hi / 2 - lo / 2)
        rescale = None
    src = kernel_input(arr)
    if src is not None:
        lo, hi = rescale if rescale is not None else (0.0, 1.0)
        out = np.empty(arr.shape, np.uint8)
        _fast.to_uint8(src, out, rescale is not None, lo, 1.0 / (hi - lo))
        return out
    if rescale is not None:
        lo, hi = rescale
        with np.errstate(over="ignore", invalid="ignore"):
            arr = (arr.astype(np.float32) - np.float32(lo)) * np.float32(1.0 / (hi - lo))
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
    """PNG bytes of a uint8 H×W×C image (C in 1, 3, 4): by the C kernel ``_fastpng`` where it is
    built (one release of the GIL; on the same zlib, the bytes Pillow writes), else by Pillow."""
    if _fastpng is not None:
        return _fastpng.png(np.ascontiguousarray(hwc), compress_level)
    from PIL import Image

    img = Image.fromarray(np.ascontiguousarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


def grid_layout(n: int, h: int, w: int, nrow: Optional[int], padding: int) -> Tuple[int, int, int, int]:
    """``(columns, padding, height, width)`` of :func:`tile_images`' grid of ``n`` images of ``h`` × ``w``
    (``nrow`` checked by the caller): ``nrow`` or ``ceil(sqrt(n))`` columns, every cell framed by
    ``padding`` pixels; a single image is the image itself (no frame)."""
    if n == 1:
        return 1, 0, h, w
    ncol = min(n, int(nrow) if nrow is not None else math.ceil(math.sqrt(n)))
    return ncol, padding, math.ceil(n / ncol) * (h + padding) + padding, ncol * (w + padding) + padding


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
    if nrow is not None and not is_int(nrow):
        raise TypeError(f"nrow must be a positive int or None, got {describe(nrow)}")
    if nrow is not None and nrow < 1:
        raise ValueError(f"nrow must be a positive int or None, got {describe(nrow)}")
    if not is_int(padding):
        raise TypeError(f"padding must be a non-negative int, got {describe(padding)}")
    if padding < 0:
        raise ValueError(f"padding must be a non-negative int, got {describe(padding)}")
    if not is_real(pad_value):
        raise TypeError(f"pad_value must be a number, got {describe(pad_value)}")
    n, c, h, w = arr.shape
    if n == 0:
        raise ValueError(f"images must hold at least one image, got {describe(arr)}")
    if n == 1:
        return np.ascontiguousarray(arr[0].transpose(1, 2, 0))
    ncol, p, gh, gw = grid_layout(n, h, w, nrow, int(padding))
    grid = np.full((gh, gw, c), pad_value, dtype=arr.dtype)
    hwc = arr.transpose(0, 2, 3, 1)
    for i in range(n):
        r, k = divmod(i, ncol)
        y, x = p + r * (h + p), p + k * (w + p)
        grid[y:y + h, x:x + w] = hwc[i]
    return grid
