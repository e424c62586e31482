"""mxboard's documented calls, run as its README and demo.md show them, read back with TensorBoard.

``from gluon_tb import SummaryWriter`` promises to replace ``from mxboard import
SummaryWriter`` with nothing else changed. Each test runs one of mxboard 0.1.0's
documented snippets (``demo.md``, the docstrings of ``mxboard/writer.py``) with small
inputs, positional arguments in mxboard's order and mxboard's defaults, and compares
what TensorBoard's own reader finds (``readback``) with what mxboard's documentation
says should be there: tags and runs (exact sets), steps, values, image shapes.

A float ``global_step`` is truncated with ``int()`` as mxboard did (its scalar demo passes
``x * 100``), with a warning. Known differences, each pinned by a test here: gray images stay gray (mxboard wrote RGB: the same pixels); floats
become 0..255 rounded to nearest (mxboard truncated: at most 1 apart).
"""
from __future__ import annotations

import io
import json
import os
import wave

import numpy as np
import pytest
from PIL import Image
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter, make_image_grid

mx = pytest.importorskip("mxnet")


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """mxboard's examples write ``SummaryWriter(logdir='./logs')`` in the current directory."""
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "logs")


def f32(x):
    return float(np.float32(x))


def png(event):
    w, h, data = event.tensor_proto.string_val
    img = Image.open(io.BytesIO(data))
    assert img.size == (int(w), int(h))
    return img


# ------------------------------------------------------------ the writer itself
def test_with_form_get_logdir_flush_close(logs):
    sw = SummaryWriter("./logs")  # mxboard: SummaryWriter(logdir, max_queue=10, flush_secs=120, ...)
    assert sw.get_logdir() == "./logs"
    with open(os.path.join(sw.get_logdir(), "notes.txt"), "w") as f:  # the directory exists at once
        f.write("saved beside the event files")
    sw.add_scalar("loss", 0.5, 1)
    sw.flush()  # visible to TensorBoard before close
    assert readback.scalars(logs, ".", "loss") == [(1, 0.5)]
    sw.close()
    sw.close()
    with SummaryWriter(logdir="./logs/run2", max_queue=10, flush_secs=120, filename_suffix=None,
                       verbose=True) as sw2:  # mxboard's constructor arguments, by keyword
        sw2.add_scalar("loss", 0.25)  # global_step=None
    assert readback.tags(logs) == {(".", "loss"), ("run2", "loss")}
    assert readback.scalars(logs, "run2", "loss") == [(0, 0.25)]
    [ev] = [p for p in readback.event_files(logs) if os.path.dirname(p) == logs]
    assert sorted(os.listdir(logs)) == sorted(["notes.txt", "run2", os.path.basename(ev)])


# ------------------------------------------------------------ scalars (demo.md "Scalar")
def test_demo_scalar_curve_with_integer_steps(logs):
    y_vals = np.sin(np.arange(0, 2 * np.pi, 0.5))
    with SummaryWriter(logdir="./logs") as sw:
        for i, y in enumerate(y_vals):
            sw.add_scalar(tag="sin_function_curve", value=y, global_step=i)
    assert readback.tags(logs) == {(".", "sin_function_curve")}
    assert readback.scalars(logs, ".", "sin_function_curve") == [(i, f32(y)) for i, y in enumerate(y_vals)]


def test_demo_scalar_curve_as_written_with_float_steps(logs):
    x_vals = np.arange(start=0, stop=2 * np.pi, step=0.01)
    with SummaryWriter(logdir="./logs") as sw, pytest.warns(UserWarning, match="truncated to an int"):
        for x, y in zip(x_vals, np.sin(x_vals)):
            sw.add_scalar(tag="sin_function_curve", value=y, global_step=x * 100)
    assert [s for s, _ in readback.scalars(logs, ".", "sin_function_curve")] == [int(x * 100) for x in x_vals]


