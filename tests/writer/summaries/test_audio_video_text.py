"""Audio (WAV), video (GIF) and text summaries: SummaryWriter.add_audio/add_video/add_text,
read back through TensorBoard."""
from __future__ import annotations

import io
import wave

import numpy as np
import pytest
from PIL import Image, ImageSequence

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer._summaries.pixels import tile_images  # the expected grid of a batch of clips
from gluon_tb.writer._summaries.text import MAX_TEXT_BYTES


def read_tensor(logdir, tag, plugin):
    """The one tensor TensorBoard loads for ``tag``, checked to be ``plugin``'s and at step 3."""
    assert readback.plugin_name(str(logdir), ".", tag) == plugin
    [e] = readback.tensor_events(str(logdir), ".", tag)
    assert e.step == 3
    return e.tensor_proto


def pcm(x):
    return np.rint(np.nan_to_num(np.clip(np.asarray(x, np.float64), -1, 1)) * 32767).astype(np.int16)


# ---------------------------------------------------------------- audio
def wav_of(logdir):
    t = read_tensor(logdir, "snd", "audio")
    wav = t.string_val[0]  # TensorBoard's loader keeps [wav] (labels dropped)
    with wave.open(io.BytesIO(wav)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2").reshape(-1, w.getnchannels())
        return w.getframerate(), w.getsampwidth(), frames


def read_wav(tmp_path, x, **kwargs):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_audio("snd", x, global_step=3, **kwargs)
    return wav_of(tmp_path)


@pytest.mark.parametrize("shape,transpose", [
    ((100,), False), ((100, 1), False), ((100, 2), False), ((1, 100), True), ((2, 100), True),
    ((2, 2), False),  # two stereo frames, not channels-first
])
def test_audio_roundtrip(tmp_path, shape, transpose):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    rate, width, frames = read_wav(tmp_path, x, sample_rate=8000)
    assert (rate, width) == (8000, 2)
    want = x.T if transpose else x.reshape(x.shape[0], -1)
    np.testing.assert_array_equal(frames, pcm(want))


@pytest.mark.parametrize("shape,squeezed,transpose", [
    ((1, 1, 100), (100, 1), False), ((100, 1, 1), (100, 1), False), ((1, 2, 100), (2, 100), True),
    ((1, 100, 2, 1), (100, 2), False),
])
def test_audio_of_a_shape_that_squeezes_to_a_clip_as_mxboards(tmp_path, shape, squeezed, transpose):
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    _, _, frames = read_wav(tmp_path, x)
    want = x.reshape(squeezed)
    np.testing.assert_array_equal(frames, pcm(want.T if transpose else want))


def test_audio_fields_and_copy(tmp_path):
    x = np.zeros((50, 2))
    with SummaryWriter(str(tmp_path)) as w:
        w.add_audio("snd", x, sample_rate=22050.0)
        x[:] = 1
    [(_, v)] = readback.summary_values(str(tmp_path))  # as written: tf.summary.audio's form
    from tensorboard.plugins.audio import plugin_data_pb2

    assert v.metadata.plugin_data.plugin_name == "audio"
    pd = plugin_data_pb2.AudioPluginData.FromString(v.metadata.plugin_data.content)
    assert pd.encoding == plugin_data_pb2.AudioPluginData.WAV
    assert [d.size for d in v.tensor.tensor_shape.dim] == [1, 2] and v.tensor.string_val[1] == b""
    with wave.open(io.BytesIO(v.tensor.string_val[0])) as wv:
        assert (wv.getframerate(), wv.getnchannels(), wv.getnframes(), wv.getsampwidth()) == (22050, 2, 50, 2)
        assert not np.frombuffer(wv.readframes(50), "<i2").any()


@pytest.mark.parametrize("load_fast", ["true", "false"])
def test_audio_is_served_as_wav_by_both_loaders(tmp_path, load_fast):
    """The legacy Summary.Audio was served as application/octet-stream by the Rust loader."""
    from tb_server import tensorboard

    x = np.sin(np.linspace(0, 40, 800)) * 0.5
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.add_audio("snd", x, global_step=4, sample_rate=8000)
    with tensorboard(str(tmp_path), load_fast=load_fast) as tb:
        [clip] = tb.get("/data/plugin/audio/audio", run="run", tag="snd", sample=0)
        assert clip["contentType"] == "audio/wav" and clip["step"] == 4
        wav_bytes = tb.get("/data/plugin/audio/individualAudio?" + clip["query"])
        with wave.open(io.BytesIO(wav_bytes)) as wv:
            got = np.frombuffer(wv.readframes(wv.getnframes()), "<i2")
        np.testing.assert_array_equal(got, pcm(x))


def test_audio_ndarray(tmp_path):
    mx = pytest.importorskip("mxnet")
    x = mx.nd.array(np.linspace(-2, 2, 64))
    with SummaryWriter(str(tmp_path)) as w:
        w.add_audio("snd", x, global_step=3)
        x[:] = 0
    _, _, frames = wav_of(tmp_path)
    np.testing.assert_array_equal(frames[:, 0], pcm(np.linspace(-2, 2, 64).astype(np.float32)))


AUDIO_CASES = [
    ("beyond [-1,1] clipped", np.array([-3.0, -1.0, 0.5, 1.0, 7.0]), {}, [-32767, -32767, 16384, 32767, 32767]),
    ("NaN -> 0", np.array([np.nan, 0.25]), {}, [0, 8192]),
    ("int64 read as amplitude", np.array([-2, 0, 1, 5], np.int64), {}, [-32767, 0, 32767, 32767]),
    # integer PCM as WAV files hold it (scipy.io.wavfile's int16): sample for sample, not clipped to +-1
    ("int16 PCM as it is", np.array([0, 16000, -32768, 32767, -1], np.int16), {}, [0, 16000, -32768, 32767, -1]),
    ("int16 big-endian", np.array([0, 16000, -32768], ">i2"), {}, [0, 16000, -32768]),
    ("int32 PCM by its top 16 bits", np.array([0, 1 << 30, -(1 << 31), (1 << 31) - 1], np.int32), {},
     [0, 16384, -32768, 32767]),
    ("uint8 PCM centred on 128", np.array([128, 255, 0, 192], np.uint8), {}, [0, 32512, -32768, 16384]),
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
        with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc) as info:
            w.add_audio("snd", x, **kwargs)
        assert type(info.value) is exc
        for word in words:
            assert word in str(info.value)
    else:
        _, _, frames = read_wav(tmp_path, x, **kwargs)
        np.testing.assert_array_equal(frames[:, 0], expected)


def test_a_rate_under_1000_hz_is_warned_once_a_writer_and_written_as_given(tmp_path, caplog):
    """tensorboardX's add_audio(tag, snd, 10) means step 10; ours (mxboard's order) reads a rate of 10 Hz."""
    import logging

    x = np.full(16, 0.5, np.float32)
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path)) as w:
            w.add_audio("snd", x, 10)
            w.add_audio("snd", x, 20)
            w.for_run("r").add_audio("snd", x, 30)  # a run of the same writer: no second warning
            w.add_audio("ok", x, 1000, 3)
        with SummaryWriter(str(tmp_path / "other")) as w:
            w.add_audio("snd", x, 999, global_step=3)  # a writer of its own: its own warning
    order = ("The order is mxboard's, add_audio(tag, audio, sample_rate, global_step); tensorboardX's is "
             "add_audio(tag, snd_tensor, global_step, sample_rate): pass global_step= by name")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records if "add_audio" in r.getMessage()] == [
        ("gluon_tb", logging.WARNING, f"gluon_tb: add_audio('snd', ...): sample_rate=10 Hz, written as given. {order}"),
        ("gluon_tb", logging.WARNING, f"gluon_tb: add_audio('snd', ...): sample_rate=999 Hz, written as given. {order}")]

    def rates(logdir, run, tag):
        out = []
        for e in readback.tensor_events(str(logdir), run, tag):
            with wave.open(io.BytesIO(e.tensor_proto.string_val[0])) as wav:
                out.append((e.step, wav.getframerate(), wav.getnframes()))
        return out

    assert rates(tmp_path, ".", "snd") == [(0, 10, 16), (0, 20, 16)]
    assert rates(tmp_path, "r", "snd") == [(0, 30, 16)]
    assert rates(tmp_path, ".", "ok") == [(3, 1000, 16)]
    assert rates(tmp_path / "other", ".", "snd") == [(3, 999, 16)]


