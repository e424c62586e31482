"""RunWriters keeps per-batch values on the training thread and queues them a block at a time:
in the order of the calls, at the latest LATER_SECS after the first or at LATER_MAX values, and
never lost: a flush, a close, the end of the process (an exception, SIGTERM) queue them first."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import readback
from gluon_tb.handlers._common import run_writers
from gluon_tb.handlers._common.run_writers import RunWriters
from gluon_tb.writer import SummaryWriter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def events(logdir, run):
    """(tag, step) of every event with a value in ``run``, in file order."""
    return [(e.summary.value[0].tag, e.step) for f in readback.event_files(os.path.join(logdir, run))
            for e in readback.raw_events(f) if e.summary.value]


def test_kept_values_are_written_before_any_later_write_in_call_order(tmp_path):
    d = str(tmp_path)
    out = RunWriters(d, "raise", 2.0)
    out.later("train_batch", "batch_loss", [np.array([1.0, 3.0])], 0)
    out.later("train_batch", "batch_acc", 0.5, 0)
    out.later("validation", None, [np.array([4.0])], 0)  # only read: no event
    assert len(out._later) == 3 and out._root is None  # nothing queued yet, no writer made
    out.call("train_batch", SummaryWriter.add_scalar, "other", 7.0, 0)  # queues the block first
    assert out._later == []
    out.later("train_batch", "batch_loss", [np.array([5.0])], 1)
    out.close()
    assert events(d, "train_batch") == [("batch_loss", 0), ("batch_acc", 0), ("other", 0), ("batch_loss", 1)]
    assert readback.scalars(d, "train_batch", "batch_loss") == [(0, 2.0), (1, 5.0)]
    assert not os.path.exists(os.path.join(d, "validation"))  # read-only values make no run


def test_a_block_is_queued_at_the_latest_after_later_secs_or_later_max_values(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(run_writers.time, "perf_counter", lambda: clock[0])
    out = RunWriters(str(tmp_path), "raise", 2.0)
    out.later("train_batch", "a", 1.0, 0)
    clock[0] += run_writers.LATER_SECS / 2
    out.later("train_batch", "a", 2.0, 1)
    assert len(out._later) == 2
    clock[0] += run_writers.LATER_SECS
    out.later("train_batch", "a", 3.0, 2)  # over LATER_SECS after the first: all three queued
    assert out._later == []
    for k in range(run_writers.LATER_MAX):  # the clock stands still: queued at LATER_MAX values
        out.later("train_batch", "a", float(k), 3 + k)
    assert out._later == []
    out.flush()
    assert len(readback.scalars(str(tmp_path), "train_batch", "a")) == 3 + run_writers.LATER_MAX
    out.close()


def test_slow_batches_are_queued_at_their_end_fast_ones_in_blocks(tmp_path, monkeypatch):
    """A training whose batches take LATER_SECS or longer is seen in TensorBoard batch by batch:
    its values are queued at the end of their batch, not with the next batch's."""
    clock = [100.0]
    monkeypatch.setattr(run_writers.time, "perf_counter", lambda: clock[0])
    out = RunWriters(str(tmp_path), "raise", 2.0)
    out.batch_done()  # the fit's first batch ended (a long time after nothing)
    for k in range(3):  # fast: 10 ms a batch, kept
        clock[0] += 0.01
        out.later("train_batch", "loss", float(k), k)
        out.later("train_batch", "acc", 0.5, k)
        out.batch_done()
    assert len(out._later) == 6
    clock[0] += run_writers.LATER_SECS * 3  # a slow batch: queued at its end, with the kept ones
    out.later("train_batch", "loss", 3.0, 3)  # (the block is older than LATER_SECS: queued here already)
    out.later("train_batch", "acc", 0.5, 3)
    out.batch_done()
    assert out._later == []
    clock[0] += run_writers.LATER_SECS * 3
    out.later("train_batch", "loss", 4.0, 4)
    out.later("train_batch", "acc", 0.5, 4)
    assert len(out._later) == 2  # kept until the batch's end ...
    out.batch_done()
    assert out._later == []  # ... which came LATER_SECS or more after the previous one's
    out.flush()
    assert [s for s, _ in readback.scalars(str(tmp_path), "train_batch", "acc")] == [0, 1, 2, 3, 4]
    out.close()


