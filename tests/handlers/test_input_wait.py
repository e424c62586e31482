"""Where an epoch's time goes: ``epoch_input_wait_seconds``, ``epoch_batch_seconds`` and
``epoch_input_wait_fraction``, with a loader made slow by a known amount, read back."""
import logging
import time
import warnings

import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import BatchBegin, BatchEnd

import readback
import repo_paths
from gluon_tb.handlers import TensorBoardHandler
from estimator_setup import BATCH, N, make_est, make_net

BATCHES = N // BATCH
warnings.filterwarnings("ignore", message="No trainer specified")


class SlowDataset(gluon.data.Dataset):
    """``__getitem__`` sleeps ``delay`` seconds: a loader ``BATCH * delay`` s slow a batch."""

    def __init__(self, delay):
        rs = np.random.RandomState(0)
        self.x = rs.rand(N, 1, 8, 8).astype("float32")
        self.y = rs.randint(0, 4, size=N).astype("float32")
        self.delay = delay

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]

    def __len__(self):
        return N


def fit(logdir, delay, epochs=2):
    data = gluon.data.DataLoader(SlowDataset(delay), batch_size=BATCH)
    make_est(make_net()).fit(data, epochs=epochs, event_handlers=[TensorBoardHandler(str(logdir))])
    return {t: readback.scalars(str(logdir), "train", t) for t in
            ("epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction")}


def median(points):
    return float(np.median([v for _, v in points]))


def test_a_slow_loader_is_measured_within_20_percent(tmp_path, caplog):
    """The loader sleeps a known 256 ms an epoch; the in-memory loader's own wait (its collation)
    is measured beside it and added. Medians over 3 epochs (the first has the warm-up)."""
    delay = 0.004
    fast = fit(tmp_path / "fast", 0.0, epochs=3)
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        got = fit(tmp_path / "slow", delay, epochs=3)
    want = BATCHES * BATCH * delay
    for tag, points in got.items():
        assert [s for s, _ in points] == [0, 1, 2], tag
    assert want * 0.95 <= median(got["epoch_input_wait_seconds"]) <= \
        want * 1.2 + median(fast["epoch_input_wait_seconds"]), (got, fast, want)
    for (_, wait), (_, busy), (_, frac) in zip(*got.values()):
        assert frac == pytest.approx(wait / (wait + busy), rel=1e-6)
    advice = [r.getMessage() for r in caplog.records if "waiting for its next batch" in r.getMessage()]
    assert len(advice) == 1 and "of epoch 1" in advice[0] and "num_workers" in advice[0]
    [text] = readback.tensor_events(str(tmp_path / "slow"), "train", "input_wait/advice")
    assert text.step == 1 and b"num_workers" in text.tensor_proto.string_val[0]