# ---------------------------------------------------------------- video
def gif_of(logdir):
    t = read_tensor(logdir, "vid", "images")
    w, h, gif = t.string_val
    img = Image.open(io.BytesIO(gif))
    assert img.format == "GIF" and img.size == (int(w), int(h))
    return img


def read_gif(tmp_path, x, **kwargs):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_video("vid", x, global_step=3, **kwargs)
    return gif_of(tmp_path)


def gray_clip(t, n=None, h=6, w=5):
    shape = (t, 1, h, w) if n is None else (n, t, 1, h, w)
    return np.random.default_rng(t).integers(0, 256, shape, dtype=np.uint8)


def test_video_gray_frames_exact(tmp_path):
    x = gray_clip(5)
    img = read_gif(tmp_path, x, fps=10)
    frames = [np.asarray(f.convert("L")) for f in ImageSequence.Iterator(img)]
    assert len(frames) == img.n_frames == 5
    for f, want in zip(frames, x[:, 0]):
        np.testing.assert_array_equal(f, want)
    assert img.info["duration"] == 100 and img.info.get("loop") == 0


def test_video_batch_tiled_per_frame(tmp_path):
    x = gray_clip(3, n=4)
    img = read_gif(tmp_path, x)
    assert img.n_frames == 3
    for t, f in enumerate(ImageSequence.Iterator(img)):
        np.testing.assert_array_equal(np.asarray(f.convert("L")), tile_images(x[:, t])[:, :, 0])


