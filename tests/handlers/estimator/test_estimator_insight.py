"""TensorBoardHandler's see-inside options under a real ``Estimator.fit``: conv filters and feature
maps, projector embeddings, gradient health — read back."""
import logging
import math
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from PIL import Image

import readback
import repo_paths
from image_readback import image, normalised
from gluon_tb.handlers import Embeddings, GradHealth, TensorBoardHandler
from estimator_setup import BATCH, GradSpy, Recorder, loader, make_est, make_net, param_names


# ------------------------------------------------------------ filters (the images, written directly)


# ------------------------------------------------------------ handler: filters and projector
def test_handler_filters_maps_and_projector(tmp_path):
    d = str(tmp_path)
    net = make_net()
    val = loader(n=48, seed=1)
    tb = TensorBoardHandler(d, conv_filters=True, embeddings=Embeddings(40), histogram_period=None)
    make_est(net).fit(loader(), val_data=val, epochs=2, event_handlers=[tb])
    tags = readback.tags(d)
    assert {("train", "conv_filters/net_conv0"), ("train", "feature_maps/net_conv0")} <= tags
    # 3 filters 1x3x3 (zoom 8 -> 24 px) and 3 maps 6x6 (zoom 4 -> 24 px): 2 columns, 2 rows
    for tag in ("conv_filters/net_conv0", "feature_maps/net_conv0"):
        assert [e.step for e in readback.tensor_events(d, "train", tag)] == [0, 1]
        _, img = image(d, "train", tag)
        assert img.shape[:2] == (54, 54)
    # feature maps at the last epoch: the first training input through conv0 (final weights)
    x0 = next(iter(loader()))[0][:1]
    want = normalised(net[0](x0).asnumpy()[0])
    _, img = image(d, "train", "feature_maps/net_conv0")
    gray = img if img.ndim == 2 else img[..., 0]
    for c in range(3):
        r, k = divmod(c, 2)
        tile = gray[2 + r * 26: 26 + r * 26: 4, 2 + k * 26: 26 + k * 26: 4]
        assert np.abs(tile.astype(int) - np.round(want[c].reshape(6, 6) * 255)).max() <= 1
    # projector: at the end of training (epoch index 1), 40 rows of the Flatten output
    root = os.path.join(d, "train", "embedding", "00001")
    assert sorted(os.listdir(os.path.join(d, "train", "embedding"))) == ["00001"]
    feats = readback.projector_tensors(os.path.join(d, "train"))["embedding"]
    assert feats.shape == (40, 3 * 6 * 6)
    meta = [line.split("\t") for line in open(os.path.join(root, "metadata.tsv")).read().splitlines()]
    xs, ys = zip(*[(b[0], b[1]) for b in val])
    xv, yv = mx.nd.concat(*xs, dim=0)[:40], mx.nd.concat(*ys, dim=0)[:40]
    assert meta[0] == ["label", "predicted"] and len(meta) == 41
    assert [int(r[0]) for r in meta[1:]] == [int(v) for v in yv.asnumpy()]
    assert [int(r[1]) for r in meta[1:]] == list(net(xv).argmax(axis=1).asnumpy().astype(int))
    np.testing.assert_allclose(feats, net[1](net[0](xv)).asnumpy(), rtol=1e-5, atol=1e-6)
    sprite = Image.open(os.path.join(root, "sprite.png"))
    assert sprite.size == (7 * 8, 7 * 8)  # ceil(sqrt(40)) = 7 thumbnails of 8x8 a row
    config = open(os.path.join(d, "train", "projector_config.pbtxt")).read()
    assert "embedding/00001/tensors.bytes" in config and "single_image_dim: 8" in config


def test_option_checks():
    with pytest.raises(ValueError, match="histogram_period"):
        TensorBoardHandler("x", grad_health=True, histogram_period=None)
    with pytest.raises(TypeError, match="conv_filters"):
        TensorBoardHandler("x", conv_filters=3)
    with pytest.raises(TypeError, match="embeddings"):
        TensorBoardHandler("x", embeddings="all")
    with pytest.raises(ValueError, match="stop"):
        GradHealth(stop=["sometimes"])
    with pytest.raises(TypeError, match="stop must be a bool or a collection of 'nonfinite'"):
        GradHealth(stop="nonfinite")  # one name, not a collection of names
    with pytest.raises(ValueError, match="conv_filters must be a bool or the name of a Conv2D layer, got str ''"):
        TensorBoardHandler("x", conv_filters="")
    with pytest.raises(ValueError, match="layer must be None or a block name, got str ''"):
        Embeddings(layer="")
    with pytest.raises(TypeError, match="layer must be None or a block name, got int 3"):
        Embeddings(layer=3)
    with pytest.raises(ValueError, match="tag must be a non-empty str, got str ''"):
        Embeddings(tag="")
    with pytest.raises(TypeError, match="tag must be a non-empty str, got NoneType None"):
        Embeddings(tag=None)


