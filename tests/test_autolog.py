"""``gluon_tb.autolog``: every Estimator.fit and Module.fit logs, each to its own run, read back."""
import json
import os
import re
import subprocess
import sys
import threading

import mxnet as mx
import pytest
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.module import BaseModule

import gluon_tb
import readback
from gluon_tb.handlers import TensorBoardCallback, TensorBoardHandler
from estimator_setup import loader, make_est, make_net
from test_module_callback import iters, module
from repo_paths import ROOT, SUPPORT

EST_FIT, MOD_FIT = Estimator.__dict__["fit"], BaseModule.__dict__["fit"]


@pytest.fixture
def autolog():
    """``gluon_tb.autolog``, undone after the test whatever happened."""
    yield gluon_tb.autolog
    gluon_tb.autolog(disable=True)
    assert Estimator.__dict__["fit"] is EST_FIT and BaseModule.__dict__["fit"] is MOD_FIT


def runs(logdir):
    return sorted(os.listdir(logdir))


def steps(logdir, run, tag):
    return [s for s, _ in readback.scalars(logdir, run, tag)]


def values(logdir, run, tag):
    return [v for _, v in readback.scalars(logdir, run, tag)]


def test_a_script_that_only_calls_autolog_logs_both_apis(tmp_path):
    """The script imports gluon_tb only for the autolog line; each fit gets its own run directory,
    the Module's positional callbacks are kept, and after ``disable=True`` nothing more is logged."""
    logdir = str(tmp_path / "logs")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.join(SUPPORT, "autolog_script.py"), logdir], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    est, mod = runs(logdir)
    assert re.fullmatch(r"\d{8}-\d{6}-fit1", est) and re.fullmatch(r"\d{8}-\d{6}-fit2", mod)
    assert readback.tags(logdir) == {
        (f"{est}/train", t) for t in ["__run_graph__", "epoch_accuracy", "epoch_loss", *readback.EPOCH_EXTRAS]} | {
        (f"{est}/train_batch", "batch_accuracy"), (f"{est}/train_batch", "batch_loss")} | {
        (f"{mod}/train", t) for t in ["__run_graph__", "epoch_accuracy", *readback.EPOCH_EXTRAS]} | {
        (f"{mod}/train_batch", "batch_accuracy"), (f"{mod}/validation", "epoch_accuracy")}
    # the options reached both: batch_period=2, histogram_period=None (no weights/), images=False
    assert steps(logdir, f"{est}/train_batch", "batch_loss") == [0, 2, 4, 6]
    assert steps(logdir, f"{mod}/train_batch", "batch_accuracy") == [0, 2, 4, 6]
    assert steps(logdir, f"{est}/train", "epoch_accuracy") == [0, 1]
    assert values(logdir, f"{est}/train", "epoch_accuracy") == pytest.approx(seen["estimator"][:2])
    assert values(logdir, f"{mod}/train", "epoch_accuracy") == pytest.approx(seen["module_train"][:2])
    assert steps(logdir, f"{mod}/validation", "epoch_accuracy") == [0, 1]
    assert values(logdir, f"{mod}/validation", "epoch_accuracy") == pytest.approx(seen["module_val"][:2])
    assert seen["module_epochs"] == [0, 1, 0]  # the script's own epoch_end_callback ran in every fit


def test_options_are_checked_before_anything_is_patched(tmp_path, autolog):
    with pytest.raises(TypeError, match=r"unexpected option 'logdri': options are the keyword arguments of "
                                        r"TensorBoardHandler and TensorBoardCallback \(batch_period, "):
        autolog(str(tmp_path), logdri="x")
    with pytest.raises(TypeError, match=r"no option 'log_dir' \(another tool's name\): pass logdir"):
        autolog(str(tmp_path), log_dir="x")
    with pytest.raises(ValueError, match="batch_period"):
        autolog(str(tmp_path), batch_period=0)
    with pytest.raises(ValueError, match="max_images"):  # the handler's own option: checked by the handler
        autolog(str(tmp_path), max_images=0)
    with pytest.raises(TypeError, match="logdir is required"):
        autolog()
    with pytest.raises(TypeError, match="disable must be a bool, got str 'yes'"):
        autolog(str(tmp_path), disable="yes")
    with pytest.raises(TypeError, match=r"autolog\(disable=True\) takes no logdir or options, got logdir"):
        autolog(str(tmp_path), disable=True)
    assert Estimator.__dict__["fit"] is EST_FIT and BaseModule.__dict__["fit"] is MOD_FIT
    assert runs(tmp_path) == []