def test_demo_five_curves_in_one_chart_and_export_scalars(logs):
    xs = np.arange(0, 6) * 0.5
    y_sin, y_cos = np.sin(xs), np.cos(xs)
    y_exp_sin, y_exp_cos, y_sin2 = np.exp(y_sin), np.exp(y_cos), y_sin * y_sin
    with SummaryWriter(logdir="./logs") as sw:
        for i, (y1, y2, y3, y4, y5) in enumerate(zip(y_sin, y_cos, y_exp_sin, y_exp_cos, y_sin2)):
            sw.add_scalar("curves", {"sin": y1, "cos": y2}, i)
            sw.add_scalar("curves", ("exp(sin)", y3), i)
            sw.add_scalar("curves", ["exp(cos)", y4], i)
            sw.add_scalar("curves", y5, i)
        sw.export_scalars("scalars.json")
    # one chart "curves": the unnamed curve in the writer's run, each named one in run curves/<name>
    series = {".": y_sin2, "curves/sin": y_sin, "curves/cos": y_cos,
              "curves/exp(sin)": y_exp_sin, "curves/exp(cos)": y_exp_cos}
    assert readback.tags(logs) == {(run, "curves") for run in series}
    for run, ys in series.items():
        assert readback.scalars(logs, run, "curves") == [(i, f32(y)) for i, y in enumerate(ys)], run
    # mxboard's export: {get_logdir() + '/' + tag (+ '/' + name): [[timestamp, step, value], ...]}
    data = json.loads(open("scalars.json").read())
    key = {run: "./logs/curves" if run == "." else "./logs/" + run for run in series}
    assert set(data) == set(key.values())  # ./logs/curves, ./logs/curves/sin, ...
    for run, ys in series.items():
        rows = data[key[run]]
        assert [r[1] for r in rows] == list(range(len(ys)))
        np.testing.assert_allclose([r[2] for r in rows], ys, rtol=1e-6)
        assert all(isinstance(r[0], float) and r[0] > 1e9 for r in rows)  # timestamps


# ------------------------------------------------------------ histograms (demo.md "Histogram")
def test_demo_histograms_with_bins_and_default_bins(logs):
    with SummaryWriter(logdir="./logs") as sw:
        datas = []
        for i in range(3):
            data = mx.nd.normal(loc=0, scale=10.0 / (i + 1), shape=(10, 3, 8, 8))
            datas.append(data.asnumpy())
            sw.add_histogram(tag="norml_dist", values=data, bins=200, global_step=i)
        sw.add_histogram("default_bins", datas[0], 5)  # positional; bins='default'
    assert readback.tags(logs) == {(".", "norml_dist"), (".", "default_bins")}
    assert readback.plugin_name(logs, ".", "norml_dist") == "histograms"
    events = readback.tensor_events(logs, ".", "norml_dist")
    assert [e.step for e in events] == [0, 1, 2]
    for e, data in zip(events, datas):
        buckets = tensor_util.make_ndarray(e.tensor_proto)  # [left, right, count] rows
        counts, edges = np.histogram(data, bins=200)
        assert buckets.shape == (200, 3)
        np.testing.assert_array_equal(buckets[:, 2], counts)
        np.testing.assert_allclose(buckets[[0, -1], [0, 1]], edges[[0, -1]], rtol=1e-6)
    [e] = readback.tensor_events(logs, ".", "default_bins")
    assert e.step == 5 and tensor_util.make_ndarray(e.tensor_proto)[:, 2].sum() == datas[0].size


# ------------------------------------------------------------ images (demo.md "Image")
def test_demo_batch_of_images_is_one_grid_8_per_row(logs):
    face = np.random.default_rng(0).integers(0, 256, (3, 6, 5), dtype=np.uint8)
    faces = np.concatenate([face[None]] * 15, axis=0)
    img = mx.nd.array(faces, dtype=faces.dtype)
    with SummaryWriter(logdir="./logs") as sw:
        sw.add_image(tag="faces", image=img)
    assert readback.tags(logs) == {(".", "faces")}
    assert readback.plugin_name(logs, ".", "faces") == "images"
    [e] = readback.tensor_events(logs, ".", "faces")
    px = np.asarray(png(e))
    assert e.step == 0 and px.shape == (2 * (6 + 2) + 2, 8 * (5 + 2) + 2, 3)  # mxboard's make_image_grid
    np.testing.assert_array_equal(px, make_image_grid(faces).transpose(1, 2, 0))
    np.testing.assert_array_equal(px[10:16, 2 + 6 * 7:2 + 6 * 7 + 5], face.transpose(1, 2, 0))  # the 15th


