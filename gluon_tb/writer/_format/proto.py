"""The TensorBoard messages gluon_tb writes, encoded with :mod:`.wire`.

Field numbers follow TensorBoard's ``tensorboard/compat/proto`` definitions
(``event.proto``, ``summary.proto``, ``tensor.proto``, ``graph.proto``,
``node_def.proto``, ``attr_value.proto``). ``tests/writer/format/test_proto.py`` parses every
function's output with TensorBoard's own generated classes.
"""
from __future__ import annotations

import struct
import sys
from typing import Iterable, List, Mapping, Optional, Sequence, overload

import numpy as np

from . import wire as _wire
from .chain import Chain, Message, concat, f_message
from .wire import (
    f_bool,
    f_bytes,
    f_double,
    f_float,
    f_packed_doubles,
    f_repeated_str,
    f_str,
    f_varint,
    varint,
)

_LITTLE = sys.byteorder == "little"

# tensorflow DataType enum values
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_STRING, DT_INT64, DT_BOOL, DT_HALF = 1, 2, 3, 4, 7, 9, 10, 19
# SummaryMetadata.data_class
DATA_CLASS_SCALAR, DATA_CLASS_TENSOR, DATA_CLASS_BLOB_SEQUENCE = 1, 2, 3
# SessionLog.status
SESSION_START = 1

_NP_TO_DT = {
    np.dtype(np.float32): DT_FLOAT,
    np.dtype(np.float64): DT_DOUBLE,
    np.dtype(np.int32): DT_INT32,
    np.dtype(np.uint8): DT_UINT8,
    np.dtype(np.int64): DT_INT64,
    np.dtype(np.bool_): DT_BOOL,
    np.dtype(np.float16): DT_HALF,
}


# ---------------------------------------------------------------- Event
@overload
def event(wall_time: float, step: int = 0, *, summary: Optional[bytes] = None, file_version: Optional[str] = None,
          graph_def: Optional[bytes] = None, session_log: Optional[bytes] = None) -> bytes: ...
@overload
def event(wall_time: float, step: int = 0, *, summary: Optional[Message] = None, file_version: Optional[str] = None,
          graph_def: Optional[bytes] = None, session_log: Optional[bytes] = None) -> Message: ...


def event(
    wall_time: float,
    step: int = 0,
    *,
    summary: Optional[Message] = None,
    file_version: Optional[str] = None,
    graph_def: Optional[bytes] = None,
    session_log: Optional[bytes] = None,
) -> Message:
    """An ``Event``; a Chain ``summary`` makes a Chain (its pieces uncopied, :class:`.chain.Chain`)."""
    out = f_double(1, wall_time)
    if step:
        out += f_varint(2, step)
    if file_version is not None:
        out += f_str(3, file_version)
    if graph_def is not None:
        out += f_bytes(4, graph_def)
    if type(summary) is Chain:
        return concat(out, f_message(5, summary), f_bytes(7, session_log) if session_log is not None else b"")
    if summary is not None:
        out += f_bytes(5, summary)  # type: ignore[arg-type]
    if session_log is not None:
        out += f_bytes(7, session_log)
    return out


def session_log(status: int, msg: str = "") -> bytes:
    out = f_varint(1, status)
    if msg:
        out += f_str(3, msg)
    return out


# ---------------------------------------------------------------- Summary
@overload
def summary(values: Iterable[bytes]) -> bytes: ...
@overload
def summary(values: Iterable[Message]) -> Message: ...


def summary(values: Iterable[Message]) -> Message:
    """A ``Summary`` of already-encoded ``Summary.Value`` messages (a Chain if one of them is)."""
    values = values if isinstance(values, list) else list(values)
    if Chain in map(type, values):
        return concat(*(f_message(1, v) for v in values))
    return b"".join(f_bytes(1, v) for v in values)  # type: ignore[arg-type]


@overload
def value(tag: str, *, simple_value: Optional[float] = None, image: Optional[bytes] = None,
          histo: Optional[bytes] = None, audio: Optional[bytes] = None, tensor: Optional[bytes] = None,
          metadata: Optional[bytes] = None) -> bytes: ...