def test_enabling_twice_wraps_once_and_disable_restores(tmp_path, autolog):
    autolog(str(tmp_path / "a"))
    wrapper = Estimator.__dict__["fit"]
    assert wrapper is not EST_FIT and wrapper.__wrapped__ is EST_FIT
    autolog(str(tmp_path / "b"), batch_period=2)  # the new options, the same wrapper
    assert Estimator.__dict__["fit"] is wrapper and BaseModule.__dict__["fit"].__wrapped__ is MOD_FIT
    train, val = iters()
    module().fit(train, eval_data=val, num_epoch=1, optimizer_params={"learning_rate": 0.1})
    assert not os.path.exists(tmp_path / "a")
    (run,) = runs(tmp_path / "b")
    assert steps(str(tmp_path / "b"), f"{run}/train_batch", "batch_accuracy") == [0, 2]
    autolog(disable=True)
    assert Estimator.__dict__["fit"] is EST_FIT and BaseModule.__dict__["fit"] is MOD_FIT
    autolog(disable=True)  # twice: nothing to undo


def test_a_fit_that_has_its_own_handler_is_left_alone(tmp_path, autolog):
    """No second handler, so no point twice: the script's own handler and callback log as without autolog."""
    auto, own = tmp_path / "auto", tmp_path / "own"
    autolog(str(auto))
    net = make_net()
    make_est(net).fit(loader(), epochs=2, event_handlers=[TensorBoardHandler(str(own / "est"), histogram_period=None)])
    assert steps(str(own / "est"), "train_batch", "batch_loss") == list(range(8))
    assert steps(str(own / "est"), "train", "epoch_loss") == [0, 1]
    for name, slots in [("all", lambda cb: cb.fit_callbacks()),
                        ("eval", lambda cb: dict(eval_end_callback=cb.eval_end))]:
        train, val = iters()
        cb = TensorBoardCallback(str(own / name), histogram_period=None, graph=False)
        module().fit(train, eval_data=val, num_epoch=2, optimizer_params={"learning_rate": 0.1}, **slots(cb))
        cb.close()
    assert readback.tags(str(own / "all")) == {("train_batch", "batch_accuracy"), ("train", "epoch_accuracy"),
                                               ("validation", "epoch_accuracy")} | {
        ("train", t) for t in readback.EPOCH_EXTRAS}
    assert steps(str(own / "all"), "train_batch", "batch_accuracy") == list(range(8))
    # a callback only in eval_end_callback (a bound method) is seen too
    assert readback.tags(str(own / "eval")) == {("validation", "epoch_accuracy")}
    assert steps(str(own / "eval"), "validation", "epoch_accuracy") == [0, 1]
    assert not auto.exists()


def test_concurrent_fits_each_get_their_own_run(tmp_path, autolog):
    autolog(str(tmp_path), histogram_period=None, graph=False)
    errors = []

    def train():
        try:
            t, v = iters()
            module().fit(t, eval_data=v, num_epoch=2, optimizer_params={"learning_rate": 0.1})
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=train) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    names = runs(tmp_path)
    assert sorted(n.rsplit("-", 1)[1] for n in names) == ["fit1", "fit2", "fit3"]
    assert readback.tags(str(tmp_path)) == {(f"{n}/{r}", t) for n in names for r, t in [
        ("train_batch", "batch_accuracy"), ("train", "epoch_accuracy"), ("validation", "epoch_accuracy"),
        *[("train", e) for e in readback.EPOCH_EXTRAS]]}
    for n in names:
        assert steps(str(tmp_path), f"{n}/train_batch", "batch_accuracy") == list(range(8))
        assert steps(str(tmp_path), f"{n}/validation", "epoch_accuracy") == [0, 1]


