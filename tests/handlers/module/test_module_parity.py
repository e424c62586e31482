"""Under ``Module.fit`` the callback logs the Estimator handler's tags too:
``epoch_learning_rate``, ``epoch_samples_per_second`` and ``gradients/<param>``.

Set up as MXNet's ``example/image-classification`` (``common/fit.py``) does: an ``lr_scheduler``
(``MultiFactorScheduler`` stepping inside the run), a ``Speedometer``, checkpoints at each epoch
end. A recorder callback beside ours keeps what the training computed: the rate each update
used (asked of the optimizer after the update), each batch's size, the time from the epoch's
``tic`` to the end of its last batch and to ``epoch_end``, and the executors' gradients summed
over devices. TensorBoard's reader must return the same, step by step.
"""
import time

import mxnet as mx
import numpy as np
import pytest

import readback
from gluon_tb.handlers import TensorBoardCallback
from synccount import count_host_reads
from tensorboard.util import tensor_util

N, BATCH, CLASSES, EPOCHS = 48, 8, 3, 3  # 6 batches an epoch
PARAMS = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def iters():
    rs = np.random.RandomState(0)
    x, y = rs.rand(N, 5).astype("float32"), rs.randint(0, CLASSES, N).astype("float32")
    return mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label")


def symbol():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=7, name="fc1"), act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc2"), name="softmax")


class Recorder:
    """What the training computed, read on the host (a test may sync; gluon_tb may not)."""

    def __init__(self, devices):
        self.devices = devices
        self.lr, self.samples, self.grads = [], [], []
        self.tic, self.last_batch_end, self.epoch_end = [], [], []

    def batch_end(self, param):
        mod = param.locals["self"]
        opt = mod._optimizer
        self.lr.append(opt.lr_scheduler(opt.num_update))  # the rate of this batch's update
        self.samples.append(param.locals["data_batch"].data[0].shape[0])
        g = mod._exec_group
        reduced = mod._kvstore is not None and not mod._update_on_kvstore
        self.grads.append({n: (gs[0].asnumpy() if reduced else sum(x.asnumpy() for x in gs))
                           for n, gs in zip(g.param_names, g.grad_arrays)})
        if param.nbatch == 0:
            self.tic.append(param.locals["tic"])
        self.last_batch_end.append(time.time())

    def at_epoch_end(self, *args):
        self.epoch_end.append(time.time())


def fit(d, devices=1, **kw):
    rec = Recorder(devices)
    cb = TensorBoardCallback(d, **kw)
    mod = mx.mod.Module(symbol(), context=[mx.cpu(i) for i in range(devices)])
    sched = mx.lr_scheduler.MultiFactorScheduler(step=[4, 13], factor=0.5, base_lr=0.2)  # inside epochs 0 and 2
    with count_host_reads() as c:
        mod.fit(iters(), num_epoch=EPOCHS, optimizer="sgd",
                optimizer_params={"learning_rate": 0.2, "lr_scheduler": sched}, initializer=mx.init.Xavier(),
                batch_end_callback=[mx.callback.Speedometer(BATCH, 2), cb, rec.batch_end],
                epoch_end_callback=[cb.epoch_end, rec.at_epoch_end])
    cb.close()
    return rec, c


def histogram(event):
    """``(count, min, max)`` of a histogram as TensorBoard's reader returns it ([left, right, count] rows)."""
    a = np.asarray(tensor_util.make_ndarray(event.tensor_proto))
    return float(a[:, 2].sum()), float(a[0, 0]), float(a[-1, 1])


def per_epoch_last(values):
    k = N // BATCH
    return [values[(e + 1) * k - 1] for e in range(EPOCHS)]


def per_epoch_first(values):
    k = N // BATCH
    return [values[e * k] for e in range(EPOCHS)]


@pytest.mark.parametrize("devices", [1, 2])
def test_learning_rate_throughput_and_gradients_are_what_the_training_computed(tmp_path, devices):
    d = str(tmp_path)
    rec, c = fit(d, devices)
    assert c.calls == [], str(c)  # the recorder's reads are not gluon_tb's
    # the rate the epoch's first update used, as the Estimator handler logs it: 0.2, then 0.1 after
    # update 4, 0.05 after 13
    lr = readback.scalars(d, "train", "epoch_learning_rate")
    assert [s for s, _ in lr] == [0, 1, 2]
    assert [v for _, v in lr] == pytest.approx(per_epoch_first(rec.lr))
    assert len(set(per_epoch_first(rec.lr))) > 1
    # samples over the seconds from the epoch's tic to its end: between the two recorded ends
    sps = readback.scalars(d, "train", "epoch_samples_per_second")
    assert [s for s, _ in sps] == [0, 1, 2]
    k = N // BATCH
    for e, (_, v) in enumerate(sps):
        samples = sum(rec.samples[e * k:(e + 1) * k])
        assert samples == N
        assert samples / (rec.epoch_end[e] - rec.tic[e]) <= v <= samples / (rec.last_batch_end[(e + 1) * k - 1]
                                                                             - rec.tic[e])
    # gradients of the epoch's last batch, summed over devices, at its global index
    for p in PARAMS:
        events = readback.tensor_events(d, "train_batch", f"gradients/{p}")
        assert [e.step for e in events] == [5, 11, 17]
        for ev, want in zip(events, per_epoch_last(rec.grads)):
            assert histogram(ev) == pytest.approx((want[p].size, want[p].min(), want[p].max()), rel=1e-5, abs=1e-7)


def test_gradients_on_an_int_schedule(tmp_path):
    d = str(tmp_path)
    rec, _ = fit(d, histogram_period=4, params="fc2")
    for p in ("fc2_weight", "fc2_bias"):
        events = readback.tensor_events(d, "train_batch", f"gradients/{p}")
        assert [e.step for e in events] == [0, 4, 8, 12, 16]
        for ev in events:
            want = rec.grads[ev.step][p]
            assert histogram(ev) == pytest.approx((want.size, want.min(), want.max()), rel=1e-5, abs=1e-7)
    assert not any(t.startswith("gradients/fc1") for _, t in readback.tags(d))


def test_samples_are_counted_along_the_batch_axis_of_the_layout():
    """MXNet's RNN examples lay sequences out time-major (``"TNC"``): the batch axis is 1."""
    from types import SimpleNamespace

    from gluon_tb.handlers._module.rates import batch_samples

    batch = mx.io.DataBatch([mx.nd.zeros((35, 20, 8))],
                            provide_data=[mx.io.DataDesc("data", (35, 20, 8), layout="TNC")])
    assert batch_samples(None, batch) == 20
    bound = SimpleNamespace(data_shapes=[mx.io.DataDesc("data", (16, 5), layout="NT")])
    assert batch_samples(bound, mx.io.DataBatch([mx.nd.zeros((16, 5))])) == 16  # NDArrayIter's batches: none given
    assert batch_samples(None, mx.io.DataBatch([mx.nd.zeros((7, 3))])) == 7  # nothing else: the first axis
