"""Embeddings for TensorBoard's projector: files in the run directory, not events.

``capture_embedding`` (caller's thread) checks shapes and counts and takes
private copies. On the worker, ``embedding_action`` writes the files of
:mod:`.projector_files` (``tensors.bytes``, ``metadata.tsv``, ``sprite.png`` under
``<safe tag>/<step:05d>/``) and rewrites the run's ``projector_config.pbtxt``
(:mod:`.projector_config`), as one ``action(sink)``.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import check_tag, describe
from .._format import proto as _proto
from .capture import array_nbytes, check_array, snapshot
from .layouts import check_size, guess_layout
from .projector_config import CONFIG_NAME, EmbeddingEntry, add_entry, projector_config
from .projector_files import (MAX_SPRITE_SIZE, TENSORS_BINARY, TENSORS_TSV, embedding_dir, escape, metadata_tsv,
                              sprite_layout, sprite_png, tensor_file)


class EmbeddingPayload(NamedTuple):
    matrix: Any                       # (N, D) numpy copy or NDArray copy
    labels: Optional[List[Any]]       # columns: each a list/array copy of N values
    header: Optional[List[str]]       # column names when there are several columns
    images: Any                       # (N, C, H, W) or (N, H, W) copy, or None

    @property
    def nbytes(self) -> int:
        n = array_nbytes(self.matrix) + (0 if self.images is None else array_nbytes(self.images))
        return n + (0 if self.labels is None else 64 * len(self.labels) * self.matrix.shape[0])


# ------------------------------------------------------------ capture (caller thread)
def check_embedding_tag(tag: Any) -> str:
    """``tag`` checked (``check_tag``); a matrix in its place (numpy, NDArray, a list of rows), as
    tensorboardX's order puts it first, is a ``TypeError`` that also gives both orders."""
    if not isinstance(tag, str) and (isinstance(tag, np.ndarray) or is_ndarray(tag)
                                     or (isinstance(tag, (list, tuple)) and len(tag) > 0 and _is_seq(tag[0]))):
        raise TypeError(f"tag must be a str, got {describe(tag)}: the order is mxboard's, add_embedding(tag, "
                        "embedding, labels, images, global_step); tensorboardX's is add_embedding(mat, metadata, "
                        "label_img, global_step, tag)")
    return check_tag(tag)


def _is_seq(x: Any) -> bool:
    return isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim >= 1) \
        or (is_ndarray(x) and len(x.shape) >= 1)


def _copy_column(col: Any, n: int, where: str) -> Any:
    if is_ndarray(col) or isinstance(col, np.ndarray):
        if len(col.shape) != 1:
            raise ValueError(f"{where} must be 1-D with {n} items, got {describe(col)}")
        if col.shape[0] != n:
            raise ValueError(f"{where} must have one item per embedding row ({n}), "
                             f"got {col.shape[0]}")
        return snapshot(col)
    if not isinstance(col, (list, tuple)):
        raise TypeError(f"{where} must be a list of {n} labels, got {describe(col)}")
    if len(col) != n:
        raise ValueError(f"{where} must have one item per embedding row ({n}), got {len(col)}")
    if any(_is_seq(v) or isinstance(v, dict) for v in col):
        raise TypeError(f"{where} items must be single values (str, number), got a nested list")
    return list(col)


def _check_labels(labels: Any, n: int) -> Tuple[List[Any], Optional[List[str]]]:
    if isinstance(labels, dict):
        if not labels:
            raise ValueError("labels must hold at least one column, got {}")
        cols = [_copy_column(v, n, f"labels[{k!r}]") for k, v in labels.items()]
        names = [k if isinstance(k, str) else str(k) for k in labels]
    else:
        if not _is_seq(labels):
            raise TypeError(f"labels must be a list of N labels, a list of N rows or a dict of "
                            f"columns, got {describe(labels)}")
        if isinstance(labels, np.ndarray) and labels.ndim == 2:
            labels = list(labels)
        rows = isinstance(labels, (list, tuple)) and len(labels) > 0 and _is_seq(labels[0])
        if not rows:
            cols = [_copy_column(labels, n, "labels")]
        else:
            if len(labels) != n:
                raise ValueError(f"labels must have one row per embedding row ({n}), "
                                 f"got {len(labels)} rows")
            k = len(labels[0])
            if not all(_is_seq(r) for r in labels):  # rows, then a single value
                raise TypeError(f"labels rows must all be lists of the same non-zero length, got "
                                f"{describe(next(r for r in labels if not _is_seq(r)))} among them")
            if any(len(r) != k for r in labels) or k == 0:
                raise ValueError(f"labels rows must all be lists of the same non-zero length, "
                                 f"got lengths {sorted({len(r) for r in labels})}")
            cols = [[r[j] for r in labels] for j in range(k)]
        names = [f"label_{j}" for j in range(len(cols))]
    if len(cols) == 1:
        return cols, None
    esc = [escape(h) for h in names]
    if len(set(esc)) != len(esc) or not all(e.strip() for e in esc):
        raise ValueError(f"labels column names must be distinct and non-blank, got {names!r}")
    return cols, esc


