"""A new user's mistakes get a clear word (an error, a warning) and never silently wrong curves.

Each test makes the mistake with a real ``Estimator.fit`` or a real constructor call and asserts the
message, and where the right thing is done instead, the exact steps read back with TensorBoard's loader.
"""
import logging
import os
import warnings

import numpy as np
import pytest
from PIL import Image

import readback
from gluon_tb.handlers import TensorBoardCallback, TensorBoardHandler
from estimator_setup import N, BATCH, loader, make_est, make_net

BATCHES = N // BATCH  # 4 a epoch
warnings.filterwarnings("ignore", message="No trainer specified")


# ------------------------------------------------------------ the same handler listed twice
def test_a_handler_listed_twice_logs_once_and_warns(tmp_path):
    h = TensorBoardHandler(str(tmp_path), histogram_period=1)
    est = make_est(make_net())
    with pytest.warns(UserWarning, match=r"TensorBoardHandler is listed 2 times in event_handlers; it logs once"):
        est.fit(loader(), epochs=2, event_handlers=[h, h])
    assert [s for s, _ in readback.scalars(str(tmp_path), "train_batch", "batch_loss")] == list(range(2 * BATCHES))
    assert [s for s, _ in readback.scalars(str(tmp_path), "train", "epoch_loss")] == [0, 1]
    steps = [e.step for e in readback.tensor_events(str(tmp_path), "train_batch", "gradients/net_dense0_weight")]
    assert steps == list(range(2 * BATCHES))


def test_a_handler_listed_once_gives_no_warning(tmp_path, recwarn):
    make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path))])
    assert not [w for w in recwarn if "listed" in str(w.message)]


# ------------------------------------------------------------ graph=True on a net that was not hybridized
def test_graph_of_a_net_not_hybridized_is_a_warning_that_says_what_to_do(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        make_est(make_net(hybridize=False)).fit(loader(), epochs=1,
                                                event_handlers=[TensorBoardHandler(str(tmp_path))])
    said = [r for r in caplog.records if "graph is not logged" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "call net.hybridize() before fit" in said[0].getMessage()


# ------------------------------------------------------------ Keras's argument names
@pytest.mark.parametrize("cls", [TensorBoardHandler, TensorBoardCallback])
@pytest.mark.parametrize("kwargs, words", [
    ({"log_dir": "logs"}, ["'log_dir'", "pass logdir"]),
    ({"histogram_freq": 1}, ["'histogram_freq'", "histogram_period", "\"epoch\""]),
    ({"update_freq": "epoch"}, ["'update_freq'", "batch_period"]),
    ({"write_graph": False}, ["'write_graph'", "pass graph"]),
    ({"write_images": True}, ["'write_images'", "conv_filters=True"]),
    ({"batch_perod": 2}, ["'batch_perod'", "did you mean 'batch_period'?"]),
])
def test_other_tools_argument_names_name_ours(tmp_path, cls, kwargs, words):
    args = () if "log_dir" in kwargs else (str(tmp_path),)
    with pytest.raises(TypeError) as e:
        cls(*args, **kwargs)
    assert str(e.value).startswith(f"{cls.__name__}() has no argument")
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize("kwargs, words, not_words", [
    ({"write_images": True}, ["conv_filters=True", "Convolution", "no input images"], ["Conv2D", "images="]),
    ({"hparams": {"lr": 0.1}}, ["TensorBoardHandler's", "add_hparams"], ["did you mean"]),
    ({"images": True}, ["TensorBoardHandler's", "add_images"], ["did you mean"]),
    ({"max_images": 4}, ["TensorBoardHandler's"], ["did you mean"]),
])
def test_the_module_callback_points_to_what_it_has(tmp_path, kwargs, words, not_words):
    """The Estimator handler's own arguments and hints name things the Module callback lacks."""
    with pytest.raises(TypeError) as e:
        TensorBoardCallback(str(tmp_path), **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    for w in not_words:
        assert w not in str(e.value), (w, str(e.value))


def test_the_checked_constructor_keeps_its_signature():
    import inspect

    assert list(inspect.signature(TensorBoardHandler).parameters)[:2] == ["logdir", "batch_period"]
    assert TensorBoardHandler.__init__.__doc__ == TensorBoardHandler.__init__.__wrapped__.__doc__


# ------------------------------------------------------------ normalised inputs in first_batch
def test_first_batch_of_normalised_inputs_is_rescaled_with_a_warning(tmp_path):
    import io

    from mxnet import gluon

    rs = np.random.RandomState(0)
    x = rs.randn(N, 1, 8, 8).astype("float32")  # mean 0, std 1: clipped, 81% would be black or white
    y = rs.randint(0, 4, size=N).astype("float32")
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)
    with pytest.warns(UserWarning, match=r"image 'first_batch': float values span .* outside \[0, 1\]; rescaled"):
        make_est(make_net()).fit(data, epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path), max_images=1)])
    [e] = readback.tensor_events(str(tmp_path), "train", "first_batch")
    px = np.asarray(Image.open(io.BytesIO(e.tensor_proto.string_val[2]))).astype(float)
    first = x[0, 0]
    want = np.rint((first - first.min()) / (first.max() - first.min()) * 255)
    np.testing.assert_allclose(px.reshape(want.shape), want, atol=1)


