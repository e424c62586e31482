"""Every Estimator value means what the training computed.

Each test reproduces a set-up of third-party training code (gluon-nlp 0.10's estimator scripts,
MXNet 1.9.1's estimator tests) in code written here, runs a *recorder* handler beside ours that
records what the training computed, and compares it, step by step and value by value, with what
TensorBoard's reader returns.
"""
import logging
import math
import types
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.gluon.contrib.estimator import BatchProcessor, Estimator, GradientUpdateHandler
from mxnet.gluon.contrib.estimator.event_handler import BatchBegin, BatchEnd, EpochBegin, EpochEnd, TrainBegin

import readback
from gluon_tb.handlers import TensorBoardHandler
from gluon_tb.handlers._estimator import epoch_values as _epoch_values

warnings.filterwarnings("ignore", message="No trainer specified")

N, BATCH, CLASSES, FEAT = 48, 8, 3, 5  # 6 batches per epoch


def data(n=N, seed=0, time_major=False, steps=4):
    rs = np.random.RandomState(seed)
    if time_major:  # (T, N, F) samples: a language model's batch_axis=1 layout
        x = rs.rand(n, steps, FEAT).astype("float32")
        y = rs.randint(0, CLASSES, size=(n,)).astype("float32")
        ds = gluon.data.ArrayDataset(x, y)

        def batchify(samples):
            xs = np.stack([s[0] for s in samples], axis=1)  # (T, N, F)
            ys = np.array([s[1] for s in samples], dtype="float32")
            return mx.nd.array(xs), mx.nd.array(ys)
        return gluon.data.DataLoader(ds, batch_size=BATCH, batchify_fn=batchify)
    x = rs.rand(n, FEAT).astype("float32")
    y = rs.randint(0, CLASSES, size=n).astype("float32")
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)


def make_net(seed=1):
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier())
    return net


def make_est(net, lr=0.1, metrics=None, **kw):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,
                     train_metrics=metrics if metrics is not None else mx.metric.Accuracy(), **kw)


def handler(logdir, **kw):
    kw.setdefault("histogram_period", None)
    kw.setdefault("images", False)
    kw.setdefault("graph", False)
    return TensorBoardHandler(str(logdir), **kw)


def read(logdir, tag, run=None):
    return readback.scalars(str(logdir), run or readback.train_run(tag), tag)


def close(a, b, rel=1e-5):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-7)


# ---------------------------------------------------------------- learning rate
class LRDecay(EpochEnd):
    """gluon-nlp's MT script: the rate decays at the end of each epoch."""

    def __init__(self, factor):
        self.factor = factor

    def epoch_end(self, estimator, *args, **kwargs):
        estimator.trainer.set_learning_rate(estimator.trainer.learning_rate * self.factor)
        return False


class RateRecorder(BatchBegin, EpochBegin):
    """The rate each batch's update uses (read before the batch), by epoch."""

    priority = -5000

    def __init__(self):
        self.rates = []

    def epoch_begin(self, estimator, *args, **kwargs):
        self.rates.append([])

    def batch_begin(self, estimator, *args, **kwargs):
        self.rates[-1].append(estimator.trainer.learning_rate)


def test_learning_rate_is_the_rate_the_epoch_trained_with(tmp_path):
    net = make_net()
    est = make_est(net, lr=0.01)
    rec = RateRecorder()
    est.fit(data(), epochs=3, event_handlers=[handler(tmp_path), LRDecay(0.5), rec])
    assert [set(r) for r in rec.rates] == [{0.01}, {0.01 * 0.5}, {0.01 * 0.25}]
    got = read(tmp_path, "epoch_learning_rate")
    assert [s for s, _ in got] == [0, 1, 2]
    assert all(close(v, r[0]) for (_, v), r in zip(got, rec.rates)), (got, rec.rates)


