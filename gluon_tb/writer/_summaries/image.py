"""Images: one image, or a batch tiled into one grid, written as PNG.

``capture_image``/``capture_images`` run on the caller's thread: they check the
shape, layout and dtype and take a copy (``np.array(copy=True)``, or
``NDArray.copy()`` on MXNet's engine); ``build_image`` runs on the worker:
converts to uint8, tiles, PNG-encodes with Pillow and returns a legacy
``Summary.Value.image`` (TensorBoard migrates it to the images plugin on load).

Value policy (the same for video frames):

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
import numbers
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .._format import proto as _proto
from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import describe, is_int, is_real

#: zlib level for PNG. Measured on a 274×274 RGB grid of 64 CIFAR-like images
#: (Pillow 13): level 0 4.7 ms / 226 kB, 1 8.6 ms / 161 kB, 6 (Pillow's default)
#: 10.3 ms / 151 kB, 9 25 ms / 151 kB. Most of the time is Pillow's PNG filtering.
PNG_COMPRESS_LEVEL = 1

_SINGLE = ("HW", "CHW", "HWC")
_BATCH = ("NCHW", "NHWC", "NHW")
_CHANNELS = (1, 3, 4)
#: images per row of ``add_image``'s grid of a batch, as mxboard's ``add_image`` (``add_images``: square-ish)
MXBOARD_NROW = 8


class ImagePayload(NamedTuple):
    """What ``capture_image(s)`` hands to the worker."""

    array: Any  # a private numpy copy or an NDArray copy
    layout: str  # one of _SINGLE + _BATCH
    nrow: Optional[int] = None  # images per grid row of a batch; None: ceil(sqrt(N))

    @property
    def nbytes(self) -> int:
        return array_nbytes(self.array)


# ------------------------------------------------------------ shared helpers
def array_nbytes(x: Any) -> int:
    """Bytes held by a numpy array or NDArray (for the writer's queue budget)."""
    return int(np.prod(x.shape, dtype=np.int64)) * np.dtype(x.dtype).itemsize


def check_array(x: Any, name: str) -> Tuple[Any, Tuple[int, ...]]:
    """Cheap type/dtype check; returns ``(array_like, shape)`` without copying numpy/NDArray.

    Lists are converted here (that conversion is their copy).
    """
    if not (isinstance(x, np.ndarray) or is_ndarray(x)):
        if isinstance(x, (str, bytes, dict)) or x is None or isinstance(x, numbers.Number):
            raise TypeError(f"{name} must be an array (numpy, MXNet NDArray or nested list of "
                            f"numbers), got {describe(x)}")
        x = to_numpy(x, name)
    kind = np.dtype(x.dtype).kind
    if kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (bool, int or float), got {describe(x)}")
    return x, tuple(int(d) for d in x.shape)


def snapshot(x: Any) -> Any:
    """A private copy: numpy is copied now, an NDArray asynchronously on MXNet's engine."""
    if is_ndarray(x):
        return x.copy()
    return np.array(x, copy=True)


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


def check_channels(c: int, name: str, x: Any, layout: str) -> None:
    if c not in _CHANNELS:
        raise ValueError(f"{name} must have 1, 3 or 4 channels, got {c} channels in "
                         f"{describe(x)} read as dataformats={layout!r}; pass dataformats= "
                         f"to read the axes differently")


def _layout(x: Any, shape: Tuple[int, ...], dataformats: Optional[str], name: str,
            allowed: Sequence[str]) -> str:
    nd = len(shape)
    if dataformats is None:
        if nd == 2 and "HW" in allowed:
            layout = "HW"
        elif nd == 3 and "CHW" in allowed:
            layout = "CHW" if shape[0] in _CHANNELS else "HWC"
        elif nd == 3:
            layout = "NHW"
        elif nd == 4:
            layout = "NCHW" if shape[1] in _CHANNELS else "NHWC"
        else:
            want = " or ".join(f"{len(a)}-D ({a})" for a in allowed)
            raise ValueError(f"{name} must be {want}, got {describe(x)}")
        if "C" in layout and shape[layout.index("C")] not in _CHANNELS:
            first, last = layout.replace("HWC", "CHW"), layout.replace("CHW", "HWC")
            raise ValueError(f"{name} must have 1, 3 or 4 channels on axis {first.index('C')} "
                             f"({first}) or {last.index('C')} ({last}), got {describe(x)}; "
                             f"pass dataformats= to name the axes")
    else:
        if not isinstance(dataformats, str):
            raise TypeError(f"dataformats must be a str such as 'CHW', got {describe(dataformats)}")
        layout = dataformats.upper()
        if layout not in allowed:
            raise ValueError(f"dataformats must be one of {', '.join(map(repr, allowed))}, "
                             f"got {dataformats!r}")
        if len(layout) != nd:
            raise ValueError(f"{name} must be {len(layout)}-D for dataformats={layout!r}, "
                             f"got {describe(x)}")
    dims = dict(zip(layout, shape))
    if "C" in dims:
        check_channels(dims["C"], name, x, layout)
    if dims["H"] == 0 or dims["W"] == 0:
        raise ValueError(f"{name} must have non-zero height and width, got {describe(x)}")
    if dims.get("N", 1) == 0:
        raise ValueError(f"{name} must hold at least one image, got {describe(x)}")
    return layout


# ------------------------------------------------------------ capture (caller thread)
def capture_image(image: Any, dataformats: Optional[str] = None) -> ImagePayload:
    """Check and copy one image (or, for 4-D input as in mxboard, a batch to tile
    ``MXBOARD_NROW`` per row, as mxboard's ``add_image``).

    ``dataformats`` is 'HW', 'CHW' or 'HWC' (or 'NCHW'/'NHWC'/'NHW' for a batch).
    ``None`` infers it: 2-D is HW; 3-D is CHW when ``shape[0]`` is 1, 3 or 4,
    else HWC; 4-D is NCHW when ``shape[1]`` is 1, 3 or 4, else NHWC.
    Channels must be 1 (gray), 3 (RGB) or 4 (RGBA). Values follow the module's
    policy: floats in [0, 1] (clipped, NaN -> 0), uint8 as is, other ints clipped to 0..255.
    """
    x, shape = check_array(image, "image")
    layout = _layout(x, shape, dataformats, "image", _SINGLE + _BATCH)
    return ImagePayload(snapshot(x), layout, MXBOARD_NROW if layout in _BATCH else None)


def capture_images(images: Any, dataformats: Optional[str] = None,
                   max_images: Optional[int] = None) -> ImagePayload:
    """Check and copy a batch of images, tiled into one grid by the worker.

    ``dataformats`` is 'NCHW', 'NHWC' or 'NHW'. ``None`` infers it: 4-D is NCHW
    when ``shape[1]`` is 1, 3 or 4, else NHWC; 3-D is NHW (a batch of gray
    images). ``max_images`` keeps only the first images (and copies only those).
    Values follow the module's policy (floats in [0, 1], uint8 as is, ints clipped).
    """
    x, shape = check_array(images, "images")
    layout = _layout(x, shape, dataformats, "images", _BATCH)
    if max_images is not None:
        if not is_int(max_images):
            raise TypeError(f"max_images must be a positive int or None, got {describe(max_images)}")
        if max_images < 1:
            raise ValueError(f"max_images must be a positive int or None, got {max_images}")
        if shape[0] > max_images:
            x = x[: int(max_images)]
    return ImagePayload(snapshot(x), layout)


# ------------------------------------------------------------ build (worker thread)
def to_nchw(arr: np.ndarray, layout: str) -> np.ndarray:
    """A view of ``arr`` as N×C×H×W for any supported layout."""
    if layout == "HW":
        return arr[None, None]
    if layout == "CHW":
        return arr[None]
    if layout == "HWC":
        return arr.transpose(2, 0, 1)[None]
    if layout == "NHW":
        return arr[:, None]
    if layout == "NHWC":
        return arr.transpose(0, 3, 1, 2)
    return arr


def image_hwc(payload: ImagePayload, name: str = "image") -> np.ndarray:
    """The payload as one uint8 H×W×C image (a grid for a batch)."""
    arr = to_numpy(payload.array, name)
    return tile_images(to_uint8(to_nchw(arr, payload.layout)), nrow=payload.nrow)


def build_image(tag: str, payload: ImagePayload) -> bytes:
    """Encode the payload as PNG in a ``Summary.Value.image``."""
    hwc = image_hwc(payload)
    h, w, c = hwc.shape
    return _proto.value(tag, image=_proto.image(h, w, c, encode_png(hwc)))


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
