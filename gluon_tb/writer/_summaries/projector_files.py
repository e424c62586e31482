"""The files of one embedding for TensorBoard's projector (pure functions, worker thread).

Under ``<safe tag>/<step:05d>/`` of the run directory (:func:`embedding_dir`):

* ``tensors.bytes``: the N×D matrix as raw little-endian float32, row after row; the config gives
  its shape (``tensor_shape``), and the projector reads it with ``np.fromfile`` (no text to format:
  a 5000×300 matrix took ~300 ms of the writer's time holding the GIL as TSV, ~2 ms now). The
  projector tries a file as TSV text first and reads it as binary only when it is not UTF-8, so
  the rare matrix whose bytes happen to be valid UTF-8 (all zeros, say) is written as
  ``tensors.tsv`` instead: N lines of D tab-separated floats (``%.9g``, exact); see
  :func:`tensor_file`;
* ``metadata.tsv``: one label column without a header, or several columns
  after a header row (as the projector expects);
* ``sprite.png``: the images as a square grid of equal thumbnails, at most
  8192×8192 pixels, thumbnails scaled down (area average) when N is large.

Labels: every cell is ``str(value)`` (bytes decoded as UTF-8, None -> empty);
tab, newline and carriage return are written as the two characters ``\\t``,
``\\n``, ``\\r`` (:func:`escape`). The projector skips blank lines, so a line that
would be blank gets ``<empty>`` in its first cell.
"""
from __future__ import annotations

import codecs
import hashlib
import math
import re
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from .._common.arrays import is_ndarray, to_numpy
from .layouts import to_nchw

MAX_SPRITE_SIZE = 8192
EMPTY_LABEL = "<empty>"


# ------------------------------------------------------------ paths
_CLEAN = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
             *(f"lpt{i}" for i in range(10))}
_TAKEN = {"projector_config.pbtxt"}  # files of the run directory that an embedding directory would shadow


def safe_path_component(tag: str) -> str:
    """One file-name component for ``tag``; distinct tags give distinct names.

    A tag of at most 64 characters from ``a-z 0-9 _ . -``, not starting with
    '.' or '-', not ending with '.', not a Windows device name and not a name the run's
    directory holds already (``projector_config.pbtxt``, an event file's), is used as
    is. Any other tag becomes its characters with each run of characters
    outside ``A-Za-z0-9_-`` replaced by '_', leading '-' removed, cut to 40
    characters (or '_' if nothing is left), then '~' and the first 16 hex
    digits of the SHA-256 of its UTF-8 (clean names never hold '~',
    and upper-case tags are hashed so that case-insensitive file systems keep
    them apart). So '/', '..', absolute paths, NUL and long tags never leave
    the folder.
    """
    if (_CLEAN.fullmatch(tag) and not tag.endswith(".") and tag.split(".")[0] not in _RESERVED
            and tag not in _TAKEN and not tag.startswith("events.out.tfevents.")):
        return tag
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "_", tag).lstrip("-")[:40] or "_"
    return f"{prefix}~{hashlib.sha256(tag.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def embedding_dir(tag: str, step: int) -> str:
    return f"{safe_path_component(tag)}/{int(step):05d}"


# ------------------------------------------------------------ tensors.tsv, metadata.tsv
def escape(s: str) -> str:
    """Tab, newline and carriage return as the two characters ``\\t``, ``\\n``, ``\\r``."""
    return s.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        v = v.item()
    return str(v)


_BLANK_LINE = re.compile(r"^[\s\ufeff]*$", re.MULTILINE)  # what str.strip() would leave empty


def metadata_tsv(columns: List[Any], header: Optional[List[str]]) -> bytes:
    cols = [to_numpy(c, "labels").tolist() if is_ndarray(c) or isinstance(c, np.ndarray) else c
            for c in columns]
    lines = [] if header is None else ["\t".join(header)]
    body = _plain_rows(cols)
    if body is not None:
        return ("\n".join(lines + [body]) + "\n").encode("utf-8", "surrogatepass")
    for row in zip(*cols):
        cells = [escape(_cell(v)) for v in row]
        line = "\t".join(cells)
        if not line.replace("\ufeff", "").strip():  # the projector drops blank lines
            line = "\t".join([EMPTY_LABEL] + cells[1:])
        lines.append(line)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def _plain_rows(cols: List[Any]) -> Optional[str]:
    """The rows of the common case in a few C-level passes (5000 labels: ~1 ms instead of ~10 ms
    of the writer's time, holding the GIL): every cell a str, int, float or bool, none holding a
    tab, newline or carriage return, no row blank. None otherwise (the row by row loop above)."""
    text_cols = []
    for col in cols:
        kinds = set(map(type, col))
        if kinds <= {str}:
            cells = col if isinstance(col, list) else list(col)
        elif kinds <= {int, float, bool}:
            cells = list(map(str, col))
        else:
            return None
        joined = "".join(cells)
        if "\t" in joined or "\n" in joined or "\r" in joined:
            return None
        text_cols.append(cells)
    n = min(map(len, text_cols), default=0)  # zip's rule: the shortest column
    body = ("\n".join(text_cols[0][:n]) if len(text_cols) == 1
            else "\n".join(map("\t".join, zip(*text_cols))))
    if n == 0 or _BLANK_LINE.search(body):
        return None
    return body


