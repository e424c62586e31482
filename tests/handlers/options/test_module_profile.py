"""``TensorBoardCallback(profile_batch=)``: MXNet's profiler over global batches of a real ``Module.fit``,
read back from the XSpace file and the ``profile/operator_stats`` text.

Which batches were profiled is seen two ways: a test callback placed *before* the TensorBoardCallback
runs one operator of its own at each batch's end, a different one for each global batch (``sin`` for
0, ``cos`` for 1, ...; MXNet profiles an operator when it is queued while the profiler runs: from the
batch_end of ``start - 1``, after the TensorBoardCallback, to the batch_end of ``stop``), and the
model's operators are counted (2 FullyConnected forward and 2 backward per training batch, 2 forward
per validation batch).
"""
import collections
import gc
import glob
import logging
import os
import re

import mxnet as mx
import numpy as np
import pytest

import readback
from gluon_tb import SummaryWriter
from gluon_tb.handlers import TensorBoardCallback
from test_profile import decode_xspace, fail, profiler_calls  # noqa: F401 - a fixture


@pytest.fixture(autouse=True)
def collect_garbage_here():
    """Free the Modules of earlier tests (kept in reference cycles by the tracebacks of the
    injected failures) on this thread, between tests. Left to the cyclic collector, they were
    freed wherever it ran next, once on the writer thread while MXNet ran this test's update,
    and MXNet aborted the process inside Executor.__del__ (2 runs in 3 of this file with
    test_profile.py, with the profiler switched on and off around them)."""
    gc.collect()
    yield
    gc.collect()

N, BATCH, CLASSES, NVAL = 64, 16, 3, 32  # 4 training batches an epoch, 2 validation batches


def symbol():
    h = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=8, name="fc1"), act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc2"), name="softmax")


def iters():
    rs = np.random.RandomState(0)
    x, y = rs.randn(N, 5).astype("float32"), rs.randint(0, CLASSES, N).astype("float32")
    xv, yv = rs.randn(NVAL, 5).astype("float32"), rs.randint(0, CLASSES, NVAL).astype("float32")
    return (mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label"),
            mx.io.NDArrayIter(xv, yv, BATCH, label_name="softmax_label"))


MARKS = ["sin", "cos", "tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "expm1", "log1p",
         "cbrt", "square", "reciprocal", "degrees", "radians"]  # the mark of global batch k: MARKS[k]


class BatchMarks:
    """A batch_end callback: operator ``MARKS[k]`` at the end of global batch ``k``."""

    def __init__(self, first=0):
        self.k = first
        self.x = mx.nd.ones((1,))

    def __call__(self, param):
        getattr(mx.nd, MARKS[self.k])(self.x)
        self.k += 1


def fit(cb, epochs=2, eval_data=True, begin_epoch=0, marks=None, close=True, eval_end=True):
    train, val = iters()
    mod = mx.mod.Module(symbol(), context=mx.cpu())
    mod.fit(train, eval_data=val if eval_data else None, num_epoch=epochs, begin_epoch=begin_epoch,
            optimizer="sgd", optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
            batch_end_callback=[marks, cb] if marks else cb, epoch_end_callback=cb.epoch_end,
            eval_end_callback=cb.eval_end if eval_end else None)
    if close:
        cb.close()


def profile_files(logdir):
    return glob.glob(os.path.join(str(logdir), "train_batch", "plugins", "profile", "*", "*.xplane.pb"))


def trace(logdir):
    """``(ops, marks)``: how many times each operator ran on the device line (a bulk segment
    ``[FullyConnected,Activation,...]`` counts each of its operators), and the marked batches."""
    [f] = profile_files(logdir)
    _, planes = decode_xspace(open(f, "rb").read())
    ops = collections.Counter()
    for ln in planes[0]["lines"]:
        if ln["name"].startswith(("cpu/0 /", "pid 0 /")):
            for name, _, _ in ln["events"]:
                ops.update(name.strip("[]").split(","))
    return ops, {k for k, op in enumerate(MARKS) if ops[op]}


