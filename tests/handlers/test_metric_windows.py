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
