"""``projector_config.pbtxt``: the projector's list of every embedding of a run.

The writer keeps one :class:`EmbeddingEntry` per logged embedding (:func:`add_entry`, on the
worker) and rewrites the file whole from them (:func:`projector_config`); paths are relative
to the run directory, as :mod:`.projector_files` lays the files out.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

from .projector_files import TENSORS_BINARY, TENSORS_TSV, embedding_dir

CONFIG_NAME = "projector_config.pbtxt"


class EmbeddingEntry(NamedTuple):
    """What ``projector_config`` needs to know of one logged embedding."""

    tag: str
    step: int
    has_metadata: bool
    sprite_dim: Optional[Tuple[int, int]]  # thumbnail (width, height)
    tensor_file: str = TENSORS_TSV  # tensors.bytes (its shape below) or tensors.tsv
    shape: Tuple[int, int] = (0, 0)  # (N, D)


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
                 f'  tensor_path: "{d}/{e.tensor_file}"']
        if e.tensor_file == TENSORS_BINARY:
            lines += [f"  tensor_shape: {e.shape[0]}", f"  tensor_shape: {e.shape[1]}"]
        if e.has_metadata:
            lines.append(f'  metadata_path: "{d}/metadata.tsv"')
        if e.sprite_dim is not None:
            lines.append(f'  sprite {{\n    image_path: "{d}/sprite.png"\n'
                         f"    single_image_dim: {e.sprite_dim[0]}\n"
                         f"    single_image_dim: {e.sprite_dim[1]}\n  }}")
        blocks.append("embeddings {\n" + "\n".join(lines) + "\n}\n")
    return "".join(blocks)

