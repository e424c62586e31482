"""The first ``add_*`` call of a fresh process with numpy input never imports MXNet.

Each kind runs in its own ``sys.executable -c`` process (a fresh ``sys.modules``): import
gluon_tb, make a ``SummaryWriter``, call the ``add_*`` once, close, and report whether
``mxnet`` was imported (on the caller or by the writer thread). The event is then read
back here with TensorBoard's reader. Functional only: how long the first call takes is
measured by ``benchmarks/bench_first_call.py``, not asserted here.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import wave

import numpy as np
import pytest
import readback

from repo_paths import ROOT  # noqa: E402

# the inputs, made the same way in the child (which logs them) and here (which checks them)
INPUTS = """
import numpy as np
rng = np.random.default_rng(15)
hist = rng.standard_normal(100_000).astype(np.float32)
hist_b = rng.random(1000) * 10.0
img = rng.random((3, 32, 32), dtype=np.float32)
imgs = rng.random((16, 3, 32, 32), dtype=np.float32)
aud = (rng.random(8000) * 2 - 1).astype(np.float32)
vid = rng.random((6, 3, 16, 16), dtype=np.float32)
emb = rng.standard_normal((50, 8)).astype(np.float32)
labels = rng.random(500) > 0.5
preds = rng.random(500)
"""

CALLS = {
    "scalar": 'sw.add_scalar("loss", 1.5, global_step=3)',
    "histogram": 'sw.add_histogram("h", hist, global_step=3)',
    "histograms": 'sw.add_histograms({"ha": hist, "hb": hist_b}, global_step=3)',
    "image": 'sw.add_image("img", img, global_step=3)',
    "images": 'sw.add_images("imgs", imgs, global_step=3)',
    "audio": 'sw.add_audio("snd", aud, sample_rate=8000, global_step=3)',
    "text": 'sw.add_text("note", "hello **world**", global_step=3)',
    "embedding": 'sw.add_embedding("emb", emb, labels=[str(i) for i in range(50)], global_step=3)',
    "pr_curve": 'sw.add_pr_curve("pr", labels, preds, num_thresholds=11, global_step=3)',
    "hparams": 'sw.add_hparams({"lr": 0.1, "opt": "sgd"}, {"acc": 0.9})',
    "custom_scalars": 'sw.add_custom_scalars({"c": {"losses": ["Multiline", ["loss/.*"]]}})',
    "video": 'sw.add_video("vid", vid, global_step=3, fps=4)',
}

CHILD = """
import json, sys
{inputs}
import gluon_tb
sw = gluon_tb.SummaryWriter(sys.argv[1])
{call}
after_call = "mxnet" in sys.modules
sw.close()
print("RESULT " + json.dumps({{"after_call": after_call, "after_close": "mxnet" in sys.modules}}))
"""


def inputs() -> dict:
    ns: dict = {}
    exec(INPUTS, ns)
    return ns


def run_child(kind: str, logdir: str) -> dict:
    code = CHILD.format(inputs=INPUTS, call=CALLS[kind])
    p = subprocess.run([sys.executable, "-c", code, logdir], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    [line] = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    return json.loads(line[7:])


def only_value(logdir: str):
    """The one Summary.Value of the run's only event file, parsed by TensorBoard's protobuf."""
    [path] = readback.event_files(logdir)
    values = [v for e in readback.raw_events(path) if e.HasField("summary") for v in e.summary.value]
    assert len(values) == 1
    return values[0]


def check_histogram(logdir: str, tag: str, x: np.ndarray) -> None:
    from gluon_tb.writer._summaries.histogram_counts import default_edges

    assert readback.plugin_name(logdir, ".", tag) == "histograms"
    [e] = readback.tensor_events(logdir, ".", tag)
    assert e.step == 3
    [path] = readback.event_files(logdir)
    [h] = [v.histo for ev in readback.raw_events(path) if ev.HasField("summary")
           for v in ev.summary.value if v.tag == tag]
    counts, edges = np.histogram(x, default_edges())
    nz = np.flatnonzero(counts)
    assert list(h.bucket) == counts[nz[0]:nz[-1] + 1].tolist()
    assert list(h.bucket_limit) == edges[1:][nz[0]:nz[-1] + 1].tolist()
    assert h.num == x.size and h.min == float(x.min()) and h.max == float(x.max())


def check_png(logdir: str, tag: str, width: int, height: int) -> None:
    from PIL import Image
    from tensorboard.util import tensor_util

    assert readback.plugin_name(logdir, ".", tag) == "images"
    [e] = readback.tensor_events(logdir, ".", tag)
    w, h, png = tensor_util.make_ndarray(e.tensor_proto).tolist()
    assert (int(w), int(h)) == (width, height) and e.step == 3
    assert Image.open(io.BytesIO(png)).size == (width, height)


def expect_scalar(logdir, ns):
    assert readback.tags(logdir) == {(".", "loss")}
    assert readback.scalars(logdir, ".", "loss") == [(3, 1.5)]


def expect_histogram(logdir, ns):
    assert readback.tags(logdir) == {(".", "h")}
    check_histogram(logdir, "h", ns["hist"])


def expect_histograms(logdir, ns):
    assert readback.tags(logdir) == {(".", "ha"), (".", "hb")}
    check_histogram(logdir, "ha", ns["hist"])
    check_histogram(logdir, "hb", ns["hist_b"])


def expect_image(logdir, ns):
    assert readback.tags(logdir) == {(".", "img")}
    check_png(logdir, "img", 32, 32)


def expect_images(logdir, ns):
    assert readback.tags(logdir) == {(".", "imgs")}
    side = 4 * 32 + 5 * 2  # ceil(sqrt(16)) = 4 per row, 2 pixels of padding around each
    check_png(logdir, "imgs", side, side)


def expect_audio(logdir, ns):
    from tensorboard.util import tensor_util

    assert readback.tags(logdir) == {(".", "snd")}
    assert readback.plugin_name(logdir, ".", "snd") == "audio"
    [e] = readback.tensor_events(logdir, ".", "snd")
    wav = tensor_util.make_ndarray(e.tensor_proto).reshape(-1)[0]
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (8000, 1, 8000)


def expect_text(logdir, ns):
    from tensorboard.util import tensor_util

    assert readback.tags(logdir) == {(".", "note")}
    assert readback.plugin_name(logdir, ".", "note") == "text"
    [e] = readback.tensor_events(logdir, ".", "note")
    assert tensor_util.make_ndarray(e.tensor_proto).reshape(-1)[0] == b"hello **world**"


def expect_embedding(logdir, ns):
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    with open(os.path.join(logdir, "projector_config.pbtxt")) as f:
        cfg = text_format.Parse(f.read(), ProjectorConfig())
    [emb] = cfg.embeddings
    assert (emb.tensor_name, emb.tensor_path, list(emb.tensor_shape)) == \
        ("emb", "emb/00003/tensors.bytes", list(ns["emb"].shape))
    got = readback.projector_tensors(logdir)["emb"]
    assert np.array_equal(got, ns["emb"])
    with open(os.path.join(logdir, emb.metadata_path)) as f:
        assert f.read().split("\n")[:50] == [str(i) for i in range(50)]


def expect_pr_curve(logdir, ns):
    from tensorboard.util import tensor_util

    assert readback.tags(logdir) == {(".", "pr")}
    assert readback.plugin_name(logdir, ".", "pr") == "pr_curves"
    [e] = readback.tensor_events(logdir, ".", "pr")
    data = tensor_util.make_ndarray(e.tensor_proto)
    assert data.shape == (6, 11) and e.step == 3
    labels = ns["labels"]
    assert data[0, 0] == labels.sum() and data[1, 0] == (~labels).sum()  # TP, FP at threshold 0


def expect_hparams(logdir, ns):
    from tensorboard.plugins.hparams import plugin_data_pb2

    tags = readback.tags(logdir)
    assert (".", "acc") in tags and readback.scalars(logdir, ".", "acc") == [(0, pytest.approx(0.9))]
    [path] = readback.event_files(logdir)
    vals = {v.tag: v for e in readback.raw_events(path) if e.HasField("summary") for v in e.summary.value}
    start = plugin_data_pb2.HParamsPluginData.FromString(
        vals["_hparams_/session_start_info"].metadata.plugin_data.content).session_start_info
    assert start.hparams["lr"].number_value == pytest.approx(0.1)
    assert start.hparams["opt"].string_value == "sgd"


def expect_custom_scalars(logdir, ns):
    from tensorboard.plugins.custom_scalar import layout_pb2

    tag = "custom_scalars__config__"
    assert readback.tags(logdir) == {(".", tag)}
    assert readback.plugin_name(logdir, ".", tag) == "custom_scalars"
    [e] = readback.tensor_events(logdir, ".", tag)
    layout = layout_pb2.Layout.FromString(e.tensor_proto.string_val[0])
    [cat] = layout.category
    [chart] = cat.chart
    assert (cat.title, chart.title, list(chart.multiline.tag)) == ("c", "losses", ["loss/.*"])


def expect_video(logdir, ns):
    from PIL import Image

    v = only_value(logdir)
    assert v.tag == "vid"
    gif = Image.open(io.BytesIO(v.image.encoded_image_string))
    assert gif.format == "GIF" and gif.size == (16, 16) and gif.n_frames == 6
    assert (v.image.width, v.image.height) == (16, 16)


EXPECT = {name[len("expect_"):]: fn for name, fn in globals().items() if name.startswith("expect_")}


def test_every_kind_is_covered():
    assert set(EXPECT) == set(CALLS)


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_first_call_with_numpy_never_imports_mxnet(kind, tmp_path):
    logdir = str(tmp_path / "run")
    res = run_child(kind, logdir)
    assert res == {"after_call": False, "after_close": False}
    EXPECT[kind](logdir, inputs())
