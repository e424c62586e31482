"""Images: one image, or a batch tiled into one grid, written as PNG.

``capture_image``/``capture_images`` run on the caller's thread: they check the
shape, layout (:mod:`.layouts`) and dtype and take a copy (into a buffer of the writer's
:class:`~.copy_buffers.BufferPool` where one is idle: a batch of images is logged again and
again, and fresh memory costs more than the copy);
``build_image`` runs on the worker: converts to uint8, tiles and PNG-encodes
(:mod:`.pixels`, which states the value policy) and returns a legacy
``Summary.Value.image`` (TensorBoard migrates it to the images plugin on load).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from .._format import proto as _proto
from .._format.chain import Message, uncopied
from .._common.arrays import to_numpy
from .._common.checks import describe, is_int
from .capture import array_nbytes, check_array, snapshot
from .copy_buffers import BufferPool
from .layouts import BATCH, SINGLE, resolve_layout, to_nchw
from .pixels import checked_png, checked_uint8, encode_png, tile_images

#: images per row of ``add_image``'s grid of a batch, as mxboard's ``add_image`` (``add_images``: square-ish)
MXBOARD_NROW = 8


class ImagePayload(NamedTuple):
    """What ``capture_image(s)`` hands to the worker."""

    array: Any  # a private numpy copy or an NDArray copy
    pool: Optional[BufferPool]  # where ``array`` goes back once read (None: nowhere)
    layout: str  # one of layouts.SINGLE + layouts.BATCH
    nrow: Optional[int] = None  # images per grid row of a batch; None: ceil(sqrt(N))

    @property
    def nbytes(self) -> int:
        return array_nbytes(self.array)


# ------------------------------------------------------------ capture (caller thread)
def capture_image(image: Any, dataformats: Optional[str] = None,
                  pool: Optional[BufferPool] = None) -> ImagePayload:
    """Check and copy one image (or, for 4-D input as in mxboard, a batch to tile
    ``MXBOARD_NROW`` per row, as mxboard's ``add_image``).

    ``dataformats`` is 'HW', 'CHW' or 'HWC' (or 'NCHW'/'NHWC'/'NHW' for a batch).
    ``None`` infers it: 2-D is HW; 3-D is CHW when ``shape[0]`` is 1, 3 or 4,
    else HWC; 4-D is NCHW when ``shape[1]`` is 1, 3 or 4, else NHWC.
    Channels must be 1 (gray), 3 (RGB) or 4 (RGBA). Values follow the pixels'
    policy: floats in [0, 1] (clipped, NaN -> 0), uint8 as is, other ints clipped to 0..255.
    """
    x, shape = check_array(image, "image")
    layout = resolve_layout(x, shape, dataformats, "image", SINGLE + BATCH)
    return ImagePayload(*_copy(x, pool), layout=layout, nrow=MXBOARD_NROW if layout in BATCH else None)


def capture_images(images: Any, dataformats: Optional[str] = None,
                   max_images: Optional[int] = None, pool: Optional[BufferPool] = None) -> ImagePayload:
    """Check and copy a batch of images, tiled into one grid by the worker.

    ``dataformats`` is 'NCHW', 'NHWC' or 'NHW'. ``None`` infers it: 4-D is NCHW
    when ``shape[1]`` is 1, 3 or 4, else NHWC; 3-D is NHW (a batch of gray
    images). ``max_images`` keeps only the first images (and copies only those).
    Values follow the pixels' policy (floats in [0, 1], uint8 as is, ints clipped).
    """
    x, shape = check_array(images, "images")
    layout = resolve_layout(x, shape, dataformats, "images", BATCH)
    if max_images is not None:
        if not is_int(max_images):
            raise TypeError(f"max_images must be a positive int or None, got {describe(max_images)}")
        if max_images < 1:
            raise ValueError(f"max_images must be a positive int or None, got {max_images}")
        if shape[0] > max_images:
            x = x[: int(max_images)]
    return ImagePayload(*_copy(x, pool), layout=layout)


def _copy(x: Any, pool: Optional[BufferPool]) -> Tuple[Any, Optional[BufferPool]]:
    """A private copy of ``x`` and the pool it goes back to: numpy into an idle buffer of
    ``pool`` where there is one (the caller's time is the copy's); an NDArray fresh, on MXNet's
    engine (off the caller's time), not pooled."""
    if pool is not None and isinstance(x, np.ndarray):
        return pool.copy_numpy(x), pool
    return snapshot(x), None


# ------------------------------------------------------------ build (worker thread)
def build_image(tag: str, payload: ImagePayload) -> Message:
    """Encode the payload as PNG in a ``Summary.Value.image``: float images by one kernel call
    (``pixels.checked_png``), the others (and without the kernel) as a uint8 H×W×C grid, then PNG."""
    name = tag or "image"
    try:
        nchw = to_nchw(to_numpy(payload.array, "image"), payload.layout)
        fast = checked_png(nchw, payload.nrow, name)
        if fast is not None:
            png, (h, w, c) = fast
        else:
            hwc = tile_images(checked_uint8(nchw, name), nrow=payload.nrow)
            h, w, c = hwc.shape
            png = encode_png(hwc)
    finally:  # the copy is read (the grid may be a view of it): it may be reused
        if payload.pool is not None:
            payload.pool.give(payload.array)
    return _proto.value(tag, image=_proto.image(h, w, c, uncopied(png)))
