"""Convolution filters and feature maps as image grids: NDArray in, NDArray out.

Pure functions of MXNet NDArrays: each queues operations on MXNet's engine (per-item min/max
normalisation, nearest-neighbour zoom, tiling) and returns NDArrays, which the ``conv_filters=``
option (``_conv_filters.write_filters``) hands to the writer's ``add_image``/``add_images``.
Nothing waits for a value on the calling thread; nothing here knows a network or a writer.

Filters of a convolution with weight ``(O, I, kh, kw)`` (at most ``max_filters`` of them),
each filter scaled to [0, 1] by its own min and max (a constant filter is black):

* ``I == 3``: one RGB tile per filter; ``I == 1``: one grayscale tile per filter; both tiled
  by ``add_images`` (``ceil(sqrt(O))`` tiles a row, 2 black pixels between and around).
* otherwise: one row per filter, one grayscale tile per input channel (so row ``o``, column
  ``i`` is ``w[o, i]``), 2 black pixels between and around, as one ``CHW`` image.

Feature maps of one sample, ``(1, C, H, W)`` or ``(C, H, W)``: the first ``max_maps``
channels, each scaled by its own min and max, as grayscale tiles for ``add_images``.

``zoom`` repeats every pixel ``zoom`` times in both directions; ``None`` picks
``max(1, 24 // max(h, w))`` so that 3×3 kernels become 24×24 tiles.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from .._common.checks import check_positive_int, check_positive_int_or_none

PAD = 2


def auto_zoom(h: int, w: int) -> int:
    return max(1, 24 // max(h, w, 1))


def normalise(x: Any) -> Any:
    """Each item ``x[i]`` scaled to [0, 1] by its own min and max (NDArray ops)."""
    from mxnet import nd

    n = x.shape[0]
    flat = nd.reshape(x, shape=(n, -1)).astype("float32")
    lo = flat.min(axis=1, keepdims=True)
    span = flat.max(axis=1, keepdims=True) - lo
    return nd.reshape(nd.broadcast_div(nd.broadcast_sub(flat, lo), span + 1e-12), shape=x.shape)


def _zoom(x: Any, zoom: int) -> Any:
    return x if zoom == 1 else x.repeat(zoom, axis=2).repeat(zoom, axis=3)


def split_grid(tiles: Any, pad: int = PAD) -> Any:
    """``(O, I, h, w)`` -> one ``(1, O*(h+pad)+pad, I*(w+pad)+pad)`` image: row o, column i."""
    from mxnet import nd

    o, i, h, w = tiles.shape
    t = nd.pad(tiles, mode="constant", pad_width=(0, 0, 0, 0, 0, pad, 0, pad))
    g = nd.reshape(t.transpose((0, 2, 1, 3)), shape=(1, 1, o * (h + pad), i * (w + pad)))
    return nd.pad(g, mode="constant", pad_width=(0, 0, 0, 0, pad, 0, pad, 0))[0]


def filter_images(weight: Any, *, max_filters: int = 64, zoom: Optional[int] = None) -> Tuple[Any, str]:
    """``(images, dataformats)`` for the filters of a convolution weight ``(O, I, kh, kw)``:
    ``"NCHW"`` tiles (1 or 3 input channels) or one ``"CHW"`` grid (any other count)."""
    if len(weight.shape) != 4:
        raise ValueError(f"weight must be a Conv2D weight (O, I, kh, kw), got shape {tuple(weight.shape)}")
    check_positive_int(max_filters, "max_filters")
    z = check_positive_int_or_none(zoom, "zoom") or auto_zoom(*weight.shape[2:])
    w = _first(weight, max_filters)
    if w.shape[1] in (1, 3):
        return _zoom(normalise(w), z), "NCHW"
    return split_grid(_zoom(normalise(w), z)), "CHW"


def feature_map_images(maps: Any, *, max_maps: int = 64, zoom: Optional[int] = None) -> Any:
    """``(C, 1, H', W')`` tiles of one sample's feature maps ``(1, C, H, W)`` or ``(C, H, W)``."""
    shape = tuple(maps.shape)
    if len(shape) == 4 and shape[0] == 1:
        maps = _first(maps, 1).reshape(shape[1:])
    elif len(shape) != 3:
        raise ValueError(f"maps must be the feature maps of one sample, (1, C, H, W) or "
                         f"(C, H, W), got shape {shape}")
    check_positive_int(max_maps, "max_maps")
    z = check_positive_int_or_none(zoom, "zoom") or auto_zoom(*maps.shape[1:])
    m = _first(maps, max_maps)
    return _zoom(normalise(m.expand_dims(axis=1)), z)


def _first(x: Any, n: int) -> Any:
    """The first ``n`` items of ``x`` as a new array: slicing makes a view, which MXNet refuses
    for arrays in MKL-DNN's internal layout (a Conv2D's weight after a forward pass)."""
    from mxnet import nd

    return nd.slice_axis(x, axis=0, begin=0, end=min(n, x.shape[0]))
