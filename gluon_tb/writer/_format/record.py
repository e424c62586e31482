"""TFRecord framing: length, masked CRC of length, bytes, masked CRC of bytes."""
from __future__ import annotations

import struct
import sys
from typing import BinaryIO, Callable, Iterator, List, Optional

from . import crc32c as _crc32c

_len = struct.Struct("<Q")
_u32 = struct.Struct("<I")


def frame(data: bytes) -> bytes:
    """Return ``data`` (bytes, or a :class:`.chain.Chain`) framed as one TFRecord."""
    if type(data) is not bytes:
        data = bytes(data)
    return b"".join((_header(len(data)), data, _u32.pack(_crc32c.masked_crc(data))))


_headers: dict[int, bytes] = {}


def _header(n: int) -> bytes:
    """Length field plus its masked CRC; cached, since most records share a few lengths."""
    h = _headers.get(n)
    if h is None:
        header = _len.pack(n)
        h = header + _u32.pack(_crc32c.masked_crc(header))
        if len(_headers) < 65536:
            _headers[n] = h
    return h


def frame_many_py(records: list[bytes]) -> bytes:
    """Frame every record and join them into one buffer (one write)."""
    masked = _crc32c.masked_crc
    pack_u32 = _u32.pack
    headers = _headers
    parts: list[bytes] = []
    append = parts.append
    for data in records:
        if type(data) is not bytes:  # a Chain (or a bytes-like object)
            data = bytes(data)
        n = len(data)
        h = headers.get(n)
        append(h if h is not None else _header(n))
        append(data)
        append(pack_u32(masked(data)))
    return b"".join(parts)


try:  # the optional C kernel: the same bytes, a few times faster, without the GIL
    from ._fastframe import frame_many as _frame_many_c
except ImportError:  # pragma: no cover - depends on the build
    _frame_many_c = None
try:  # not on Windows
    from ._fastframe import frame_append as _frame_append_c
except ImportError:  # pragma: no cover - depends on the build
    _frame_append_c = None
_little = sys.byteorder == "little"
frame_many = _frame_many_c if _frame_many_c is not None and _little else frame_many_py
#: ``frame_append(fd, records, start) -> int``: the records framed and appended to ``fd`` in one
#: release of the GIL, -1 if its file was deleted (``_fastframe.c``, ``EventFile.write_records``);
#: None without the C kernel
frame_append: Optional[Callable[[int, List[bytes], int], int]] = _frame_append_c if _little else None


class CorruptRecordError(ValueError):
    """A record whose length or data CRC does not match."""


def read_records(f: BinaryIO, *, strict: bool = False) -> Iterator[bytes]:
    """Yield the records of a TFRecord stream.

    A torn tail (the file ends inside a record, as after a crash mid-write)
    ends the iteration quietly; a CRC mismatch raises :class:`CorruptRecordError`
    when ``strict`` and otherwise also ends the iteration.
    """
    while True:
        header = f.read(12)
        if len(header) < 12:
            return
        (n,) = _len.unpack_from(header)
        (c1,) = _u32.unpack_from(header, 8)
        if c1 != _crc32c.masked_crc(header[:8]):
            if strict:
                raise CorruptRecordError("length CRC mismatch")
            return
        data = f.read(n)
        tail = f.read(4)
        if len(data) < n or len(tail) < 4:
            return
        if _u32.unpack(tail)[0] != _crc32c.masked_crc(data):
            if strict:
                raise CorruptRecordError("data CRC mismatch")
            return
        yield data
