"""What the handlers do with the training inputs: ``first_batch`` images."""
from __future__ import annotations

import logging
from typing import Any, Tuple

from ...writer import SummaryWriter
from .._common.run_writers import TRAIN, RunWriters


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
    if not fmt and len(shape) == 4 and shape[3] in (1, 3):
        fmt = "NHWC"  # channels last: MXNet's vision datasets without ToTensor
    if not fmt:
        out.say_once("not-images", f"gluon_tb: inputs of shape {shape} do "
                     "not look like images; first_batch is not logged")
        return
    # the writer's one value rule for floats (writer/_summaries/pixels.py): kept if in [0, 1], else
    # rescaled by the batch's min and max, with one warning for the tag
    out.call(TRAIN, SummaryWriter.add_images, "first_batch", x[:max_images], step, dataformats=fmt)
