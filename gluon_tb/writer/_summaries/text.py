"""Text (Markdown), in the text plugin's format: a scalar ``DT_STRING`` tensor.

This is what ``tf.summary.text`` writes today: a 0-d string tensor (rendered
as Markdown, not as a one-cell table) with ``plugin_name='text'`` metadata.

Size policy: a text of at most :data:`MAX_TEXT_BYTES` (16 MiB) of UTF-8 is
written whole; a longer one raises ``ValueError`` on the caller's thread.
TensorBoard loads such a value, but its text dashboard renders Markdown in
Python on every request and fetches up to 100 samples of a tag in one gRPC
message of at most 256 MiB, so keep multi-megabyte texts to a few per tag.
Lone surrogates, which UTF-8 cannot hold, are written as ``?``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from .._format import proto as _proto
from .._common.checks import describe

MAX_TEXT_BYTES = 16 * 1024 * 1024
PLUGIN_NAME = "text"


class TextPayload(NamedTuple):
    text: str  # immutable: kept by reference, no copy needed

    @property
    def nbytes(self) -> int:
        return len(self.text)


def capture_text(text: Any) -> TextPayload:
    """Check ``text`` is a str of at most ``MAX_TEXT_BYTES`` UTF-8 bytes."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {describe(text)}")
    n = len(text)
    # A character takes 1 to 4 bytes (ASCII: 1, an O(1) check): encode only when
    # neither the count nor ASCII-ness decides.
    if n > MAX_TEXT_BYTES or (4 * n > MAX_TEXT_BYTES and not text.isascii()
                              and len(text.encode("utf-8", "replace")) > MAX_TEXT_BYTES):
        raise ValueError(f"text must be at most {MAX_TEXT_BYTES} bytes of UTF-8, "
                         f"got {n} characters")
    return TextPayload(text)  # a lone surrogate is written as '?' (build_text)


def build_text(tag: str, payload: TextPayload) -> bytes:
    """Encode the text as the text plugin's scalar string tensor."""
    data = payload.text.encode("utf-8", "replace")
    return _proto.value(
        tag,
        tensor=_proto.tensor_strings([data], shape=[]),
        metadata=_proto.metadata(PLUGIN_NAME, data_class=_proto.DATA_CLASS_TENSOR),
    )
