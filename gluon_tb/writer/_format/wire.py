"""Protocol-buffer wire encoding, by hand.

gluon_tb never imports ``google.protobuf``: every message TensorBoard reads is a
few fields deep, and encoding them directly is faster than building message
objects, works with any installed protobuf (or none), and cannot clash with the
``tensorboard`` package's own descriptors in the same process.

Each helper returns the bytes of one *field* (key + payload); a message is the
concatenation of its fields. Field numbers live in :mod:`.proto`. :func:`fields`
reads a message back field by field (``export_scalars`` reads our own files with it).
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator, Sequence, Tuple

import numpy as np

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

_pack_d = struct.Struct("<d").pack
_pack_f = struct.Struct("<f").pack


def varint(n: int) -> bytes:
    """Encode a non-negative int (or a negative int64 as 10 bytes)."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def f_varint(field: int, n: int) -> bytes:
    return key(field, _VARINT) + varint(int(n))


def f_bool(field: int, b: bool) -> bytes:
    return key(field, _VARINT) + (b"\x01" if b else b"\x00")


def f_double(field: int, x: float) -> bytes:
    return key(field, _I64) + _pack_d(x)


def f_float(field: int, x: float) -> bytes:
    try:
        return key(field, _I32) + _pack_f(x)
    except OverflowError:  # beyond float32's range: +-inf, as numpy rounds it
        return key(field, _I32) + _pack_f(float(np.float32(x)))


def f_bytes(field: int, b: bytes) -> bytes:
    return key(field, _LEN) + varint(len(b)) + b


def f_str(field: int, s: str) -> bytes:
    return f_bytes(field, s.encode("utf-8"))


def f_packed_doubles(field: int, values: Sequence[float] | np.ndarray) -> bytes:
    payload = np.ascontiguousarray(values, dtype="<f8").tobytes()
    return f_bytes(field, payload)


def f_repeated_str(field: int, values: Iterable[str | bytes]) -> bytes:
    return b"".join(
        f_bytes(field, v if isinstance(v, bytes) else v.encode("utf-8")) for v in values
    )


# ---------------------------------------------------------------- decoding (reading our own files back)
_unpack_d = struct.Struct("<d").unpack_from
_unpack_f = struct.Struct("<f").unpack_from


def read_varint(buf: bytes, i: int) -> Tuple[int, int]:
    """The varint at ``buf[i]`` and the index after it."""
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def fields(buf: bytes) -> Iterator[Tuple[int, object]]:
    """Yield ``(field_number, value)`` of one message: ints, floats (fixed32 as
    float, fixed64 as double) or bytes for length-delimited fields."""
    i, n = 0, len(buf)
    while i < n:
        k, i = read_varint(buf, i)
        field, wt = k >> 3, k & 7
        if wt == _VARINT:
            v, i = read_varint(buf, i)
            yield field, v
        elif wt == _I64:
            yield field, _unpack_d(buf, i)[0]
            i += 8
        elif wt == _I32:
            yield field, _unpack_f(buf, i)[0]
            i += 4
        elif wt == _LEN:
            ln, i = read_varint(buf, i)
            yield field, buf[i:i + ln]
            i += ln
        else:
            raise ValueError(f"unsupported wire type {wt}")
