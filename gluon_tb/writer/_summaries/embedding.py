"""Embeddings for TensorBoard's projector: files in the run directory, not events.

``capture_embedding`` (caller's thread) checks shapes and counts and takes
private copies. On the worker, ``embedding_files`` turns the payload into
files under ``<safe tag>/<step:05d>/`` of the run directory:

* ``tensors.tsv``: N lines of D tab-separated floats (float32, ``%.9g``, exact);
* ``metadata.tsv``: one label column without a header, or several columns
  after a header row (as the projector expects);
* ``sprite.png``: the images as a square grid of equal thumbnails, at most
  8192×8192 pixels, thumbnails scaled down (area average) when N is large.

``projector_config`` writes ``projector_config.pbtxt`` for every embedding of
the run; the writer keeps the list (``add_entry``) and rewrites the file whole.
``embedding_action`` does all of it as one ``action(sink)``.

Labels: every cell is ``str(value)`` (bytes decoded as UTF-8, None -> empty);
tab, newline and carriage return are written as the two characters ``\\t``,
``\\n``, ``\\r``. The projector skips blank lines, so a line that would be
blank gets ``<empty>`` in its first cell.
"""
from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .._common.arrays import is_ndarray, to_numpy
from .._common.checks import describe
from .image import array_nbytes, check_array, encode_png, snapshot, to_uint8

MAX_SPRITE_SIZE = 8192
CONFIG_NAME = "projector_config.pbtxt"
EMPTY_LABEL = "<empty>"


class EmbeddingPayload(NamedTuple):
    matrix: Any                       # (N, D) numpy copy or NDArray copy
    labels: Optional[List[Any]]       # columns: each a list/array copy of N values
    header: Optional[List[str]]       # column names when there are several columns
    images: Any                       # (N, C, H, W) or (N, H, W) copy, or None

    @property
    def nbytes(self) -> int:
        n = array_nbytes(self.matrix) + (0 if self.images is None else array_nbytes(self.images))
        return n + (0 if self.labels is None else 64 * len(self.labels) * self.matrix.shape[0])


class EmbeddingEntry(NamedTuple):
    """What ``projector_config`` needs to know of one logged embedding."""

    tag: str
    step: int
    has_metadata: bool
    sprite_dim: Optional[Tuple[int, int]]  # thumbnail (width, height)


# ------------------------------------------------------------ paths
_CLEAN = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
             *(f"lpt{i}" for i in range(10))}


def safe_path_component(tag: str) -> str:
    """One file-name component for ``tag``; distinct tags give distinct names.

    A tag of at most 64 characters from ``a-z 0-9 _ . -``, not starting with
    '.' or '-', not ending with '.' and not a Windows device name, is used as
    is. Any other tag becomes its characters with each run of characters
    outside ``A-Za-z0-9_-`` replaced by '_', leading '-' removed, cut to 40
    characters (or '_' if nothing is left), then '~' and the first 16 hex
    digits of the SHA-256 of its UTF-8 (clean names never hold '~',
    and upper-case tags are hashed so that case-insensitive file systems keep
    them apart). So '/', '..', absolute paths, NUL and long tags never leave
    the folder.
    """
    if _CLEAN.fullmatch(tag) and not tag.endswith(".") and tag.split(".")[0] not in _RESERVED:
        return tag
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "_", tag).lstrip("-")[:40] or "_"
    return f"{prefix}~{hashlib.sha256(tag.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def embedding_dir(tag: str, step: int) -> str:
    return f"{safe_path_component(tag)}/{int(step):05d}"


# ------------------------------------------------------------ capture (caller thread)
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


def _check_labels(labels: Any, n: int, header: Any) -> Tuple[List[Any], Optional[List[str]]]:
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
            if any(not _is_seq(r) or len(r) != k for r in labels) or k == 0:
                raise ValueError(f"labels rows must all be lists of the same non-zero length, "
                                 f"got lengths {sorted({len(r) if _is_seq(r) else -1 for r in labels})}")
            cols = [[r[j] for r in labels] for j in range(k)]
        names = [f"label_{j}" for j in range(len(cols))]
    if header is not None:
        if isinstance(header, str) or not isinstance(header, (list, tuple)) \
                or any(not isinstance(h, str) for h in header):
            raise TypeError(f"label_header must be a list of str, got {describe(header)}")
        if len(header) != len(cols):
            raise ValueError(f"label_header must name the {len(cols)} label columns, "
                             f"got {len(header)} names")
        names = list(header)
    if len(cols) == 1:
        return cols, None
    esc = [_escape(h) for h in names]
    if len(set(esc)) != len(esc) or not all(e.strip() for e in esc):
        raise ValueError(f"labels column names must be distinct and non-blank, got {names!r}")
    return cols, esc


