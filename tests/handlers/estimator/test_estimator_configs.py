"""The configurations users actually run with TensorBoardHandler, read back through TensorBoard's loader.

The typical estimator (Accuracy metrics, no Loss metric, validation data), the host-read
count over a matrix of configurations, a resume from a checkpoint in a new process, a fit
that raised followed by another fit, an epoch cut short, and grad_health's update ratio.
"""
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.gluon.contrib.estimator.event_handler import BatchEnd, EpochEnd

import readback
import tb_server
from synccount import count_host_reads
from gluon_tb.handlers import Embeddings, GradHealth, TensorBoardHandler

warnings.filterwarnings("ignore", message="No trainer specified")
N, BATCH, CLASSES = 64, 16, 4  # 4 batches an epoch
HERE = os.path.dirname(os.path.abspath(__file__))


def loader(n=N, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.rand(n, 1, 8, 8).astype("float32")
    y = rs.randint(0, CLASSES, size=n).astype("float32")
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)


def make_net(ctx):
    net = gluon.nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(3, kernel_size=3, activation="relu"), gluon.nn.Flatten(),
                gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    return net


def make_est(net, ctx, loss_metric=False):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    metrics = [mx.metric.Accuracy()] + ([mx.metric.Loss()] if loss_metric else [])
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=metrics,
                     val_metrics=[type(m)() for m in metrics], trainer=trainer, context=ctx)


def steps(logdir, run, tag):
    return [s for s, _ in readback.scalars(logdir, run, tag)]


class ValLossByHand(EpochEnd):
    """After validation (-1000), before gluon_tb (1000): the mean per-sample validation loss."""

    priority = 0

    def __init__(self, data):
        self.data, self.means = data, []

    def epoch_end(self, estimator, *args, **kwargs):
        total, count = 0.0, 0
        for x, y in self.data:
            l = estimator.val_loss(estimator.val_net(x), y).asnumpy().astype(np.float64)
            total, count = total + l.sum(), count + l.size
        self.means.append(total / count)
        return False


# ------------------------------------------------------------ 1. the typical set-up
def test_typical_setup_has_both_loss_curves(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    net = make_net(ctx)
    est = make_est(net, ctx)
    by_hand = ValLossByHand(loader(32, seed=1))
    est.fit(loader(), val_data=loader(32, seed=1), epochs=3,
            event_handlers=[by_hand, TensorBoardHandler(d, histogram_period=None, images=False,
                                                          graph=False)])
    assert readback.tags(d) == {
        ("train", t) for t in ("epoch_loss", "epoch_accuracy", "epoch_learning_rate", "epoch_samples_per_second",
                               "epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction")
    } | {("train_batch", "batch_loss"), ("train_batch", "batch_accuracy"), ("validation", "epoch_loss"),
         ("validation", "epoch_accuracy")}
    got = readback.scalars(d, "validation", "epoch_loss")
    assert [s for s, _ in got] == [0, 1, 2]
    np.testing.assert_allclose([v for _, v in got], by_hand.means, rtol=1e-5)
    assert steps(d, "train", "epoch_loss") == [0, 1, 2]


def test_validation_loss_metric_of_the_estimator_wins(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx, loss_metric=True)
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2,
            event_handlers=[TensorBoardHandler(d, histogram_period=None, images=False, graph=False)])
    loss_metric = [m for m in est.val_metrics if isinstance(m, mx.metric.Loss)][0]
    (last,) = [v for s, v in readback.scalars(d, "validation", "epoch_loss") if s == 1]
    assert last == pytest.approx(loss_metric.get()[1], rel=1e-6)


def test_no_validation_curve_for_epochs_that_did_not_validate(tmp_path):
    from mxnet.gluon.contrib.estimator import ValidationHandler

    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    val = loader(32, seed=1)
    est.fit(loader(), val_data=val, epochs=4,
            event_handlers=[ValidationHandler(val, est.evaluate, epoch_period=2),
                            TensorBoardHandler(d, histogram_period=None, images=False, graph=False)])
    assert steps(d, "validation", "epoch_loss") == [1, 3]
    assert steps(d, "validation", "epoch_accuracy") == [1, 3]