def test_a_fit_that_raises_closes_its_handler(tmp_path, autolog):
    autolog(str(tmp_path), histogram_period=None)

    def crash(param):
        if param.nbatch == 1:
            raise RuntimeError("stop")

    train, val = iters()
    with pytest.raises(RuntimeError, match="stop"):
        module().fit(train, eval_data=val, num_epoch=2, batch_end_callback=crash)
    net = make_net()
    with pytest.raises(ValueError, match="DataLoader"):
        make_est(net).fit([1, 2], epochs=1)
    (first,) = runs(tmp_path)  # the Estimator's fit raised before training: no empty run directory
    assert first.endswith("-fit1")
    assert steps(str(tmp_path), f"{first}/train_batch", "batch_accuracy") == [0, 1]  # on disk when fit raised


def test_grad_health_stop_goes_to_estimator_fits_and_module_fits_warn(tmp_path, autolog):
    """GradHealth(stop=...) is refused by the Module callback (a callback cannot stop Module.fit):
    autolog gives Module fits the same detectors without stop, and the Estimator's keep it."""
    from gluon_tb.handlers import GradHealth

    health = GradHealth(stop=["exploding"], explode_factor=50.0)
    autolog(str(tmp_path / "logs"), grad_health=health)
    from gluon_tb import _autolog

    config = _autolog._config
    est, mod = config.options["estimator"]["grad_health"], config.options["module"]["grad_health"]
    assert est is health and est.stop == frozenset({"exploding"})
    assert mod.stop == frozenset() and mod.explode_factor == 50.0 and health.stop == frozenset({"exploding"})


def test_fits_wrapped_by_another_tool_still_log(tmp_path):
    """Another tool (a profiler, an experiment tracker) had wrapped fit before autolog: with a plain
    ``(self, *args, **kwargs)`` wrapper, autolog bound the call to that signature, and the slots it
    filled were dropped: an empty run directory, no warning. With a functools.wraps wrapper that adds
    a callback by keyword, a slot autolog passed by position clashed ("multiple values")."""
    calls = []

    def plain(original):
        def fit(self, *args, **kwargs):  # no functools.wraps: the signature says nothing
            return original(self, *args, **kwargs)
        return fit

    def adds_a_callback(original):
        import functools

        @functools.wraps(original)
        def fit(self, *args, **kwargs):
            extra = kwargs.pop("batch_end_callback", None)
            extra = [] if extra is None else (list(extra) if isinstance(extra, (list, tuple)) else [extra])
            return original(self, *args, batch_end_callback=extra + [lambda p: calls.append(p.nbatch)], **kwargs)
        return fit

    for name, wrap_fit in [("plain", plain), ("keyword", adds_a_callback)]:
        logdir = tmp_path / name
        Estimator.fit, BaseModule.fit = wrap_fit(EST_FIT), wrap_fit(MOD_FIT)
        try:
            gluon_tb.autolog(str(logdir), histogram_period=None)
            make_est(make_net()).fit(loader(), epochs=2) if name == "plain" else None
            train, val = iters()
            module().fit(train, val, "acc", None, None, num_epoch=2, optimizer_params={"learning_rate": 0.1})
        finally:
            gluon_tb.autolog(disable=True)
            Estimator.fit, BaseModule.fit = EST_FIT, MOD_FIT
        made = runs(str(logdir))
        mod = made[-1]
        assert steps(str(logdir), f"{mod}/train", "epoch_accuracy") == [0, 1]
        assert steps(str(logdir), f"{mod}/train_batch", "batch_accuracy") == list(range(8))
        if name == "plain":
            assert len(made) == 2 and steps(str(logdir), f"{made[0]}/train", "epoch_loss") == [0, 1]
    assert calls == list(range(4)) * 2  # the other tool's callback ran beside ours
