"""``conv_filters=``: a Conv2D's filters and its feature maps on the first input, as image grids —
the grids written directly, then under both adapters (``Estimator.fit``, ``Module.fit``), read back."""
import io
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from PIL import Image

import readback
from estimator_setup import make_net
from gluon_tb.handlers import TensorBoardCallback
from gluon_tb.handlers._mxnet.blocks import LayerProbe
from gluon_tb.handlers._options.conv_filter_images import feature_map_images, filter_images
from gluon_tb.handlers._options.conv_filters import pick_conv, write_filters
from gluon_tb.writer import SummaryWriter
from image_readback import image, normalised
from module_setup import data, fit


def conv_net(o, i):
    net = gluon.nn.HybridSequential(prefix="c_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(o, 3, in_channels=i), gluon.nn.Conv2D(2, 3, in_channels=o))
    net.initialize(mx.init.Uniform(1.0))
    return net


def log_filters(w, net, step, *, layer=None, sample=None, max_filters=64, zoom=None):
    """What the conv_filters option does at an epoch end (pick the layer, probe its maps for
    ``sample``, write_filters), with a zoom of choice; returns the layer's name."""
    conv = pick_conv(net, layer)
    maps = None
    if sample is not None:
        probe = LayerProbe(net, conv)
        try:
            maps, _ = probe(sample)
        finally:
            probe.close()
    write_filters(w, conv.name, conv.weight.data(), maps, step, max_filters, zoom=zoom)
    return conv.name


def png(logdir, tag, i=-1, run="train"):
    ev = readback.tensor_events(logdir, run, tag)[i]
    return ev.step, np.asarray(Image.open(io.BytesIO(ev.tensor_proto.string_val[2]))).astype(int)


# ------------------------------------------------------------ the grids (written directly; TensorBoardHandler's path)
@pytest.mark.parametrize("o,i", [(4, 1), (5, 3)])
def test_filter_grid_gray_and_rgb(tmp_path, o, i):
    net = conv_net(o, i)
    with SummaryWriter(str(tmp_path)) as w:
        assert log_filters(w, net, 3, zoom=1) == "c_conv0"
    step, img = image(str(tmp_path), ".", "conv_filters/c_conv0")
    ncol = math.ceil(math.sqrt(o))
    nrow = math.ceil(o / ncol)
    assert step == 3 and img.shape[:2] == (nrow * 5 + 2, ncol * 5 + 2)
    if i == 1:
        assert img.ndim == 2 or img.shape[2] == 1 or np.all(img[..., 0] == img[..., 1])
    wt = normalised(net[0].weight.data().asnumpy()).reshape(o, i, 3, 3)
    for k in range(o):
        r, c = divmod(k, ncol)
        tile = img[2 + r * 5: 5 + r * 5, 2 + c * 5: 5 + c * 5].reshape(3, 3, -1)
        want = np.round(wt[k].transpose(1, 2, 0) * 255)
        assert np.abs(tile[..., :i].astype(int) - want).max() <= 1
        assert tile.min() == 0 and tile.max() == 255  # each filter spans the full range


def test_filter_grid_split_channels_and_feature_maps(tmp_path):
    net = conv_net(4, 1)
    x = mx.nd.random.uniform(shape=(2, 1, 9, 9))
    with SummaryWriter(str(tmp_path)) as w:
        log_filters(w, net, 0, layer="conv1", sample=x[:1], zoom=1)
    _, img = image(str(tmp_path), ".", "conv_filters/c_conv1")  # weight (2, 4, 3, 3)
    assert img.shape[:2] == (2 * 5 + 2, 4 * 5 + 2)  # one row per filter, a column per channel
    wt = normalised(net[1].weight.data().asnumpy()).reshape(2, 4, 3, 3)
    gray = img if img.ndim == 2 else img[..., 0]
    for o in range(2):
        for i in range(4):
            tile = gray[2 + o * 5: 5 + o * 5, 2 + i * 5: 5 + i * 5]
            assert np.abs(tile.astype(int) - np.round(wt[o, i] * 255)).max() <= 1
    _, maps = image(str(tmp_path), ".", "feature_maps/c_conv1")  # 2 maps of 5x5
    out = net(x[:1]).asnumpy()[0]
    want = normalised(out)
    gray = maps if maps.ndim == 2 else maps[..., 0]
    assert gray.shape == (9, 16)  # 2 tiles of 5x5 in one row
    for c in range(2):
        tile = gray[2: 7, 2 + c * 7: 7 + c * 7]
        assert np.abs(tile.astype(int) - np.round(want[c].reshape(5, 5) * 255)).max() <= 1


def test_filter_helper_rejects_bad_layers(tmp_path):
    net = make_net()
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"conv_filters=.dense0. must name a Conv2D"):
            log_filters(w, net, 0, layer="dense0")
        with pytest.raises(ValueError, match="not a block"):
            log_filters(w, net, 0, layer="nope")


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(max_filters="8"), TypeError, "max_filters must be a positive int, got str '8'"),
    (dict(max_filters=8.0), TypeError, "max_filters must be a positive int, got float 8.0"),
    (dict(max_filters=0), ValueError, "max_filters must be a positive int, got int 0"),
    (dict(zoom=True), TypeError, "zoom must be a positive int, got bool True"),
    (dict(zoom=0), ValueError, "zoom must be a positive int, got int 0"),
])
def test_filter_image_sizes_are_checked_with_the_shared_check(kwargs, exc, words):
    from gluon_tb.handlers._options.conv_filter_images import filter_images

    with pytest.raises(exc) as e:
        filter_images(mx.nd.ones((4, 1, 3, 3)), **kwargs)
    assert str(e.value) == words


def test_filters_of_a_trained_conv_in_mkldnn_layout(tmp_path):
    """After a forward pass a Conv2D's weight may be in MKL-DNN's layout, where views fail."""
    net = gluon.nn.HybridSequential(prefix="m_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(16, 3, padding=1), gluon.nn.Conv2D(32, 3, padding=1))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = mx.nd.random.uniform(shape=(4, 1, 8, 8))
    net(x)
    with SummaryWriter(str(tmp_path)) as w:
        log_filters(w, net, 0, sample=x[:1])
        log_filters(w, net, 0, layer="conv1", max_filters=8, zoom=1)
    _, img = image(str(tmp_path), ".", "conv_filters/m_conv1")
    assert img.shape[:2] == (8 * 5 + 2, 16 * 5 + 2)  # 8 filters of 16 input channels


# ------------------------------------------------------------ TensorBoardCallback
def test_filters_and_feature_maps_are_the_final_weights_on_the_first_input(tmp_path):
    d, ref = str(tmp_path / "cb"), str(tmp_path / "ref")
    mod = fit(TensorBoardCallback(d, conv_filters="conv1", weights=False))
    arg, _ = mod.get_params()
    x0 = mx.nd.array(data()[0][:1])
    maps = mx.nd.Convolution(x0, arg["conv1_weight"], arg["conv1_bias"], kernel=(3, 3), num_filter=4)
    with SummaryWriter(ref) as w:  # the expected images, through the same image path
        imgs, _ = filter_images(arg["conv1_weight"])
        w.add_images("conv_filters/conv1", imgs, 1, dataformats="NCHW")
        w.add_images("feature_maps/conv1", feature_map_images(maps), 1, dataformats="NCHW")
    for tag in ("conv_filters/conv1", "feature_maps/conv1"):
        step, got = png(d, tag)
        _, want = png(ref, tag, run=".")
        assert step == 1 and got.shape == want.shape
        assert np.abs(got - want).max() <= 1

