"""Audio clips, written as 16-bit PCM WAV in a ``Summary.Value.audio``.

Shapes: 1-D ``(frames,)`` is mono; 2-D is ``(frames, channels)`` with 1 or 2
channels. A 2-D array whose first dimension is 1 or 2 and whose second is
greater than 2 is read as ``(channels, frames)`` instead (so ``(2, 44100)`` is
one second of stereo, while ``(2, 2)`` is two stereo frames).

Values: every numeric dtype is read as amplitude in ``[-1, 1]``: values outside
are clipped, NaN becomes 0, and samples are ``round(x * 32767)``. Integer PCM
(e.g. int16) is *not* recognised: divide it by 32768 first.
"""
from __future__ import annotations

import io
import wave
from typing import Any, NamedTuple

import numpy as np

from .._format import proto as _proto
from .._common.arrays import to_numpy
from .._common.checks import Number, as_float, describe, is_real
from .capture import array_nbytes, check_array, snapshot

MAX_SAMPLE_RATE = 2**32 - 1  # the WAV header's field


class AudioPayload(NamedTuple):
    array: Any  # a private copy, (frames,), (frames, channels) or (channels, frames)
    channels_first: bool
    sample_rate: float

    @property
    def nbytes(self) -> int:
        return array_nbytes(self.array)


def capture_audio(audio: Any, sample_rate: Number = 44100) -> AudioPayload:
    """Check and copy a clip: ``(frames,)``, ``(frames, 1|2)`` or ``(1|2, frames>2)``.

    ``sample_rate`` is a number of samples per second, at least 1 (it is
    rounded to an int in the WAV header). Values are clipped to [-1, 1].
    """
    if not is_real(sample_rate):
        raise TypeError(f"sample_rate must be a positive number, got {describe(sample_rate)}")
    if not (1 <= sample_rate <= MAX_SAMPLE_RATE):  # False for NaN too
        raise ValueError(f"sample_rate must be a number from 1 to {MAX_SAMPLE_RATE}, "
                         f"got {sample_rate!r}")
    x, shape = check_array(audio, "audio")
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
    """Little-endian int16 samples: clipped to [-1, 1], NaN -> 0, ``round(x * 32767)``."""
    with np.errstate(invalid="ignore"):
        f = np.clip(arr.astype(np.float64), -1.0, 1.0)
    np.nan_to_num(f, copy=False, nan=0.0)
    return np.rint(f * 32767.0).astype("<i2")


def encode_wav(frames: np.ndarray, sample_rate: float) -> bytes:
    """WAV bytes of int16 ``(frames, channels)`` samples."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(frames.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(round(sample_rate)))
        w.setnframes(frames.shape[0])
        w.writeframes(np.ascontiguousarray(frames).tobytes())
    return buf.getvalue()


def build_audio(tag: str, payload: AudioPayload) -> bytes:
    """Encode the clip as WAV in a ``Summary.Value.audio``."""
    arr = to_numpy(payload.array, "audio")
    if arr.ndim == 1:
        arr = arr[:, None]
    elif payload.channels_first:
        arr = arr.T
    frames = to_pcm16(arr)
    n, c = frames.shape
    wav = encode_wav(frames, payload.sample_rate)
    return _proto.value(tag, audio=_proto.audio(payload.sample_rate, c, n, wav))
