"""The 8x8 handwritten digits shipped in ``examples/data`` (scikit-learn's copy, BSD-3; see
``data/LICENSE-digits.txt``): 1797 images, pixels 0..16, labels 0..9. Works offline."""
import gzip
import os
from typing import Tuple

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.csv.gz")


def load_digits(path: str = DATA) -> Tuple[np.ndarray, np.ndarray]:
    """``(images, labels)``: float32 N×1×8×8 scaled to [0, 1], and int labels."""
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    images = (table[:, :-1] / 16.0).reshape(-1, 1, 8, 8)
    return images, table[:, -1].astype(np.int64)


def split(images: np.ndarray, labels: np.ndarray, val_fraction: float = 0.2, seed: int = 0):
    """A shuffled train/validation split: ``(x_train, y_train), (x_val, y_val)``."""
    order = np.random.RandomState(seed).permutation(len(images))
    n_val = int(len(images) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    return (images[train], labels[train]), (images[val], labels[val])


def loaders(batch_size: int):
    """``(train, validation)`` Gluon DataLoaders of the split above (train shuffled)."""
    from mxnet import gluon

    (x_tr, y_tr), (x_val, y_val) = split(*load_digits())
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x_tr, y_tr.astype("float32")),
                                  batch_size=batch_size, shuffle=True)
    val = gluon.data.DataLoader(gluon.data.ArrayDataset(x_val, y_val.astype("float32")),
                                batch_size=batch_size)
    return train, val
