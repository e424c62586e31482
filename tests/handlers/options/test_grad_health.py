"""``grad_health=``: per-parameter and global gradient norms, weight norms and update ratios, and
the detectors (non-finite, exploding, vanishing) that warn, write a text and may stop — under
``Estimator.fit`` and ``Module.fit``, read back. What a check costs the training thread, and the
sums it is built on, are in ``test_grad_health_ops.py``."""
import logging
import math

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import readback
from estimator_setup import BATCH, GradSpy, Recorder, loader, make_est, make_net, param_names
from gluon_tb.handlers import GradHealth, TensorBoardCallback, TensorBoardHandler
from module_setup import BATCH as MODULE_BATCH, LR, PARAMS, fit, steps

assert MODULE_BATCH == BATCH  # the tests below write BATCH for both setups' batch size (16)


# ------------------------------------------------------------ TensorBoardHandler
def test_health_scalars_match_the_gradients(tmp_path):
    d = str(tmp_path)
    net = make_net()
    spy = GradSpy(net)
    tb = TensorBoardHandler(d, grad_health=True, histogram_period=1)
    make_est(net).fit(loader(), epochs=1, event_handlers=[tb, spy])
    names = param_names(net)
    for name in names:
        got = readback.scalars(d, "train_batch", f"grad_norm/{name}")
        assert [s for s, _ in got] == [0, 1, 2, 3]
        want = [np.sqrt(np.sum(np.square(g[name].astype(np.float64)))) / BATCH for g in spy.grads]
        np.testing.assert_allclose([v for _, v in got], want, rtol=1e-5)
        gn, wn = got[-1][1], readback.scalars(d, "train_batch", f"weight_norm/{name}")[-1][1]
        ratio = readback.scalars(d, "train_batch", f"update_ratio/{name}")[-1][1]
        assert ratio == pytest.approx(0.1 * gn / max(wn, 0.1 * gn), rel=1e-5)  # at most 1
    glob = readback.scalars(d, "train_batch", "grad_norm/global")
    per = [readback.scalars(d, "train_batch", f"grad_norm/{n}") for n in names]
    for k in range(4):
        assert glob[k][1] == pytest.approx(math.sqrt(sum(p[k][1] ** 2 for p in per)), rel=1e-5)
    assert ("train_batch", "grad_health") not in readback.tags(d)  # a healthy run stays silent


class Poison(gluon.data.Dataset):
    """Random digits-like data; from sample ``at`` on, inputs are scaled by ``scale``."""

    def __init__(self, n=64, at=32, scale=float("nan")):
        rs = np.random.RandomState(0)
        self.x = rs.rand(n, 1, 8, 8).astype("float32")
        self.x[at:] *= scale
        self.y = rs.randint(0, 4, n).astype("float32")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


@pytest.mark.parametrize("scale,kind", [(float("nan"), "nonfinite"), (1e4, "exploding")])
def test_detectors_fire_warn_write_text_and_stop(tmp_path, caplog, scale, kind):
    d = str(tmp_path)
    rec = Recorder()
    data = gluon.data.DataLoader(Poison(scale=scale), batch_size=BATCH)  # batches 2, 3 poisoned
    tb = TensorBoardHandler(d, grad_health=GradHealth(stop=True), histogram_period=1)
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        make_est(make_net()).fit(data, epochs=8, event_handlers=[tb, rec])
    warned = [r.getMessage() for r in caplog.records if "gluon_tb:" in r.getMessage()]
    assert len(warned) == 1 and "net_conv0_weight" in warned[0], warned
    ev = readback.tensor_events(d, "train_batch", "grad_health")
    assert len(ev) == 1 and ev[0].step == 2  # seen at batch 2
    text = ev[0].tensor_proto.string_val[0].decode()
    assert "net_conv0_weight" in text and ("non-finite" in text) == (kind == "nonfinite")
    # stopped once the helper thread had read batch 2's check: typically at batch 3 (one check
    # later), later when the CPU is busy (up to ~12 seen on a loaded machine); never before it was
    # seen, and long before the end (32 batches)
    assert 4 <= len(rec.batch) < 32, len(rec.batch)


class NaNBatch(Poison):
    """Poison's data with NaN inputs in batch ``k`` only (of 16 samples)."""

    def __init__(self, k=1):
        super().__init__(scale=1.0)
        self.x[16 * k:16 * (k + 1)] = np.nan


def test_weights_made_nan_between_checks_are_reported(tmp_path, caplog):
    """Checked once an epoch (at batch 3), a NaN batch 1 makes the weights NaN through its update; the
    check sees them (whatever the gradients of batch 3 then are) and names them."""
    d = str(tmp_path)
    tb = TensorBoardHandler(d, grad_health=True)  # histogram_period="epoch": batches 3, 7
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        make_est(make_net()).fit(gluon.data.DataLoader(NaNBatch(1), batch_size=BATCH), epochs=2, event_handlers=[tb])
    ev = readback.tensor_events(d, "train_batch", "grad_health")
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in ev}
    assert 3 in texts and "non-finite gradients, weights or loss" in texts[3], texts
    assert "`net_conv0_weight` (non-finite weights)" in texts[3], texts[3]
    assert tb.health_events.get("nonfinite") == 3
    assert math.isnan(readback.scalars(d, "train_batch", "weight_norm/net_conv0_weight")[0][1])


