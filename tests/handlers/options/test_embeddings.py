"""``embeddings=``: a layer's outputs for some samples, with their labels and predictions, in
TensorBoard's projector — under ``Estimator.fit`` and ``Module.fit``, read back.

(``tests/writer/summaries/test_embedding.py`` tests the writer's ``add_embedding`` itself.)"""
import os

import mxnet as mx
import numpy as np
import pytest

import readback
from estimator_setup import loader, make_est, make_net
from gluon_tb.handlers import Embeddings, TensorBoardCallback, TensorBoardHandler
from module_setup import CLASSES, data, fit


# ------------------------------------------------------------ TensorBoardHandler
def test_embeddings_from_explicit_data_every_epoch(tmp_path):
    d = str(tmp_path)
    rs = np.random.RandomState(3)
    data = (rs.rand(10, 1, 8, 8).astype("float32"), rs.randint(0, 4, 10).astype("float32"))
    tb = TensorBoardHandler(d, embeddings=Embeddings(10, layer="conv0", every=1, data=data, tag="conv"))
    make_est(make_net()).fit(loader(), epochs=2, event_handlers=[tb])
    assert sorted(os.listdir(os.path.join(d, "train", "conv"))) == ["00000", "00001"]
    got = readback.projector_tensors(os.path.join(d, "train"))
    assert got["conv@0"].shape == got["conv@1"].shape == (10, 3 * 6 * 6)


# ------------------------------------------------------------ TensorBoardCallback
@pytest.mark.parametrize("source", ["eval_data", "data_pair", "data_iter"])
def test_embeddings_are_the_classifier_inputs_with_labels(tmp_path, source):
    d = str(tmp_path)
    x, y, xv, yv = data()
    kw = {"eval_data": source == "eval_data"}
    if source == "eval_data":
        emb, sx, sy = Embeddings(20), xv[:20], yv[:20]  # 24 samples in batches of 16: crosses a batch
    elif source == "data_pair":
        emb, sx, sy = Embeddings(10, data=(x[:10], y[:10])), x[:10], y[:10]
    else:
        it = mx.io.NDArrayIter(xv, yv, 16, last_batch_handle="pad")
        emb, sx, sy = Embeddings(100, data=it), xv, yv  # the padded last batch's pad is left out
    mod = fit(TensorBoardCallback(d, embeddings=emb, weights=False), **kw)
    arg, _ = mod.get_params()
    h = mx.nd.Convolution(mx.nd.array(sx), arg["conv1_weight"], arg["conv1_bias"], kernel=(3, 3),
                          num_filter=4).relu().flatten()
    feats = mx.nd.FullyConnected(h, arg["fc1_weight"], arg["fc1_bias"], num_hidden=8).relu()
    pred = mx.nd.FullyConnected(feats, arg["fc2_weight"], arg["fc2_bias"], num_hidden=CLASSES).argmax(axis=1)
    folder = os.path.join(d, "train", "embedding", "00001")  # the last epoch, at the end of fit
    assert sorted(os.listdir(os.path.join(d, "train", "embedding"))) == ["00001"]
    got = readback.projector_tensors(os.path.join(d, "train"))["embedding"]
    np.testing.assert_allclose(got, feats.asnumpy(), rtol=1e-4, atol=1e-5)
    rows = open(os.path.join(folder, "metadata.tsv")).read().splitlines()
    assert rows[0] == "label\tpredicted"
    assert rows[1:] == [f"{int(a)}\t{int(b)}" for a, b in zip(sy, pred.asnumpy())]



@pytest.mark.parametrize("deferred", [False, True], ids=["shapes-known", "shapes-deferred"])
def test_inputs_the_net_cannot_take_fail_before_training(tmp_path, deferred):
    """Embeddings(data=) inputs of the wrong shape were found only when the embeddings were computed,
    at the end of fit (an MXNetError after the whole training). One row now goes through the probe
    at the start (the net's shapes known) or after the first batch (deferred: that batch sets them,
    and the error comes before any other handler's end of it), and the error names the argument."""
    from estimator_setup import Recorder, loader, make_est, make_net

    def net_as_given():
        net = make_net()
        if not deferred:
            net(mx.nd.zeros((1, 1, 8, 8)))
        assert any(0 in p.shape for p in net.collect_params().values()) == deferred
        return net

    rec = Recorder()
    bad = (np.zeros((4, 1, 9, 9), np.float32), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"^Embeddings\(data=\): the network cannot take its inputs \(a row of "
                                         r"shape \(1, 9, 9\)\): "):
        make_est(net_as_given()).fit(loader(), epochs=2, event_handlers=[
            TensorBoardHandler(str(tmp_path / "bad"), embeddings=Embeddings(4, data=bad)), rec])
    assert rec.batch == []  # the recorder (priority 10**6) never saw a batch end
    good = (np.zeros((4, 1, 8, 8), np.float32), np.zeros(4, np.float32))
    make_est(net_as_given()).fit(loader(), epochs=1, event_handlers=[
        TensorBoardHandler(str(tmp_path / "good"), embeddings=Embeddings(4, data=good))])
    assert readback.projector_tensors(str(tmp_path / "good" / "train"))["embedding"].shape[0] == 4
