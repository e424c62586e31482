"""The C kernels of ``_fastconvert`` give the numpy code's values exactly: pixels (range, uint8,
with and without rescaling) and audio samples; the WAV header is the one Python's ``wave`` writes."""
import io
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gluon_tb.writer._summaries import audio, pixels

fast = pixels._fast
needs_kernel = pytest.mark.skipif(fast is None, reason="the optional C kernel is not built")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 0.5 / 255, 1 / 255, 254.5 / 255, 1e-45, 3e38, -3e38, 0.5 / 32767,
           1.5 / 32767, -0.5 / 32767, 1.0000001, -1.0000001]


def numpy_only(fn, *args):
    """``fn`` with the C kernel hidden: the numpy code's result."""
    saved = pixels._fast, audio._fast
    pixels._fast = audio._fast = None
    try:
        return fn(*args)
    finally:
        pixels._fast, audio._fast = saved


def arrays(dtype):
    special = [float(dtype(v)) for v in SPECIAL]  # each exactly representable in dtype
    values = st.one_of(st.floats(width=32 if dtype == np.float32 else 64), st.sampled_from(special))
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40), elements=values)


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.float32, np.float64]).flatmap(arrays), st.booleans())
def test_pixels_equal_numpy(x, transposed):
    if transposed:
        x = x.T  # not C-contiguous
    rng = pixels.display_range(x)
    assert rng == numpy_only(pixels.display_range, x)
    for r in (rng, None):
        got, want = pixels.to_uint8(x, r), numpy_only(pixels.to_uint8, x, r)
        assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.float32, np.float64]).flatmap(arrays))
def test_pcm16_equal_numpy(x):
    got, want = audio.to_pcm16(x), numpy_only(audio.to_pcm16, x)
    assert got.dtype == want.dtype == np.dtype("<i2") and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_rounding_half_to_even_and_edges():
    x = np.array([0.5 / 32767, 1.5 / 32767, 2.5 / 32767, -0.5 / 32767, 2.0, -2.0, np.nan, np.inf, -np.inf])
    assert audio.to_pcm16(x).tolist() == [0, 2, 2, 0, 32767, -32767, 0, 32767, -32767]
    px = np.array([np.nan, np.inf, -np.inf, -0.1, 1.1, 0.5 / 255, 0.49 / 255], np.float32)
    assert pixels.to_uint8(px).tolist() == [0, 255, 0, 0, 255, 1, 0]


def wave_module_bytes(frames: np.ndarray, sample_rate: float) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(frames.shape[1])
        w.setsampwidth(2)
        w.setframerate(int(round(sample_rate)))
        w.setnframes(frames.shape[0])
        w.writeframes(np.ascontiguousarray(frames).tobytes())
    return buf.getvalue()


@pytest.mark.parametrize("channels,frames,rate", [(1, 1, 1), (1, 44100, 44100), (2, 7, 22050.4), (2, 1000, 8000.5)])
def test_wav_bytes_are_the_wave_modules(channels, frames, rate):
    pcm = np.random.default_rng(channels * frames).integers(-32767, 32768, (frames, channels)).astype("<i2")
    wav = audio.encode_wav(pcm, rate)
    assert wav == wave_module_bytes(pcm, rate)
    with wave.open(io.BytesIO(wav)) as r:
        assert (r.getnchannels(), r.getnframes(), r.getframerate()) == (channels, frames, int(round(rate)))
        np.testing.assert_array_equal(np.frombuffer(r.readframes(frames), "<i2").reshape(frames, channels), pcm)


@needs_kernel
def test_kernel_errors_name_what_was_wrong():
    with pytest.raises(TypeError, match="x must be float32 or float64 values"):
        fast.finite_range(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="out must hold 6 bytes"):
        fast.pcm16(np.zeros(3, np.float32), np.zeros(2, np.int16))
    with pytest.raises(ValueError, match="out must hold 3 bytes"):
        fast.to_uint8(np.zeros(3), np.zeros(4, np.uint8), False, 0.0, 1.0)
    assert fast.finite_range(np.array([np.nan, np.inf])) == (0, 0.0, 0.0)
    assert fast.finite_range(np.array([np.nan, 2.0, -np.inf, -3.0], np.float32)) == (2, -3.0, 2.0)


needs_png = pytest.mark.skipif(pixels._fastpng is None, reason="the optional PNG kernel is not built")


def image_batches(dtype):
    special = [float(dtype(v)) for v in SPECIAL]
    kinds = st.sampled_from(["unit", "wide", "special", "constant"])
    shapes = st.tuples(st.integers(1, 7), st.sampled_from([1, 3, 4]), st.integers(1, 9), st.integers(1, 9))

    def make(kind, shape, seed):
        rng = np.random.default_rng(seed)
        if kind == "unit":
            return rng.random(shape).astype(dtype)
        if kind == "wide":
            return (rng.standard_normal(shape) * 40).astype(dtype)
        if kind == "constant":
            return np.full(shape, 7.5, dtype)
        return rng.choice(np.array(special, dtype), shape)
    return st.builds(make, kinds, shapes, st.integers(0, 2 ** 32 - 1))