def test_images_2d_and_3d_positional(logs):
    rng = np.random.default_rng(1)
    gray = rng.random((4, 6), dtype=np.float32)
    rgb = rng.integers(0, 256, (3, 5, 7), dtype=np.uint8)
    with SummaryWriter("./logs") as sw:
        sw.add_image("gray", gray, 3)  # (tag, image, global_step)
        sw.add_image("rgb", mx.nd.array(rgb, dtype="uint8"), 4)
    assert readback.tags(logs) == {(".", "gray"), (".", "rgb")}
    [g] = readback.tensor_events(logs, ".", "gray")
    [c] = readback.tensor_events(logs, ".", "rgb")
    assert (g.step, c.step) == (3, 4)
    gpx = np.asarray(png(g).convert("RGB")).astype(int)  # mxboard wrote gray as RGB: same pixels
    assert gpx.shape == (4, 6, 3)
    for ch in range(3):
        assert np.abs(gpx[:, :, ch] - (gray * 255.0).astype(np.uint8)).max() <= 1  # mxboard truncated
    np.testing.assert_array_equal(np.asarray(png(c)), rgb.transpose(1, 2, 0))


# ------------------------------------------------------------ audio (demo.md "Audio")
def test_demo_audio_and_positional_sample_rate(logs):
    frequency = 4410
    data = mx.random.uniform(low=-1, high=1, shape=(frequency,))
    data = data / data.abs().max()
    with SummaryWriter(logdir="./logs") as sw:
        sw.add_audio(tag="uniform_audio", audio=data, global_step=0)
        sw.add_audio("slow", data, 8000, 2)  # (tag, audio, sample_rate, global_step)
    assert readback.tags(logs) == {(".", "uniform_audio"), (".", "slow")}
    for tag, rate, step in (("uniform_audio", 44100, 0), ("slow", 8000, 2)):
        assert readback.plugin_name(logs, ".", tag) == "audio"
        [e] = readback.tensor_events(logs, ".", tag)
        assert e.step == step
        with wave.open(io.BytesIO(e.tensor_proto.string_val[0])) as w:
            assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (rate, 1, frequency)
            pcm = np.frombuffer(w.readframes(frequency), "<i2")
        np.testing.assert_allclose(pcm / 32767.0, data.asnumpy(), atol=1.0 / 32767)


# ------------------------------------------------------------ text (demo.md "Text")
def test_demo_text_plain_and_markdown(logs):
    def simple_example(sw, step):
        greeting = "Hello MXNet from step {}".format(str(step))
        sw.add_text(tag="simple_example", text=greeting, global_step=step)

    def markdown_table(sw):
        header_row = "Hello | MXNet,\n"
        delimiter = "----- | -----\n"
        table_body = "This | is\n" + "so | awesome!"
        sw.add_text(tag="markdown_table", text=header_row + delimiter + table_body)

    with SummaryWriter(logdir="./logs") as sw:
        simple_example(sw, 100)
        markdown_table(sw)
    assert readback.tags(logs) == {(".", "simple_example"), (".", "markdown_table")}
    [s] = readback.tensor_events(logs, ".", "simple_example")
    [m] = readback.tensor_events(logs, ".", "markdown_table")
    assert readback.plugin_name(logs, ".", "simple_example") == "text"
    assert (s.step, s.tensor_proto.string_val) == (100, [b"Hello MXNet from step 100"])
    assert (m.step, m.tensor_proto.string_val) == (
        0, [b"Hello | MXNet,\n----- | -----\nThis | is\nso | awesome!"])