def capture_embedding(embedding: Any, labels: Any = None, images: Any = None,
                      label_header: Optional[Sequence[str]] = None) -> EmbeddingPayload:
    """Check and copy an embedding matrix with optional labels and images.

    ``embedding``: (N, D) numbers, N >= 1 (numpy, NDArray or nested list).
    ``labels``: a list (or 1-D array) of N labels; a list (or 2-D array) of N
    rows; or a dict ``{column name: list of N}``. ``label_header`` names the
    columns of the row form (default ``label_0``, ``label_1``, ...). A single
    column is written without a header (the projector's rule), so its name is
    not kept. The count of labels must equal N.
    ``images``: (N, C, H, W) with C = 1, 3 or 4, or (N, H, W); values as in
    ``add_image`` (floats in [0, 1], uint8 as is).
    """
    x, shape = check_array(embedding, "embedding")
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"embedding must be a 2-D (N, D) matrix with N >= 1 and D >= 1, "
                         f"got {describe(x)}")
    n = shape[0]
    cols, header = (None, None) if labels is None else _check_labels(labels, n, label_header)
    imgs = None
    if images is not None:
        imgs, ishape = check_array(images, "images")
        if not (len(ishape) == 3 or (len(ishape) == 4 and ishape[1] in (1, 3, 4))):
            raise ValueError(f"images must be (N, C, H, W) with C = 1, 3 or 4, or (N, H, W), "
                             f"got {describe(imgs)}")
        if ishape[0] != n:
            raise ValueError(f"images must hold one image per embedding row ({n}), "
                             f"got {ishape[0]}")
        if ishape[-1] < 1 or ishape[-2] < 1:
            raise ValueError(f"images must have non-zero height and width, got {describe(imgs)}")
        if math.isqrt(n - 1) + 1 > MAX_SPRITE_SIZE:
            raise ValueError(f"images: at most {MAX_SPRITE_SIZE ** 2} images fit in one sprite, "
                             f"got {n}")
        imgs = snapshot(imgs)
    return EmbeddingPayload(snapshot(x), cols, header, imgs)


# ------------------------------------------------------------ build (worker)
def _escape(s: str) -> str:
    return s.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        v = v.item()
    return str(v)


def metadata_tsv(columns: List[Any], header: Optional[List[str]]) -> bytes:
    cols = [to_numpy(c, "labels").tolist() if is_ndarray(c) or isinstance(c, np.ndarray) else c
            for c in columns]
    lines = [] if header is None else ["\t".join(header)]
    for row in zip(*cols):
        cells = [_escape(_cell(v)) for v in row]
        line = "\t".join(cells)
        if not line.replace("\ufeff", "").strip():  # the projector drops blank lines
            line = "\t".join([EMPTY_LABEL] + cells[1:])
        lines.append(line)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def tensors_tsv(matrix: np.ndarray) -> bytes:
    m = np.asarray(matrix, dtype=np.float32)
    fmt = "\t".join(["%.9g"] * m.shape[1])
    return ("\n".join(fmt % tuple(r) for r in m.tolist()) + "\n").encode("ascii")


def sprite_layout(n: int, h: int, w: int) -> Tuple[int, int, int]:
    """``(grid side, thumb height, thumb width)``: side*thumb <= MAX_SPRITE_SIZE."""
    side = math.isqrt(n - 1) + 1
    scale = min(1.0, MAX_SPRITE_SIZE / (side * w), MAX_SPRITE_SIZE / (side * h))
    return side, max(1, min(h, int(h * scale))), max(1, min(w, int(w * scale)))


def _area_weights(src: int, dst: int) -> np.ndarray:
    """(dst, src) matrix averaging the source pixels each destination pixel covers."""
    edges = np.arange(dst + 1, dtype=np.float64) * (src / dst)
    lo, hi = edges[:-1, None], edges[1:, None]
    i = np.arange(src, dtype=np.float64)[None, :]
    overlap = np.clip(np.minimum(hi, i + 1) - np.maximum(lo, i), 0, None)
    return (overlap / (src / dst)).astype(np.float32)


