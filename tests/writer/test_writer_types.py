"""Every summary type through SummaryWriter, read back by TensorBoard's loader and HTTP API."""
import io
import wave

import numpy as np
import pytest
from PIL import Image
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter
from tb_server import tensorboard

mx = pytest.importorskip("mxnet")


def _net():
    net = mx.gluon.nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(mx.gluon.nn.Dense(8, activation="relu"), mx.gluon.nn.Dense(3))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 4)))
    return net


def _write_everything(logdir):
    rng = np.random.RandomState(0)
    with SummaryWriter(logdir) as w:
        for i in range(3):
            w.add_scalar("loss", 1.0 / (i + 1), i)
        w.add_histogram("weights", rng.randn(1000).astype(np.float32), 1)
        w.add_histogram("grads", mx.nd.array(rng.randn(500)), 1, bins=20)
        w.add_image("digit", np.linspace(0, 1, 64, dtype=np.float32).reshape(1, 8, 8), 2)
        w.add_images("batch", rng.rand(4, 3, 6, 6).astype(np.float32), 2)
        w.add_audio("tone", np.sin(np.linspace(0, 100, 8000)).astype(np.float32), 8000, 3)
        w.add_text("notes", "**bold** text", 4)
        w.add_pr_curve("pr", rng.randint(0, 2, 100), rng.rand(100), 11, 5)
        w.add_video("clip", rng.rand(3, 1, 8, 8).astype(np.float32), 6, fps=2)
        w.add_graph(_net())
        w.add_embedding("emb", rng.randn(10, 4).astype(np.float32), labels=[str(i % 3) for i in range(10)],
                        images=rng.rand(10, 1, 8, 8).astype(np.float32), global_step=7)
        w.add_custom_scalars({"Training": {"loss": ["Multiline", ["loss"]]}})
        w.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hp/accuracy": 0.9})


def test_every_type_reads_back_under_exactly_the_given_tag(tmp_path):
    _write_everything(str(tmp_path))
    d = str(tmp_path)
    tags = readback.tags(d)
    assert {t for r, t in tags if r == "."} == {
        "loss", "weights", "grads", "digit", "batch", "tone", "notes", "pr", "clip",
        "custom_scalars__config__", "_hparams_/experiment", "_hparams_/session_start_info",
        "_hparams_/session_end_info", "hp/accuracy", "__run_graph__"}
    assert {r for r, _ in tags} == {"."}
    plugins = {t: readback.plugin_name(d, ".", t) for t in
               ["loss", "weights", "grads", "digit", "batch", "tone", "notes", "pr", "clip", "hp/accuracy"]}
    assert plugins == {"loss": "scalars", "weights": "histograms", "grads": "histograms", "digit": "images",
                       "batch": "images", "tone": "audio", "notes": "text", "pr": "pr_curves",
                       "clip": "images", "hp/accuracy": "scalars"}
    # values
    h = tensor_util.make_ndarray(readback.tensor_events(d, ".", "grads")[0].tensor_proto)
    assert h.shape == (20, 3) and h[:, 2].sum() == 500
    (img,) = readback.tensor_events(d, ".", "digit")
    width, height, png = tensor_util.make_ndarray(img.tensor_proto)
    pixels = np.asarray(Image.open(io.BytesIO(png)))
    assert (int(width), int(height)) == (8, 8)
    np.testing.assert_array_equal(pixels.reshape(8, 8, -1)[..., 0].reshape(-1),
                                  np.round(np.linspace(0, 1, 64) * 255).astype(np.uint8))
    (snd,) = readback.tensor_events(d, ".", "tone")
    wav = tensor_util.make_ndarray(snd.tensor_proto).reshape(-1)[0]
    with wave.open(io.BytesIO(wav)) as f:
        assert (f.getframerate(), f.getnframes(), f.getnchannels()) == (8000, 8000, 1)
    (txt,) = readback.tensor_events(d, ".", "notes")
    assert tensor_util.make_ndarray(txt.tensor_proto).item() == b"**bold** text"
    (pr,) = readback.tensor_events(d, ".", "pr")
    assert tensor_util.make_ndarray(pr.tensor_proto).shape == (6, 11) and pr.step == 5
    mux = readback.multiplexer(d)
    graph = mux.Graph(".")
    names = {n.name for n in graph.node}
    assert "mlp/dense0/fwd" in names and "mlp/dense1/fwd" in names


def test_tensorboard_http_api_serves_every_plugin(tmp_path):
    _write_everything(str(tmp_path))
    with tensorboard(str(tmp_path)) as tb:
        import time

        for _ in range(60):  # the projector decides it is active on a thread of its own
            active = tb.get("/data/plugins_listing")
            if active["projector"]["enabled"]:
                break
            time.sleep(0.5)
        for plugin in ["scalars", "histograms", "images", "audio", "text", "pr_curves", "hparams",
                       "custom_scalars", "graphs", "projector"]:
            assert active[plugin]["enabled"], plugin
        assert tb.get("/data/runs") == ["."]
        assert "loss" in tb.get("/data/plugin/scalars/tags")["."]
        series = tb.get("/data/plugin/scalars/scalars", run=".", tag="loss")
        assert [(s[1], round(s[2], 6)) for s in series] == [(0, 1.0), (1, 0.5), (2, 0.333333)]
        hist = tb.get("/data/plugin/histograms/histograms", run=".", tag="weights")
        assert len(hist) == 1 and hist[0][1] == 1
        imgs = tb.get("/data/plugin/images/images", run=".", tag="batch")
        assert len(imgs) == 1 and imgs[0]["step"] == 2
        png = tb.get("/data/plugin/images/individualImage?" + imgs[0]["query"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        audio = tb.get("/data/plugin/audio/audio", run=".", tag="tone")
        assert len(audio) == 1 and audio[0]["contentType"] == "audio/wav"
        text = tb.get("/data/plugin/text/text", run=".", tag="notes")
        assert "<strong>bold</strong>" in text[0]["text"]
        pr = tb.get("/data/plugin/pr_curves/pr_curves", run=".", tag="pr")
        # TensorBoard drops the trailing thresholds at which nothing is predicted positive
        assert 2 <= len(pr["."][0]["precision"]) <= 11 and pr["."][0]["recall"][0] == 1.0
        layout = tb.get("/data/plugin/custom_scalars/layout")
        assert layout["category"][0]["title"] == "Training"
        graph = tb.get("/data/plugin/graphs/graph", run=".")
        assert b"mlp/dense0/fwd" in graph
        exp = tb.get("/data/plugin/hparams/experiment", request="{}")
        assert {h["name"] for h in exp["hparamInfos"]} == {"lr", "opt"}
        proj_runs = tb.get("/data/plugin/projector/runs")
        assert proj_runs == ["."]
        info = tb.get("/data/plugin/projector/info", run=".")
        assert [e["tensorName"] for e in info["embeddings"]] == ["emb"]
        assert info["embeddings"][0]["tensorShape"] == [10, 4]
