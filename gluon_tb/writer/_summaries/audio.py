"""Audio clips, written as 16-bit PCM WAV in the ``audio`` plugin's tensor (``[[wav, label]]``,
``AudioPluginData(encoding=WAV)``: what ``tf.summary.audio`` writes).

Shapes: 1-D ``(frames,)`` is mono; 2-D is ``(frames, channels)`` with 1 or 2
channels. A 2-D array whose first dimension is 1 or 2 and whose second is
greater than 2 is read as ``(channels, frames)`` instead (so ``(2, 44100)`` is
one second of stereo, while ``(2, 2)`` is two stereo frames).

Values: integer PCM in the dtypes WAV files hold is written as such: int16 (what
``scipy.io.wavfile`` reads from a 16-bit file) sample for sample, int32 by its top 16 bits, uint8
(8-bit WAV, centred on 128) scaled to 16 bits. Every other numeric dtype (floats, bool, int64 and
the other integers) is read as amplitude in ``[-1, 1]``: values outside are clipped, NaN becomes 0,
and samples are ``round(x * 32767)``.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from .._format import proto as _proto
from .._format.chain import CHAINS, Chain, Message
from .._common.arrays import to_numpy
from .._common.checks import Number, as_float, describe, is_real
from .capture import array_nbytes, check_array, snapshot
from .pixels import _fast, kernel_input  # the optional C kernels: the same samples, the GIL released once

MAX_SAMPLE_RATE = 2**32 - 1  # the WAV header's field


class AudioPayload(NamedTuple):
    array: Any  # a private copy, (frames,), (frames, channels) or (channels, frames)
    channels_first: bool
    sample_rate: float

    @property
    def nbytes(self) -> int:
        return array_nbytes(self.array)


def capture_audio(audio: Any, sample_rate: Number = 44100) -> AudioPayload:
    """Check and copy a clip: ``(frames,)``, ``(frames, 1|2)`` or ``(1|2, frames>2)``, or any
    shape that is one of those without its axes of length 1 (mxboard squeezed the array).

    ``sample_rate`` is a number of samples per second, at least 1 (it is
    rounded to an int in the WAV header). Floats are clipped to [-1, 1]; int16, int32 and
    uint8 are integer PCM (see the module's docstring).
    """
    if not is_real(sample_rate):
        raise TypeError(f"sample_rate must be a positive number, got {describe(sample_rate)}")
    if not (1 <= sample_rate <= MAX_SAMPLE_RATE):  # False for NaN too
        raise ValueError(f"sample_rate must be a number from 1 to {MAX_SAMPLE_RATE}, "
                         f"got {sample_rate!r}")
    x, shape = check_array(audio, "audio")
    if len(shape) > 2 and sum(d != 1 for d in shape) <= 2:  # (1, 1, frames) and the like: squeezed, as mxboard's
        shape = tuple(d for d in shape if d != 1) or (1,)
        x = x.reshape(shape)
    channels_first = False
    if len(shape) == 2:
        if shape[0] in (1, 2) and shape[1] > 2:
            channels_first = True
        elif shape[1] not in (1, 2):
            raise ValueError(f"audio must be (frames,), (frames, channels) or (channels, frames) "
                             f"with 1 or 2 channels, got {describe(x)}")
    elif len(shape) != 1:
        raise ValueError(f"audio must be 1-D (frames,) or 2-D (frames, channels), "
                         f"got {describe(x)}")
    if shape[1 if channels_first else 0] == 0:
        raise ValueError(f"audio must have at least one frame, got {describe(x)}")
    return AudioPayload(snapshot(x), channels_first, as_float(sample_rate, "sample_rate"))


def to_pcm16(arr: np.ndarray) -> np.ndarray:
    """Little-endian int16 samples: clipped to [-1, 1], NaN -> 0, ``round(x * 32767)`` (half to even)."""
    src = kernel_input(arr) if np.little_endian else None
    if src is not None:
        out = np.empty(arr.shape, "<i2")
        _fast.pcm16(src, out)
        return out
    with np.errstate(invalid="ignore"):
        f = np.clip(arr.astype(np.float64), -1.0, 1.0)
    np.nan_to_num(f, copy=False, nan=0.0)
    return np.rint(f * 32767.0).astype("<i2")


#: the 44-byte header of a PCM WAV file, as Python's ``wave`` module writes it: 'RIFF', the size
#: after these 8 bytes, 'WAVE', a 16-byte 'fmt ' chunk (format 1, channels, frame rate, bytes a
#: second, bytes a frame, bits a sample), then 'data' and its size
_WAV_HEADER = struct.Struct("<4sL4s4sLHHLLHH4sL")


def wav_header(frames: int, channels: int, sample_rate: float) -> bytes:
    """The 44 bytes before ``frames`` x ``channels`` int16 samples in a WAV file."""
    size = frames * channels * 2
    rate = int(round(sample_rate))
    return _WAV_HEADER.pack(b"RIFF", 36 + size, b"WAVE", b"fmt ", 16, 1, channels, rate,
                            channels * rate * 2, channels * 2, 16, b"data", size)


def encode_wav(frames: np.ndarray, sample_rate: float) -> bytes:
    """WAV bytes of int16 ``(frames, channels)`` samples (the bytes ``wave`` writes for them)."""
    n, channels = frames.shape
    data = np.ascontiguousarray(frames, dtype="<i2").data.cast("B")
    return b"".join((wav_header(n, channels, sample_rate), data))


def wav(arr: np.ndarray, sample_rate: float) -> Message:
    """WAV of float ``(frames, channels)`` samples. Where the C kernels and framing are built, a
    Chain whose samples are converted while its record is framed and written (``pcm16_piece``):
    the GIL is taken back once for the conversion, the framing and the write, and the clip is
    not copied on its way to the file (:class:`.chain.Chain`)."""
    n, c = arr.shape
    src = kernel_input(arr) if CHAINS else None  # CHAINS: a little-endian host
    if src is not None and hasattr(_fast, "pcm16_piece"):
        head = wav_header(n, c, sample_rate)
        return Chain((head, _fast.pcm16_piece(src)), len(head) + 2 * n * c)
    return encode_wav(to_pcm16(arr), sample_rate)


#: integer PCM dtypes, as 16-bit samples
_PCM = {np.dtype(np.int16): lambda a: a, np.dtype(np.int32): lambda a: a >> 16,
        np.dtype(np.uint8): lambda a: (a.astype(np.int16) - 128) << 8}


def build_audio(tag: str, payload: AudioPayload) -> Message:
    """Encode the clip as WAV in the ``audio`` plugin's tensor."""
    arr = to_numpy(payload.array, "audio")
    if arr.ndim == 1:
        arr = arr[:, None]
    elif payload.channels_first:
        arr = arr.T
    n, c = arr.shape
    pcm = _PCM.get(np.dtype(arr.dtype).newbyteorder("="))
    data = encode_wav(pcm(arr.astype(arr.dtype.newbyteorder("="), copy=False)), payload.sample_rate) \
        if pcm is not None else wav(arr, payload.sample_rate)
    return _proto.value(tag, tensor=_proto.audio_tensor(data), metadata=_proto.audio_metadata(tag))