def sprite_png(images: Any) -> Tuple[bytes, Tuple[int, int]]:
    """The sprite PNG and the thumbnail ``(width, height)``."""
    arr = to_numpy(images, "images")
    if arr.ndim == 3:
        arr = arr[:, None]
    n, c, h, w = arr.shape
    side, th, tw = sprite_layout(n, h, w)
    sprite = np.zeros((side * th, side * tw, c), np.uint8)
    wy, wx = _area_weights(h, th), _area_weights(w, tw)
    per_row = side * c * h * w * 4
    chunk = side * max(1, (64 << 20) // per_row)  # whole grid rows, ~64 MiB of float32
    for s in range(0, n, chunk):
        t = to_uint8(np.ascontiguousarray(arr[s:s + chunk])).transpose(0, 2, 3, 1)  # k,h,w,c
        if (th, tw) != (h, w):
            t = np.einsum("yh,khwc->kywc", wy, t.astype(np.float32), optimize=True)
            t = np.einsum("xw,kywc->kyxc", wx, t, optimize=True)
            t = np.clip(t + 0.5, 0, 255).astype(np.uint8)
        k = t.shape[0]
        rows = -(-k // side)
        if k < rows * side:
            t = np.concatenate([t, np.zeros((rows * side - k, th, tw, c), np.uint8)])
        r0 = s // side
        sprite[r0 * th:(r0 + rows) * th] = (
            t.reshape(rows, side, th, tw, c).transpose(0, 2, 1, 3, 4).reshape(rows * th, side * tw, c))
    return encode_png(sprite), (tw, th)


def embedding_files(tag: str, step: int, payload: EmbeddingPayload) -> Dict[str, bytes]:
    """``{relative path: file contents}`` for one embedding (pure; may be slow)."""
    d = embedding_dir(tag, step)
    files = {f"{d}/tensors.tsv": tensors_tsv(to_numpy(payload.matrix, "embedding"))}
    if payload.labels is not None:
        files[f"{d}/metadata.tsv"] = metadata_tsv(payload.labels, payload.header)
    if payload.images is not None:
        files[f"{d}/sprite.png"] = sprite_png(payload.images)[0]
    return files


def embedding_entry(tag: str, step: int, payload: EmbeddingPayload) -> EmbeddingEntry:
    dim = None
    if payload.images is not None:
        n, h, w = payload.images.shape[0], payload.images.shape[-2], payload.images.shape[-1]
        _, th, tw = sprite_layout(n, h, w)
        dim = (tw, th)
    return EmbeddingEntry(tag, int(step), payload.labels is not None, dim)


# ------------------------------------------------------------ projector_config.pbtxt
def _pbtxt_str(s: str) -> str:
    out = []
    for b in s.encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def add_entry(entries: List[EmbeddingEntry], entry: EmbeddingEntry) -> None:
    """Add ``entry`` to the writer's list, replacing one with the same tag and step."""
    for i, e in enumerate(entries):
        if (e.tag, e.step) == (entry.tag, entry.step):
            entries[i] = entry
            return
    entries.append(entry)


def tensor_name(entry: EmbeddingEntry, entries: Sequence[EmbeddingEntry]) -> str:
    """The tag, or ``tag@step`` when the tag was logged at several steps."""
    steps = {e.step for e in entries if e.tag == entry.tag}
    return entry.tag if len(steps) <= 1 else f"{entry.tag}@{entry.step}"


def projector_config(entries: Sequence[EmbeddingEntry]) -> str:
    """The whole ``projector_config.pbtxt`` text (paths relative to the run directory)."""
    uniq: List[EmbeddingEntry] = []
    for e in entries:
        add_entry(uniq, e)
    blocks = []
    for e in uniq:
        d = embedding_dir(e.tag, e.step)
        lines = [f"  tensor_name: {_pbtxt_str(tensor_name(e, uniq))}",
                 f'  tensor_path: "{d}/tensors.tsv"']
        if e.has_metadata:
            lines.append(f'  metadata_path: "{d}/metadata.tsv"')
        if e.sprite_dim is not None:
            lines.append(f'  sprite {{\n    image_path: "{d}/sprite.png"\n'
                         f"    single_image_dim: {e.sprite_dim[0]}\n"
                         f"    single_image_dim: {e.sprite_dim[1]}\n  }}")
        blocks.append("embeddings {\n" + "\n".join(lines) + "\n}\n")
    return "".join(blocks)


def embedding_action(tag: str, step: int, payload: EmbeddingPayload,
                     entries: List[EmbeddingEntry], run: str = "") -> Callable[[Any], None]:
    """An ``action(sink)``: write the files into ``run`` ("" = the log directory), record
    the embedding in ``entries`` (the writer's list for that run, touched only by the
    worker) and rewrite ``run/projector_config.pbtxt``."""
    prefix = f"{run.strip('/')}/" if run.strip("/") else ""

    def action(sink: Any) -> None:
        for rel, data in embedding_files(tag, step, payload).items():
            sink.write_file(prefix + rel, data)
        add_entry(entries, embedding_entry(tag, step, payload))
        sink.write_file(prefix + CONFIG_NAME, projector_config(entries).encode("ascii"))

    return action