def test_a_muted_worker_keeps_nothing(tmp_path):
    out = RunWriters(str(tmp_path), "raise", 2.0)
    out.place("", muted=True)
    out.later("train_batch", "a", 1.0, 0)
    assert out._later == []
    out.close()
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("on_error", ["raise", "warn"])
def test_a_bad_value_loses_nothing_else(tmp_path, on_error):
    """The error policy applies at the queueing; every other value of the block, in every run, is written."""
    d = str(tmp_path)
    out = RunWriters(d, on_error, 2.0)
    out.later("train_batch", "a", 1.0, 0)
    out.later("train_batch", "a", "not a number", 1)
    out.later("train_batch", "a", 3.0, 2)
    out.later("validation", "b", 4.0, 0)
    if on_error == "raise":
        with pytest.raises(TypeError, match="value"):
            out.flush()
    else:
        with pytest.warns(RuntimeWarning, match="training goes on"):
            out.flush()
        assert out.errors == 1
    out.later("train_batch", "a", 5.0, 3)  # still working
    out.close()
    assert readback.scalars(d, "train_batch", "a") == [(0, 1.0), (2, 3.0), (3, 5.0)]
    assert readback.scalars(d, "validation", "b") == [(0, 4.0)]


SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from gluon_tb.handlers._common.run_writers import RunWriters
    from gluon_tb.writer import SummaryWriter

    out = RunWriters(sys.argv[2], "raise", 60.0)
    out.call("train", SummaryWriter.add_scalar, "epoch_loss", 1.0, 0)  # a writer is open
    for k in range(5):
        out.later("train_batch", "batch_loss", [np.array([float(k), k + 2.0])], k)
    assert len(out._later) == 5
    if sys.argv[3] == "exit":
        raise SystemExit(3)  # a handler of the script's own stops the process inside the fit
    os.kill(os.getpid(), signal.SIGTERM)
""")


@pytest.mark.parametrize("how", ["exit", "sigterm"])
def test_a_process_that_ends_inside_a_fit_writes_what_was_kept(tmp_path, how):
    d = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", SCRIPT, ROOT, d, how], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == (3 if how == "exit" else -signal.SIGTERM), done.stderr[-3000:]
    assert readback.scalars(d, "train_batch", "batch_loss") == [(k, k + 1.0) for k in range(5)]
    assert readback.scalars(d, "train", "epoch_loss") == [(0, 1.0)]


def test_a_closed_writer_runs_no_hook_when_collected(tmp_path):
    """After close, the old writer forgets the hook: collected later (on any thread), it queues nothing."""
    out = RunWriters(str(tmp_path), "raise", 2.0)
    out.call("train", SummaryWriter.add_scalar, "a", 1.0, 0)
    root = out._root
    out.close()
    assert root is not None and root._before_exit is None
    out.later("train", "a", 2.0, 1)
    root._close_at_exit()  # as the collector would
    assert len(out._later) == 1
    out.close()
    assert readback.scalars(str(tmp_path), "train", "a") == [(0, 1.0), (1, 2.0)]


def test_the_ignored_errors_are_summed_up_once_however_often_close_is_called(tmp_path, caplog):
    """on_error="warn": ``train_end`` closes, and a script's own ``close()`` after ``fit`` closes again;
    the count of ignored errors is said once, and again only when more came."""
    out = RunWriters(str(tmp_path), "warn", 2.0)
    with pytest.warns(RuntimeWarning, match="training goes on"):
        for step in range(3):
            out.later("train_batch", "a", "not a number", step)
            out.flush()  # one error each
    with caplog.at_level("WARNING", logger="gluon_tb.handlers"):
        out.close()
        out.close()
    said = [r.getMessage() for r in caplog.records if "were ignored" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("gluon_tb: 3 writer errors"), said
    caplog.clear()
    out.later("train_batch", "a", "not a number", 9)
    with caplog.at_level("WARNING", logger="gluon_tb.handlers"):
        out.close()
    assert [r.getMessage()[:29] for r in caplog.records if "were ignored" in r.getMessage()] == \
        ["gluon_tb: 4 writer errors in "]


def test_a_failed_write_does_not_take_the_next_block_with_it(tmp_path):
    """on_error="warn": the writer thread's error (a write the disk refused) was raised by the next
    hand-over, before it queued anything: that block of batch values was lost, and with it part of
    the epoch's loss, whose mean then came out wrong. The error is now reported first, and the block
    queued."""
    d = str(tmp_path)
    out = RunWriters(d, "warn", 2.0)
    out.call("train_batch", SummaryWriter.add_scalar, "a", 0.0, 0)  # the writer is made
    out.flush()
    out._root._p.error = OSError(28, "No space left on device")  # as the worker leaves a failed write
    for k in (1, 2, 3):
        out.later("train_batch", "a", float(k), k)
    with pytest.warns(RuntimeWarning, match=r"failed \(OSError: \[Errno 28\] No space left on device\)"):
        out.flush()
    assert out.errors == 1
    out.close()
    assert readback.scalars(d, "train_batch", "a") == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
