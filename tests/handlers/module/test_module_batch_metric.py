"""``batch_<metric>`` under ``Module.fit``: the metric over the batches since the previous point,
beside MXNet's ``Speedometer``, read back through TensorBoard's loader."""
import logging
import re

import mxnet as mx
import numpy as np
import pytest

import readback
from gluon_tb.handlers import TensorBoardCallback

N, BATCH, CLASSES = 64, 8, 3  # 8 batches per epoch
EPOCHS = 2


from test_estimator_semantics import PlainAccuracy  # noqa: E402 - no global statistics, as toy_nce.py's


class BatchOracle:
    """Each batch's own correct count and size, from the module's outputs (test oracle)."""

    def __init__(self):
        self.correct, self.size, self.ce = [], [], []

    def __call__(self, param):
        mod, batch = param.locals["self"], param.locals["data_batch"]
        pred, label = mod.get_outputs()[0].asnumpy(), batch.label[0].asnumpy()
        self.correct.append(float((pred.argmax(axis=1) == label).sum()))
        self.size.append(label.shape[0])
        self.ce.append(float(-np.log(pred[np.arange(len(label)), label.astype(int)] + 1e-12).sum()))

    def over(self, first, last, of="correct"):
        return sum(getattr(self, of)[first:last + 1]) / sum(self.size[first:last + 1])


class Printed(logging.Handler):
    """What Speedometer prints: ``(epoch, count, value)``."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        m = re.match(r"Epoch\[(\d+)\] Batch \[\d+-(\d+)\]\tSpeed: \S+ samples/sec\t\S+=([0-9.]+)",
                     record.getMessage())
        if m:
            self.lines.append((int(m.group(1)), int(m.group(2)), float(m.group(3))))


def fit(logdir, metric, frequent, ours_first, validate=False):
    rs = np.random.RandomState(0)
    x, y = rs.rand(N, 6).astype("float32"), rs.randint(0, CLASSES, N).astype("float32")
    train = mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label")
    # validation scored with fit's own metric object (Module.fit's default validation_metric)
    val = mx.io.NDArrayIter(x[:32] * 3, y[:32], BATCH, label_name="softmax_label") if validate else None
    data = mx.sym.var("data")
    out = mx.sym.FullyConnected(mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8), act_type="relu"),
                                num_hidden=CLASSES)
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(out, name="softmax"), context=mx.cpu())
    cb = TensorBoardCallback(logdir, batch_period=frequent, weights=False, graph=False)
    speed = mx.callback.Speedometer(BATCH, frequent, auto_reset=True)
    oracle, printed = BatchOracle(), Printed()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(printed)
    try:
        mod.fit(train, eval_data=val, eval_metric=metric, num_epoch=EPOCHS, optimizer="sgd",
                optimizer_params={"learning_rate": 0.5}, initializer=mx.init.Xavier(),
                batch_end_callback=[oracle] + ([cb, speed] if ours_first else [speed, cb]),
                epoch_end_callback=cb.epoch_end)
    finally:
        root.removeHandler(printed)
        root.setLevel(level)
    cb.close()
    return oracle, printed.lines


@pytest.mark.parametrize("frequent", [1, 2])
@pytest.mark.parametrize("ours_first", [True, False])
@pytest.mark.parametrize("metric,tag", [("acc", "batch_accuracy"), (PlainAccuracy, "batch_plainacc")])
def test_batch_metric_matches_speedometer(tmp_path, frequent, ours_first, metric, tag):
    oracle, printed = fit(str(tmp_path), metric() if callable(metric) else metric, frequent, ours_first)
    per_epoch = N // BATCH
    steps = list(range(0, EPOCHS * per_epoch, frequent))
    got = readback.scalars(str(tmp_path), "train_batch", tag)
    assert [s for s, _ in got] == steps
    # each point: the batches since the previous point
    want = [oracle.over(prev + 1, k) for prev, k in zip([-1] + steps, steps)]
    assert [v for _, v in got] == pytest.approx(want, abs=1e-6)
    assert len(set(want)) > 2
    # Speedometer prints at in-epoch batches frequent, 2*frequent, ... the batches since its last
    # print; its first print of an epoch also holds the epoch's batch 0 (Module.fit resets the
    # metric before it, and Speedometer prints nothing at batch 0), which our point at batch 0 took
    assert len(printed) == EPOCHS * ((per_epoch - 1) // frequent)
    ours = dict(got)
    for epoch, count, value in printed:
        first, k = epoch * per_epoch, epoch * per_epoch + count
        since = first if count == frequent else k - frequent + 1
        assert value == pytest.approx(oracle.over(since, k), abs=1e-6)  # Speedometer's %f
        if count > frequent:
            assert ours[k] == pytest.approx(value, abs=1e-6), (epoch, count)
        else:
            assert ours[k] == pytest.approx(oracle.over(first + 1, k), abs=1e-6)


@pytest.mark.parametrize("ours_first", [True, False])
def test_points_fall_on_speedometers_batches_in_every_epoch(tmp_path, ours_first):
    """8 batches an epoch and frequent=3: Speedometer prints at in-epoch batches 3 and 6 of every
    epoch; our points are at in-epoch batches 0, 3, 6 (a global schedule put them at 9, 12, 15)."""
    oracle, printed = fit(str(tmp_path), "acc", 3, ours_first)
    per_epoch = N // BATCH
    got = dict(readback.scalars(str(tmp_path), "train_batch", "batch_accuracy"))
    assert sorted(got) == [e * per_epoch + n for e in range(EPOCHS) for n in (0, 3, 6)]
    assert [(e, c) for e, c, _ in printed] == [(e, c) for e in range(EPOCHS) for c in (3, 6)]
    for epoch, count, value in printed:
        k = epoch * per_epoch + count
        if count == 6:  # every print but the epoch's first (which also holds batch 0) is our point
            assert got[k] == pytest.approx(value, abs=1e-6)
        assert got[k] == pytest.approx(oracle.over(k - 2, k), abs=1e-6)


def test_validation_with_fits_own_metric_stays_out_of_the_next_epochs_first_point(tmp_path):
    """Module.fit scores the validation data with the training metric object (reset first, and again
    at the next epoch): the first point of the next epoch holds only training batches."""
    oracle, _ = fit(str(tmp_path), mx.metric.CrossEntropy(), 3, True, validate=True)  # one object: shared
    per_epoch = N // BATCH
    got = readback.scalars(str(tmp_path), "train_batch", "batch_cross-entropy")
    steps = [s for s, _ in got]
    assert steps == [e * per_epoch + n for e in range(EPOCHS) for n in (0, 3, 6)]
    for (prev, _), (k, v) in zip([(-1, None)] + got, got):  # the batches since the previous point, only
        assert v == pytest.approx(oracle.over(prev + 1, k, of="ce"), rel=1e-4), k