def stats(logdir):
    acc = readback.multiplexer(str(logdir)).GetAccumulator("train_batch")
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("profile/operator_stats")]


def assert_profiled(logdir, start, stop, val_batches=0):
    ops, marks = trace(logdir)
    n = stop - start + 1
    assert marks == set(range(start, stop + 1))
    assert ops["FullyConnected"] == 2 * n + 2 * val_batches
    assert ops["_backward_FullyConnected"] == 2 * n
    [(step, text)] = stats(logdir)
    assert step == stop and f"global batches {start} to {stop}" in text
    assert "FullyConnected" in text


# ------------------------------------------------------------ the range
@pytest.mark.parametrize("profile_batch, start, stop, eval_data", [
    ((1, 2), 1, 2, True),   # inside the first epoch: started at batch_end of 0
    (6, 6, 6, True),        # an int: that one batch
    ((4, 5), 4, 5, True),   # the first batches of epoch 1: started at eval_end, after the validation
    ((4, 5), 4, 5, False),  # the same without validation: started at epoch_end
])
def test_profiles_exactly_the_range(tmp_path, profiler_calls, profile_batch, start, stop, eval_data):
    fit(TensorBoardCallback(str(tmp_path), profile_batch=profile_batch), eval_data=eval_data, marks=BatchMarks())
    assert profiler_calls == ["run", "stop"]
    assert_profiled(tmp_path, start, stop)  # no validation batch in the profile
    # the batch scalars count the same global batches
    assert [s for s, _ in readback.scalars(str(tmp_path), "train_batch", "batch_accuracy")] == list(range(8))


def test_a_range_over_an_epoch_end_holds_that_epochs_validation(tmp_path, profiler_calls):
    """As with the Estimator: what runs between batches 3 and 4 (epoch 0's validation) is profiled."""
    fit(TensorBoardCallback(str(tmp_path), profile_batch=(3, 4)), marks=BatchMarks())
    assert_profiled(tmp_path, 3, 4, val_batches=NVAL // BATCH)


def test_a_range_past_the_end_of_fit_ends_with_it(tmp_path, profiler_calls):
    cb = TensorBoardCallback(str(tmp_path), profile_batch=(6, 100))
    fit(cb, marks=BatchMarks(), close=False)
    assert profiler_calls == ["run", "stop"]  # before close
    assert_profiled(tmp_path, 6, 7)  # stopped at the last batch's end: not the last validation
    cb.close()
    fit(cb)  # once per callback: a second fit (batches 8..15) is not profiled
    assert profiler_calls == ["run", "stop"] and len(profile_files(tmp_path)) == 1


@pytest.fixture
def every_profiler_call(profiler_calls, monkeypatch):
    """``profiler_calls`` and every set_config, dump, dumps, pause and resume too."""
    for name in ("set_config", "dump", "dumps", "pause", "resume"):
        real = getattr(mx.profiler, name)
        monkeypatch.setattr(mx.profiler, name, lambda *a, _n=name, _f=real, **k: (profiler_calls.append(_n),
                                                                                   _f(*a, **k))[1])
    return profiler_calls


def test_no_profiler_call_outside_the_range(tmp_path, every_profiler_call):
    fit(TensorBoardCallback(str(tmp_path / "never"), profile_batch=(50, 60)))
    assert every_profiler_call == [] and profile_files(tmp_path / "never") == []
    fit(TensorBoardCallback(str(tmp_path / "once"), profile_batch=2))
    assert every_profiler_call == ["set_config", "run", "stop", "dump", "dumps", "set_config"]


# ------------------------------------------------------------ batch 0 and resumed fits
def test_profile_batch_0_is_off_as_in_keras(tmp_path, profiler_calls):
    fit(TensorBoardCallback(str(tmp_path), profile_batch=0), epochs=1)
    assert profiler_calls == [] and profile_files(tmp_path) == []


@pytest.mark.parametrize("value", [(0, 3), [0, 0]])
def test_start_at_batch_0_is_refused(value):
    with pytest.raises(ValueError) as e:
        TensorBoardCallback("x", profile_batch=value)
    msg = str(e.value)
    for words in ("profile_batch", "Module.fit calls no callback before its first batch", "start at 1",
                  f"got {value!r}"):
        assert words in msg, (words, msg)


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), ((3, 2), ValueError), ("2", TypeError),
                                      (True, TypeError), ((1.0, 2), TypeError)])
