"""TensorBoardHandler with a real ``Estimator.fit``, read back through TensorBoard's loader."""
import logging
import os
import time
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import BatchProcessor, CheckpointHandler, EarlyStoppingHandler

import readback
from estimator_setup import CLASSES, GradSpy, Recorder, loader, make_est, make_net, param_names
from gluon_tb.handlers import TensorBoardCallback, TensorBoardHandler
from gluon_tb.writer import SummaryWriter

WAIT_TAGS = ("epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction")  # every epoch

warnings.filterwarnings("ignore", message="No trainer specified")


def expected_tags(net, images=True, validation=True, skip=(), graph=True):
    train = {"epoch_loss", "epoch_accuracy", "epoch_learning_rate", "epoch_samples_per_second", *WAIT_TAGS}
    if graph:
        train.add("__run_graph__")
    batches = {"batch_loss", "batch_accuracy"} | {f"{k}/{n}" for n in param_names(net, skip)
                                                  for k in ("gradients", "weights")}
    if images:
        train.add("first_batch")
    out = {("train", t) for t in train} | {("train_batch", t) for t in batches}
    if validation:
        out |= {("validation", "epoch_loss"), ("validation", "epoch_accuracy")}
    return out


def steps(logdir, run, tag):
    return [s for s, _ in readback.scalars(logdir, run, tag)]


def hist_steps(logdir, run, tag):
    return [e.step for e in readback.tensor_events(logdir, run, tag)]


def hist_range(logdir, tag, step):
    from tensorboard.util import tensor_util

    ev = [e for e in readback.tensor_events(logdir, "train_batch", tag) if e.step == step][0]
    arr = tensor_util.make_ndarray(ev.tensor_proto)  # rows: left, right, count
    return arr[:, 0].min(), arr[:, 1].max(), arr[:, 2].sum()


def has_graph(logdir):
    return any(ev.graph_def for f in readback.event_files(os.path.join(logdir, "train"))
               for ev in readback.raw_events(f))


def check_clean(logdir, runs=("train", "train_batch", "validation")):
    assert sorted(os.listdir(logdir)) == sorted(runs)
    for f in readback.event_files(logdir):
        assert len(readback.raw_events(f)) > 1, f"empty event file {f}"


# ---------------------------------------------------------------- tests
def test_layout_steps_and_values(tmp_path):
    logdir = str(tmp_path)
    net = make_net()
    est = make_est(net)
    rec, spy = Recorder(), GradSpy(net)
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2,
            event_handlers=[TensorBoardHandler(logdir), rec, spy])

    assert readback.tags(logdir) == expected_tags(net)
    check_clean(logdir)
    assert has_graph(logdir)
    assert steps(logdir, "train_batch", "batch_loss") == list(range(8))
    assert steps(logdir, "train_batch", "batch_accuracy") == list(range(8))
    for run, tag in [("train", "epoch_loss"), ("train", "epoch_accuracy"), ("train", "epoch_learning_rate"),
                     ("train", "epoch_samples_per_second"), ("validation", "epoch_loss"),
                     ("validation", "epoch_accuracy")]:
        assert steps(logdir, run, tag) == [0, 1], (run, tag)
    for n in param_names(net):
        assert hist_steps(logdir, "train_batch", f"gradients/{n}") == [3, 7]
        assert hist_steps(logdir, "train_batch", f"weights/{n}") == [3, 7]
    assert [e.step for e in readback.tensor_events(logdir, "train", "first_batch")] == [0, 1]

    # values: exactly the estimator's own
    val = readback.scalars(logdir, "validation", "epoch_accuracy")
    assert [v for _, v in val] == pytest.approx([r["validation accuracy"] for r in rec.val], abs=1e-6)
    vloss = readback.scalars(logdir, "validation", "epoch_loss")
    assert [v for _, v in vloss] == pytest.approx([r["validation softmaxcrossentropyloss"] for r in rec.val],
                                                  rel=1e-6)
    tacc = readback.scalars(logdir, "train", "epoch_accuracy")
    assert [v for _, v in tacc] == pytest.approx([r["training accuracy"] for r in rec.train], abs=1e-6)
    bacc = readback.scalars(logdir, "train_batch", "batch_accuracy")
    assert [v for _, v in bacc] == pytest.approx(rec.per_batch(4), abs=1e-6)  # the batch's own
    lr = readback.scalars(logdir, "train", "epoch_learning_rate")
    assert [v for _, v in lr] == pytest.approx([0.1, 0.1])
    # the epoch loss is the mean of the batch losses (equal batch sizes)
    bl = [v for _, v in readback.scalars(logdir, "train_batch", "batch_loss")]
    el = [v for _, v in readback.scalars(logdir, "train", "epoch_loss")]
    assert el == pytest.approx([np.mean(bl[:4]), np.mean(bl[4:])], rel=1e-5)
    # gradients as the batch produced them (before the step)
    for n in param_names(net):
        for step in (3, 7):
            g = spy.grads[step][n]
            lo, hi, count = hist_range(logdir, f"gradients/{n}", step)
            assert count == g.size
            assert (lo, hi) == pytest.approx((g.min(), g.max()), rel=1e-5, abs=1e-7)