class SequenceLengthRate(BatchBegin, BatchEnd):
    """gluon-nlp's word language model (LearningRateHandler): each batch trains with the base rate
    scaled by its sequence length, set at batch_begin; the base rate is put back at batch_end,
    after the update and before our handler."""

    priority = 0

    def __init__(self, base, scales):
        self.base, self.scales, self.k = base, scales, 0

    def batch_begin(self, estimator, *args, **kwargs):
        estimator.trainer.set_learning_rate(self.base * self.scales[self.k % len(self.scales)])
        self.k += 1

    def batch_end(self, estimator, *args, **kwargs):
        estimator.trainer.set_learning_rate(self.base)
        return False


class UsedRateRecorder(RateRecorder):
    """The rate each update uses, read after every handler's batch_begin."""

    priority = 5000


def test_learning_rate_is_the_rate_the_update_used_when_a_handler_sets_it_per_batch(tmp_path):
    net = make_net()
    est = make_est(net, lr=20.0)
    rec = UsedRateRecorder()
    scales = [0.9, 1.1, 1.3, 0.7, 1.0, 1.2, 0.8]  # 7: each epoch (6 batches) starts at another one
    est.fit(data(), epochs=3, event_handlers=[handler(tmp_path), SequenceLengthRate(20.0, scales), rec])
    assert [r[0] for r in rec.rates] == [20.0 * 0.9, 20.0 * 0.8, 20.0 * 1.2]
    got = read(tmp_path, "epoch_learning_rate")
    assert [s for s, _ in got] == [0, 1, 2]
    assert all(close(v, r[0]) for (_, v), r in zip(got, rec.rates)), (got, rec.rates)  # not 20.0


