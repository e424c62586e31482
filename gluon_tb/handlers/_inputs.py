"""What the handlers do with the training inputs: ``first_batch`` images."""
from __future__ import annotations

import logging
from typing import Any, Tuple

from ..writer import SummaryWriter
from ._run_writers import TRAIN, RunWriters


def image_format(shape: Tuple[Any, ...]) -> str:
    """``"NCHW"`` (1 or 3 channels) or ``"NHW"`` when ``shape`` is that of a batch of images, else ``""``.

    The one image-shape test of the handlers: ``first_batch`` and the projector's sprite use it.
    """
    if len(shape) == 4 and shape[1] in (1, 3):
        return "NCHW"
    if len(shape) == 3:
        return "NHW"
    return ""


def log_first_batch(out: RunWriters, batch: Any, max_images: int, step: int) -> None:
    """Log a ``[data, label]`` batch's inputs as one grid ``first_batch`` in ``train``;
    anything else is skipped, saying why once."""
    if not (isinstance(batch, (list, tuple)) and len(batch) == 2):
        out.say_once("pairs", "gluon_tb: training batches are not [data, label] pairs; "
                     "first_batch images are not logged", logging.WARNING)
        return
    x = batch[0]
    shape = tuple(getattr(x, "shape", ()))
    fmt = image_format(shape)
    if not fmt:
        out.say_once("not-images", f"gluon_tb: inputs of shape {shape} do "
                     "not look like images; first_batch is not logged")
        return
    out.call(TRAIN, SummaryWriter.add_images, "first_batch", for_display(x[:max_images]), step,
             dataformats=fmt)


def for_display(x: Any) -> Any:
    """Floats scaled to [0, 1] by the batch's min and max (asynchronous for NDArrays)."""
    import numpy as np

    if np.dtype(x.dtype).kind != "f":
        return x
    if isinstance(x, np.ndarray):
        lo, hi = x.min(), x.max()
        return (x - lo) / max(float(hi - lo), 1e-12)
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo + 1e-12)