@overload
def value(tag: str, *, simple_value: Optional[float] = None, image: Optional[Message] = None,
          histo: Optional[bytes] = None, audio: Optional[Message] = None, tensor: Optional[Message] = None,
          metadata: Optional[bytes] = None) -> Message: ...


def value(
    tag: str,
    *,
    simple_value: Optional[float] = None,
    image: Optional[Message] = None,
    histo: Optional[bytes] = None,
    audio: Optional[Message] = None,
    tensor: Optional[Message] = None,
    metadata: Optional[bytes] = None,
) -> Message:
    """A ``Summary.Value``; give exactly one payload (a Chain payload makes a Chain)."""
    if type(image) is Chain or type(audio) is Chain or type(tensor) is Chain:
        parts: List[Message] = [f_str(1, tag)]
        if simple_value is not None:
            parts.append(f_float(2, simple_value))
        for field, m in ((4, image), (5, histo), (6, audio), (8, tensor), (9, metadata)):
            if m is not None:
                parts.append(f_message(field, m))
        return concat(*parts)
    out = f_str(1, tag)  # bytes only: as fast as before Chains (histograms, every batch with some options)
    if simple_value is not None:
        out += f_float(2, simple_value)
    if image is not None:
        out += f_bytes(4, image)  # type: ignore[arg-type]
    if histo is not None:
        out += f_bytes(5, histo)
    if audio is not None:
        out += f_bytes(6, audio)  # type: ignore[arg-type]
    if tensor is not None:
        out += f_bytes(8, tensor)  # type: ignore[arg-type]
    if metadata is not None:
        out += f_bytes(9, metadata)
    return out


def metadata(
    plugin_name: str,
    content: bytes = b"",
    *,
    display_name: str = "",
    description: str = "",
    data_class: int = 0,
) -> bytes:
    plugin_data = f_str(1, plugin_name)
    if content:
        plugin_data += f_bytes(2, content)
    out = f_bytes(1, plugin_data)
    if display_name:
        out += f_str(2, display_name)
    if description:
        out += f_str(3, description)
    if data_class:
        out += f_varint(4, data_class)
    return out


def histogram(
    min: float,
    max: float,
    num: float,
    sum: float,
    sum_squares: float,
    bucket_limit: Sequence[float] | np.ndarray,
    bucket: Sequence[float] | np.ndarray,
) -> bytes:
    return (
        f_double(1, min)
        + f_double(2, max)
        + f_double(3, num)
        + f_double(4, sum)
        + f_double(5, sum_squares)
        + f_packed_doubles(6, bucket_limit)
        + f_packed_doubles(7, bucket)
    )


def trimmed_histogram_py(min: float, max: float, num: float, sum: float, sum_squares: float,
                         right_edges: np.ndarray, counts: np.ndarray) -> bytes:
    """:func:`histogram` of the buckets from the first non-zero count to the last (none when
    every count is zero): what a histogram summary writes."""
    nz = np.flatnonzero(counts)
    if nz.size:
        start, end = int(nz[0]), int(nz[-1]) + 1
        counts, right_edges = counts[start:end], right_edges[start:end]
    else:
        counts, right_edges = counts[:0], right_edges[:0]
    return histogram(min, max, num, sum, sum_squares, right_edges, np.asarray(counts, dtype=np.float64))


try:  # the optional C kernel (_fastframe.c): the same bytes, without numpy's per-call costs
    from ._fastframe import trimmed_histogram as _trimmed_histogram_c
except ImportError:  # pragma: no cover - depends on the build
    _trimmed_histogram_c = None
_F8, _I8 = np.dtype(np.float64), np.dtype(np.int64)


def trimmed_histogram(min: float, max: float, num: float, sum: float, sum_squares: float,
                      right_edges: np.ndarray, counts: np.ndarray) -> bytes:
    """:func:`trimmed_histogram_py`, in C for float64 edges and int64 counts (little-endian hosts)."""
    if _trimmed_histogram_c is not None and _LITTLE and type(right_edges) is np.ndarray and \
            type(counts) is np.ndarray and right_edges.dtype == _F8 and counts.dtype == _I8 and \
            right_edges.shape == counts.shape and right_edges.ndim == 1 and \
            right_edges.flags.c_contiguous and counts.flags.c_contiguous:
        return _trimmed_histogram_c(min, max, num, sum, sum_squares, right_edges, counts)
    return trimmed_histogram_py(min, max, num, sum, sum_squares, right_edges, counts)


