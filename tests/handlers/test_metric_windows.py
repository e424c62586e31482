"""``window_value``: a metric's value over a window's sums is what the metric's own ``get()`` gives."""
import copy

import mxnet as mx
import pytest

from gluon_tb.handlers._mxnet.metric_windows import window_value


class Halved(mx.metric.Accuracy):
    """A custom metric whose own get() is not EvalMetric's: its formula must be used."""

    def get(self):
        name, value = super().get()
        return name, value / 2


class Plain(mx.metric.EvalMetric):
    """A custom metric that keeps EvalMetric's get()."""

    def __init__(self):
        super().__init__("plain")

    def update(self, labels, preds):
        pass


METRICS = [mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=2), mx.metric.MAE(), mx.metric.MSE(),
           mx.metric.RMSE(), mx.metric.CrossEntropy(), mx.metric.NegativeLogLikelihood(),
           mx.metric.Perplexity(ignore_label=None), mx.metric.F1(), mx.metric.MCC(), mx.metric.Loss(),
           mx.metric.PearsonCorrelation(), Halved(), Plain(), mx.metric.Accuracy(name="acc/train")]


def own_get(m, ds, dn):
    shadow = copy.copy(m)
    shadow.sum_metric, shadow.num_inst = ds, dn
    shadow.global_sum_metric, shadow.global_num_inst = ds, dn
    name, value = shadow.get()
    return list(zip(name if isinstance(name, list) else [name], value if isinstance(value, list) else [value]))


@pytest.mark.parametrize("m", METRICS, ids=lambda m: type(m).__name__ + ":" + str(m.name))
@pytest.mark.parametrize("ds, dn", [(5.0, 8), (3, 7), (0.0, 1), (-2.5, 4)])
def test_window_value_is_the_metrics_own_get_of_the_sums(m, ds, dn):
    assert window_value(m, ds, dn) == own_get(m, ds, dn)


def test_a_window_without_instances_gives_no_value():
    assert window_value(mx.metric.Accuracy(), 0.0, 0) == [("accuracy", None)]
    assert window_value(Halved(), 0.0, 0) == [("accuracy", None)]


def test_halved_is_not_taken_for_a_plain_division():
    assert window_value(Halved(), 5.0, 8) == [("accuracy", 0.3125)]


def _update(ms, rng):
    labels = [mx.nd.array(rng.integers(0, 3, 8))]
    preds = [mx.nd.array(rng.random((8, 3)))]
    for m in ms:
        if isinstance(m, mx.metric.Loss):
            m.update(None, [mx.nd.array(rng.random(8))])
        else:
            m.update(labels, preds)


@pytest.mark.parametrize("make", [
    lambda: [mx.metric.Accuracy()],
    lambda: [mx.metric.Loss(), mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=2)],
    lambda: [mx.metric.Accuracy(), mx.metric.Accuracy()],  # the same name twice: accuracy, accuracy_2
    lambda: [mx.metric.Accuracy(), Halved()],  # a get() of its own: the general path
    lambda: [mx.metric.CompositeEvalMetric([mx.metric.Accuracy(), mx.metric.CrossEntropy()])],
], ids=["one", "loss-first", "twice", "own-get", "composite"])
def test_the_planned_take_gives_what_the_general_one_gives(make):
    """``BatchMetrics.take`` works out the tags of a list of plain metrics once (``_make_plan``); batch
    after batch, through resets and a skipped loss, it gives what the general path gives."""
    import numpy as np

    from gluon_tb.handlers._mxnet.metric_windows import BatchMetrics

    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    planned, general = make(), make()
    a, b = BatchMetrics(), BatchMetrics()
    a.watch(planned)
    b.watch(general)
    for i in range(12):
        skip = i % 4 == 1  # the batch's loss is logged as batch_loss: the Loss metric's point left out
        for _ in range(1 + i % 2):
            _update(planned, rng_a)
            _update(general, rng_b)
        if i in (5, 9):  # a reset inside the window (MetricHandler at an epoch, Speedometer)
            for m in planned + general:
                m.reset() if i == 5 else m.reset_local()
            _update(planned, rng_a)
            _update(general, rng_b)
        got, want = a.take(planned, skip_loss=skip), b._take(general, skip)
        assert [t for t, _ in got] == [t for t, _ in want]
        np.testing.assert_allclose([v for _, v in got], [v for _, v in want], rtol=1e-12)
        assert got, "every batch updated every metric"
    plain = all(type(m) in (mx.metric.Accuracy, mx.metric.Loss, mx.metric.TopKAccuracy) for m in planned)
    assert (a._plan[3] is not None) == plain


def test_a_deep_copy_of_a_watched_metric_resets_only_itself(tmp_path):
    """The metric's reset is hooked on the instance; copy.deepcopy carried the hook, so a callback
    that snapshots fit's metric and resets its copy reset fit's own metric every batch (MXNet's
    printed Train-accuracy and the logged values were then wrong). The copy now gets its own reset."""
    import readback
    from gluon_tb import TensorBoardCallback
    from module_setup import BATCH, fit

    seen, counts = [], []

    def snapshot(p):  # a user's per-batch snapshot of the metric, after ours
        snap = copy.deepcopy(p.eval_metric)
        snap.reset()
        counts.append(p.eval_metric.num_inst)
        seen.append(p.eval_metric.get()[1])

    cb = TensorBoardCallback(str(tmp_path), graph=False, weights=False, histogram_period=None)
    fit(cb, eval_data=False, extra=[snapshot])
    assert counts == [BATCH, 2 * BATCH, 3 * BATCH, 4 * BATCH] * 2  # reset by fit at each epoch only
    logged = [v for _, v in readback.scalars(str(tmp_path), "train", "epoch_accuracy")]
    assert logged == pytest.approx([seen[3], seen[7]], abs=1e-6)


def test_a_watched_metric_pickles_and_its_copy_is_not_watched():
    """pickle.dumps(fit's metric) in a callback (to send it through a multiprocessing.Queue) failed:
    "Can't pickle local object" (the reset hook). It pickles as the metric's own method now."""
    import pickle

    from gluon_tb.handlers._mxnet.hooks import wrap

    m, calls = mx.metric.Accuracy(), []
    tap = wrap(m, ("reset", "reset_local"), lambda: calls.append("hook"))
    m.update([mx.nd.array([1])], [mx.nd.array([[0.1, 0.9]])])
    twin = pickle.loads(pickle.dumps(m))
    assert twin.num_inst == 1 and twin.get() == m.get()
    twin.reset()
    assert (twin.num_inst, m.num_inst, calls) == (0, 1, [])  # the copy resets itself, unwatched
    m.reset()
    assert (m.num_inst, calls) == (0, ["hook"])
    tap.remove()