# ------------------------------------------------------------ gradient health
def test_health_scalars_match_the_gradients(tmp_path):
    d = str(tmp_path)
    net = make_net()
    spy = GradSpy(net)
    tb = TensorBoardHandler(d, grad_health=True, histogram_period=1)
    make_est(net).fit(loader(), epochs=1, event_handlers=[tb, spy])
    names = param_names(net)
    for name in names:
        got = readback.scalars(d, "train_batch", f"grad_norm/{name}")
        assert [s for s, _ in got] == [0, 1, 2, 3]
        want = [np.sqrt(np.sum(np.square(g[name].astype(np.float64)))) / BATCH for g in spy.grads]
        np.testing.assert_allclose([v for _, v in got], want, rtol=1e-5)
        gn, wn = got[-1][1], readback.scalars(d, "train_batch", f"weight_norm/{name}")[-1][1]
        ratio = readback.scalars(d, "train_batch", f"update_ratio/{name}")[-1][1]
        assert ratio == pytest.approx(0.1 * gn / max(wn, 0.1 * gn), rel=1e-5)  # at most 1
    glob = readback.scalars(d, "train_batch", "grad_norm/global")
    per = [readback.scalars(d, "train_batch", f"grad_norm/{n}") for n in names]
    for k in range(4):
        assert glob[k][1] == pytest.approx(math.sqrt(sum(p[k][1] ** 2 for p in per)), rel=1e-5)
    assert ("train_batch", "grad_health") not in readback.tags(d)  # a healthy run stays silent


class Poison(gluon.data.Dataset):
    """Random digits-like data; from sample ``at`` on, inputs are scaled by ``scale``."""

    def __init__(self, n=64, at=32, scale=float("nan")):
        rs = np.random.RandomState(0)
        self.x = rs.rand(n, 1, 8, 8).astype("float32")
        self.x[at:] *= scale
        self.y = rs.randint(0, 4, n).astype("float32")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


@pytest.mark.parametrize("scale,kind", [(float("nan"), "nonfinite"), (1e4, "exploding")])
def test_detectors_fire_warn_write_text_and_stop(tmp_path, caplog, scale, kind):
    d = str(tmp_path)
    rec = Recorder()
    data = gluon.data.DataLoader(Poison(scale=scale), batch_size=BATCH)  # batches 2, 3 poisoned
    tb = TensorBoardHandler(d, grad_health=GradHealth(stop=True), histogram_period=1)
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        make_est(make_net()).fit(data, epochs=8, event_handlers=[tb, rec])
    warned = [r.getMessage() for r in caplog.records if "gluon_tb:" in r.getMessage()]
    assert len(warned) == 1 and "net_conv0_weight" in warned[0], warned
    ev = readback.tensor_events(d, "train_batch", "grad_health")
    assert len(ev) == 1 and ev[0].step == 2  # seen at batch 2
    text = ev[0].tensor_proto.string_val[0].decode()
    assert "net_conv0_weight" in text and ("non-finite" in text) == (kind == "nonfinite")
    # stopped once the helper thread had read batch 2's check: typically at batch 3 (one check
    # later), later when the CPU is busy (up to ~12 seen on a loaded machine); never before it was
    # seen, and long before the end (32 batches)
    assert 4 <= len(rec.batch) < 32, len(rec.batch)


def test_vanishing_detector(tmp_path, caplog):
    d = str(tmp_path)
    net = make_net()
    net(mx.nd.zeros((1, 1, 8, 8)))  # finish deferred initialisation
    net[0].weight.set_data(mx.nd.zeros_like(net[0].weight.data()))  # relu(0) kills every gradient
    tb = TensorBoardHandler(d, grad_health=GradHealth(vanish_checks=2), histogram_period=1)
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        make_est(net).fit(loader(), epochs=1, event_handlers=[tb])
    text = readback.tensor_events(d, "train_batch", "grad_health")[0].tensor_proto.string_val[0].decode()
    assert "vanishing" in text and "net_conv0_weight" in text and "net_dense0_bias" not in text  # its input is 0


def test_word_embeddings_example_runs_offline(tmp_path):
    pytest.importorskip("gluonnlp")
    import importlib.util

    path = os.path.join(repo_paths.EXAMPLES, "word_embeddings_gluonnlp.py")
    spec = importlib.util.spec_from_file_location("word_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = str(tmp_path)
    mod.main(["--logdir", d, "--epochs", "1", "--max-tokens", "3000", "--words", "50"])
    assert {("train", "epoch_perplexity"), ("validation", "epoch_perplexity")} <= readback.tags(d)
    labels = open(os.path.join(d, "train", "word_vectors", "00000", "metadata.tsv")).read().splitlines()
    # word_vectors=WordVectors(vocab, counts, top=50): the 50 most frequent words, most frequent first
    counts = mod.nlp.data.count_tokens(mod.WORD.findall(mod.docstrings().lower())[:3000])
    vocab = mod.nlp.Vocab(counts, max_size=5000, min_freq=2)
    toks = vocab.idx_to_token
    order = sorted(range(len(toks)), key=lambda i: (toks[i] not in counts, -counts.get(toks[i], 0), i))
    assert labels == [toks[i] for i in order[:50]] and "the" in labels
