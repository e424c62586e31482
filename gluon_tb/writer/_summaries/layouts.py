"""Image axes: which axis of an array holds the images (N), channels (C), rows (H) and columns (W).

A *layout* names the axes in order: ``HW``, ``CHW``, ``HWC`` for one image, ``NCHW``, ``NHWC``,
``NHW`` for a batch. Without ``dataformats=``, a shape is read by :func:`guess_layout`: by its
rank, and by whether the axis that could hold channels has 1, 3 or 4 of them (channels first
wins). Every image summary checks the same size rule (:func:`check_size`) and works on
N×C×H×W (:func:`to_nchw`).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .._common.checks import describe

CHANNELS = (1, 3, 4)  # gray, RGB, RGBA
SINGLE = ("HW", "CHW", "HWC")
BATCH = ("NCHW", "NHWC", "NHW")


def guess_layout(shape: Sequence[int], single: bool) -> Optional[str]:
    """The layout of ``shape`` when none is given; ``single``: a 2-D or 3-D shape is one image
    (HW; CHW, else HWC), not a batch (3-D: NHW). 4-D is NCHW, else NHWC. None for other ranks."""
    nd = len(shape)
    if nd == 2 and single:
        return "HW"
    if nd == 3:
        return ("CHW" if shape[0] in CHANNELS else "HWC") if single else "NHW"
    if nd == 4:
        return "NCHW" if shape[1] in CHANNELS else "NHWC"
    return None


def check_channels(c: int, name: str, x: Any, layout: str) -> None:
    if c not in CHANNELS:
        raise ValueError(f"{name} must have 1, 3 or 4 channels, got {c} channels in "
                         f"{describe(x)} read as dataformats={layout!r}; pass dataformats= "
                         f"to read the axes differently")


def check_size(layout: str, shape: Sequence[int], name: str, x: Any) -> None:
    """Images have rows and columns: ``H`` and ``W`` of ``shape`` read as ``layout`` are not 0."""
    dims = dict(zip(layout, shape))
    if dims["H"] == 0 or dims["W"] == 0:
        raise ValueError(f"{name} must have non-zero height and width, got {describe(x)}")


def resolve_layout(x: Any, shape: Tuple[int, ...], dataformats: Optional[str], name: str,
                   allowed: Sequence[str]) -> str:
    """The layout of ``x`` (of ``shape``): ``dataformats`` checked, or guessed when None; then
    the channels (1, 3 or 4), the size and at least one image are checked."""
    nd = len(shape)
    if dataformats is None:
        layout = guess_layout(shape, single="HW" in allowed)
        if layout is None:
            want = " or ".join(f"{len(a)}-D ({a})" for a in allowed)
            raise ValueError(f"{name} must be {want}, got {describe(x)}")
        if "C" in layout and shape[layout.index("C")] not in CHANNELS:
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
    check_size(layout, shape, name, x)
    if dims.get("N", 1) == 0:
        raise ValueError(f"{name} must hold at least one image, got {describe(x)}")
    return layout


def to_nchw(arr: np.ndarray, layout: str) -> np.ndarray:
    """A view of ``arr`` as N×C×H×W for any layout above (and NCHW as it is)."""
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
