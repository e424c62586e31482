"""Audio (WAV), video (GIF) and text summaries, read back through TensorBoard."""
from __future__ import annotations

import io
import wave

import numpy as np
import pytest
from PIL import Image, ImageSequence

import readback
from gluon_tb.writer._summaries.audio import build_audio, capture_audio
from gluon_tb.writer._summaries.pixels import tile_images
from gluon_tb.writer._summaries.text import MAX_TEXT_BYTES, build_text, capture_text
from gluon_tb.writer._summaries.video import build_video, capture_video


def write_read(tmp_path, value, tag, plugin):
    readback.write_values(str(tmp_path), [(3, value)])
    assert readback.plugin_name(str(tmp_path), ".", tag) == plugin
    [e] = readback.tensor_events(str(tmp_path), ".", tag)
    assert e.step == 3
    return e.tensor_proto


def pcm(x):
    return np.rint(np.nan_to_num(np.clip(np.asarray(x, np.float64), -1, 1)) * 32767).astype(np.int16)


# ---------------------------------------------------------------- audio
def read_wav(tmp_path, payload):
    t = write_read(tmp_path, build_audio("snd", payload), "snd", "audio")
    wav = t.string_val[0]  # TensorBoard's loader keeps [wav] (labels dropped)
    with wave.open(io.BytesIO(wav)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2").reshape(-1, w.getnchannels())
        return w.getframerate(), w.getsampwidth(), frames


@pytest.mark.parametrize("shape,transpose", [
    ((100,), False), ((100, 1), False), ((100, 2), False), ((1, 100), True), ((2, 100), True),
    ((2, 2), False),  # two stereo frames, not channels-first
])
def test_audio_roundtrip(tmp_path, shape, transpose):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    rate, width, frames = read_wav(tmp_path, capture_audio(x, sample_rate=8000))
    assert (rate, width) == (8000, 2)
    want = x.T if transpose else x.reshape(x.shape[0], -1)
    np.testing.assert_array_equal(frames, pcm(want))


def test_audio_fields_and_copy(tmp_path):
    x = np.zeros((50, 2))
    p = capture_audio(x, sample_rate=22050.0)
    x[:] = 1
    readback.write_values(str(tmp_path), [(0, build_audio("snd", p))])
    a = readback.raw_events(readback.event_files(str(tmp_path))[0])[1].summary.value[0].audio
    assert (a.sample_rate, a.num_channels, a.length_frames, a.content_type) == (22050, 2, 50, "audio/wav")
    assert not np.frombuffer(a.encoded_audio_string[44:], "<i2").any()


def test_audio_ndarray(tmp_path):
    mx = pytest.importorskip("mxnet")
    x = mx.nd.array(np.linspace(-2, 2, 64))
    p = capture_audio(x)
    x[:] = 0
    _, _, frames = read_wav(tmp_path, p)
    np.testing.assert_array_equal(frames[:, 0], pcm(np.linspace(-2, 2, 64).astype(np.float32)))


AUDIO_CASES = [
    ("beyond [-1,1] clipped", np.array([-3.0, -1.0, 0.5, 1.0, 7.0]), {}, [-32767, -32767, 16384, 32767, 32767]),
    ("NaN -> 0", np.array([np.nan, 0.25]), {}, [0, 8192]),
    ("int64 read as amplitude", np.array([-2, 0, 1, 5], np.int64), {}, [-32767, 0, 32767, 32767]),
    ("3 channels", np.zeros((100, 3)), {}, (ValueError, ["audio", "(100, 3)"])),
    ("3-D", np.zeros((2, 2, 2)), {}, (ValueError, ["audio", "(2, 2, 2)"])),
    ("empty", np.zeros(0), {}, (ValueError, ["audio", "frame"])),
    ("not an array", "beep.wav", {}, (TypeError, ["audio", "str"])),
    ("strings", np.array(["a", "b"]), {}, (TypeError, ["audio"])),
    ("rate 0", np.zeros(4), {"sample_rate": 0}, (ValueError, ["sample_rate", "0"])),
    ("rate NaN", np.zeros(4), {"sample_rate": float("nan")}, (ValueError, ["sample_rate"])),
    ("rate str", np.zeros(4), {"sample_rate": "44100"}, (TypeError, ["sample_rate", "str"])),
    ("rate bool", np.zeros(4), {"sample_rate": True}, (TypeError, ["sample_rate", "bool"])),
]


@pytest.mark.parametrize("name,x,kwargs,expected", AUDIO_CASES, ids=[c[0] for c in AUDIO_CASES])
def test_audio_bad_and_odd_inputs(tmp_path, name, x, kwargs, expected):
    if isinstance(expected, tuple):
        exc, words = expected
        with pytest.raises(exc) as info:
            capture_audio(x, **kwargs)
        assert type(info.value) is exc
        for word in words:
            assert word in str(info.value)
    else:
        _, _, frames = read_wav(tmp_path, capture_audio(x, **kwargs))
        np.testing.assert_array_equal(frames[:, 0], expected)


# ---------------------------------------------------------------- video
def read_gif(tmp_path, payload):
    t = write_read(tmp_path, build_video("vid", payload), "vid", "images")
    w, h, gif = t.string_val
    img = Image.open(io.BytesIO(gif))
    assert img.format == "GIF" and img.size == (int(w), int(h))
    return img


def gray_clip(t, n=None, h=6, w=5):
    shape = (t, 1, h, w) if n is None else (n, t, 1, h, w)
    return np.random.default_rng(t).integers(0, 256, shape, dtype=np.uint8)


def test_video_gray_frames_exact(tmp_path):
    x = gray_clip(5)
    img = read_gif(tmp_path, capture_video(x, fps=10))
    frames = [np.asarray(f.convert("L")) for f in ImageSequence.Iterator(img)]
    assert len(frames) == img.n_frames == 5
    for f, want in zip(frames, x[:, 0]):
        np.testing.assert_array_equal(f, want)
    assert img.info["duration"] == 100 and img.info.get("loop") == 0


def test_video_batch_tiled_per_frame(tmp_path):
    x = gray_clip(3, n=4)
    img = read_gif(tmp_path, capture_video(x))
    assert img.n_frames == 3
    for t, f in enumerate(ImageSequence.Iterator(img)):
        np.testing.assert_array_equal(np.asarray(f.convert("L")), tile_images(x[:, t])[:, :, 0])


def test_video_rgb_float_and_rgba(tmp_path):
    x = np.random.default_rng(0).random((4, 3, 8, 8)).astype(np.float32)
    img = read_gif(tmp_path / "rgb", capture_video(x, fps=2.5))
    assert img.n_frames == 4 and img.size == (8, 8) and img.info["duration"] == 400
    x4 = np.random.default_rng(1).random((2, 3, 4, 8, 8))
    img = read_gif(tmp_path / "rgba", capture_video(x4))
    assert img.n_frames == 3 and img.size == (2 * (8 + 2) + 2, 8 + 2 + 2)


def test_video_copy_and_ndarray(tmp_path):
    mx = pytest.importorskip("mxnet")
    x = gray_clip(2)
    nd = mx.nd.array(x, dtype="uint8")
    p = capture_video(nd)
    nd[:] = 0
    img = read_gif(tmp_path, p)
    np.testing.assert_array_equal(np.asarray(img.convert("L")), x[0, 0])


VIDEO_BAD = [
    ("3-D", np.zeros((2, 4, 4)), {}, ValueError, ["video", "(2, 4, 4)"]),
    ("2 channels", np.zeros((2, 2, 4, 4)), {}, ValueError, ["video", "2 channels"]),
    ("5 channels", np.zeros((1, 2, 5, 4, 4)), {}, ValueError, ["video", "5 channels"]),
    ("no frames", np.zeros((0, 3, 4, 4)), {}, ValueError, ["video"]),
    ("zero width", np.zeros((2, 3, 4, 0)), {}, ValueError, ["video", "(2, 3, 4, 0)"]),
    ("not an array", [["x"]], {}, TypeError, ["video"]),
    ("fps 0", np.zeros((2, 3, 4, 4)), {"fps": 0}, ValueError, ["fps"]),
    ("fps inf", np.zeros((2, 3, 4, 4)), {"fps": float("inf")}, ValueError, ["fps"]),
    ("fps str", np.zeros((2, 3, 4, 4)), {"fps": "4"}, TypeError, ["fps", "str"]),
]


@pytest.mark.parametrize("name,x,kwargs,exc,words", VIDEO_BAD, ids=[c[0] for c in VIDEO_BAD])
def test_video_bad_inputs(name, x, kwargs, exc, words):
    with pytest.raises(exc) as info:
        capture_video(x, **kwargs)
    assert type(info.value) is exc
    for word in words:
        assert word in str(info.value)


# ---------------------------------------------------------------- text
def read_text(tmp_path, text):
    t = write_read(tmp_path, build_text("note", capture_text(text)), "note", "text")
    assert t.dtype == 7 and len(t.tensor_shape.dim) == 0  # DT_STRING scalar, as tf.summary.text
    [s] = t.string_val
    return s.decode("utf-8")


@pytest.mark.parametrize("text", ["hello", "", "**bold** | ünïcødé ✓ 😀\n\n| a | b |\n|---|---|\n| 1 | 2 |"])
def test_text_roundtrip(tmp_path, text):
    assert read_text(tmp_path, text) == text


@pytest.mark.filterwarnings("ignore:html5lib's sanitizer is deprecated:DeprecationWarning")
def test_text_renders_as_markdown(tmp_path):
    from tensorboard.plugins.text import text_plugin
    from tensorboard.util import tensor_util

    readback.write_values(str(tmp_path), [(0, build_text("note", capture_text("**hi**")))])
    [e] = readback.tensor_events(str(tmp_path), ".", "note")
    html = text_plugin.text_array_to_html(tensor_util.make_ndarray(e.tensor_proto), True)
    assert "<strong>hi</strong>" in html and "<table>" not in html


def test_text_lone_surrogate_becomes_question_mark(tmp_path):
    assert read_text(tmp_path, "a\ud800b") == "a?b"


def test_text_10mb_is_loaded(tmp_path):
    text = ("line of log text " * 64 + "\n") * 9600  # ~10.5 MB
    assert len(text) > 10_000_000
    assert read_text(tmp_path, text) == text


def test_text_size_limit():
    capture_text("x" * MAX_TEXT_BYTES)
    with pytest.raises(ValueError, match="text must be at most"):
        capture_text("x" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(ValueError, match="text must be at most"):
        capture_text("é" * (MAX_TEXT_BYTES // 2 + 1))  # 2 bytes each in UTF-8


@pytest.mark.parametrize("bad", [b"bytes", 3, None, ["a"], np.array("s")])
def test_text_must_be_str(bad):
    with pytest.raises(TypeError, match="text must be a str"):
        capture_text(bad)