def test_profile_batch_type_and_value_errors(bad, exc):
    with pytest.raises(exc, match="profile_batch must be"):
        TensorBoardCallback("x", profile_batch=bad)


def test_resumed_fit_starting_in_the_range_profiles_from_its_next_batch(tmp_path, profiler_calls, caplog):
    # begin_epoch=1: global batches 4..11, and Module.fit calls nothing before batch 4
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        fit(TensorBoardCallback(str(tmp_path), profile_batch=(4, 5)), epochs=3, begin_epoch=1,
            marks=BatchMarks(first=4))
    warned = [r.getMessage() for r in caplog.records if "profile_batch" in r.getMessage()]
    assert warned == ["gluon_tb: profile_batch: global batch 4 is the first of this fit, and Module.fit calls "
                      "no callback before its first batch; profiling from batch 5"]
    assert profiler_calls == ["run", "stop"]
    assert_profiled(tmp_path, 5, 5)


def test_a_range_the_fit_never_reaches_is_a_warning(tmp_path, profiler_calls, caplog):
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        fit(TensorBoardCallback(str(tmp_path), profile_batch=(100, 101)), epochs=2)
    said = [r.getMessage() for r in caplog.records if "profile_batch" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("gluon_tb: profile_batch=(100, 101) was not reached: this "
                                                 "fit's last global batch was "), said
    assert profiler_calls == [] and profile_files(tmp_path) == []


def test_resumed_fit_whose_first_batch_is_the_whole_range(tmp_path, profiler_calls, caplog):
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        fit(TensorBoardCallback(str(tmp_path), profile_batch=4), epochs=2, begin_epoch=1)
    assert profiler_calls == [] and profile_files(tmp_path) == []
    assert re.search(r"global batch 4 is the first of this fit.*; nothing is profiled", caplog.text)


def test_without_eval_end_a_range_after_an_epoch_end_starts_a_batch_late(tmp_path, profiler_calls, caplog):
    """With eval_data the profiler waits for eval_end (after the validation); without that callback
    it is started at the next batch's end, with one warning that says what to pass."""
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        fit(TensorBoardCallback(str(tmp_path), profile_batch=(4, 5)), marks=BatchMarks(), eval_end=False)
    assert re.search(r"global batch 4 came after an epoch's end without a callback \(pass cb.epoch_end as "
                     r"epoch_end_callback and cb.eval_end as eval_end_callback\); profiling from batch 5", caplog.text)
    assert_profiled(tmp_path, 5, 5)


def test_without_bulk_execution_each_operator_is_an_event(tmp_path, profiler_calls, monkeypatch):
    monkeypatch.setenv("MXNET_EXEC_BULK_EXEC_TRAIN", "0")  # read when fit binds the module
    fit(TensorBoardCallback(str(tmp_path), profile_batch=(1, 2)))
    [f] = profile_files(tmp_path)
    _, planes = decode_xspace(open(f, "rb").read())
    names = collections.Counter(e[0] for ln in planes[0]["lines"] if ln["name"].startswith(("cpu/0 /", "pid 0 /"))
                                for e in ln["events"])
    assert names["FullyConnected"] == names["_backward_FullyConnected"] == 4
    assert not [n for n in names if n.startswith("[")]


def test_second_fit_of_the_same_callback_counts_on(tmp_path, profiler_calls):
    cb = TensorBoardCallback(str(tmp_path), profile_batch=(9, 10))  # the second fit's batches 1 and 2
    fit(cb, close=False)
    assert profiler_calls == []
    fit(cb, marks=BatchMarks(first=8))
    assert_profiled(tmp_path, 9, 10)


# ------------------------------------------------------------ profiler failures and on_error
@pytest.mark.parametrize("name", ["dump", "dumps", "set_config"])
def test_profiler_failure_raises_under_on_error_raise(tmp_path, profiler_calls, monkeypatch, name):
    fail(monkeypatch, name)
    cb = TensorBoardCallback(str(tmp_path), profile_batch=(1, 2))
    with pytest.raises(RuntimeError, match=f"injected {name} failure"):
        fit(cb, close=False)
    assert profiler_calls[-1:] == ["stop"]  # given back stopped
    cb.close()
    assert [s for s, _ in readback.scalars(str(tmp_path), "train_batch", "batch_accuracy")] == \
        list(range(3 if name != "set_config" else 1))  # up to the failing batch


@pytest.mark.parametrize("name", ["dump", "dumps", "set_config"])
def test_profiler_failure_warns_once_under_on_error_warn(tmp_path, profiler_calls, monkeypatch, name):
    fail(monkeypatch, name)
    cb = TensorBoardCallback(str(tmp_path), profile_batch=(1, 2), on_error="warn")
    with pytest.warns(RuntimeWarning) as w:
        fit(cb)
    assert [str(x.message) for x in w if "gluon_tb" in str(x.message)] == \
        [f"gluon_tb: writing to {tmp_path} failed (RuntimeError: injected {name} failure); training goes on "
         "(on_error='warn'), later writer errors are only counted"]
    assert profiler_calls[-1:] == ["stop"]
    # training went on and everything else is there; no profile
    d = str(tmp_path)
    assert [s for s, _ in readback.scalars(d, "train_batch", "batch_accuracy")] == list(range(8))
    assert [s for s, _ in readback.scalars(d, "validation", "epoch_accuracy")] == [0, 1]
    assert profile_files(tmp_path) == [] and ("train_batch", "profile/operator_stats") not in readback.tags(d)


def test_a_failing_profile_write_does_not_stop_the_table(tmp_path, profiler_calls, monkeypatch):
    def broken(self, *a, **k):
        raise OSError("injected write failure")
    monkeypatch.setattr(SummaryWriter, "add_profile", broken)
    with pytest.warns(RuntimeWarning, match="injected write failure"):
        fit(TensorBoardCallback(str(tmp_path), profile_batch=(1, 2), on_error="warn"))
    assert profile_files(tmp_path) == []
    [(step, text)] = stats(tmp_path)
    assert step == 2 and "global batches 1 to 2" in text


# ------------------------------------------------------------ steps for XProf's Overview page
def test_each_profiled_batch_is_a_step_xprof_finds(tmp_path, profiler_calls, xprof_python):
    """Steps 1..5 over an epoch's end (4 batches an epoch): a step runs from the previous batch's
    end (or from eval_end, after the validation) to its own batch_end; Module.fit has no
    batch_begin, so a step is all ``batch`` (no ``input`` part). XProf's own converter finds them
    with their times (it shows all steps up to 5; of more it leaves out the first and the last)."""
    from test_profile import assert_xprof_steps, decode_steps, steps_of

    fit(TensorBoardCallback(str(tmp_path), profile_batch=(1, 5)))
    [f] = profile_files(tmp_path)
    steps = steps_of(decode_steps(open(f, "rb").read()))
    assert sorted(steps) == [1, 2, 3, 4, 5]
    assert all(wait == 0 and batch == dur > 0 for _, dur, wait, batch in steps.values())
    assert 0 <= steps[2][0] - (steps[1][0] + steps[1][1]) < 1e9  # back to back inside an epoch
    assert steps[4][0] > steps[3][0] + steps[3][1]  # epoch 0's end and validation in no step
    assert_xprof_steps(xprof_python, f, [1, 2, 3, 4, 5])