def test_video_rgb_float_and_rgba(tmp_path):
    x = np.random.default_rng(0).random((4, 3, 8, 8)).astype(np.float32)
    img = read_gif(tmp_path / "rgb", x, fps=2.5)
    assert img.n_frames == 4 and img.size == (8, 8) and img.info["duration"] == 400
    x4 = np.random.default_rng(1).random((2, 3, 4, 8, 8))
    img = read_gif(tmp_path / "rgba", x4)
    assert img.n_frames == 3 and img.size == (2 * (8 + 2) + 2, 8 + 2 + 2)


def test_video_copy_and_ndarray(tmp_path):
    mx = pytest.importorskip("mxnet")
    x = gray_clip(2)
    nd = mx.nd.array(x, dtype="uint8")
    with SummaryWriter(str(tmp_path)) as w:
        w.add_video("vid", nd, global_step=3)
        nd[:] = 0
    img = gif_of(tmp_path)
    np.testing.assert_array_equal(np.asarray(img.convert("L")), x[0, 0])


def gif_bytes(tmp_path, x, **kwargs):
    """The image tensor TensorBoard reads back of ``add_video("vid", x, 3, **kwargs)``: width, height, GIF."""
    with SummaryWriter(str(tmp_path)) as w:
        w.add_video("vid", x, global_step=3, **kwargs)
    return list(read_tensor(tmp_path, "vid", "images").string_val)


@pytest.mark.parametrize("shape,dataformats", [
    ((2, 5, 6, 7, 3), "NTHWC"), ((5, 6, 7, 1), "THWC"), ((5, 6, 7, 4), "thwc"),
    ((1, 16, 64, 64, 3), "NTHWC"),  # 196 KiB: the GIF is encoded in a child process
])
def test_video_channels_last_is_the_gif_of_its_channels_first_transpose(tmp_path, shape, dataformats):
    x = np.random.default_rng(len(shape)).random(shape).astype(np.float32)
    first = np.moveaxis(x, -1, -3).copy()  # (N, )T, C, H, W
    want = gif_bytes(tmp_path / "first", first)
    assert gif_bytes(tmp_path / "last", x, dataformats=dataformats) == want
    named = "NTCHW" if x.ndim == 5 else "TCHW"  # the default named: the same bytes as today
    assert gif_bytes(tmp_path / "named", first, dataformats=named) == want
    n = x.shape[0] if x.ndim == 5 else 1
    h, w, _ = tile_images(np.zeros((n, 1) + x.shape[-3:-1])).shape  # rows and columns, not swapped
    assert want[:2] == [str(w).encode(), str(h).encode()]


