"""CRC-32C (Castagnoli), as TFRecord framing needs it.

A C implementation is used when one is importable (the ``crc32c`` package, or
``google-crc32c``, or gluon_tb's own ``_fastframe``); otherwise a table-driven
pure-Python version, which is correct but slow. ``IMPLEMENTATION`` says which
one is active.
"""
from __future__ import annotations

import sys
from typing import Callable

_POLY = 0x82F63B78  # reversed Castagnoli polynomial


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_py(data: bytes, crc: int = 0) -> int:
    """Pure-Python CRC-32C of ``data`` (continuing from ``crc``)."""
    table = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _find_c() -> tuple[Callable[[bytes], int], str]:
    try:
        import crc32c as _c  # ICRAR's package: hardware-accelerated

        fn = _c.crc32c
        if fn(b"123456789") == 0xE3069283:
            return fn, "crc32c"
    except Exception:  # pragma: no cover - absent or broken
        pass
    try:
        import google_crc32c as _g

        if _g.implementation == "c":
            fn = _g.value
            if fn(b"123456789") == 0xE3069283:
                return fn, "google_crc32c"
    except Exception:  # pragma: no cover
        pass
    try:  # gluon_tb's own C fallback (setup.py builds it where a compiler is found)
        from ._fastframe import crc32c as own

        if sys.byteorder == "little" and own(b"123456789") == 0xE3069283:
            return own, "gluon_tb"
    except Exception:  # pragma: no cover - not built
        pass
    return crc32c_py, "python"


crc32c, IMPLEMENTATION = _find_c()


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``: the CRC rotated right by 15 bits plus a constant
    (so that the CRC of bytes that hold CRCs is not itself trivial)."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
