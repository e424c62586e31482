"""TensorBoardCallback with a real ``Module.fit``, read back through TensorBoard's loader."""
import os

import mxnet as mx
import numpy as np
import pytest

import readback
from gluon_tb.handlers import TensorBoardCallback

N, BATCH, CLASSES = 64, 16, 4  # 4 batches per epoch


def iters():
    rs = np.random.RandomState(0)
    x, y = rs.rand(N, 10).astype("float32"), rs.randint(0, CLASSES, N).astype("float32")
    xv, yv = rs.rand(32, 10).astype("float32"), rs.randint(0, CLASSES, 32).astype("float32")
    return (mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label"),
            mx.io.NDArrayIter(xv, yv, BATCH, label_name="softmax_label"))


def module():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"), act_type="relu")
    out = mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc2")
    return mx.mod.Module(mx.sym.SoftmaxOutput(out, name="softmax"), context=mx.cpu())


class Oracle:
    """What Module.fit itself reports: train values at the last batch, validation at score end."""

    def __init__(self):
        self.batch, self.train, self.val = [], [], []

    def on_batch(self, param):
        vals = param.eval_metric.get_global_name_value()
        m = param.eval_metric
        m = m.metrics[0] if isinstance(m, mx.metric.CompositeEvalMetric) else m
        s, n = m.global_sum_metric, m.global_num_inst  # since the epoch's reset
        ps, pn = self._sums if param.nbatch else (0.0, 0)
        self._sums = (s, n)
        self.batch.append([(vals[0][0], (s - ps) / (n - pn))])  # the batch's own value
        if param.nbatch == N // BATCH - 1:
            self.train.append(vals)

    def on_eval(self, param):
        self.val.append(param.eval_metric.get_name_value())


PARAMS = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def fit(logdir, metric="acc", oracle=None, epoch_end=None, **kw):
    train, val = iters()
    cb = TensorBoardCallback(logdir, **kw)
    oracle = oracle or Oracle()
    # Speedometer(auto_reset=True) runs first and resets the metric's local values every batch
    mod = module()
    mod.fit(train, eval_data=val, eval_metric=metric, num_epoch=2, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
            batch_end_callback=[mx.callback.Speedometer(BATCH, 1, auto_reset=True), cb, oracle.on_batch],
            epoch_end_callback=epoch_end(cb) if epoch_end else cb.epoch_end,
            eval_end_callback=[cb.eval_end, oracle.on_eval])
    cb.close()
    return oracle


def test_layout_steps_and_values(tmp_path):
    logdir = str(tmp_path)
    oracle = fit(logdir)
    expected = {("train", t) for t in ["epoch_accuracy", "__run_graph__", *readback.EPOCH_EXTRAS]} | {
        ("validation", "epoch_accuracy")}
    expected |= {("train_batch", t) for t in ["batch_accuracy"]
                 + [f"{k}/{p}" for p in PARAMS for k in ("weights", "gradients")]}
    assert readback.tags(logdir) == expected
    assert sorted(os.listdir(logdir)) == ["train", "train_batch", "validation"]

    batch = readback.scalars(logdir, "train_batch", "batch_accuracy")
    assert [s for s, _ in batch] == list(range(8))  # global batch index, not the epoch
    assert [v for _, v in batch] == pytest.approx([b[0][1] for b in oracle.batch])
    train = readback.scalars(logdir, "train", "epoch_accuracy")
    assert [s for s, _ in train] == [0, 1]
    assert [v for _, v in train] == pytest.approx([t[0][1] for t in oracle.train])
    val = readback.scalars(logdir, "validation", "epoch_accuracy")
    assert [s for s, _ in val] == [0, 1]
    assert [v for _, v in val] == pytest.approx([v[0][1] for v in oracle.val])
    for p in PARAMS:
        assert [e.step for e in readback.tensor_events(logdir, "train_batch", f"weights/{p}")] == [3, 7]


def test_the_callback_itself_as_epoch_end_callback_is_its_epoch_end(tmp_path):
    """MXNet calls an epoch_end_callback with (epoch, symbol, arg_params, aux_params): the
    callback object passed there does what its epoch_end does."""
    logdir = str(tmp_path)
    oracle = fit(logdir, epoch_end=lambda cb: cb)
    train = readback.scalars(logdir, "train", "epoch_accuracy")
    assert [s for s, _ in train] == [0, 1]
    assert [v for _, v in train] == pytest.approx([t[0][1] for t in oracle.train])
    for p in PARAMS:
        assert [e.step for e in readback.tensor_events(logdir, "train_batch", f"weights/{p}")] == [3, 7]


def test_composite_metric_period_and_filter(tmp_path):
    logdir = str(tmp_path)
    fit(logdir, metric=["acc", "ce"], batch_period=3, params="weight", graph=False)
    expected = {("train", t) for t in ["epoch_accuracy", "epoch_cross-entropy", *readback.EPOCH_EXTRAS]}
    expected |= {("train_batch", t) for t in ["batch_accuracy", "batch_cross-entropy", "weights/fc1_weight",
                                             "weights/fc2_weight", "gradients/fc1_weight", "gradients/fc2_weight"]}
    expected |= {("validation", "epoch_accuracy"), ("validation", "epoch_cross-entropy")}
    assert readback.tags(logdir) == expected
    # in-epoch batches 0 and 3 of each 4-batch epoch, as Speedometer(frequent=3) counts
    assert [s for s, _ in readback.scalars(logdir, "train_batch", "batch_cross-entropy")] == [0, 3, 4, 7]


def test_arguments_checked_up_front():
    with pytest.raises(TypeError, match="logdir"):
        TensorBoardCallback(None)
    with pytest.raises(ValueError, match="batch_period"):
        TensorBoardCallback("x", batch_period=0)
    with pytest.raises(ValueError, match="on_error"):
        TensorBoardCallback("x", on_error="nope")
    with pytest.raises(TypeError, match="weights"):
        TensorBoardCallback("x", weights=1)


def test_histograms_on_a_batch_schedule_are_queued_lazily_once_an_epoch_at_once(tmp_path, monkeypatch):
    """As the Estimator handler: groups of a batch schedule go with ``wake=False`` (read a little
    later, when MXNet has copied them), the epoch's own ones wake the writer at once; both are written."""
    from gluon_tb.writer._io import pipeline

    seen = []
    real = pipeline.Pipeline.put

    def put(self, item, wake=True):
        if getattr(item, "tag", "").startswith(("gradients/", "weights/")):  # not the graph's Action
            seen.append((item.tag.split("/")[0], item.step, wake))
        return real(self, item, wake)

    monkeypatch.setattr(pipeline.Pipeline, "put", put)
    fit(str(tmp_path / "batch"), histogram_period=2)
    assert seen and {w for _, _, w in seen} == {False}
    assert sorted({s for k, s, _ in seen if k == "gradients"}) == [0, 2, 4, 6]
    seen.clear()
    fit(str(tmp_path / "epoch"))
    assert ("gradients", 3, True) in seen and ("gradients", 7, True) in seen
    assert {w for _, _, w in seen} == {True}
    for run in ("batch", "epoch"):
        steps = [e.step for e in readback.tensor_events(str(tmp_path / run), "train_batch", "gradients/fc1_weight")]
        assert steps == ([0, 2, 4, 6] if run == "batch" else [3, 7])