def test_video_refused_dataformats_leaves_the_writer_working(tmp_path):
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError) as info:
            w.add_video("vid", x, global_step=3, dataformats="HWC")
        assert str(info.value) == "dataformats must be one of 'TCHW', 'THWC', 'NTCHW', 'NTHWC', got str 'HWC'"
        w.add_video("vid", x, global_step=3, dataformats="THWC")
    img = gif_of(tmp_path)
    assert img.n_frames == 1 and img.size == (4, 4)


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
    ("dataformats unknown", np.zeros((2, 3, 4, 4)), {"dataformats": "TCWH"}, ValueError,
     ["dataformats must be one of 'TCHW', 'THWC', 'NTCHW', 'NTHWC', got str 'TCWH'"]),
    ("dataformats not a str", np.zeros((2, 3, 4, 4)), {"dataformats": 5}, TypeError,
     ["dataformats must be one of 'TCHW', 'THWC', 'NTCHW', 'NTHWC', got int 5"]),
    ("dataformats of another rank", np.zeros((2, 4, 4, 3)), {"dataformats": "NTHWC"}, ValueError,
     ["video must be 5-D for dataformats='NTHWC', got ndarray of shape (2, 4, 4, 3)"]),
    ("channels last read first", np.zeros((1, 2, 5, 5, 3)), {}, ValueError,
     ["got 5 channels", "read as dataformats='NTCHW'; pass dataformats= to read the axes differently"]),
    ("channels first read last", np.zeros((2, 3, 5, 5)), {"dataformats": "thwc"}, ValueError,
     ["video must have 1, 3 or 4 channels, got 5 channels", "read as dataformats='THWC'"]),
]


@pytest.mark.parametrize("name,x,kwargs,exc,words", VIDEO_BAD, ids=[c[0] for c in VIDEO_BAD])
def test_video_bad_inputs(tmp_path, name, x, kwargs, exc, words):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc) as info:
        w.add_video("vid", x, **kwargs)
    assert type(info.value) is exc
    for word in words:
        assert word in str(info.value)


# ---------------------------------------------------------------- text
def read_text(tmp_path, text):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_text("note", text, global_step=3)
    t = read_tensor(tmp_path, "note", "text")
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

    with SummaryWriter(str(tmp_path)) as w:
        w.add_text("note", "**hi**")
    [e] = readback.tensor_events(str(tmp_path), ".", "note")
    html = text_plugin.text_array_to_html(tensor_util.make_ndarray(e.tensor_proto), True)
    assert "<strong>hi</strong>" in html and "<table>" not in html


def test_text_lone_surrogate_becomes_question_mark(tmp_path):
    assert read_text(tmp_path, "a\ud800b") == "a?b"


def test_text_10mb_is_loaded(tmp_path):
    text = ("line of log text " * 64 + "\n") * 9600  # ~10.5 MB
    assert len(text) > 10_000_000
    assert read_text(tmp_path, text) == text


def test_text_size_limit(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_text("note", "x" * MAX_TEXT_BYTES)
        with pytest.raises(ValueError, match="text must be at most"):
            w.add_text("note", "x" * (MAX_TEXT_BYTES + 1))
        with pytest.raises(ValueError, match="text must be at most"):
            w.add_text("note", "é" * (MAX_TEXT_BYTES // 2 + 1))  # 2 bytes each in UTF-8


@pytest.mark.parametrize("bad", [b"bytes", 3, None, ["a"], np.array("s")])
def test_text_must_be_str(tmp_path, bad):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(TypeError, match="text must be a str"):
        w.add_text("note", bad)