def test_learning_rate_of_a_scheduler_is_the_rate_of_the_epochs_first_update(tmp_path):
    """An lr_scheduler counts the update before its rate is used: the rate read as the step
    returns is the one the update used, also where the schedule steps at that update."""
    net = make_net()
    sched = mx.lr_scheduler.FactorScheduler(step=6, factor=0.5, base_lr=0.1)  # steps after 6 updates
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "lr_scheduler": sched})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, train_metrics=mx.metric.Accuracy())
    used = []
    opt = trainer._optimizer
    real = opt._get_lrs

    def spy(indices):
        lrs = real(indices)
        used.append(lrs[0])
        return lrs
    opt._get_lrs = spy
    est.fit(data(), epochs=3, event_handlers=[handler(tmp_path)])
    per_update = used[::len(used) // 18]  # one call per update (18 updates)
    got = read(tmp_path, "epoch_learning_rate")
    assert [s for s, _ in got] == [0, 1, 2]
    assert all(close(v, per_update[6 * e]) for e, (_, v) in enumerate(got)), (got, per_update)


# ---------------------------------------------------------------- throughput
class SummedLoss(BatchProcessor):
    """One summed loss per batch (gluon-nlp's MT script), data split along ``batch_axis``."""

    def fit_batch(self, estimator, train_batch, batch_axis=0):
        x, y = train_batch
        if batch_axis == 1:
            x = x.mean(axis=0)  # (T, N, F) -> (N, F)
        with autograd.record():
            pred = estimator.net(x)
            loss = estimator.loss(pred, y).sum()
        loss.backward()
        return [x], [y], [pred], [loss.reshape((1,))]


class SampleRecorder(BatchEnd):
    priority = -5000

    def __init__(self):
        self.samples = []

    def batch_end(self, estimator, *args, **kwargs):
        self.samples.append(kwargs["batch"][0].shape[estimator.batch_axis])
        return False


@pytest.mark.parametrize("batch_axis", [0, 1])
def test_samples_per_second_counts_samples_along_batch_axis(tmp_path, monkeypatch, batch_axis):
    clock = iter(range(0, 1000, 2))  # every reading 2 s after the last: an epoch takes 2 s
    monkeypatch.setattr(_epoch_values, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    net = make_net()
    est = make_est(net, batch_processor=SummedLoss())
    rec = SampleRecorder()
    est.fit(data(time_major=batch_axis == 1), epochs=2, batch_axis=batch_axis,
            event_handlers=[handler(tmp_path), rec])
    assert rec.samples == [BATCH] * 12
    assert read(tmp_path, "epoch_samples_per_second") == [(0, N / 2.0), (1, N / 2.0)]


# ---------------------------------------------------------------- metrics reset mid-epoch
class MetricResetHandler(BatchEnd):
    """gluon-nlp's: ``reset_local()`` of the training metrics every ``every`` batches."""

    def __init__(self, metrics, every, priority=0):
        self.metrics, self.every, self.n, self.priority = metrics, every, 0, priority

    def batch_end(self, estimator, *args, **kwargs):
        self.n += 1
        if self.n % self.every == 0:
            for m in self.metrics:
                m.reset_local()
        return False


class EpochRecorder(EpochEnd):
    priority = 10 ** 6

    def __init__(self):
        self.values = []

    def epoch_end(self, estimator, *args, **kwargs):
        self.values.append({m.name: m.get_global()[1] for m in estimator.train_metrics})
        return False


def test_epoch_values_survive_reset_local(tmp_path):
    net = make_net()
    est = make_est(net, metrics=None)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=est.trainer)  # Accuracy + Loss
    rec = EpochRecorder()
    est.fit(data(), epochs=2, event_handlers=[handler(tmp_path, batch_period=None),
                                              MetricResetHandler(est.train_metrics, 4), rec])
    acc = [v for name, v in rec.values[0].items() if "accuracy" in name]
    assert len(acc) == 1
    for tag, key in (("epoch_accuracy", "accuracy"), ("epoch_loss", "loss")):
        want = [[v for name, v in r.items() if key in name][0] for r in rec.values]
        got = read(tmp_path, tag)
        assert [s for s, _ in got] == [0, 1]
        assert all(close(g, w) for (_, g), w in zip(got, want)), (tag, got, want)


# ---------------------------------------------------------------- losses that are not per sample
class FloatLoss(BatchProcessor):
    """Returns the batch's summed loss as a Python float (train) and as floats (validation)."""

    def __init__(self):
        self.train, self.val = [], []

    def fit_batch(self, estimator, train_batch, batch_axis=0):
        x, y = train_batch
        with autograd.record():
            pred = estimator.net(x)
            loss = estimator.loss(pred, y)
        loss.backward()
        value = float(loss.sum().asscalar())
        self.train.append(value)
        return [x], [y], [pred], value

    def evaluate_batch(self, estimator, val_batch, batch_axis=0):
        x, y = val_batch
        pred = estimator.val_net(x)
        value = float(estimator.val_loss(pred, y).sum().asscalar())
        self.val.append(value)
        return [x], [y], [pred], [value]


class StepBySamples(GradientUpdateHandler):
    """MXNet's GradientUpdateHandler counts the batch from the loss's shape; a float has none."""

    def batch_end(self, estimator, *args, **kwargs):
        estimator.trainer.step(kwargs["batch"][0].shape[0])
        return False


class BatchLosses(BatchEnd):
    """Every batch's loss values, as the batch processor returned them (read on the host here)."""

    def __init__(self):
        self.batches = []

    def batch_end(self, estimator, *args, **kwargs):
        loss = kwargs["loss"]
        self.batches.append(np.concatenate([l.asnumpy().reshape(-1) for l in
                                            (loss if isinstance(loss, (list, tuple)) else [loss])]))
        return False


@pytest.mark.parametrize("loss_metric", [False, True], ids=["summed-by-the-handler", "with-a-Loss-metric"])
def test_batch_loss_with_a_period_is_the_mean_over_the_batches_since_the_previous_point(tmp_path, loss_metric):
    """batch_period=4 over 2 epochs of 6 batches: points at 0, 4, 8 are the mean of every loss value of
    batches {0}, {1..4}, {5..8} (across the epoch boundary, as batch_<metric>'s windows), not of the one
    batch at the point; the epoch's loss stays the mean of its own batches."""
    rec = BatchLosses()
    metrics = [mx.metric.Accuracy()] + ([mx.metric.Loss()] if loss_metric else [])
    make_est(make_net(), metrics=metrics).fit(data(), epochs=2,
                                              event_handlers=[handler(tmp_path, batch_period=4), rec])
    assert len(rec.batches) == 12
    windows = [[0], [1, 2, 3, 4], [5, 6, 7, 8]]
    want = [float(np.mean(np.concatenate([rec.batches[b] for b in w]))) for w in windows]
    got = read(tmp_path, "batch_loss")
    assert [s for s, _ in got] == [0, 4, 8]
    assert all(close(g, w) for (_, g), w in zip(got, want)), (got, want)
    assert not close(got[1][1], float(np.mean(rec.batches[4])))  # not the batch at the point
    epochs = [float(np.mean(np.concatenate(rec.batches[e * 6:(e + 1) * 6]))) for e in range(2)]
    got = read(tmp_path, "epoch_loss")
    assert [s for s, _ in got] == [0, 1] and all(close(g, w) for (_, g), w in zip(got, epochs)), (got, epochs)


def test_float_losses_are_logged_for_what_they_are(tmp_path):
    net = make_net()
    bp = FloatLoss()
    est = make_est(net, batch_processor=bp)  # Accuracy only: no loss metric, the handler sums
    est.fit(data(), val_data=data(16, seed=3), epochs=2, event_handlers=[handler(tmp_path), StepBySamples()])
    per_epoch = len(bp.train) // 2
    assert per_epoch == N // BATCH
    got = read(tmp_path, "batch_loss")
    assert [s for s, _ in got] == list(range(2 * per_epoch))
    assert all(close(g, w) for (_, g), w in zip(got, bp.train))
    want = [np.mean(bp.train[:per_epoch]), np.mean(bp.train[per_epoch:])]
    got = read(tmp_path, "epoch_loss")
    assert [s for s, _ in got] == [0, 1] and all(close(g, w) for (_, g), w in zip(got, want)), (got, want)
    vper = len(bp.val) // 2
    want = [np.mean(bp.val[:vper]), np.mean(bp.val[vper:])]
    got = read(tmp_path, "epoch_loss", "validation")
    assert [s for s, _ in got] == [0, 1] and all(close(g, w) for (_, g), w in zip(got, want)), (got, want)


class OddLoss(FloatLoss):
    def fit_batch(self, estimator, train_batch, batch_axis=0):
        data_, label, pred, _ = super().fit_batch(estimator, train_batch, batch_axis)
        return data_, label, pred, {"loss": self.train[-1]}


def test_a_loss_that_cannot_be_averaged_warns_once(tmp_path, caplog):
    net = make_net()
    est = make_est(net, batch_processor=OddLoss())
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        est.fit(data(), epochs=2, event_handlers=[handler(tmp_path), StepBySamples()])
    said = [r.getMessage() for r in caplog.records if "loss is a dict" in r.getMessage()]
    assert len(said) == 1
    tags = {t for r, t in readback.tags(str(tmp_path)) if r in ("train", "train_batch")}
    assert tags == {"batch_accuracy", "epoch_accuracy", "epoch_learning_rate", "epoch_samples_per_second",
                    "epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction"}


# ---------------------------------------------------------------- gradients before clipping
class ClipUpdate(GradientUpdateHandler):
    """gluon-nlp's scripts: clip the global norm, then step."""

    def __init__(self, clip):
        super().__init__()
        self.clip = clip

    def batch_end(self, estimator, *args, **kwargs):
        params = [p for p in estimator.net.collect_params().values() if p.grad_req != "null"]
        gluon.utils.clip_global_norm([p.grad() for p in params], self.clip)
        estimator.trainer.step(kwargs["batch"][0].shape[0])
        return False


class NormRecorder(BatchEnd):
    """The global gradient norm backward produced (before the update handler)."""

    priority = -3000

    def __init__(self):
        self.norms, self.grads = [], []

    def batch_end(self, estimator, *args, **kwargs):
        ps = [(n, p) for n, p in estimator.net.collect_params().items() if p.grad_req != "null"]
        self.grads.append({n: p.grad().asnumpy().copy() for n, p in ps})
        self.norms.append(math.sqrt(sum(float((g.astype("float64") ** 2).sum()) for g in self.grads[-1].values())))
        return False


def test_gradients_are_logged_before_an_update_handler_clips(tmp_path):
    net = make_net()
    est = make_est(net)
    rec = NormRecorder()
    est.fit(data(), epochs=1, event_handlers=[handler(tmp_path, histogram_period=2, grad_health=True),
                                              ClipUpdate(0.01), rec])
    got = read(tmp_path, "grad_norm/global")
    assert [s for s, _ in got] == [0, 2, 4]
    assert all(n > 0.05 for n in rec.norms)  # the clip (0.01) really clipped
    want = [rec.norms[s] / BATCH for s, _ in got]  # rescale_grad = 1 / batch size
    assert all(close(g, w, 1e-4) for (_, g), w in zip(got, want)), (got, want)
    for name in rec.grads[0]:
        ev = readback.tensor_events(str(tmp_path), "train_batch", f"gradients/{name}")
        assert [e.step for e in ev] == [0, 2, 4]
        from tensorboard.util import tensor_util
        for e in ev:
            arr = tensor_util.make_ndarray(e.tensor_proto)
            g = rec.grads[e.step][name]
            assert close(arr[:, 0].min(), g.min(), 1e-5) and close(arr[:, 1].max(), g.max(), 1e-5)


class EstimatedLength(gluon.data.DataLoader):
    """gluon-nlp's bucket samplers: ``len()`` is an estimate (the word language model's said ~76
    batches an epoch that had 6)."""

    def __init__(self, loader, claimed):
        self.__dict__.update(loader.__dict__)
        self._claimed = claimed

    def __len__(self):
        return self._claimed


def histograms(logdir, kind, name):
    from tensorboard.util import tensor_util

    return {e.step: tensor_util.make_ndarray(e.tensor_proto)
            for e in readback.tensor_events(str(logdir), "train_batch", f"{kind}/{name}")}


@pytest.mark.parametrize("claimed", [10, 4])
def test_per_epoch_gradients_when_len_of_the_data_is_wrong_are_never_the_clipped_ones(tmp_path, caplog, claimed):
    """Epochs of 6 batches where len() says 10 (or 4): no epoch's gradients are the clipped
    buffers. The first epoch's are not logged (its last batch was not known to be the last, and
    the update clipped the buffers after), with a warning; from then on the counted length is
    used and each epoch's last batch is logged as backward produced it."""
    net = make_net()
    est = make_est(net)
    rec = NormRecorder()
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        est.fit(EstimatedLength(data(), claimed), epochs=3,
                event_handlers=[handler(tmp_path, histogram_period="epoch"), ClipUpdate(0.01), rec])
    assert all(n > 0.05 for n in rec.norms)  # the clip (0.01) really clipped
    for name in rec.grads[0]:
        got = histograms(tmp_path, "gradients", name)
        assert sorted(got) == ([11, 17] if claimed == 10 else [3, 11, 17]), (name, sorted(got))
        for step, arr in got.items():  # claimed 4: the 4th batch, taken as the last, as backward left it
            g = rec.grads[step][name]
            assert close(arr[:, 0].min(), g.min(), 1e-5) and close(arr[:, 1].max(), g.max(), 1e-5), (name, step)
        assert sorted(histograms(tmp_path, "weights", name)) == ([5, 11, 17] if claimed == 10 else [3, 11, 17])
    if claimed == 10:
        assert any("ended after 6 batches where len(train_data) said 10" in r.getMessage() for r in caplog.records)


class LengthPerEpoch(gluon.data.DataLoader):
    """A loader whose length changes every epoch and is right each time: ``len()`` is the next
    epoch's count of batches, decided before it starts."""

    def __init__(self, loader, counts):
        self.__dict__.update(loader.__dict__)
        self._counts, self._epoch = counts, 0

    def __len__(self):
        return self._counts[self._epoch]

    def __iter__(self):
        n = self._counts[self._epoch]
        self._epoch += 1
        for i, batch in enumerate(super().__iter__()):
            if i == n:
                return
            yield batch


def test_per_epoch_gradients_follow_a_length_that_changes_every_epoch(tmp_path, caplog):
    """``len(train_data)`` is read again at every epoch's start while it has been right: each
    epoch's gradients are its own last batch's, as backward produced them (before the clip)."""
    net = make_net()
    est = make_est(net)
    rec = NormRecorder()
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        est.fit(LengthPerEpoch(data(), [6, 4, 5]), epochs=3,
                event_handlers=[handler(tmp_path, histogram_period="epoch"), ClipUpdate(0.01), rec])
    assert all(n > 0.05 for n in rec.norms)  # the clip (0.01) really clipped
    for name in rec.grads[0]:
        got = histograms(tmp_path, "gradients", name)
        assert sorted(got) == [5, 9, 14], (name, sorted(got))
        for step, arr in got.items():
            g = rec.grads[step][name]
            assert close(arr[:, 0].min(), g.min(), 1e-5) and close(arr[:, 1].max(), g.max(), 1e-5), (name, step)
        assert sorted(histograms(tmp_path, "weights", name)) == [5, 9, 14]
    assert not any("len(train_data) said" in r.getMessage() for r in caplog.records)


def test_per_epoch_gradients_of_a_short_epoch_with_mxnets_own_update_are_its_last_batch(tmp_path):
    """Without an update handler of the script's own the buffers are what backward produced:
    the first epoch is logged at its real last batch too."""
    net = make_net()
    est = make_est(net)
    rec = NormRecorder()
    est.fit(EstimatedLength(data(), 10), epochs=3, event_handlers=[handler(tmp_path, histogram_period="epoch"), rec])
    for name in rec.grads[0]:
        got = histograms(tmp_path, "gradients", name)
        assert sorted(got) == [5, 11, 17]
        for step, arr in got.items():
            g = rec.grads[step][name]
            assert close(arr[:, 0].min(), g.min(), 1e-5) and close(arr[:, 1].max(), g.max(), 1e-5), (name, step)


# ---------------------------------------------------------------- an epoch cut short, then a second fit
class CustomStopHandler(TrainBegin, BatchEnd, EpochEnd):
    """MXNet 1.9.1's test_custom_handler."""

    def __init__(self, batch_stop=None, epoch_stop=None):
        self.batch_stop, self.epoch_stop = batch_stop, epoch_stop
        self.num_batch = self.num_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator, *args, **kwargs):
        self.num_batch = self.num_epoch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.num_batch += 1
        if self.num_batch == self.batch_stop:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator, *args, **kwargs):
        self.num_epoch += 1
        if self.num_epoch == self.epoch_stop:
            self.stop_training = True
        return self.stop_training