# ------------------------------------------------------------ a log directory used again
def test_a_second_training_in_the_same_logdir_is_told_its_curves_overlay_the_first(tmp_path, caplog):
    """Re-running a script (or a loop over settings) with one logdir drew two trainings on the same
    curves without a word. The same handler's second fit continues its steps: nothing to say; a
    training that continues (initial_epoch) is told where it starts instead."""
    logdir = str(tmp_path / "same")

    def said():
        return [r.getMessage() for r in caplog.records if "already holds the events" in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="gluon_tb"):
        h = TensorBoardHandler(logdir)
        est = make_est(make_net())
        est.fit(loader(), epochs=1, event_handlers=[h])
        est.fit(loader(), epochs=1, event_handlers=[h])  # the same handler: steps go on
        assert said() == []
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(logdir)])
        assert said() == [f"gluon_tb: {tmp_path / 'same' / 'train'} already holds the events of an earlier "
                          "training, and this one starts again at epoch 0, batch 0: TensorBoard's default loader "
                          "reads the step going back as a restart and shows only this training's points, its "
                          "Python loader (--load_fast=false) both on the same curves. Give each training its own "
                          "logdir (logs/<name or time>), or delete "
                          "the old one; to continue that training, pass initial_epoch= and initial_step="]
        assert [r.levelno for r in caplog.records if "already holds" in r.getMessage()] == [logging.WARNING]
        caplog.clear()
        make_est(make_net()).fit(loader(), epochs=1,
                                 event_handlers=[TensorBoardHandler(logdir, initial_epoch=3, initial_step=12)])
        assert said() == [] and any("continuing at epoch 3, batch 12" in r.getMessage() for r in caplog.records)
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "new"))])
        assert said() == []
    assert [s for s, _ in readback.scalars(logdir, "train", "epoch_loss")][-1] == 3  # resumed at epoch 3


def test_a_module_training_in_a_used_logdir_is_told_too(tmp_path, caplog):
    import mxnet as mx

    from test_module_profile import symbol

    logdir = str(tmp_path)
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        for _ in range(2):
            it = mx.io.NDArrayIter(np.random.rand(N, 5).astype("float32"), np.random.randint(0, 3, N).astype("float32"),
                                   BATCH, label_name="softmax_label")
            mod = mx.mod.Module(symbol(), context=mx.cpu())
            with TensorBoardCallback(logdir) as cb:
                mod.fit(it, num_epoch=1, optimizer="sgd", initializer=mx.init.Xavier(), **cb.fit_callbacks())
    assert len([r for r in caplog.records if "already holds the events of an earlier training" in r.getMessage()]) == 1


# ------------------------------------------------------------ params= that matches nothing
def test_params_that_match_no_parameter_are_a_warning_not_silence(tmp_path, caplog):
    """A typo in params= logged no histogram and said nothing."""
    def said():
        return [r.getMessage() for r in caplog.records if "matches none of the net's" in r.getMessage()]

    def no_param(name):
        return False

    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "a"),
                                                                                         params="desne")])
        [msg] = said()
        assert msg.startswith("gluon_tb: params='desne' matches none of the net's ") and msg.endswith(
            "parameters with a gradient (net_conv0_weight, net_conv0_bias, net_dense0_weight, net_dense0_bias); "
            "no gradient or weight histograms are logged"), msg
        caplog.clear()
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "b"),
                                                                                         params=no_param)])
        assert [m.split(" matches")[0] for m in said()] == ["gluon_tb: params=no_param"]
        caplog.clear()
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "c"),
                                                                                         params="dense")])
        assert said() == []
    assert {t for r, t in readback.tags(str(tmp_path / "a")) if "/" in t and r == "train_batch"} == set()
    assert {t for r, t in readback.tags(str(tmp_path / "c")) if t.startswith("weights/")} == {
        "weights/net_dense0_weight", "weights/net_dense0_bias"}


