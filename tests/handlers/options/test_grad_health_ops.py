"""What ``grad_health`` costs the training thread: a handful of MXNet operations per check, not
a dozen per parameter (each costs it tens of microseconds while the engine is busy). Counted by
wrapping MXNet's operator call; the values themselves are checked in test_grad_health.py."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.ndarray import register

import readback
from gluon_tb.handlers import TensorBoardHandler
from gluon_tb.handlers._mxnet import square_sums
from gluon_tb.handlers._options import grad_health_monitor as _health

warnings.filterwarnings("ignore", message="No trainer specified")


@pytest.fixture
def ops_per_check(monkeypatch):
    """``[(observe ops, finish ops)]`` of every check."""
    counted, inside = [0], [False]
    real = register._imperative_invoke

    def counting(*a, **k):
        if inside[0]:
            counted[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(register, "_imperative_invoke", counting)
    checks = []
    for name in ("observe", "finish"):
        method = getattr(_health.HealthMonitor, name)

        def wrapped(self, *a, _method=method, _name=name, **k):
            if self._fresh is None and _name == "finish":  # nothing observed: not a check
                return _method(self, *a, **k)
            inside[0], counted[0] = True, 0
            try:
                return _method(self, *a, **k)
            finally:
                inside[0] = False
                if _name == "observe":
                    checks.append([counted[0], None])
                else:
                    checks[-1][1] = counted[0]

        monkeypatch.setattr(_health.HealthMonitor, name, wrapped)
    return checks


def test_a_check_costs_a_few_operations_whatever_the_parameter_count(tmp_path, ops_per_check):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, activation="relu"), gluon.nn.Flatten(),
            gluon.nn.Dense(300, activation="relu"), gluon.nn.Dense(16, activation="relu"),
            gluon.nn.Dense(4))  # 8 parameters, each under 65,536 values (the largest 300 x 144)
    big = gluon.nn.Dense(70_000 // 4, in_units=4)  # and one weight over it
    net.add(big)
    net.initialize(mx.init.Xavier())
    rs = np.random.RandomState(0)
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(rs.rand(32, 1, 8, 8).astype("float32"),
                                                         rs.randint(0, 4, 32).astype("float32")), batch_size=8)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01}))
    est.fit(data, epochs=1, event_handlers=[
        TensorBoardHandler(tmp_path, histogram_period=1, grad_health=True, images=False, graph=False)])
    assert len(ops_per_check) == 4  # one check a batch
    for observe, finish in ops_per_check:
        # observe: one multi_sum_sq for the 18 small arrays, one dot for each large one (the
        # weight and its gradient), one concat; finish: the loss's multi_sum_sq and one concat
        assert observe <= 4 and finish <= 2, ops_per_check
    names = [n for n in net.collect_params()]
    got = readback.scalars(str(tmp_path), "train_batch", f"grad_norm/{names[-2]}")
    assert [s for s, _ in got] == [0, 1, 2, 3] and all(v > 0 for _, v in got)


@pytest.mark.parametrize("ctx1", [mx.cpu(0), mx.cpu(1)], ids=["same-device", "other-device"])
def test_sums_of_squares_are_exact_to_float32_at_every_size(ctx1):
    rs = np.random.RandomState(3)
    sizes = [1, 100, square_sums.SMALL, square_sums.SMALL + 1, 3 * square_sums.SMALL + 7,
             2 * square_sums.CHUNK + 5]  # the last: three chunks
    host = [rs.standard_normal(n).astype(np.float32) * 10 ** (i - 2) for i, n in enumerate(sizes)]
    host.append(rs.standard_normal((30, 40)).astype(np.float16))
    arrays = [mx.nd.array(h, dtype=h.dtype) for h in host]
    arrays[1] = arrays[1].as_in_context(ctx1)
    vec, index = square_sums.sum_squares(arrays, mx.cpu(0))
    v = vec.asnumpy().astype(np.float64)
    assert len(index) == len(arrays) and sorted(i for idx in index for i in idx) == list(range(v.size))
    for h, idx in zip(host, index):
        want = (h.astype(np.float64) ** 2).sum()
        assert v[idx].sum() == pytest.approx(want, rel=2e-4), (h.size, h.dtype)


def test_later_checks_call_mxnet_for_their_operations_only(tmp_path, monkeypatch):
    """The gradients and weights are the same NDArrays at every check: their sizes, dtypes and
    chunk views are read once per fit, so a later check pushes operations and nothing else."""
    from mxnet_calls import MXNetCalls

    calls = []
    real = _health.HealthMonitor.observe

    def observe(self, *a, **k):
        with MXNetCalls() as c:
            real(self, *a, **k)
        calls.append(c.names)

    monkeypatch.setattr(_health.HealthMonitor, "observe", observe)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(70_000 // 16), gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    rs = np.random.RandomState(0)
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(rs.rand(32, 8).astype("float32"),
                                                         rs.randint(0, 4, 32).astype("float32")), batch_size=8)
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01}))
    est.fit(data, epochs=1, event_handlers=[
        TensorBoardHandler(tmp_path, histogram_period=1, grad_health=True, images=False, graph=False)])
    assert len(calls) == 4
    assert {"reshape", "_slice"} <= set(calls[0])  # the first check plans: views of the large weight
    for later in calls[1:]:
        # one multi_sum_sq for the small arrays, a dot for the large weight and its gradient, a concat
        assert later == ["_imperative_invoke"] * 4, calls


def test_square_sums_plan_once_and_follow_the_values(ctx1=mx.cpu(0)):
    from mxnet_calls import MXNetCalls

    rs = np.random.RandomState(5)
    host = [rs.standard_normal(n).astype(np.float32) for n in (10, square_sums.CHUNK + 3)]
    arrays = [mx.nd.array(h) for h in host]
    sums = square_sums.SquareSums()

    def check(hosts, got):
        vec, index = got
        v = vec.asnumpy().astype(np.float64)
        for h, idx in zip(hosts, index):
            assert v[idx].sum() == pytest.approx((h.astype(np.float64) ** 2).sum(), rel=2e-4)

    check(host, sums(arrays, mx.cpu(0)))
    for a, h in zip(arrays, host):  # the same arrays, new values (as an update writes them)
        h *= 3
        a[:] = h
    with MXNetCalls() as c:
        got = sums(arrays, mx.cpu(0))
    assert c.names == ["_imperative_invoke"] * 4  # multi_sum_sq, two dots, concat: no view, no read
    check(host, got)
    other = [mx.nd.array(h[:5]) for h in host]  # other arrays: planned anew
    check([h[:5] for h in host], sums(other, mx.cpu(0)))
