"""Video clips, written as an animated GIF in a ``Summary.Value.image``.

TensorBoard's images dashboard shows GIFs (it sniffs the image format), as
tensorboardX's ``add_video`` relies on. Shapes are ``(T, C, H, W)`` for one
clip or ``(N, T, C, H, W)`` for N clips, tiled side by side in every frame with
:func:`~.pixels.tile_images`; ``dataformats='THWC'`` or ``'NTHWC'`` takes the channels
last (the copy keeps the caller's layout: the writer thread transposes it). C is 1 (gray),
3 (RGB) or 4 (RGBA: GIF has no alpha channel, so alpha is dropped). Values follow the pixels' policy (floats in
[0, 1], NaN -> 0; uint8 as is; other ints clipped to 0..255).

GIF limits: RGB frames are reduced to a 256-colour palette each (gray frames
are exact); frame delays are stored in 1/100 s, so ``1/fps`` is rounded to
10 ms and held at 20 ms at least (browsers slow faster GIFs down); identical
consecutive frames are merged into one longer frame by Pillow.
"""
from __future__ import annotations

import io
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from .._format import proto as _proto
from .._format.chain import Message, uncopied
from .._common.arrays import to_numpy
from .._common.checks import Number, as_float, check_choice, describe, is_real
from .capture import array_nbytes, check_array, snapshot
from .layouts import check_channels
from .pixels import checked_uint8, tile_images


#: ``dataformats`` of ``add_video``: channels first (the default) or last, one clip or a batch
LAYOUTS = ("TCHW", "THWC", "NTCHW", "NTHWC")


class VideoPayload(NamedTuple):
    array: Any  # a private copy, in the caller's layout
    fps: float
    layout: str = "TCHW"  # one of LAYOUTS: build_video transposes it to (N, )T, C, H, W

    @property
    def nbytes(self) -> int:
        return array_nbytes(self.array)


def capture_video(video: Any, fps: Number = 4, dataformats: Optional[str] = None) -> VideoPayload:
    """Check and copy ``(T, C, H, W)`` or ``(N, T, C, H, W)`` frames, or the layout ``dataformats``
    names (one of :data:`LAYOUTS`, any case); ``fps`` > 0."""
    if not is_real(fps):
        raise TypeError(f"fps must be a positive number, got {describe(fps)}")
    if not (0 < fps < float("inf")):  # False for NaN too
        raise ValueError(f"fps must be a positive finite number, got {fps!r}")
    if dataformats is not None:
        if not isinstance(dataformats, str) or dataformats.upper() not in LAYOUTS:
            check_choice(dataformats, "dataformats", LAYOUTS)  # raises, naming what was given
        dataformats = dataformats.upper()
    x, shape = check_array(video, "video")
    if dataformats is not None and len(shape) != len(dataformats):
        raise ValueError(f"video must be {len(dataformats)}-D for dataformats={dataformats!r}, "
                         f"got {describe(x)}")
    if len(shape) not in (4, 5):
        raise ValueError(f"video must be 4-D (T, C, H, W) or 5-D (N, T, C, H, W), "
                         f"got {describe(x)}")
    layout = dataformats or ("TCHW" if len(shape) == 4 else "NTCHW")
    dims = dict(zip(layout, shape))
    check_channels(dims["C"], "video", x, layout)
    if 0 in shape:
        raise ValueError(f"video must have at least one clip, frame, row and column, "
                         f"got {describe(x)}")
    return VideoPayload(snapshot(x), as_float(fps, "fps"), layout)


def frame_delay_ms(fps: float) -> int:
    """The GIF frame delay for ``fps``: a multiple of 10 ms, at least 20 ms."""
    return max(2, int(round(100.0 / fps))) * 10


def encode_gif(frames: np.ndarray, fps: float) -> bytes:
    """GIF bytes of uint8 ``(T, H, W, C)`` frames (C in 1, 3)."""
    from PIL import Image

    imgs = [Image.fromarray(np.ascontiguousarray(f[:, :, 0] if f.shape[2] == 1 else f))
            for f in frames]
    buf = io.BytesIO()
    imgs[0].save(buf, format="GIF", save_all=True, append_images=imgs[1:],
                 duration=frame_delay_ms(fps), loop=0)
    return buf.getvalue()


def build_video(tag: str, payload: VideoPayload,
                encode: Callable[[np.ndarray, float], bytes] = encode_gif) -> Message:
    """Encode the clip(s) as an animated GIF in a ``Summary.Value.image``. ``encode``: what turns
    the frames into GIF bytes (:func:`encode_gif`, or the same in a child process)."""
    arr = to_numpy(payload.array, "video")
    if payload.layout.endswith("HWC"):  # channels last: a view with them first
        arr = np.moveaxis(arr, -1, -3)
    if arr.ndim == 4:
        arr = arr[None]
    arr = checked_uint8(arr[:, :, :3], tag)  # GIF has no alpha channel: drop it
    frames = np.stack([tile_images(arr[:, t]) for t in range(arr.shape[1])])
    _, h, w, c = frames.shape
    return _proto.value(tag, image=_proto.image(h, w, c, uncopied(encode(frames, payload.fps))))