def test_an_in_memory_loader_barely_waits(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        got = fit(tmp_path, 0.0, epochs=3)
    sleep = BATCHES * BATCH * 0.004  # what the slow loader above adds: the scale of "near 0"
    assert median(got["epoch_input_wait_seconds"]) < 0.1 * sleep, got
    assert median(got["epoch_input_wait_fraction"]) < 0.5, got  # most of the epoch is in the batches
    assert not [r for r in caplog.records if "waiting for its next batch" in r.getMessage()]
    assert ("train", "input_wait/advice") not in readback.tags(str(tmp_path))


class SlowHandler(BatchBegin, BatchEnd):
    """Sleeps ``delay`` s in its batch event (``batch_begin`` when ``begin``, else ``batch_end``)."""

    def __init__(self, priority, delay, begin=False):
        self.priority, self.delay, self.begin = priority, delay, begin
        self.calls = 0

    def batch_begin(self, estimator, *args, **kwargs):
        if self.begin:
            self.calls += 1
            time.sleep(self.delay)

    def batch_end(self, estimator, *args, **kwargs):
        if not self.begin:
            self.calls += 1
            time.sleep(self.delay)
        return False


@pytest.mark.parametrize("priority,begin", [(2000, False), (float("inf"), False), (-5000, True)],
                         ids=["batch_end-after-ours", "batch_end-at-inf", "batch_begin-before-ours"])
def test_other_handlers_slow_batches_are_batch_time_not_input_wait(tmp_path, caplog, priority, begin):
    """A handler that runs after ours at batch_end (or before ours at batch_begin) is part of the
    batch: 20 ms of it a batch is ``epoch_batch_seconds``, not wait, and earns no advice; a slow
    loader beside it is still measured as wait; the handler's method is its own again after fit."""
    delay = 0.02
    slow = SlowHandler(priority, delay, begin)
    data = gluon.data.DataLoader(SlowDataset(0.0), batch_size=BATCH)
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        make_est(make_net()).fit(data, epochs=3, event_handlers=[TensorBoardHandler(str(tmp_path)), slow])
    assert slow.calls == 3 * BATCHES and "batch_begin" not in vars(slow) and "batch_end" not in vars(slow)
    got = {t: readback.scalars(str(tmp_path), "train", t) for t in
           ("epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction")}
    assert median(got["epoch_batch_seconds"]) >= BATCHES * delay, got
    assert median(got["epoch_input_wait_seconds"]) < 0.25 * BATCHES * delay, got
    assert median(got["epoch_input_wait_fraction"]) < 0.2, got
    assert not [r for r in caplog.records if "waiting for its next batch" in r.getMessage()]

    # the same slow handler beside a slow loader (4 ms a sample): the loader's sleep is the wait
    logdir = tmp_path / "slow_loader"
    data = gluon.data.DataLoader(SlowDataset(0.004), batch_size=BATCH)
    make_est(make_net()).fit(data, epochs=3, event_handlers=[TensorBoardHandler(str(logdir)),
                                                               SlowHandler(priority, delay, begin)])
    want = BATCHES * BATCH * 0.004
    wait = median(readback.scalars(str(logdir), "train", "epoch_input_wait_seconds"))
    busy = median(readback.scalars(str(logdir), "train", "epoch_batch_seconds"))
    assert want * 0.95 <= wait <= want * 1.2 + 0.25 * BATCHES * delay and busy >= BATCHES * delay, (wait, busy)


# ------------------------------------------------------------ Module.fit: the iterator's next() is timed
class SlowIter:
    """An ``NDArrayIter`` whose ``next()`` sleeps ``delay`` seconds a batch."""

    def __new__(cls, delay):
        import mxnet as mx

        rs = np.random.RandomState(0)
        it = mx.io.NDArrayIter(rs.rand(N, 5).astype("float32"), rs.randint(0, 3, N).astype("float32"), BATCH,
                               label_name="softmax_label")
        plain = it.next

        def slow():
            time.sleep(delay)
            return plain()
        if delay:  # the class's method stays; the instance gets a slow one
            it.next = slow
        return it


def module_fit(logdir, delay, epochs=3):
    import mxnet as mx

    from gluon_tb.handlers import TensorBoardCallback
    from test_module_profile import symbol

    it = SlowIter(delay)
    had = it.next
    mod = mx.mod.Module(symbol(), context=mx.cpu())
    with TensorBoardCallback(str(logdir)) as cb:
        mod.fit(it, num_epoch=epochs, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
                initializer=mx.init.Xavier(), **cb.fit_callbacks())
    assert it.next == had  # the iterator's own next() is back
    return {t: readback.scalars(str(logdir), "train", t) for t in
            ("epoch_input_wait_seconds", "epoch_batch_seconds", "epoch_input_wait_fraction")}


def test_module_fit_measures_a_slow_iterator(tmp_path):
    delay = 0.02  # a batch: 4 batches and the end-of-epoch call an epoch
    fast = module_fit(tmp_path / "fast", 0.0)
    got = module_fit(tmp_path / "slow", delay)
    for tag, points in got.items():
        assert [s for s, _ in points] == [0, 1, 2], tag
    # epoch 0's first fetch comes before any callback: epochs 1 and 2 count all 5 calls
    want = 5 * delay
    for _, wait in got["epoch_input_wait_seconds"][1:]:
        assert want * 0.95 <= wait <= want * 1.2 + median(fast["epoch_input_wait_seconds"]), (got, fast, want)
    assert got["epoch_input_wait_fraction"][1][1] > 0.5
    assert median(fast["epoch_input_wait_fraction"]) < 0.5


def test_the_example_shows_a_slow_loader_near_1_and_the_advice(tmp_path, monkeypatch, caplog):
    import os
    import sys

    examples = repo_paths.EXAMPLES
    monkeypatch.syspath_prepend(examples)
    import input_wait_digits

    logdir = str(tmp_path / "logs")
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        input_wait_digits.main(["--logdir", logdir, "--samples", "256", "--delay", "0.004"])
    slow = [v for _, v in readback.scalars(logdir, "slow/train", "epoch_input_wait_fraction")]
    fast = [v for _, v in readback.scalars(logdir, "fast/train", "epoch_input_wait_fraction")]
    assert len(slow) == len(fast) == 3
    assert min(slow) > 0.5 and float(np.median(fast)) < float(np.median(slow)) / 2, (slow, fast)
    assert ("slow/train", "input_wait/advice") in readback.tags(logdir)
    assert ("fast/train", "input_wait/advice") not in readback.tags(logdir)
    assert sum("waiting for its next batch" in r.getMessage() for r in caplog.records) == 1
    sys.modules.pop("input_wait_digits", None)


def test_a_short_wait_gets_no_advice_whatever_its_share():
    """Tiny epochs on a busy machine can wait over half of their few milliseconds: not advice."""
    from gluon_tb.handlers._common.input_wait import InputWait

    class Out:
        def __init__(self):
            self.said, self.calls = [], []

        def say_once(self, key, text, level):
            self.said.append(text)

        def call(self, run, fn, *args):
            self.calls.append((run, fn.__name__) + args[:1])

    out = Out()
    waits = InputWait(out)
    for epoch in range(3):  # 90% waiting, 0.05 s of it
        waits.add(0.05, 0.005)
        waits.epoch_end(epoch)
    assert out.said == [] and ("train", "add_text", "input_wait/advice") not in out.calls
    for epoch in range(3, 5):  # 90% waiting, 0.5 s of it
        waits.add(0.5, 0.05)
        waits.epoch_end(epoch)
    assert len(out.said) == 1 and "of epoch 4" in out.said[0]
    assert ("train", "add_text", "input_wait/advice") in out.calls