def capture_embedding(embedding: Any, labels: Any = None, images: Any = None) -> EmbeddingPayload:
    """Check and copy an embedding matrix with optional labels and images.

    ``embedding``: (N, D) numbers, N >= 1 (numpy, NDArray or nested list).
    ``labels``: a list (or 1-D array) of N labels; a list (or 2-D array) of N
    rows, whose columns are named ``label_0``, ``label_1``, ...; or a dict
    ``{column name: list of N}``. A single column is written without a header
    (the projector's rule), so its name is not kept. The count of labels must equal N.
    ``images``: (N, C, H, W) with C = 1, 3 or 4, or (N, H, W); values as in
    ``add_image`` (floats in [0, 1], uint8 as is).
    """
    x, shape = check_array(embedding, "embedding")
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"embedding must be a 2-D (N, D) matrix with N >= 1 and D >= 1, "
                         f"got {describe(x)}")
    n = shape[0]
    cols, header = (None, None) if labels is None else _check_labels(labels, n)
    imgs = None
    if images is not None:
        imgs, ishape = check_array(images, "images")
        layout = guess_layout(ishape, single=False)
        if layout not in ("NCHW", "NHW"):
            raise ValueError(f"images must be (N, C, H, W) with C = 1, 3 or 4, or (N, H, W), "
                             f"got {describe(imgs)}")
        if ishape[0] != n:
            raise ValueError(f"images must hold one image per embedding row ({n}), "
                             f"got {ishape[0]}")
        check_size(layout, ishape, "images", imgs)
        if math.isqrt(n - 1) + 1 > MAX_SPRITE_SIZE:
            raise ValueError(f"images: at most {MAX_SPRITE_SIZE ** 2} images fit in one sprite, "
                             f"got {n}")
        imgs = snapshot(imgs)
    return EmbeddingPayload(snapshot(x), cols, header, imgs)


# ------------------------------------------------------------ build (worker)
def embedding_files(tag: str, step: int, payload: EmbeddingPayload) -> Dict[str, Union[bytes, memoryview]]:
    """``{relative path: file contents}`` for one embedding (pure; may be slow)."""
    d = embedding_dir(tag, step)
    name, data = tensor_file(to_numpy(payload.matrix, "embedding"))
    files = {f"{d}/{name}": data}
    if payload.labels is not None:
        files[f"{d}/metadata.tsv"] = metadata_tsv(payload.labels, payload.header)
    if payload.images is not None:
        files[f"{d}/sprite.png"] = sprite_png(payload.images, f"{tag} (sprite)")[0]
    return files


def embedding_entry(tag: str, step: int, payload: EmbeddingPayload, files: Dict[str, Union[bytes, memoryview]]) -> EmbeddingEntry:
    """The config's entry for the ``files`` of :func:`embedding_files`."""
    binary = f"{embedding_dir(tag, step)}/{TENSORS_BINARY}" in files
    rows, cols = payload.matrix.shape
    dim = None
    if payload.images is not None:
        n, h, w = payload.images.shape[0], payload.images.shape[-2], payload.images.shape[-1]
        _, th, tw = sprite_layout(n, h, w)
        dim = (tw, th)
    return EmbeddingEntry(tag, int(step), payload.labels is not None, dim,
                          TENSORS_BINARY if binary else TENSORS_TSV, (int(rows), int(cols)))


def embedding_action(tag: str, step: int, payload: EmbeddingPayload,
                     entries: List[EmbeddingEntry]) -> Callable[[Any], None]:
    """An ``action(sink)``: write the files into the log directory with the run's
    rewritten ``projector_config.pbtxt``, all or none, and then record the embedding in
    ``entries`` (the writer's list, touched only by the worker)."""

    def action(sink: Any) -> None:
        files = embedding_files(tag, step, payload)
        after = list(entries)
        add_entry(after, embedding_entry(tag, step, payload, files))
        files[CONFIG_NAME] = projector_config(after).encode("ascii")
        sink.write_files(files)  # all of them or none (a full disk leaves no half step)
        entries[:] = after
        # an event (no value: no chart) in the run's event file, which TensorBoard lists runs by: a
        # run with embeddings alone would have none (event files are made at a run's first event)
        sink.write_event(_proto.event(time.time(), step))

    return action