# ------------------------------------------------------------ 2. no host read on the training thread
ALL_ON = dict(histogram_period=1, grad_health=GradHealth(), conv_filters=True,
              embeddings=Embeddings(samples=8), images=True)


@pytest.mark.parametrize("options", [{}, ALL_ON], ids=["defaults", "all-on"])
@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("validation", [False, True], ids=["no-val", "val"])
@pytest.mark.parametrize("loss_metric", [False, True], ids=["no-loss-metric", "loss-metric"])
def test_no_host_read_by_gluon_tb_during_fit(tmp_path, loss_metric, validation, devices, options):
    ctx = [mx.cpu(i) for i in range(devices)]
    net = make_net(ctx)
    est = make_est(net, ctx, loss_metric=loss_metric)
    tb = TensorBoardHandler(str(tmp_path), hparams={"lr": 0.1}, **options)
    with count_host_reads() as c:
        est.fit(loader(), val_data=loader(32, seed=1) if validation else None, epochs=2,
                event_handlers=[tb])
    assert c.calls == [], str(c)
    tags = readback.tags(str(tmp_path))
    assert ("train", "epoch_loss") in tags and ("train_batch", "batch_loss") in tags
    assert (("validation", "epoch_loss") in tags) == validation
    if options:
        assert {("train_batch", "grad_norm/global"), ("train", "first_batch")} <= tags


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value is per thread on Linux only")
def test_every_thread_that_takes_the_gil_keeps_the_process_priority(tmp_path):
    """The writer's threads and grad_health's reader all run Python: at a low priority, on a CPU
    that MXNet keeps busy, each would stall the training thread behind the GIL (see
    writer/_common/threads.py). Sampled at every batch of a fit with every option on."""

    mine = os.getpriority(os.PRIO_PROCESS, 0)
    seen, policies = {}, {}

    class Sample(BatchEnd):
        def batch_end(self, estimator, *args, **kwargs):
            for t in threading.enumerate():
                if t.name.startswith("gluon_tb") and t.is_alive():
                    try:
                        seen[t.name] = max(seen.get(t.name, mine), os.getpriority(os.PRIO_PROCESS, t.native_id))
                        policies.setdefault(t.name, set()).add(os.sched_getscheduler(t.native_id))
                    except OSError:  # ended meanwhile
                        pass

    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2,
            event_handlers=[TensorBoardHandler(str(tmp_path), **ALL_ON), Sample()])
    assert {"gluon_tb-writer", "gluon_tb-grad-health"} <= set(seen), seen
    assert set(seen.values()) == {mine}, seen
    # and waking, the two do not preempt MXNet's OpenMP threads
    assert policies["gluon_tb-writer"] == policies["gluon_tb-grad-health"] == {os.SCHED_BATCH}, policies
    assert ("train_batch", "grad_norm/global") in readback.tags(str(tmp_path))


# ------------------------------------------------------------ 3. resume in a new process
RESUME = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.filterwarnings("ignore")
    import mxnet as mx
    from mxnet.gluon.contrib.estimator import CheckpointHandler
    from mxnet.gluon.contrib.estimator.event_handler import BatchEnd
    import test_estimator_configs as t
    from gluon_tb.handlers import TensorBoardHandler

    logdir, model_dir, mode, n, resume, crash_at = sys.argv[2:8]
    n, resume, crash_at = int(n), resume == "1", int(crash_at)

    class Crash(BatchEnd):
        priority = 2000
        seen = 0
        def batch_end(self, estimator, *a, **k):
            Crash.seen += 1
            if Crash.seen == crash_at:
                raise SystemExit(3)  # the process dies here, its writers flushed at exit

    mx.random.seed(0)
    ctx = [mx.cpu()]
    net = t.make_net(ctx)
    est = t.make_est(net, ctx)
    if mode == "epochs":
        ck = CheckpointHandler(model_dir, model_prefix="m", epoch_period=1, resume_from_checkpoint=resume)
        kw = dict(epochs=n)
    else:
        ck = CheckpointHandler(model_dir, model_prefix="m", epoch_period=None, batch_period=3,
                               resume_from_checkpoint=resume)
        kw = dict(batches=n)
    tb = TensorBoardHandler(logdir, histogram_period=None, images=False, graph=False)
    est.fit(t.loader(), val_data=t.loader(32, seed=1), event_handlers=[ck, tb, Crash()], **kw)
    print("resumed_from", tb.resumed_from)