def test_module_params_that_match_no_parameter_are_a_warning(tmp_path, caplog):
    import mxnet as mx

    from test_module_profile import symbol

    it = mx.io.NDArrayIter(np.random.rand(N, 5).astype("float32"), np.random.randint(0, 3, N).astype("float32"),
                           BATCH, label_name="softmax_label")
    mod = mx.mod.Module(symbol(), context=mx.cpu())
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with TensorBoardCallback(str(tmp_path), params="nomatch") as cb:
            mod.fit(it, num_epoch=2, optimizer="sgd", initializer=mx.init.Xavier(), **cb.fit_callbacks())
    said = [r.getMessage() for r in caplog.records if "matches none of the net's" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("gluon_tb: params='nomatch' matches none"), said


# ------------------------------------------------------------ a failed fit does not fail the next one
FAILED_THEN_GOOD = """
import sys, warnings
import mxnet as mx, numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from gluon_tb import TensorBoardHandler
warnings.simplefilter("ignore")

kept = []  # the notebook keeps the failed estimator (its trainer still wrapped by the dead handler)

def fit(logdir):
    rs = np.random.RandomState(0)
    x = rs.randn(64, 20).astype("float32")
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, rs.randint(0, 4, 64).astype("float32")), batch_size=16)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(4))
    net.initialize()
    net.hybridize()
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    kept.append(est)
    est.fit(data, epochs=1, event_handlers=[TensorBoardHandler(logdir)])

try:
    fit(sys.argv[1])
except OSError as e:
    print("fit1 failed", type(e).__name__)
fit(sys.argv[2])
print("fit2 ok")
"""


def test_a_fit_that_failed_on_a_bad_logdir_does_not_fail_the_next_fit(tmp_path):
    """A logdir whose run directories are files fails its fit at the first write; the next fit
    (new net, new estimator, a good logdir) raised the dead handler's error from its train_begin,
    where the earlier handler is closed. (Its runs share one writer, whose one error that fit
    raised: closing it now raises nothing; a close that raises is the next test's.)"""
    import subprocess
    import sys

    bad = tmp_path / "bad"
    bad.mkdir()
    for run in ("train", "train_batch", "validation"):
        (bad / run).write_text("not a directory")
    good = tmp_path / "good"
    p = subprocess.run([sys.executable, "-c", FAILED_THEN_GOOD, str(bad), str(good)], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "fit1 failed FileExistsError" in p.stdout and "fit2 ok" in p.stdout
    assert "Traceback" not in p.stderr
    assert [s for s, _ in readback.scalars(str(good), "train", "epoch_loss")] == [0]


@pytest.mark.parametrize("where", ["afile", "afile/sub/run"])
def test_a_logdir_that_is_a_file_is_an_error_before_training(tmp_path, monkeypatch, where):
    """Found at the first write, it cost a handler's user an epoch of training: now every entry
    point refuses it at once, naming the argument and the file."""
    import gluon_tb
    from gluon_tb import SummaryWriter

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a directory")
    said = "it is a file" if where == "afile" else f"{str(tmp_path / 'afile')!r} is a file"
    for make in (TensorBoardHandler, TensorBoardCallback, SummaryWriter, gluon_tb.autolog):
        with pytest.raises(ValueError) as e:
            make(where)
        assert str(e.value) == (f"logdir must be a directory (or a path where one can be made), got {where!r}: "
                                f"{said}"), make
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing made beside it


def test_closing_the_handler_of_a_fit_that_raised_says_so_when_that_fails_too(caplog):
    """The next fit's hooks close a dead fit's handler; its close failing is a warning, not the
    next fit's error."""
    from gluon_tb.handlers._mxnet.hooks import FitScope, wrap

    class Obj:
        def step(self):
            return 1

    def close():
        raise NotADirectoryError("cannot create an event file in afile/train")

    scope = FitScope(object())  # no fit on the stack: alive until end()
    obj = Obj()
    wrap(obj, ("step",), lambda: None, scope=scope, on_dead=close)
    scope.end()
    with caplog.at_level("WARNING", logger="gluon_tb"):
        assert obj.step() == 1  # the first call after that fit removes the hook and closes
    assert "step" not in vars(obj)
    assert ["closing the handler of an earlier fit that raised failed too (NotADirectoryError: cannot create "
            "an event file in afile/train)" in r.getMessage() for r in caplog.records] == [True]


def test_first_batch_of_channels_last_uint8_images_is_logged(tmp_path):
    """MXNet's vision datasets give N×H×W×C uint8 without ToTensor: no first_batch was logged, and
    the only word was at INFO."""
    import io

    from mxnet import gluon

    rs = np.random.RandomState(0)
    x = rs.randint(0, 256, size=(N, 8, 8, 3)).astype("uint8")
    y = rs.randint(0, 4, size=N).astype("float32")
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Flatten(), gluon.nn.Dense(4))
    net.initialize()
    raw = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)

    class Raw(gluon.contrib.estimator.BatchProcessor):  # trains on floats, hands the handler the uint8 batch
        def fit_batch(self, estimator, train_batch, batch_axis=0):
            return super().fit_batch(estimator, [train_batch[0].astype("float32") / 255, train_batch[1]], batch_axis)

    make_est(net, batch_processor=Raw()).fit(raw, epochs=1,
                                             event_handlers=[TensorBoardHandler(str(tmp_path), max_images=1)])
    [e] = readback.tensor_events(str(tmp_path), "train", "first_batch")
    px = np.asarray(Image.open(io.BytesIO(e.tensor_proto.string_val[2])))
    np.testing.assert_array_equal(px, x[0])  # uint8 as is, channels last