@overload
def image(height: int, width: int, colorspace: int, encoded: bytes) -> bytes: ...
@overload
def image(height: int, width: int, colorspace: int, encoded: Message) -> Message: ...


def image(height: int, width: int, colorspace: int, encoded: Message) -> Message:
    return concat(f_varint(1, height) + f_varint(2, width) + f_varint(3, colorspace), f_message(4, encoded))


@overload
def audio(sample_rate: float, num_channels: int, length_frames: int, encoded: bytes,
          content_type: str = "audio/wav") -> bytes: ...
@overload
def audio(sample_rate: float, num_channels: int, length_frames: int, encoded: Message,
          content_type: str = "audio/wav") -> Message: ...


def audio(sample_rate: float, num_channels: int, length_frames: int, encoded: Message,
          content_type: str = "audio/wav") -> Message:
    head = f_float(1, sample_rate) + f_varint(2, num_channels) + f_varint(3, length_frames)
    return concat(head, f_message(4, encoded), f_str(5, content_type))


#: ``AudioPluginData.Encoding.WAV`` (tensorboard/plugins/audio/plugin_data.proto)
AUDIO_WAV = 11


@overload
def audio_tensor(encoded: bytes, label: bytes = b"") -> bytes: ...
@overload
def audio_tensor(encoded: Message, label: bytes = b"") -> Message: ...


def audio_tensor(encoded: Message, label: bytes = b"") -> Message:
    """The ``audio`` plugin's tensor: ``DT_STRING`` of shape ``[1, 2]``, the encoded clip and its
    label (what ``tf.summary.audio`` writes; with :func:`audio_metadata`)."""
    return concat(f_varint(1, DT_STRING) + f_bytes(2, tensor_shape([1, 2])), f_message(8, encoded),
                  f_bytes(8, label))


def audio_metadata(tag: str) -> bytes:
    """``SummaryMetadata`` of the ``audio`` plugin with ``AudioPluginData(encoding=WAV)``: both of
    TensorBoard's loaders then serve the clip as ``audio/wav`` (the Rust one served the legacy
    ``Summary.Audio`` as ``application/octet-stream``)."""
    return metadata("audio", f_varint(2, AUDIO_WAV), display_name=tag)


# ---------------------------------------------------------------- Tensor
def tensor_shape(dims: Sequence[int]) -> bytes:
    return b"".join(f_bytes(2, f_varint(1, d) if d else b"") for d in dims)


def tensor_strings(strings: Sequence[bytes | str], shape: Optional[Sequence[int]] = None) -> bytes:
    """A ``DT_STRING`` tensor; ``shape`` defaults to ``[len(strings)]``."""
    dims = [len(strings)] if shape is None else list(shape)
    return f_varint(1, DT_STRING) + f_bytes(2, tensor_shape(dims)) + f_repeated_str(8, strings)


def tensor_array(arr: np.ndarray) -> bytes:
    """A numeric tensor carried as little-endian ``tensor_content``."""
    arr = np.asarray(arr)
    dt = _NP_TO_DT.get(arr.dtype)
    if dt is None:
        arr = arr.astype(np.float32)
        dt = DT_FLOAT
    content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return tensor_content(dt, arr.shape, content)


@overload
def tensor_content(dtype: int, shape: Sequence[int], content: bytes) -> bytes: ...
@overload
def tensor_content(dtype: int, shape: Sequence[int], content: Message) -> Message: ...


def tensor_content(dtype: int, shape: Sequence[int], content: Message) -> Message:
    """A tensor of DataType ``dtype`` whose little-endian values are ``content``."""
    return concat(f_varint(1, dtype) + f_bytes(2, tensor_shape(shape)), f_message(4, content))


