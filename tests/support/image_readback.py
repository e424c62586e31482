"""Image summaries read back as pixels, and a conv layer's values scaled per filter the way the
``conv_filters`` grids scale them: ``from image_readback import image, normalised``."""
import io

import numpy as np
from PIL import Image

import readback


def image(logdir, run, tag, i=-1):
    ev = readback.tensor_events(logdir, run, tag)[i]
    w, h, png = ev.tensor_proto.string_val[:3]
    img = np.asarray(Image.open(io.BytesIO(png)))
    assert img.shape[:2] == (int(h), int(w))
    return ev.step, img


def normalised(a):
    a = a.reshape(a.shape[0], -1)
    lo, hi = a.min(1, keepdims=True), a.max(1, keepdims=True)
    return (a - lo) / (hi - lo + 1e-12)

