"""Two writers appending to one run directory at once (two trainings, one logdir) get a
RuntimeWarning, once per directory; a resume (purge_step) and a finished writer do not."""
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer._io import neighbours

from repo_paths import ROOT  # noqa: E402

OTHER = """
import sys
from gluon_tb import SummaryWriter
w = SummaryWriter(sys.argv[1])
w.add_scalar("loss", 9.0, 0)
w.flush()
print("ready", flush=True)
if sys.argv[2] == "stay":
    sys.stdin.readline()
w.close()
"""


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    monkeypatch.setattr(neighbours, "_warned", set())


def other_process(logdir, stay=True):
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(OTHER), str(logdir), "stay" if stay else "go"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.stdout.readline().strip() == "ready"
    if not stay:
        p.wait()
    return p


def log(logdir, values, **kw):
    """Write ``values`` (step -> value) with a new writer; the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = SummaryWriter(str(logdir), **kw)
        for step, v in values.items():
            w.add_scalar("loss", v, step)
        w.flush()
    return w, [str(c.message) for c in caught if "two writers" in str(c.message)]


def test_two_writers_of_this_process_in_one_run_are_warned_about_once(tmp_path):
    a, said_a = log(tmp_path, {0: 1.0})
    b, said_b = log(tmp_path, {0: 2.0})
    assert said_a == []
    assert len(said_b) == 1 and str(tmp_path) in said_b[0]
    assert "another SummaryWriter of this process" in said_b[0]
    c, said_c = log(tmp_path, {1: 3.0})  # once per run directory
    assert said_c == []
    for w in (a, b, c):
        w.close()
    assert sorted(readback.scalars(str(tmp_path), ".", "loss")) == [(0, 1.0), (0, 2.0), (1, 3.0)]


def test_a_live_process_appending_to_the_run_is_warned_about(tmp_path):
    p = other_process(tmp_path)
    try:
        w, said = log(tmp_path, {0: 1.0})
        w.close()
    finally:
        p.communicate("\n")
    assert len(said) == 1 and f"process {p.pid} is appending to events.out.tfevents." in said[0]
    assert str(tmp_path) in said[0]


def test_a_finished_process_or_writer_is_not_warned_about(tmp_path):
    other_process(tmp_path, stay=False)  # wrote, closed and exited
    a, said_a = log(tmp_path, {0: 1.0})
    a.close()
    b, said_b = log(tmp_path, {1: 2.0})  # the earlier writer of this process is closed
    b.close()
    assert said_a == [] and said_b == []


def test_a_resumed_run_is_not_warned_about(tmp_path):
    p = other_process(tmp_path)
    try:
        w, said = log(tmp_path, {5: 1.0}, purge_step=5)
        w.close()
    finally:
        p.communicate("\n")
    assert said == []


def test_an_old_file_of_a_live_pid_is_not_warned_about(tmp_path, monkeypatch):
    p = other_process(tmp_path)
    try:
        (path,) = readback.event_files(str(tmp_path))
        old = time.time() - neighbours.RECENT_SECS - 60
        os.utime(path, (old, old))  # its pid may be a new process's now
        w, said = log(tmp_path, {0: 1.0})
        w.close()
    finally:
        p.communicate("\n")
    assert said == []


def test_two_handlers_in_one_logdir_are_warned_about(tmp_path):
    mx = pytest.importorskip("mxnet")
    from mxnet import gluon
    from mxnet.gluon.contrib.estimator import Estimator

    from gluon_tb.handlers import TensorBoardHandler

    p = other_process(tmp_path / "train")  # another training's handler, writing run "train"
    try:
        net = gluon.nn.Dense(2, in_units=3)
        net.initialize()
        data = gluon.data.DataLoader(gluon.data.ArrayDataset(mx.nd.ones((16, 3)), mx.nd.zeros((16,))),
                                     batch_size=8)
        est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(),
                        trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(data, epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path))])
    finally:
        p.communicate("\n")
    said = [str(c.message) for c in caught if "two writers" in str(c.message)]
    assert len(said) == 1 and str(tmp_path / "train") in said[0] and f"process {p.pid}" in said[0]
    assert [s for s, _ in readback.scalars(str(tmp_path / "train_batch"), ".", "batch_loss")] == [0, 1]