@needs_png
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("values", [[0.0, -0.0, 1.5], [-0.0, 0.0, 1.5], [1.5, -0.0, 0.0], [-0.0, 1.5]])
def test_the_rescaling_warning_reads_a_zero_minimum_as_0_whatever_its_sign(dtype, values):
    """numpy's min and the kernel's can differ in the sign of a zero (found by the test below):
    both warnings say 0."""
    import warnings

    x = np.array(values, dtype).reshape(1, 1, 1, -1)
    tag = f"t{np.random.default_rng().integers(1 << 62)}"
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pixels.checked_png(x, None, tag)
        numpy_only(lambda: pixels.checked_uint8(x, tag + "-numpy"))
    want = ("float values span [0, 1.5], outside [0, 1]; rescaled by their min and max (pass floats in [0, 1] "
            "or uint8 0..255 to keep them as they are)")
    assert [str(w.message).split(": ")[2] for w in got] == [want, want]


@needs_png
@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.float32, np.float64]).flatmap(image_batches), st.sampled_from([None, 1, 2, 3, 8]),
       st.booleans())
def test_png_grid_is_the_numpy_grid_encoded_and_warns_alike(x, nrow, sliced):
    """``checked_png``: the PNG of checked_uint8 + tile_images + encode_png, byte for byte, and the
    same warning, in one kernel call."""
    import warnings

    if sliced:
        x = x[:, :, ::-1]  # not C-contiguous: copied first
    tag = f"t{np.random.default_rng().integers(1 << 62)}"  # a warning per new tag
    with warnings.catch_warnings(record=True) as got_w:
        warnings.simplefilter("always")
        got = pixels.checked_png(x, nrow, tag)
    with warnings.catch_warnings(record=True) as want_w:
        warnings.simplefilter("always")
        grid = numpy_only(lambda: pixels.tile_images(pixels.checked_uint8(x, tag + "-numpy"), nrow=nrow))
    if x.dtype == np.float64 and pixels._beyond_float32(pixels.display_range(x)):
        assert got is None  # the kernel rescales in float32: float64 past its range goes numpy's way
        return
    assert got is not None
    png, shape = got
    assert shape == grid.shape
    assert png == pixels.encode_png(grid)
    assert [str(w.message).replace(tag, "T") for w in got_w] == \
        [str(w.message).replace(tag + "-numpy", "T") for w in want_w]


def test_png_grid_leaves_what_it_does_not_take_to_numpy():
    x = np.zeros((2, 3, 4, 4), np.float32)
    assert pixels.checked_png(x.astype(np.uint8), None, "t") is None  # uint8: nothing to convert
    assert pixels.checked_png(x.astype(np.float16), None, "t") is None
    assert pixels.checked_png(x[:0], None, "t") is None
    assert pixels.checked_png(np.zeros((2, 5, 4, 4), np.float32), None, "t") is None  # 5 channels
    for bad in (0, -1, 1.5, "2"):  # tile_images raises for these, naming nrow
        assert pixels.checked_png(x, bad, "t") is None


@needs_png
def test_png_grid_errors_name_what_was_wrong():
    png_grid = pixels._fastpng.png_grid
    with pytest.raises(ValueError, match="x must hold n \\* c \\* h \\* w = 96 values, got 95"):
        png_grid(np.zeros(95, np.float32), 2, 3, 4, 4, 1, 2, 1)
    with pytest.raises(ValueError, match="ncol <= n"):
        png_grid(np.zeros(96, np.float32), 2, 3, 4, 4, 3, 2, 1)
    with pytest.raises(ValueError, match="level 0-9"):
        png_grid(np.zeros(96, np.float32), 2, 3, 4, 4, 1, 2, 10)
    with pytest.raises(TypeError, match="x must be float32 or float64"):
        png_grid(np.zeros(96, np.int32), 2, 3, 4, 4, 1, 2, 1)


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(st.sampled_from([np.float32, np.float64]).flatmap(arrays), st.sampled_from([1, 2]),
       st.sampled_from([1.0, 8000.0, 44100.0, 22050.4]))
def test_wav_made_while_framed_is_the_numpy_wav(x, channels, rate):
    """The samples converted inside the framing (a Chain with a fill piece): the same WAV bytes."""
    from gluon_tb.writer._format.chain import CHAINS, Chain

    x = x.reshape(-1, channels) if x.size % channels == 0 else x.reshape(-1, 1)

    got = audio.wav(x, rate)
    want = numpy_only(audio.wav, x, rate)
    assert type(want) is bytes and want == wave_module_bytes(numpy_only(audio.to_pcm16, x), rate)
    if CHAINS:
        assert type(got) is Chain and got.nbytes == len(want)
    assert bytes(got) == want


@needs_kernel
def test_a_fill_piece_holds_its_samples_until_it_is_dropped():
    import sys

    x = np.linspace(-1, 1, 1001, dtype=np.float32)
    before = sys.getrefcount(x)
    piece = fast.pcm16_piece(x)
    assert sys.getrefcount(x) == before + 1  # the buffer it reads while the GIL is free
    del piece
    assert sys.getrefcount(x) == before
    with pytest.raises(TypeError, match="x must be float32 or float64 values"):
        fast.pcm16_piece(np.zeros(3, np.int16))