""")


def run_script(*args):
    return subprocess.run([sys.executable, "-c", RESUME, HERE, *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_resume_from_checkpoint_continues_the_steps(tmp_path):
    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    first = run_script(d, m, "epochs", 2, 0, 0)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_script(d, m, "epochs", 4, 1, 0)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "CheckpointHandler (epoch 1, batch 8)" in second.stdout
    for run in ("train", "validation"):
        assert steps(d, run, "epoch_loss") == [0, 1, 2, 3]
        assert steps(d, run, "epoch_accuracy") == [0, 1, 2, 3]
    assert steps(d, "train_batch", "batch_loss") == list(range(16))
    assert steps(d, "train", "epoch_learning_rate") == [0, 1, 2, 3]


def test_resume_hides_what_a_crashed_process_logged_after_its_checkpoint(tmp_path):
    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    crashed = run_script(d, m, "epochs", 4, 0, 11)  # checkpoints after epochs 0 and 1, dies at batch 10
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    assert steps(d, "train_batch", "batch_loss") == list(range(11))  # 8, 9, 10: past the checkpoint
    second = run_script(d, m, "epochs", 4, 1, 0)
    assert second.returncode == 0, second.stderr[-3000:]
    assert steps(d, "train_batch", "batch_loss") == list(range(16))
    assert steps(d, "train", "epoch_loss") == [0, 1, 2, 3]
    assert steps(d, "validation", "epoch_loss") == [0, 1, 2, 3]
    # the points of batches 8-10 are the resumed process's, not the crashed one's
    files = readback.event_files(os.path.join(d, "train_batch"))
    assert len(files) == 2
    newest = {e.step for e in readback.raw_events(files[-1]) if e.summary.value}
    assert set(range(8, 16)) <= newest
    # and so does TensorBoard's default loader, the Rust data server: same steps, same values
    want = {k: readback.scalars(d, *k) for k in
            [("train_batch", "batch_loss"), ("train", "epoch_loss"), ("validation", "epoch_loss")]}
    got = tb_server.served_scalars(d, list(want), [[s for s, _ in v] for v in want.values()])
    assert got == {k: [(s, pytest.approx(v, rel=1e-6)) for s, v in pts] for k, pts in want.items()}


def test_resume_of_a_fit_by_batches(tmp_path):
    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    crashed = run_script(d, m, "batches", 12, 0, 8)  # checkpoints after batches 2 and 5, dies at 7
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    second = run_script(d, m, "batches", 12, 1, 0)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "CheckpointHandler (epoch 1, batch 5)" in second.stdout
    assert steps(d, "train_batch", "batch_loss") == list(range(12))


def test_initial_epoch_and_step_are_the_fallback(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    tb = TensorBoardHandler(d, histogram_period=None, images=False, graph=False, initial_epoch=5,
                            initial_step=100)
    est.fit(loader(), epochs=1, event_handlers=[tb])
    assert steps(d, "train", "epoch_loss") == [5]
    assert steps(d, "train_batch", "batch_loss") == [100, 101, 102, 103]
    with pytest.raises(ValueError, match="initial_step must be None or an int >= 0, got -1"):
        TensorBoardHandler(d, initial_step=-1)
    with pytest.raises(TypeError, match="initial_epoch must be None or an int >= 0, got str"):
        TensorBoardHandler(d, initial_epoch="3")


def test_initial_epoch_alone_hides_no_batch_points(tmp_path):
    """A purge at batch 0 would hide all of train's earlier points: only validation's epoch is purged."""
    d = str(tmp_path)
    ctx = [mx.cpu()]
    kw = dict(histogram_period=None, images=False, graph=False)
    make_est(make_net(ctx), ctx).fit(loader(), val_data=loader(32, seed=1), epochs=2,
                                     event_handlers=[TensorBoardHandler(d, **kw)])
    make_est(make_net(ctx), ctx).fit(loader(), val_data=loader(32, seed=1), epochs=1,
                                     event_handlers=[TensorBoardHandler(d, initial_epoch=1, **kw)])
    assert steps(d, "train_batch", "batch_loss") == list(range(8)) + list(range(4))  # none hidden
    assert steps(d, "validation", "epoch_loss") == [0, 1]  # the first run's epoch 1 is replaced


def test_a_trainer_that_already_trained_continues_with_a_new_handler(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    est.fit(loader(), epochs=2, event_handlers=[TensorBoardHandler(d, histogram_period=None)])
    est.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(d, histogram_period=None)])
    assert steps(d, "train_batch", "batch_loss") == list(range(12))
    assert steps(d, "train", "epoch_loss") == [0, 1, 2]


# ------------------------------------------------------------ 4. a fit that raised
class Boom(BatchEnd):
    priority = 0

    def __init__(self, at):
        self.at, self.n = at, 0

    def batch_end(self, estimator, *args, **kwargs):
        self.n += 1
        if self.n == self.at:
            raise RuntimeError("user handler failed")
        return False


def own_methods(est):
    return not ({"step", "allreduce_grads"} & set(vars(est.trainer))
                or "evaluate_batch" in vars(est.batch_processor)
                or any("reset" in vars(m) for m in est.val_metrics))


@pytest.mark.parametrize("second", ["handler", "none", "manual-step"])
def test_a_failed_fit_leaves_nothing_hooked(tmp_path, second):
    d1, d2 = str(tmp_path / "one"), str(tmp_path / "two")
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    old = TensorBoardHandler(d1, histogram_period=1, grad_health=True, embeddings=4)
    with pytest.raises(RuntimeError, match="user handler failed"):
        est.fit(loader(), val_data=loader(32, seed=1), epochs=3, event_handlers=[old, Boom(10)])
    assert not own_methods(est)  # MXNet skipped train_end: still hooked
    if second == "handler":
        est.fit(loader(), val_data=loader(32, seed=1), epochs=1,
                event_handlers=[TensorBoardHandler(d2, histogram_period=1)])
        assert steps(d2, "train_batch", "batch_loss") == list(range(10, 14))  # the trainer made 10 updates
    elif second == "none":
        est.fit(loader(), val_data=loader(32, seed=1), epochs=1)
    else:
        with mx.autograd.record():
            l = est.loss(est.net(mx.nd.ones((2, 1, 8, 8))), mx.nd.zeros((2,)))
        l.backward()
        est.trainer.step(2)
    assert own_methods(est)
    # everything the old handler logged before the exception is on disk, and nothing after it
    assert steps(d1, "train_batch", "batch_loss") == list(range(9))
    assert readback.tensor_events(d1, "train_batch", "gradients/net_dense1_bias")[-1].step == 9
    assert not old._out._open  # its writers are closed


def test_the_same_handler_can_fit_again_after_a_failure(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    tb = TensorBoardHandler(d, histogram_period=1, grad_health=True, images=False)
    with pytest.raises(RuntimeError):
        est.fit(loader(), epochs=2, event_handlers=[tb, Boom(3)])  # batch 2 stepped, then raised
    est.fit(loader(), epochs=1, event_handlers=[tb])
    assert own_methods(est)
    assert steps(d, "train_batch", "batch_loss") == [0, 1, 3, 4, 5, 6]  # 2's gradients are the failed batch's
    for tag in ("gradients/net_dense1_bias", "weights/net_dense1_bias"):
        got = [e.step for e in readback.tensor_events(d, "train_batch", tag)]
        assert got == ([0, 1, 2] if tag.startswith("grad") else [0, 1]) + [3, 4, 5, 6]
    assert steps(d, "train_batch", "grad_norm/global") == [0, 1, 3, 4, 5, 6]


def test_a_new_fit_on_another_estimator_closes_the_dead_handlers_writers(tmp_path):
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    old = TensorBoardHandler(str(tmp_path / "one"), histogram_period=None, images=False)
    with pytest.raises(RuntimeError):
        est.fit(loader(), epochs=2, event_handlers=[old, Boom(3)])
    assert old._out._open
    other = make_est(make_net(ctx), ctx)
    other.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "two"))])
    assert not old._out._open and own_methods(est)
    assert steps(str(tmp_path / "one"), "train_batch", "batch_loss") == [0, 1]


def test_a_fit_on_another_thread_keeps_its_hooks(tmp_path):
    """A new fit heals dead hooks only: a fit running on another thread is alive."""
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    gate, go = threading.Event(), threading.Event()

    class Pause(BatchEnd):
        def batch_end(self, estimator, *args, **kwargs):
            if not gate.is_set():
                gate.set()
                go.wait(60)
            return False

    tb = TensorBoardHandler(str(tmp_path / "bg"), histogram_period=1, images=False)
    t = threading.Thread(target=est.fit, args=(loader(),), kwargs=dict(epochs=1, event_handlers=[tb, Pause()]))
    t.start()
    assert gate.wait(60)
    other = make_est(make_net(ctx), ctx)
    other.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "fg"))])
    assert "step" in vars(est.trainer)  # still hooked: that fit is running
    go.set()
    t.join(60)
    assert own_methods(est)
    assert [e.step for e in readback.tensor_events(str(tmp_path / "bg"), "train_batch", "gradients/net_dense1_bias")] \
        == [0, 1, 2, 3]


def test_a_new_hook_leaves_the_live_hook_of_a_fit_on_another_thread():
    """heal() before wrapping removes dead hooks only, not one whose fit runs on another thread."""
    from gluon_tb.handlers._mxnet.hooks import FitScope, heal, wrap

    class Obj:
        def step(self):
            return 1

    class Est:
        def fit(self, obj, made, go):
            made.append(wrap(obj, ("step",), lambda: None, scope=FitScope(self)))
            go.wait(60)

    obj, made, go = Obj(), [], threading.Event()
    t = threading.Thread(target=Est().fit, args=(obj, made, go))
    t.start()
    deadline = time.time() + 60
    while not made and time.time() < deadline:
        time.sleep(0.01)
    heal(obj, "step")
    assert "step" in vars(obj) and made[0].active  # its fit is running
    go.set()
    t.join(60)
    heal(obj, "step")
    assert "step" not in vars(obj) and not made[0].active and obj.step() == 1  # its fit is over


# ------------------------------------------------------------ 5. an epoch cut short, update ratio
class StopAt(BatchEnd, EpochEnd):
    priority = 0

    def __init__(self, at):
        self.at, self.n, self.stopped = at, 0, False

    def batch_end(self, estimator, *args, **kwargs):
        self.n += 1
        self.stopped = self.n == self.at
        return self.stopped

    def epoch_end(self, estimator, *args, **kwargs):
        return self.stopped


def test_histograms_of_an_epoch_cut_short(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    net = make_net(ctx)
    est = make_est(net, ctx)
    est.fit(loader(), epochs=5, event_handlers=[TensorBoardHandler(d), StopAt(6)])
    for kind in ("gradients", "weights"):
        assert [e.step for e in readback.tensor_events(d, "train_batch", f"{kind}/net_dense1_bias")] == [3, 5]
    last = readback.tensor_events(d, "train_batch", "weights/net_dense1_bias")[-1]
    from tensorboard.util import tensor_util

    counts = tensor_util.make_ndarray(last.tensor_proto)[:, 2]
    assert counts.sum() == CLASSES


class CutOnce(BatchEnd):
    """Returns True from batch_end once (training goes on: only epoch_end can stop it)."""

    priority = 0

    def __init__(self, at):
        self.at, self.n = at, 0

    def batch_end(self, estimator, *args, **kwargs):
        self.n += 1
        return self.n == self.at


@pytest.mark.parametrize("cut", [6, 2])
def test_an_epoch_cut_short_once_does_not_move_the_next_epochs_histograms(tmp_path, cut):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    est = make_est(make_net(ctx), ctx)
    est.fit(loader(), epochs=3, event_handlers=[TensorBoardHandler(d, grad_health=True), CutOnce(cut)])
    assert steps(d, "train_batch", "batch_loss") == list(range(10))  # one epoch of 4 lost 2 batches
    got = [e.step for e in readback.tensor_events(d, "train_batch", "gradients/net_dense1_bias")]
    assert got == {6: [3, 5, 9], 2: [1, 5, 9]}[cut]
    assert steps(d, "train_batch", "grad_norm/global") == got


def test_update_ratio_of_a_zero_initialised_bias_stays_bounded(tmp_path):
    d = str(tmp_path)
    ctx = [mx.cpu()]
    net = make_net(ctx)
    est = make_est(net, ctx)
    est.fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(d, histogram_period=1, grad_health=True)])
    first = readback.scalars(d, "train_batch", "update_ratio/net_dense1_bias")
    assert [s for s, _ in first] == [0, 1, 2, 3]
    assert first[0][1] == pytest.approx(1.0)  # the bias was 0: the step is the whole weight
    assert all(0 < v <= 1 for _, v in first)
    w = readback.scalars(d, "train_batch", "update_ratio/net_dense1_weight")
    assert all(0 < v < 0.5 for _, v in w)
    helpers = [t for t in threading.enumerate() if t.name == "gluon_tb-grad-health"]
    for t in helpers:
        t.join(10)
    assert not any(t.is_alive() for t in helpers)  # the check reader ends with fit


def test_a_batch_processor_without_losses_gets_no_nan_validation_loss(tmp_path):
    from mxnet.gluon.contrib.estimator import BatchProcessor

    class NoLoss(BatchProcessor):
        def evaluate_batch(self, estimator, val_batch, batch_axis=0):
            data, label = self._get_data_and_label(val_batch, estimator.context, batch_axis)
            return data, label, [estimator.val_net(x) for x in data], None

    d = str(tmp_path)
    ctx = [mx.cpu()]
    net = make_net(ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=[mx.metric.Accuracy()],
                    val_metrics=[mx.metric.Accuracy()], trainer=trainer, context=ctx,
                    batch_processor=NoLoss())
    est.fit(loader(), val_data=loader(32, seed=1), epochs=2,
            event_handlers=[TensorBoardHandler(d, histogram_period=None, images=False, graph=False)])
    assert {t for r, t in readback.tags(d) if r == "validation"} == {"epoch_accuracy"}
    assert steps(d, "validation", "epoch_accuracy") == [0, 1]


class TrainLossByHand(BatchEnd, EpochEnd):
    """Before gluon_tb: the mean per-sample training loss of each epoch, read on the host."""

    priority = 0

    def __init__(self):
        self.total, self.count, self.means = 0.0, 0, []

    def batch_end(self, estimator, *args, **kwargs):
        for l in kwargs["loss"]:
            self.total += l.asnumpy().astype(np.float64).sum()
            self.count += l.size
        return False

    def epoch_end(self, estimator, *args, **kwargs):
        self.means.append(self.total / self.count)
        self.total, self.count = 0.0, 0
        return False


@pytest.mark.parametrize("devices, batch_period", [(1, 1), (2, 1), (1, 3), (2, None)])
def test_epoch_losses_summed_in_chunks_equal_the_mean_of_every_sample(tmp_path, monkeypatch, devices, batch_period):
    """Without a Loss metric the writer thread adds up the batch losses it reads (a batch whose
    batch_loss is not due is read all the same); batches of 16, 16, 16, 16, 6 samples (two
    shapes), on one or two devices. (LossSum's chunks of 3, where a value is combined over workers.)"""
    from gluon_tb.handlers._estimator import epoch_values as _epoch_values

    monkeypatch.setattr(_epoch_values.LossSum, "CHUNK", 3)
    d = str(tmp_path)
    ctx = [mx.cpu(i) for i in range(devices)]
    est = make_est(make_net(ctx), ctx)
    train_hand, val_hand = TrainLossByHand(), ValLossByHand(loader(38, seed=1))
    est.fit(loader(70), val_data=loader(38, seed=1), epochs=2,
            event_handlers=[train_hand, val_hand,
                            TensorBoardHandler(d, histogram_period=None, images=False, graph=False,
                                               batch_period=batch_period)])
    for run, want in (("train", train_hand.means), ("validation", val_hand.means)):
        got = readback.scalars(d, run, "epoch_loss")
        assert [s for s, _ in got] == [0, 1]
        np.testing.assert_allclose([v for _, v in got], want, rtol=1e-5)
    if batch_period:
        assert [s for s, _ in readback.scalars(d, "train_batch", "batch_loss")] == list(range(0, 10, batch_period))
    else:
        assert ("train_batch", "batch_loss") not in readback.tags(d)
