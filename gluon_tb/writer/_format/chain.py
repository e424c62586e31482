"""Messages kept as pieces: a large payload nested in its value, summary and event without copies.

A record is written as one ``bytes`` object, or as a :class:`Chain` of pieces that the C framing
(``_fastframe.c``) joins where the record goes. Kept apart from :mod:`.wire` (which needs nothing
compiled) because a Chain needs that C framing.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Union, overload

from .wire import _LEN, f_bytes, key, varint


class Chain(tuple):
    """A message (or record) kept as its pieces in order, uncopied: bytes, bytes-like views, and
    C fill pieces (``_fill.h``: bytes made while the record is framed). Nesting a Chain in a field
    adds a header piece instead of copying its payload, and the C framing (``_fastframe.c``) writes
    the pieces where the record goes: an audio clip's 882 KB were copied five times under the GIL
    (WAV, audio, value, summary, event) on their way to one write. ``nbytes`` is the length of the
    message; ``bytes(chain)`` joins it (fills run). Only built where that C framing is
    (:data:`CHAINS`); ``len()`` counts pieces, not bytes."""

    nbytes: int

    def __new__(cls, pieces: Iterable[Any], nbytes: int) -> "Chain":
        self = super().__new__(cls, pieces)
        self.nbytes = nbytes
        return self

    def __bytes__(self) -> bytes:
        return _join(self) if _join is not None else b"".join(self)


Message = Union[bytes, Chain]

try:  # the C framing, which frames Chains and runs their fills
    from ._fastframe import join as _join
except ImportError:  # pragma: no cover - depends on the build
    _join = None
#: Chains can be framed (the C framing is built and the host little-endian, where record.py uses it)
CHAINS = _join is not None and sys.byteorder == "little"


#: below this a payload is copied into its message as before: a Chain's handling costs more
UNCOPIED_BYTES = 16 * 1024


def uncopied(b: bytes) -> Message:
    """``b`` as a one-piece Chain where Chains can be framed and it is large, else ``b``: the
    messages it is nested in then hold it without copying it (an encoded image, say)."""
    return Chain((b,), len(b)) if CHAINS and len(b) >= UNCOPIED_BYTES else b


def message_len(m: Message) -> int:
    return m.nbytes if type(m) is Chain else len(m)


@overload
def concat(*parts: bytes) -> bytes: ...
@overload
def concat(*parts: Message) -> Message: ...


def concat(*parts: Message) -> Message:
    """The parts as one message: bytes if every part is bytes, else a Chain of their pieces."""
    if not any(type(p) is Chain for p in parts):
        return b"".join(parts)  # type: ignore[arg-type]
    pieces: list = []
    for p in parts:
        if type(p) is Chain:
            pieces.extend(p)
        elif p:
            pieces.append(p)
    return Chain(pieces, sum(message_len(p) for p in parts))


@overload
def f_message(field: int, m: bytes) -> bytes: ...
@overload
def f_message(field: int, m: Message) -> Message: ...


def f_message(field: int, m: Message) -> Message:
    """A length-delimited field of ``m``: :func:`f_bytes`, or for a Chain its pieces after a header."""
    if type(m) is not Chain:
        return f_bytes(field, m)  # type: ignore[arg-type]
    head = key(field, _LEN) + varint(m.nbytes)
    return Chain((head, *m), len(head) + m.nbytes)