def test_two_contexts_gradients_summed_before_step(tmp_path):
    logdir = str(tmp_path)
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = make_net(ctx=ctx)
    est = make_est(net, ctx=ctx)
    spy = GradSpy(net)
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2,
            event_handlers=[TensorBoardHandler(logdir, histogram_period=2), spy])
    assert readback.tags(logdir) == expected_tags(net)
    assert steps(logdir, "train_batch", "batch_loss") == list(range(8))
    for n in param_names(net):
        assert hist_steps(logdir, "train_batch", f"gradients/{n}") == [0, 2, 4, 6]
        for step in (0, 2, 4, 6):
            g = spy.grads[step][n]
            lo, hi, count = hist_range(logdir, f"gradients/{n}", step)
            assert count == g.size
            assert (lo, hi) == pytest.approx((g.min(), g.max()), rel=1e-5, abs=1e-7)


def test_beside_checkpoint_and_early_stopping(tmp_path):
    logdir = str(tmp_path / "logs")
    net = make_net()
    est = make_est(net)
    handlers = [CheckpointHandler(str(tmp_path / "ckpt")),
                EarlyStoppingHandler(monitor=est.val_metrics[0], mode="max", patience=5),
                TensorBoardHandler(logdir)]
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2, event_handlers=handlers)
    assert readback.tags(logdir) == expected_tags(net)
    assert steps(logdir, "validation", "epoch_accuracy") == [0, 1]
    assert any(f.endswith(".params") for f in os.listdir(tmp_path / "ckpt"))


def test_grad_req_null_and_not_hybridized(tmp_path, caplog):
    logdir = str(tmp_path)
    net = make_net(hybridize=False)
    frozen = [n for n in net.collect_params() if n.endswith("conv0_bias")][0]
    net.collect_params()[frozen].grad_req = "null"
    est = make_est(net)
    with caplog.at_level(logging.INFO, logger="gluon_tb.handlers"):
        est.fit(loader(), val_data=loader(32, seed=1), epochs=2, event_handlers=[TensorBoardHandler(logdir)])
    tags = readback.tags(logdir)
    assert tags == expected_tags(net, graph=False)
    assert ("train_batch", f"gradients/{frozen}") not in tags
    assert not has_graph(logdir)
    assert len([r for r in caplog.records if "graph is not logged" in r.getMessage()]) == 1


def test_batches_and_no_validation(tmp_path):
    logdir = str(tmp_path)
    net = make_net()
    est = make_est(net)
    est.fit(loader(), batches=6, event_handlers=[TensorBoardHandler(logdir)])
    assert readback.tags(logdir) == expected_tags(net, validation=False)
    check_clean(logdir, runs=("train", "train_batch"))
    assert steps(logdir, "train_batch", "batch_loss") == list(range(6))
    assert steps(logdir, "train", "epoch_loss") == [0, 1]
    for n in param_names(net):
        assert hist_steps(logdir, "train_batch", f"gradients/{n}") == [3, 5]
        assert hist_steps(logdir, "train_batch", f"weights/{n}") == [3, 5]


class TripleProcessor(BatchProcessor):
    def _get_data_and_label(self, batch, ctx, batch_axis=0):
        return super()._get_data_and_label(batch[:2], ctx, batch_axis)


def test_batches_that_are_not_pairs(tmp_path, caplog):
    logdir = str(tmp_path)
    net = make_net()
    est = make_est(net, batch_processor=TripleProcessor())
    with caplog.at_level(logging.INFO, logger="gluon_tb.handlers"):
        est.fit(loader(extra=True), val_data=loader(32, seed=1, extra=True), epochs=2,
                event_handlers=[TensorBoardHandler(logdir)])
    assert readback.tags(logdir) == expected_tags(net, images=False)
    assert len([r for r in caplog.records if "not [data, label] pairs" in r.getMessage()]) == 1


def test_non_image_inputs_and_options(tmp_path):
    logdir = str(tmp_path)
    net = gluon.nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(CLASSES))
    net.initialize()
    net.hybridize()
    est = make_est(net)
    tb = TensorBoardHandler(logdir, batch_period=3, histogram_period=None, params="dense1")
    est.fit(loader(shape=(10,)), val_data=loader(32, shape=(10,), seed=1), epochs=2, event_handlers=[tb])
    expected = {t for t in expected_tags(net, images=False) if "/" not in t[1]}
    assert readback.tags(logdir) == expected
    assert steps(logdir, "train_batch", "batch_loss") == [0, 3, 6]


def test_param_filter_and_hparams(tmp_path):
    logdir = str(tmp_path)
    net = make_net()
    est = make_est(net)
    tb = TensorBoardHandler(logdir, params=lambda n: n.endswith("weight"), hparams={"lr": 0.1, "opt": "sgd"})
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2, event_handlers=[tb])
    tags = readback.tags(logdir)
    weights = [n for n in param_names(net) if n.endswith("weight")]
    assert {t for r, t in tags if t.startswith("gradients/")} == {f"gradients/{n}" for n in weights}
    final = {t for r, t in tags if t.startswith("hparams/")}
    assert final == {"hparams/train/epoch_loss", "hparams/train/epoch_accuracy",
                     "hparams/validation/epoch_loss", "hparams/validation/epoch_accuracy"}
    v = readback.scalars(logdir, "train", "hparams/validation/epoch_accuracy")
    assert v and set(v) == set(readback.scalars(logdir, "validation", "epoch_accuracy")[-1:])