TENSORS_BINARY, TENSORS_TSV = "tensors.bytes", "tensors.tsv"


def tensor_file(matrix: np.ndarray) -> Tuple[str, Union[bytes, memoryview]]:
    """``(file name, contents)`` of an N×D matrix: raw float32 unless those bytes read as UTF-8 text.
    The raw bytes are a view of the float32 array, not a copy: ``tobytes()`` copied 6 MB of a
    5000×300 matrix holding the GIL (~1 ms of the training thread's time, ``bench_gil.py``)."""
    raw = np.ascontiguousarray(matrix, dtype="<f4").data.cast("B")
    return (TENSORS_TSV, tensors_tsv(matrix)) if _is_utf8(raw) else (TENSORS_BINARY, raw)


def _is_utf8(raw: Union[bytes, memoryview], chunk: int = 1 << 16) -> bool:
    """Whether ``raw`` decodes as UTF-8, looked at a chunk at a time: a failed decode copies what
    it was given into its exception (2.4 ms for 6 MB), and float bytes nearly always fail at once."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    try:
        for start in range(0, len(raw), chunk):
            decoder.decode(view[start:start + chunk])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def tensors_tsv(matrix: np.ndarray) -> bytes:
    m = np.asarray(matrix, dtype=np.float32)
    fmt = "\t".join(["%.9g"] * m.shape[1])
    return ("\n".join(fmt % tuple(r) for r in m.tolist()) + "\n").encode("ascii")


# ------------------------------------------------------------ sprite.png
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


def sprite_png(images: Any, tag: str = "sprite") -> Tuple[bytes, Tuple[int, int]]:
    """The sprite PNG and the thumbnail ``(width, height)``."""
    from .pixels import display_range, encode_png, to_uint8, warn_rescaled  # not on a first add_embedding's path

    arr = to_numpy(images, "images")
    rng = display_range(arr)  # one rescaling for all the images, as for one batch
    if rng is not None:
        warn_rescaled(tag, rng)
    arr = to_nchw(arr, "NHW" if arr.ndim == 3 else "NCHW")
    n, c, h, w = arr.shape
    side, th, tw = sprite_layout(n, h, w)
    # the sprite seen as (grid row, thumb y, grid column, thumb x, channel): each chunk of whole
    # grid rows is copied into it once, and only the cells no image fills are zeroed (each numpy
    # copy or calloc of this size drops the GIL and takes it back: a hand-over, see _fastio.c)
    sprite = np.empty((side * th, side * tw, c), np.uint8)
    cells = sprite.reshape(side, th, side, tw, c)
    resize = (th, tw) != (h, w)
    if resize:
        wy, wx = _area_weights(h, th), _area_weights(w, tw)
    per_row = side * c * h * w * 4
    chunk = side * max(1, (64 << 20) // per_row)  # whole grid rows, ~64 MiB of float32
    for s in range(0, n, chunk):
        t = to_uint8(np.ascontiguousarray(arr[s:s + chunk]), rng).transpose(0, 2, 3, 1)  # k,h,w,c
        if resize:
            t = np.einsum("yh,khwc->kywc", wy, t.astype(np.float32), optimize=True)
            t = np.einsum("xw,kywc->kyxc", wx, t, optimize=True)
            t = np.clip(t + 0.5, 0, 255).astype(np.uint8)
        k, r0 = t.shape[0], s // side
        full = k // side
        cells[r0:r0 + full].transpose(0, 2, 1, 3, 4)[...] = t[:full * side].reshape(full, side, th, tw, c)
        if k > full * side:  # the last images, part of a grid row
            cells[r0 + full, :, :k - full * side] = t[full * side:].transpose(1, 0, 2, 3)
    last_row, last_col = divmod(n, side)
    if last_row < side:  # the grid is not full
        cells[last_row, :, last_col:] = 0
        cells[last_row + 1:] = 0
    return encode_png(sprite), (tw, th)