def test_autolog_names_ours_for_keras_options():
    import gluon_tb

    with pytest.raises(TypeError, match=r"autolog\(\) has no option 'histogram_freq' .*pass histogram_period"):
        gluon_tb.autolog("logs", histogram_freq=1)


def test_the_handler_closes_like_the_module_callback(tmp_path):
    with TensorBoardHandler(str(tmp_path)) as h:  # a context manager, with close(), as TensorBoardCallback
        make_est(make_net()).fit(loader(), epochs=1, event_handlers=[h])
    h.close()  # twice is fine
    assert [s for s, _ in readback.scalars(str(tmp_path), "train", "epoch_loss")] == [0]


# ------------------------------------------------------------ one error vocabulary (issue 26)
# The arguments SummaryWriter, TensorBoardHandler and TensorBoardCallback share: the same mistake
# raises the same type in all three (TypeError: a wrong type; ValueError: a wrong value of the
# right type), with the argument's name in the message.
SHARED_MISTAKES = [
    ("flush_secs", "2", TypeError),
    ("flush_secs", [2], TypeError),
    ("flush_secs", True, TypeError),  # a bool is not a number of seconds
    ("flush_secs", None, TypeError),
    ("flush_secs", 0, ValueError),
    ("flush_secs", -1.5, ValueError),
    ("flush_secs", float("nan"), ValueError),
    ("logdir", 123, TypeError),
    ("logdir", b"logs", TypeError),
    ("logdir", "", ValueError),
    ("storage_options", ["key"], TypeError),
    ("storage_options", {"key": "k"}, ValueError),  # a dict, but for a local logdir
]


@pytest.mark.parametrize("name, bad, error", SHARED_MISTAKES,
                         ids=[f"{n}={b!r}" for n, b, _ in SHARED_MISTAKES])
def test_a_shared_argument_raises_the_same_type_in_the_writer_and_both_adapters(tmp_path, name, bad, error):
    from gluon_tb import SummaryWriter

    kwargs = {"logdir": str(tmp_path / "run"), name: bad}
    raised = {}
    for cls in (SummaryWriter, TensorBoardHandler, TensorBoardCallback):
        with pytest.raises(Exception) as e:
            cls(**kwargs)
        raised[cls.__name__] = type(e.value)
        assert name in str(e.value), (cls.__name__, str(e.value))
    assert raised == dict.fromkeys(raised, error)
    assert not (tmp_path / "run").exists()


def test_the_adapters_need_a_logdir_the_writer_has_a_default(tmp_path, monkeypatch):
    """SummaryWriter() writes under runs/ as tensorboardX's does; the handler and the callback,
    whose runs a training names, refuse logdir=None naming it."""
    from gluon_tb import SummaryWriter

    monkeypatch.chdir(tmp_path)
    for cls in (TensorBoardHandler, TensorBoardCallback):
        with pytest.raises(TypeError, match="logdir"):
            cls(None)
    SummaryWriter(None).close()
    assert os.listdir(tmp_path) == ["runs"]