class LossRecorder(BatchEnd, EpochEnd):
    priority = 10 ** 6

    def __init__(self):
        self.epochs, self.batches = [], 0

    def batch_end(self, estimator, *args, **kwargs):
        self.batches += 1
        return False

    def epoch_end(self, estimator, *args, **kwargs):
        self.epochs.append([m.get_global()[1] for m in estimator.train_metrics if "loss" in m.name][0])
        return False


def test_each_epoch_once_after_a_fit_cut_short(tmp_path):
    net = make_net()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    rec = LossRecorder()
    est.fit(data(), event_handlers=[handler(tmp_path), CustomStopHandler(3, 2), rec], epochs=3)
    assert rec.batches == 3 and len(rec.epochs) == 1
    est.fit(data(), event_handlers=[handler(tmp_path), CustomStopHandler(100, 5), rec], epochs=10)
    assert rec.batches == 3 + 5 * (N // BATCH) and len(rec.epochs) == 6
    got = read(tmp_path, "epoch_loss")
    assert [s for s, _ in got] == [0, 1, 2, 3, 4, 5]
    assert all(close(g, w) for (_, g), w in zip(got, rec.epochs)), (got, rec.epochs)
    assert [s for s, _ in read(tmp_path, "batch_loss")] == list(range(rec.batches))


# ---------------------------------------------------------------- batch_<metric>
class PlainAccuracy(mx.metric.EvalMetric):
    """A user-written metric: no global statistics (MXNet's default for subclasses)."""

    def __init__(self):
        super().__init__("plainacc")

    def update(self, labels, preds):
        for label, pred in zip(labels, preds):
            self.sum_metric += float((pred.argmax(axis=1) == label).sum().asscalar())
            self.num_inst += label.shape[0]


class BatchRecorder(BatchEnd):
    """Each batch's own correct count and size (test oracle, independent of the metrics)."""

    priority = -5000

    def __init__(self):
        self.correct, self.size = [], []

    def batch_end(self, estimator, *args, **kwargs):
        pred, label = kwargs["pred"][0], kwargs["label"][0]
        self.correct.append(float((pred.argmax(axis=1) == label).sum().asscalar()))
        self.size.append(label.shape[0])
        return False


def windows(rec, steps):
    """The accuracy over the batches since the previous step, at each step."""
    out, prev = [], -1
    for k in steps:
        out.append(sum(rec.correct[prev + 1:k + 1]) / sum(rec.size[prev + 1:k + 1]))
        prev = k
    return out


@pytest.mark.parametrize("period,reset_priority", [(1, 0), (4, 0), (4, 2000)])  # resets before / after ours
def test_batch_metric_is_the_metric_since_the_previous_point(tmp_path, period, reset_priority):
    net = make_net()
    est = make_est(net, lr=0.5, metrics=[mx.metric.Accuracy(), PlainAccuracy()])
    rec = BatchRecorder()
    est.fit(data(), epochs=3, event_handlers=[handler(tmp_path, batch_period=period), rec,
                                              MetricResetHandler(est.train_metrics, 3, reset_priority)])
    steps = list(range(0, 3 * N // BATCH, period))
    want = windows(rec, steps)
    assert len(set(want)) > 2  # the values change from point to point
    for tag in ("batch_accuracy", "batch_plainacc"):
        got = read(tmp_path, tag)
        assert [s for s, _ in got] == steps, tag
        assert all(close(g, w) for (_, g), w in zip(got, want)), (tag, got, want)


class TwoSums(mx.metric.EvalMetric):
    """A metric that keeps its sums in lists (no difference can be taken of them)."""

    def __init__(self):
        super().__init__("twosums")

    def reset(self):
        self.sum_metric, self.num_inst = [0.0, 0.0], [0, 0]
        self.global_sum_metric, self.global_num_inst = [0.0, 0.0], [0, 0]

    def reset_local(self):
        self.sum_metric, self.num_inst = [0.0, 0.0], [0, 0]

    def update(self, labels, preds):
        self.num_inst = [n + 1 for n in self.num_inst]

    def get(self):
        return self.name, float(sum(self.num_inst))


def test_batch_metric_without_sums_warns_once_and_is_not_logged(tmp_path, caplog):
    net = make_net()
    est = make_est(net, metrics=[mx.metric.Accuracy(), TwoSums()])
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        est.fit(data(), epochs=2, event_handlers=[handler(tmp_path)])
    said = [r.getMessage() for r in caplog.records if "batch_<metric> is not logged" in r.getMessage()]
    assert len(said) == 1 and "twosums" in said[0]
    tags = {t for r, t in readback.tags(str(tmp_path)) if r in ("train", "train_batch")}
    assert {t for t in tags if t.startswith("batch_")} == {"batch_loss", "batch_accuracy"}
    assert "epoch_twosums" in tags