def test_the_global_update_ratio_holds_each_parameters_lr_mult(tmp_path):
    d = str(tmp_path)
    net = make_net()
    net(mx.nd.zeros((1, 1, 8, 8)))
    names = param_names(net)
    net.collect_params()[names[0]].lr_mult = 0.1
    tb = TensorBoardHandler(d, grad_health=True, histogram_period=1)
    make_est(net).fit(loader(), epochs=1, event_handlers=[tb])
    mult = {n: (0.1 if n == names[0] else 1.0) for n in names}
    gn = {n: readback.scalars(d, "train_batch", f"grad_norm/{n}") for n in names}
    wglob = readback.scalars(d, "train_batch", "weight_norm/global")
    got = readback.scalars(d, "train_batch", "update_ratio/global")
    for k in range(4):
        u = math.sqrt(sum((0.1 * mult[n] * gn[n][k][1]) ** 2 for n in names))  # lr 0.1 (make_est)
        assert got[k][1] == pytest.approx(u / max(wglob[k][1], u), rel=1e-5)


def test_vanishing_detector(tmp_path, caplog):
    d = str(tmp_path)
    net = make_net()
    net(mx.nd.zeros((1, 1, 8, 8)))  # finish deferred initialisation
    net[0].weight.set_data(mx.nd.zeros_like(net[0].weight.data()))  # relu(0) kills every gradient
    tb = TensorBoardHandler(d, grad_health=GradHealth(vanish_checks=2), histogram_period=1)
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        make_est(net).fit(loader(), epochs=1, event_handlers=[tb])
    text = readback.tensor_events(d, "train_batch", "grad_health")[0].tensor_proto.string_val[0].decode()
    assert "vanishing" in text and "net_conv0_weight" in text and "net_dense0_bias" not in text  # its input is 0


# ------------------------------------------------------------ TensorBoardCallback
def test_default_schedule_is_the_epochs_last_batch(tmp_path):
    d = str(tmp_path)
    fit(TensorBoardCallback(d, grad_health=GradHealth(per_param=False), weights=False, graph=False))
    got = steps(d)
    assert {rt: s for rt, s in got.items() if "/" in rt[1]} == {
        ("train_batch", f"{k}/global"): [3, 7] for k in ("grad_norm", "weight_norm", "update_ratio")} | {
        ("train_batch", f"gradients/{p}"): [3, 7] for p in PARAMS}


class GradOracle:
    """Each batch's gradient (summed over devices) and weights, taken inside ``Module.update``
    (before the update: the batch's own gradient whatever the kvstore does next) and after it."""

    def __init__(self):
        self.g, self.w, self.mod = [], [], None

    def attach(self, mod):
        inner = mod.update

        def update():
            g = mod._exec_group
            self.g.append({n: sum(a.asnumpy().astype(np.float64) for a in gs)
                           for n, gs in zip(g.param_names, g.grad_arrays)})
            inner()
            self.w.append({n: ws[0].asnumpy().astype(np.float64) for n, ws in zip(g.param_names, g.param_arrays)})
        mod.update = update


@pytest.mark.parametrize("ctxs,update_on_kvstore", [(1, "1"), (2, "1"), (2, "0")])
def test_health_scalars_match_the_batch_gradients(tmp_path, monkeypatch, ctxs, update_on_kvstore):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", update_on_kvstore)
    d = str(tmp_path)
    oracle = GradOracle()
    orig_bind = mx.mod.Module.init_optimizer

    def init_optimizer(self, *a, **k):  # hook the oracle before training starts
        orig_bind(self, *a, **k)
        oracle.attach(self)
    monkeypatch.setattr(mx.mod.Module, "init_optimizer", init_optimizer)
    fit(TensorBoardCallback(d, grad_health=True, histogram_period=1),
        ctx=[mx.cpu(i) for i in range(ctxs)])
    assert len(oracle.g) == 8
    for p in PARAMS + ["global"]:
        names = PARAMS if p == "global" else [p]
        gn = [math.sqrt(sum((b[n] ** 2).sum() for n in names)) / BATCH for b in oracle.g]
        wn = [math.sqrt(sum((b[n] ** 2).sum() for n in names)) for b in oracle.w]  # after the update
        got_g = readback.scalars(d, "train_batch", f"grad_norm/{p}")
        got_w = readback.scalars(d, "train_batch", f"weight_norm/{p}")
        assert [s for s, _ in got_g] == list(range(8)) == [s for s, _ in got_w]
        assert [v for _, v in got_g] == pytest.approx(gn, rel=1e-4)
        assert [v for _, v in got_w] == pytest.approx(wn, rel=1e-4)
        ratio = [v for _, v in readback.scalars(d, "train_batch", f"update_ratio/{p}")]
        assert ratio == pytest.approx([LR * g / max(w, LR * g) for g, w in zip(gn, wn)], rel=1e-4)
    assert ("train_batch", "grad_health") not in readback.tags(d)  # healthy: no detector text


def test_detector_warns_and_writes_text_without_stopping(tmp_path, caplog):
    d = str(tmp_path)
    cb = TensorBoardCallback(d, grad_health=GradHealth(vanish_below=1e9, vanish_checks=2), histogram_period=1)
    with caplog.at_level(logging.WARNING, logger="gluon_tb.handlers"):
        fit(cb)
    assert cb.health_events == {"vanishing": 1}  # every norm is "below 1e9": the 2nd check fires
    ev = readback.tensor_events(d, "train_batch", "grad_health")
    assert [e.step for e in ev] == [1]
    assert "vanishing gradients" in ev[0].tensor_proto.string_val[0].decode()
    assert len([r for r in caplog.records if "vanishing" in r.getMessage()]) == 1
    assert [s for s, _ in readback.scalars(d, "train_batch", "batch_accuracy")] == list(range(8))  # not stopped