def test_on_error(tmp_path, monkeypatch):
    calls = []

    def broken(self, *a, **k):
        calls.append(a[0])
        raise OSError("disk full")

    monkeypatch.setattr(SummaryWriter, "add_scalar", broken)
    net = make_net()
    with pytest.warns(RuntimeWarning, match="disk full") as rec:
        make_est(net).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "a"),
                                                                                on_error="warn")])
    assert len([w for w in rec if "disk full" in str(w.message)]) == 1
    assert len(calls) > 4  # it kept going
    with pytest.raises(OSError, match="disk full"):
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "b"))])


def test_trainer_is_restored(tmp_path):
    net = make_net()
    est = make_est(net)
    est.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path))])
    assert "step" not in est.trainer.__dict__ and "allreduce_grads" not in est.trainer.__dict__
    assert "evaluate_batch" not in est.batch_processor.__dict__


def test_second_fit_continues_steps(tmp_path):
    logdir = str(tmp_path)
    net = make_net()
    est = make_est(net)
    tb = TensorBoardHandler(logdir)
    est.fit(loader(), epochs=1, event_handlers=[tb])
    est.fit(loader(), epochs=1, event_handlers=[tb])
    assert steps(logdir, "train_batch", "batch_loss") == list(range(8))
    assert steps(logdir, "train", "epoch_loss") == [0, 1]
    assert hist_steps(logdir, "train_batch", f"gradients/{param_names(net)[0]}") == [3, 7]


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(logdir=3), TypeError, "logdir"),
    (dict(logdir=""), ValueError, "logdir"),
    (dict(logdir="x", batch_period=0), ValueError, "batch_period"),
    (dict(logdir="x", batch_period=1.5), TypeError, "batch_period"),
    (dict(logdir="x", histogram_period="batch"), ValueError, "histogram_period"),  # a str, not 'epoch'
    (dict(logdir="x", histogram_period=1.5), TypeError, "histogram_period"),
    (dict(logdir="x", params=3), TypeError, "params"),
    (dict(logdir="x", params="("), ValueError, "params"),
    (dict(logdir="x", max_images=0), ValueError, "max_images"),
    (dict(logdir="x", images="yes"), TypeError, "images"),
    (dict(logdir="x", on_error="ignore"), ValueError, "on_error"),
    (dict(logdir="x", on_error=1), TypeError, "on_error must be one of 'raise', .*got int 1"),
    (dict(logdir="x", hparams=[1]), TypeError, "hparams"),
    (dict(logdir="x", flush_secs=0), ValueError, "flush_secs"),
    (dict(logdir="x", flush_secs="2"), TypeError, "flush_secs must be a positive number, got str '2'"),
    (dict(logdir="x", distributed="rank1"), ValueError, "distributed"),
    (dict(logdir="x", distributed=None), TypeError, "distributed"),
    (dict(logdir="x", storage_options="k=v"), TypeError, "storage_options"),
    (dict(logdir="x", storage_options={"key": "k"}), ValueError, "storage_options"),
])
def test_arguments_checked_up_front(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        TensorBoardHandler(**kwargs)


def test_public_api():
    import gluon_tb.handlers as h

    assert sorted(h.__all__) == sorted(n for n in vars(h) if not n.startswith("_") and n[0].isupper())
    assert h.TensorBoardHandler is TensorBoardHandler and h.TensorBoardCallback is TensorBoardCallback
    assert not [a for a in dir(TensorBoardHandler("x")) if "metric" in a]


def test_a_slow_trainings_batch_values_are_on_disk_before_the_next_batch(tmp_path):
    """Batches that take longer than the handler keeps values for (RunWriters.LATER_SECS): each
    batch's batch_loss is written within flush_secs of its end, while the training waits for
    the next batch; it does not wait for the next batch's values to be queued."""
    from mxnet.gluon.contrib.estimator.event_handler import BatchEnd

    d = str(tmp_path / "logs")
    seen = []

    class Slow(BatchEnd):  # after ours: waits for the batch's point, then 0.1 s more before the next batch
        priority = 2000

        def batch_end(self, estimator, *a, **k):
            deadline = time.monotonic() + 5.0
            got = []
            while time.monotonic() < deadline:
                got = steps(d, "train_batch", "batch_loss") if os.path.isdir(os.path.join(d, "train_batch")) else []
                if len(got) == len(seen) + 1:
                    break
                time.sleep(0.05)
            seen.append(got)
            time.sleep(0.1)
            return False

    net = make_net()
    est = make_est(net)
    tb = TensorBoardHandler(d, flush_secs=0.2, histogram_period=None, graph=False, images=False)
    est.fit(loader(32), batches=4, event_handlers=[tb, Slow()])
    assert seen == [list(range(k + 1)) for k in range(4)]