# ------------------------------------------------------------ embedding (demo.md "Embedding")
def test_demo_embedding_with_labels_and_images(logs):
    from test_embedding import Projector

    rng = np.random.default_rng(2)
    embedding = mx.nd.array(rng.random((12, 16), dtype=np.float32))
    labels = mx.nd.array(rng.integers(0, 10, 12))
    images = embedding[:, :].reshape((12, 1, 4, 4))
    with SummaryWriter(logdir="./logs") as sw:
        sw.add_embedding(tag="mnist", embedding=embedding, labels=labels, images=images)
    p = Projector(logs)
    (e,) = p.config()["embeddings"]
    assert e["tensorName"] == "mnist" and e["tensorShape"] == [12, 16]  # mxboard: folder 'mnist'
    np.testing.assert_array_equal(p.tensor("mnist").reshape(12, 16), embedding.asnumpy())
    assert [float(x) for x in p.metadata("mnist").splitlines()] == labels.asnumpy().tolist()
    assert e["sprite"]["singleImageDim"] == [4, 4]
    assert p.sprite("mnist").size == (4 * 4, 4 * 4)  # ceil(sqrt(12)) = 4 per row, as mxboard's sprite


# ------------------------------------------------------------ PR curve (demo.md "PR Curve")
def test_demo_pr_curve_and_positional_weights(logs):
    rng = np.random.default_rng(3)
    predictions = mx.nd.array(rng.random(100))
    labels = mx.nd.array(rng.integers(0, 2, 100))
    weights = rng.random(100).astype(np.float32)
    with SummaryWriter(logdir="./logs") as sw:
        sw.add_pr_curve(tag="pseudo_pr_curve", predictions=predictions, labels=labels, num_thresholds=120)
        sw.add_pr_curve("weighted", labels, predictions, 50, 7, weights)  # mxboard's order
    assert readback.tags(logs) == {(".", "pseudo_pr_curve"), (".", "weighted")}
    positives = labels.asnumpy() > 0
    for tag, n, step, total in (("pseudo_pr_curve", 120, 0, positives.sum()),
                                ("weighted", 50, 7, weights[positives].sum())):
        assert readback.plugin_name(logs, ".", tag) == "pr_curves"
        [e] = readback.tensor_events(logs, ".", tag)
        pr = tensor_util.make_ndarray(e.tensor_proto)  # TP, FP, TN, FN, precision, recall
        assert e.step == step and pr.shape == (6, n)
        np.testing.assert_allclose(pr[0, 0], total, rtol=1e-5)  # threshold 0: every positive is a TP
        assert pr[5, 0] == 1.0  # recall 1 at threshold 0


# ------------------------------------------------------------ graph (demo.md "Graph")
def test_demo_graph_of_a_symbol_and_of_a_hybridized_block(logs):
    data = mx.sym.Variable("data")
    weight = mx.sym.Variable("weight")
    bias = mx.sym.Variable("fc1_bias", lr_mult=1.0)
    conv1 = mx.symbol.Convolution(data=data, weight=weight, name="conv1", num_filter=32, kernel=(3, 3))
    conv2 = mx.symbol.Convolution(data=data, weight=weight, name="conv2", num_filter=32, kernel=(3, 3))
    conv3 = conv1 + conv2
    bn1 = mx.symbol.BatchNorm(data=conv3, name="bn1")
    act1 = mx.symbol.Activation(data=bn1, name="relu1", act_type="relu")
    sum1 = act1 + conv3
    mp1 = mx.symbol.Pooling(data=sum1, name="mp1", kernel=(2, 2), stride=(2, 2), pool_type="max")
    fc1 = mx.sym.FullyConnected(data=mp1, bias=bias, name="fc1", num_hidden=10, lr_mult=0)
    fc2 = mx.sym.FullyConnected(data=fc1, name="fc2", num_hidden=10, wd_mult=0.5)
    sc1 = mx.symbol.SliceChannel(data=fc2, num_outputs=10, name="slice_1", squeeze_axis=0)
    with SummaryWriter(logdir="./logs") as sw:
        sw.add_graph(sc1)
    ops = {n.op for n in readback.multiplexer(logs).Graph(".").node}
    assert {"Convolution", "BatchNorm", "Activation", "Pooling", "FullyConnected", "SliceChannel"} <= ops

    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="relu"), mx.gluon.nn.Dense(2))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 4)))  # mxboard: "users must call hybridize() and forward() once"
    with SummaryWriter(logdir="./logs/gluon") as sw:
        sw.add_graph(net)
    g = readback.multiplexer(logs).Graph("gluon")
    assert [n.op for n in g.node].count("FullyConnected") == 2