# ---------------------------------------------------------------- Graph
def attr_value(v: object) -> bytes:
    """An ``AttrValue`` for a str, bytes, bool, int, float or list of shapes."""
    if isinstance(v, bytes):
        return f_bytes(2, v)
    if isinstance(v, str):
        return f_str(2, v)
    if isinstance(v, bool):
        return f_bool(5, v)
    if isinstance(v, int):
        return f_varint(3, v)
    if isinstance(v, float):
        return f_float(4, v)
    raise TypeError(f"attr value must be str, bytes, bool, int or float, got {type(v).__name__}")


def attr_shapes(shapes: Sequence[Sequence[int]]) -> bytes:
    """An ``AttrValue`` holding a list of shapes (``-1`` for unknown dims)."""
    lst = b"".join(
        f_bytes(7, b"".join(f_bytes(2, f_varint(1, d)) for d in shp)) for shp in shapes
    )
    return f_bytes(1, lst)


def node_def(name: str, op: str, inputs: Sequence[str] = (),
             attrs: Optional[Mapping[str, bytes]] = None, device: str = "") -> bytes:
    """A ``NodeDef``; ``attrs`` maps names to encoded ``AttrValue`` bytes."""
    out = f_str(1, name) + f_str(2, op) + f_repeated_str(3, inputs)
    if device:
        out += f_str(4, device)
    for k in sorted(attrs or {}):
        out += f_bytes(5, f_str(1, k) + f_bytes(2, attrs[k]))  # type: ignore[index]
    return out


def graph_def(nodes: Iterable[bytes], producer: int = 22) -> bytes:
    return b"".join(f_bytes(1, n) for n in nodes) + f_bytes(4, f_varint(1, producer))


# ---------------------------------------------------------------- hot path
_pack_f32 = struct.Struct("<f").pack
_pack_head = struct.Struct("<Bd").pack  # Event.wall_time: key 0x09 + double
# ... followed by Event.step (key 0x10) as a varint of 1, 2 or 3 bytes: one pack for both
_pack_head_step1 = struct.Struct("<BdBB").pack
_pack_head_step2 = struct.Struct("<BdBBB").pack
_pack_head_step3 = struct.Struct("<BdBBBB").pack


def scalar_prefix(tag: str) -> bytes:
    """The constant bytes of a scalar event from ``Event.summary`` up to the float.

    ``Event.summary{value{tag, simple_value}}``: everything but the value's four
    bytes depends only on the tag, so it is computed once per tag.
    """
    tag_field = _wire.f_str(1, tag)
    value_len = len(tag_field) + 5
    summary_len = 1 + len(varint(value_len)) + value_len
    return b"\x2a" + varint(summary_len) + b"\x0a" + varint(value_len) + tag_field + b"\x15"


def step_field(step: int) -> bytes:
    """``Event.step``, left out when 0 (the proto3 default)."""
    return b"\x10" + varint(step) if step else b""


def f32(value: float) -> bytes:
    """A float's four bytes; a finite double beyond float32's range becomes +-inf, as numpy does."""
    try:
        return _pack_f32(value)
    except OverflowError:
        return _pack_f32(float(np.float32(value)))


def scalar_event(wall_time: float, step: int, prefix: bytes, value: float) -> bytes:
    """``Event{wall_time, step, summary{value{tag, simple_value}}}``; ``prefix`` from
    :func:`scalar_prefix`.

    The worker calls it once per scalar, so for steps from 1 to 2**21 - 1 it makes no
    other Python call: the wall time and the step's varint (unrolled) are packed at once,
    and :func:`f32` is inlined.
    """
    if 0 < step < 0x80:
        head = _pack_head_step1(0x09, wall_time, 0x10, step)
    elif 0x80 <= step < 0x4000:
        head = _pack_head_step2(0x09, wall_time, 0x10, (step & 0x7F) | 0x80, step >> 7)
    elif 0x4000 <= step < 0x200000:
        head = _pack_head_step3(0x09, wall_time, 0x10, (step & 0x7F) | 0x80,
                                ((step >> 7) & 0x7F) | 0x80, step >> 14)
    else:
        head = _pack_head(0x09, wall_time) + step_field(step)
    try:
        return head + prefix + _pack_f32(value)
    except OverflowError:
        return head + prefix + f32(value)
