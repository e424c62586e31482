"""No host sync by gluon_tb on the training thread under ``Module.fit``.

Every ``NDArray.asnumpy``/``asscalar``/``__bool__``/``wait_to_read`` made during ``fit`` on the
training thread whose first caller outside MXNet is gluon_tb code is counted
(``synccount.count_host_reads``); the count must be 0 with and without validation data, on one
and two devices, with the defaults and with every option on.
"""
import mxnet as mx
import pytest

import readback
from gluon_tb.handlers import Embeddings, GradHealth, TensorBoardCallback
from synccount import count_host_reads
from module_setup import PARAMS, iters, symbol

EVERYTHING = dict(histogram_period=1, conv_filters=True, grad_health=GradHealth(vanish_below=1e9, vanish_checks=2),
                  batch_period=1)  # the vanishing detector fires, so its path runs too


@pytest.mark.parametrize("options", ["defaults", "everything"])
@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("with_eval", [True, False])
def test_no_host_read_by_gluon_tb_on_the_training_thread(tmp_path, options, devices, with_eval):
    d = str(tmp_path)
    train, val = iters()
    kw = {}
    if options == "everything":
        # without eval_data the held-out sample comes from Embeddings(data=...)
        kw = dict(EVERYTHING, embeddings=Embeddings(20, every=1, data=None if with_eval else iters()[1]))
    cb = TensorBoardCallback(d, **kw)
    mod = mx.mod.Module(symbol(), context=[mx.cpu(i) for i in range(devices)])
    with count_host_reads() as c:
        mod.fit(train, eval_data=val if with_eval else None, eval_metric=["acc", "ce"], num_epoch=2,
                optimizer="sgd", optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
                batch_end_callback=[mx.callback.Speedometer(16, 2, auto_reset=True), cb],
                epoch_end_callback=cb.epoch_end, eval_end_callback=cb.eval_end)
    assert c.calls == [], str(c)
    assert c.other > 0  # the counter saw MXNet's own reads (its metrics), so it was in place

    # and the options did their work in that fit (read back after fit, before close)
    tags = readback.tags(d)
    want = {("train", "epoch_accuracy"), ("train_batch", "batch_cross-entropy")} | \
        {("train_batch", f"weights/{p}") for p in PARAMS}
    if with_eval:
        want.add(("validation", "epoch_cross-entropy"))
    if options == "everything":
        want |= {("train", "conv_filters/conv1"), ("train", "feature_maps/conv1"), ("train_batch", "grad_norm/global"),
                 ("train_batch", "update_ratio/fc1_weight"), ("train_batch", "grad_health")}
        assert cb.health_events == {"vanishing": 1}
    assert want <= tags
    cb.close()
    if options == "everything":
        assert len(readback.tensor_events(d, "train_batch", "grad_norm/global")) == 8
