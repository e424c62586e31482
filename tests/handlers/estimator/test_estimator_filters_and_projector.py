"""TensorBoardHandler with ``conv_filters`` and ``embeddings`` together under a real
``Estimator.fit``: the filter and feature-map grids of the first conv layer and the projector of
the layer before the classifier, read back. Each option alone, under both adapters, is tested in
``tests/handlers/options/`` (``test_conv_filters.py``, ``test_embeddings.py``, ``test_grad_health.py``)."""
import os

import mxnet as mx
import numpy as np
from PIL import Image

import readback
from image_readback import image, normalised
from gluon_tb.handlers import Embeddings, TensorBoardHandler
from estimator_setup import loader, make_est, make_net


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


# ------------------------------------------------------------ gradient health


