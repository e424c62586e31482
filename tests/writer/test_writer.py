"""SummaryWriter: scalars, layout, options and lifetime, read back through TensorBoard."""
import json
import math
import os
import re
import stat
import sys
import threading
import time

import numpy as np
import pytest

import readback
from gluon_tb import SummaryWriter, WriterClosedError


def test_scalars_read_back_exactly(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for i in range(1000):
            w.add_scalar("loss", 1.0 / (i + 1), i)
        w.add_scalar("np", np.float32(2.5), 3)
        w.add_scalar("int", 7, 4)
        w.add_scalar("arr", np.array([3.25]), 5)
        w.add_scalar("flag", True, 6)
    assert readback.tags(str(tmp_path)) == {(".", "loss"), (".", "np"), (".", "int"), (".", "arr"),
                                            (".", "flag")}
    got = readback.scalars(str(tmp_path), ".", "loss")
    assert [s for s, _ in got] == list(range(1000))
    assert [v for _, v in got] == [float(np.float32(1.0 / (i + 1))) for i in range(1000)]
    assert readback.scalars(str(tmp_path), ".", "np") == [(3, 2.5)]
    assert readback.scalars(str(tmp_path), ".", "int") == [(4, 7.0)]
    assert readback.scalars(str(tmp_path), ".", "arr") == [(5, 3.25)]
    assert readback.scalars(str(tmp_path), ".", "flag") == [(6, 1.0)]


def test_ndarray_scalars_are_read_on_the_worker_and_keep_the_value_at_the_call(tmp_path):
    mx = pytest.importorskip("mxnet")
    a = mx.nd.array([1.5])
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("nd", a, 0)
        a[:] = 99.0  # overwritten right after the call
        w.add_scalar("nd", a.mean(), 1)
        w.add_scalar("nd0", mx.np.array(4.0), 0)  # 0-d, numpy-style MXNet array
    assert readback.scalars(str(tmp_path), ".", "nd") == [(0, 1.5), (1, 99.0)]
    assert readback.scalars(str(tmp_path), ".", "nd0") == [(0, 4.0)]


def test_add_mean_averages_every_element_of_every_array_at_the_call(tmp_path):
    mx = pytest.importorskip("mxnet")
    with SummaryWriter(str(tmp_path)) as w:
        a, b = mx.nd.array([1, 2, 3]), mx.nd.array([[4.0]])
        w.add_mean("m", [a, b], 0)  # 10 / 4
        a[:] = 100  # written after the call: not seen
        w.add_mean("m", np.array([1, 2], np.int64), 1)
        w.add_mean("m", (mx.nd.array([1, 2]), np.array([3.0, 4, 5, 6])), 2)  # 21 / 6
        w.add_mean("m", mx.nd.array([np.nan, 1]), 3)
        for bad, exc in (([], ValueError), ("x", TypeError), (np.array([]), ValueError),
                         ([None], TypeError), (np.array(["a"]), TypeError)):
            with pytest.raises(exc, match="values must"):
                w.add_mean("m", bad, 4)
        with pytest.raises(TypeError, match="copy must be a bool"):
            w.add_mean("m", a, 4, copy=None)
        w.add_mean("m", [np.float32(0.5)], 5)  # still working after the bad calls
        w.add_mean("m", [mx.nd.array([1, 2]), mx.nd.array([6.0])], 6, copy=False)  # read later
        w.add_mean("m", mx.nd.ones((300, 300)), 7, copy=False)  # large: reduced now
    got = readback.scalars(str(tmp_path), ".", "m")
    assert [s for s, _ in got] == [0, 1, 2, 3, 5, 6, 7]
    assert [v for _, v in got][:3] == [2.5, 1.5, 3.5] and math.isnan(got[3][1])
    assert [v for _, v in got][4:] == [0.5, 3.0, 1.0]


def test_values_kept_by_a_handler_are_queued_in_order_at_their_wall_times(tmp_path):
    """A handler's block of batches (``_add_values``): numbers as ``add_scalar``, lists of fresh
    loss arrays as ``add_mean(copy=False)``, each at the wall time and step it was kept with, in
    the order given."""
    mx = pytest.importorskip("mxnet")
    losses = [mx.nd.array([1.0, 2.0, 3.0]), mx.nd.array([10.0])]
    with SummaryWriter(str(tmp_path)) as w:
        w._add_values([("batch_loss", list(losses), 0, 100.0, None),
                       ("batch_acc", 0.25, 0, 100.5, None),
                       ("batch_loss", [np.array([4.0, 6.0]), losses[1]], 1, 101.0, None),
                       ("batch_acc", np.float32(0.75), 1, 101.5, None)])
    events = [e for f in readback.event_files(str(tmp_path)) for e in readback.raw_events(f) if e.summary.value]
    assert [(e.summary.value[0].tag, e.step, e.wall_time) for e in events] == [
        ("batch_loss", 0, 100.0), ("batch_acc", 0, 100.5), ("batch_loss", 1, 101.0), ("batch_acc", 1, 101.5)]
    assert readback.scalars(str(tmp_path), ".", "batch_loss") == [(0, 4.0), (1, float(np.float32(20.0 / 3)))]
    assert readback.scalars(str(tmp_path), ".", "batch_acc") == [(0, 0.25), (1, 0.75)]


def test_a_bad_value_in_a_block_is_raised_after_the_others_are_queued(tmp_path):
    """One bad item does not lose the block: the others are written, the first error is raised,
    naming what was wrong, and the writer goes on working."""
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match="tag"):
            w._add_values([("a", 1.0, 0, 10.0, None), ("", 2.0, 0, 10.0, None), ("a", 3.0, 1, 11.0, None),
                           ("a", "x", 2, 12.0, None), ("a", 5.0, 3, 13.0, None), (None, 6.0, 4, 14.0, None),
                           ("a", 7.0, -1, 15.0, None), ("a", 8.0, 5, "late", None)])
        w._add_values([("a", 9.0, 6, 16.0, None)])
    assert readback.scalars(str(tmp_path), ".", "a") == [(0, 1.0), (1, 3.0), (3, 5.0), (6, 9.0)]


def test_fresh_means_added_into_a_running_mean_in_queue_order(tmp_path):
    """A handler's epoch loss: each batch's losses are added into a running Mean when the writer
    thread reads them (with a tag, also logged; without, only added: no event), and the running
    Mean queued after them reads as the mean of every value, host values among them. A Mean is
    added once however often it is read; one without values reads as NaN."""
    from gluon_tb.writer._common.arrays import Mean

    mx = pytest.importorskip("mxnet")
    epoch = Mean([], (0.0, 0))
    with SummaryWriter(str(tmp_path)) as w:
        w._add_values([("batch_loss", [mx.nd.array([1.0, 2.0]), mx.nd.array([3.0])], 0, 1.0, epoch),
                       (None, [mx.nd.array([10.0, 20.0, 30.0])], 1, 2.0, epoch),  # not logged, added
                       (None, [np.array([5.0])], 2, 3.0, epoch)])  # host values alone: added too
        w.add_scalar("epoch_loss", epoch, 0)
        w.add_scalar("empty", Mean([], (0.0, 0)), 0)
        w.flush()
        assert w._p._worker.unwritten() == {}
    assert readback.tags(str(tmp_path)) == {(".", "batch_loss"), (".", "epoch_loss"), (".", "empty")}
    assert readback.scalars(str(tmp_path), ".", "batch_loss") == [(0, 2.0)]
    assert readback.scalars(str(tmp_path), ".", "epoch_loss") == [(0, float(np.float32(71.0 / 7)))]
    assert math.isnan(readback.scalars(str(tmp_path), ".", "empty")[0][1])
    once = Mean([], (4.0, 2), into=epoch)
    assert float(once) == float(once) == 2.0
    assert epoch.known == (75.0, 9)


def test_non_finite_scalars_are_logged_as_they_are(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("x", float("nan"), 0)
        w.add_scalar("x", float("inf"), 1)
        w.add_scalar("x", -np.inf, 2)
    got = readback.scalars(str(tmp_path), ".", "x")
    assert math.isnan(got[0][1]) and got[1] == (1, math.inf) and got[2] == (2, -math.inf)


def test_mxboard_named_scalars_and_add_scalars_layouts(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("curves", {"sin": 0.5, "cos": 1.5}, 10)
        w.add_scalar("curves", ("exp", 2.5), 10)
        w.add_scalars("loss", {"train": 1.0, "val": 2.0}, 3)
    assert readback.tags(str(tmp_path)) == {
        ("curves/sin", "curves"), ("curves/cos", "curves"), ("curves/exp", "curves"),
        ("loss_train", "loss"), ("loss_val", "loss")}
    assert readback.scalars(str(tmp_path), "curves/exp", "curves") == [(10, 2.5)]
    assert readback.scalars(str(tmp_path), "loss_val", "loss") == [(3, 2.0)]


def test_event_file_name_and_first_event(tmp_path):
    with SummaryWriter(tmp_path, filename_suffix=".v1") as w:
        w.add_scalar("a", 1.0, 1)
    (path,) = readback.event_files(str(tmp_path))
    name = os.path.basename(path)
    assert re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^.]+(\.[^.]+)*\.%d\.\d{8}\.v1" % os.getpid(), name), name
    events = readback.raw_events(path)
    assert events[0].file_version == "brain.Event:2"
    assert events[1].summary.value[0].tag == "a"


@pytest.mark.parametrize("first", [9, 99, 9999])
def test_files_of_one_second_are_read_in_the_order_they_were_written(tmp_path, monkeypatch, first):
    """Two writers one after the other into one run in the same second (a second fit right after
    a first that ended early): TensorBoard reads a run's files in the order of their names, so the
    counter is zero-padded (``.10`` once sorted before ``.9`` and put step 0 after step 1)."""
    import itertools

    from gluon_tb.writer._io import event_file

    monkeypatch.setattr(event_file, "_counter", itertools.count(first))
    monkeypatch.setattr(event_file.time, "time", lambda: 1_700_000_000.5)  # the same second
    for step in (0, 1, 2):
        with SummaryWriter(tmp_path) as w:
            w.add_scalar("x", float(step), step, walltime=1_700_000_000.0 + step / 10)
    names = sorted(os.path.basename(p) for p in readback.event_files(str(tmp_path)))
    assert [n.rsplit(".", 1)[1] for n in names] == [f"{first + i:08d}" for i in range(3)]
    assert readback.scalars(str(tmp_path), ".", "x") == [(0, 0.0), (1, 1.0), (2, 2.0)]


def test_two_writers_in_the_same_second_never_share_a_file(tmp_path):
    ws = [SummaryWriter(tmp_path) for _ in range(5)]
    for i, w in enumerate(ws):
        w.add_scalar("w%d" % i, float(i), 0)
    for w in ws:
        w.close()
    assert len(readback.event_files(str(tmp_path))) == 5
    assert readback.tags(str(tmp_path)) == {(".", "w%d" % i) for i in range(5)}


def test_no_file_until_something_is_logged(tmp_path):
    w = SummaryWriter(tmp_path / "run")
    w.flush()
    w.close()
    assert os.listdir(tmp_path / "run") == []  # the directory (as mxboard), but no event file


def test_flush_waits_until_everything_is_on_disk(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600)
    for i in range(5000):
        w.add_scalar("s", float(i), i)
    w.flush()
    assert len(readback.scalars(str(tmp_path), ".", "s")) == 5000  # read while still open
    w.close()


@pytest.mark.parametrize("flush_secs", [float("inf"), 1e12])
def test_flush_secs_without_end_writes_at_flush_and_close(tmp_path, flush_secs):
    """flush_secs=inf: no time bound, and flush() and close() write everything. Its threads'
    waits overflowed a lock's timeout: close() raised OverflowError."""
    w = SummaryWriter(tmp_path, flush_secs=flush_secs)
    w.add_scalar("s", 1.0, 0)
    w.flush()
    assert readback.scalars(str(tmp_path), ".", "s") == [(0, 1.0)]
    w.add_scalar("s", 2.0, 1)
    w.close()
    assert readback.scalars(str(tmp_path), ".", "s") == [(0, 1.0), (1, 2.0)]


def test_close_is_idempotent_and_closed_writer_raises(tmp_path):
    w = SummaryWriter(tmp_path)
    w.add_scalar("a", 1.0)
    w.close()
    w.close()
    with pytest.raises(WriterClosedError, match="already closed"):
        w.add_scalar("a", 2.0)
    with pytest.raises(WriterClosedError):
        w.flush()
    w.reopen()
    w.add_scalar("a", 3.0, 1)
    w.close()
    assert readback.scalars(str(tmp_path), ".", "a") == [(0, 1.0), (1, 3.0)]


def test_walltime_is_used(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("a", 1.0, 0, walltime=1234.5)
    (ev,) = readback.tensor_events(str(tmp_path), ".", "a")
    assert ev.wall_time == 1234.5


def test_purge_step_hides_orphaned_later_steps(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for i in range(10):
            w.add_scalar("loss", float(i), i)
    with SummaryWriter(tmp_path, purge_step=5) as w:
        for i in range(5, 8):
            w.add_scalar("loss", 100.0 + i, i)
    got = readback.scalars(str(tmp_path), ".", "loss")
    assert got == [(i, float(i)) for i in range(5)] + [(i, 100.0 + i) for i in range(5, 8)]


def test_export_scalars_reads_back_what_was_written(tmp_path):
    out = tmp_path / "scalars.json"
    with SummaryWriter(tmp_path / "logs") as w:
        w.add_scalar("a", 1.0, 1, walltime=10.0)
        w.add_scalar("c", {"x": 2.0}, 2, walltime=11.0)
        w.add_scalar("c", ("y", 3.0), 2, walltime=12.0)
        w.add_scalar("g/h", ["z", 4.0], 3, walltime=13.0)
        w.add_scalars("m/n", {"p": 5.0}, 4, walltime=14.0)
        w.add_scalar("c", 6.0, walltime=15.0)  # no step: 0
        w.export_scalars(str(out))
    data = json.loads(out.read_text())
    base = w.get_logdir()
    assert base == str(tmp_path / "logs")
    # mxboard's keys: get_logdir() + '/' + tag, and + '/' + tag + '/' + name for named curves
    assert data == {base + "/a": [[10.0, 1, 1.0]], base + "/c": [[15.0, 0, 6.0]],
                    base + "/c/x": [[11.0, 2, 2.0]], base + "/c/y": [[12.0, 2, 3.0]],
                    base + "/g/h/z": [[13.0, 3, 4.0]], base + "/m_n_p": [[14.0, 4, 5.0]]}


def test_export_scalars_reads_every_file_of_the_writer_also_once_closed(tmp_path):
    """What was logged before a close and reopen is exported too (each run's older event files), and
    a closed writer exports (mxboard's export after a with block) instead of raising."""
    d = str(tmp_path / "logs")
    sw = SummaryWriter(d)
    sw.add_scalar("loss", 1.0, 1, walltime=10.0)
    sw.add_scalar("c", {"n": 1.0}, 1, walltime=10.0)
    sw.close()
    sw.reopen()
    sw.add_scalar("loss", 2.0, 2, walltime=20.0)
    sw.add_scalar("c", {"n": 2.0}, 2, walltime=20.0)
    sw.export_scalars(str(tmp_path / "open.json"))
    sw.close()
    sw.export_scalars(str(tmp_path / "closed.json"))
    want = {d + "/loss": [[10.0, 1, 1.0], [20.0, 2, 2.0]], d + "/c/n": [[10.0, 1, 1.0], [20.0, 2, 2.0]]}
    assert json.loads((tmp_path / "open.json").read_text()) == want
    assert json.loads((tmp_path / "closed.json").read_text()) == want
    assert len([f for f in os.listdir(d) if f.startswith("events.out.tfevents.")]) == 2


def test_clear_scalar_dict_exports_only_what_comes_after(tmp_path):
    d = str(tmp_path / "logs")
    with SummaryWriter(d) as sw:
        sw.add_scalar("a", 1.0, 1, walltime=10.0)
        sw.add_scalar("c", {"n": 1.0}, 1, walltime=10.0)
        sw.clear_scalar_dict()
        sw.add_scalar("b", 2.0, 2, walltime=20.0)
        sw.add_scalar("c", {"n": 2.0}, 2, walltime=20.0)
        sw.export_scalars(str(tmp_path / "s.json"))
    assert json.loads((tmp_path / "s.json").read_text()) == {d + "/b": [[20.0, 2, 2.0]], d + "/c/n": [[20.0, 2, 2.0]]}
    assert readback.scalars(d, ".", "a") == [(1, 1.0)]  # the event files keep everything


def test_export_scalars_keeps_the_logdir_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter("logs/") as w:  # relative, trailing slash: mxboard joins with '/'
        w.add_scalar("a", 1.0, 1, walltime=1.0)
        w.add_scalar("b", {"x": 2.0}, 1, walltime=1.0)
        w.export_scalars("s.json")
    assert json.loads((tmp_path / "s.json").read_text()) == {
        "logs//a": [[1.0, 1, 1.0]], "logs//b/x": [[1.0, 1, 2.0]]}


def test_logdir_exists_when_the_constructor_returns_and_holds_no_empty_file(tmp_path):
    logdir = tmp_path / "a" / "b" / "run"
    w = SummaryWriter(logdir)
    assert logdir.is_dir() and os.listdir(logdir) == []  # mxboard's scripts save files here at once
    (logdir / "config.json").write_text("{}")
    w.close()
    assert os.listdir(logdir) == ["config.json"]  # closed without a write: still no event file
    w2 = SummaryWriter(logdir)  # an existing directory is fine
    w2.add_scalar("s", 1.0, 0)
    w2.close()
    assert readback.scalars(str(logdir), ".", "s") == [(0, 1.0)]


def test_logdir_that_is_a_file_or_inside_one_is_an_error_of_the_constructor(tmp_path):
    (tmp_path / "f").write_text("a file in the way")
    for logdir, said in ((tmp_path / "f", "it is a file"), (tmp_path / "f" / "run", f"{str(tmp_path / 'f')!r} is a file")):
        with pytest.raises(ValueError, match=re.escape(f"logdir must be a directory (or a path where one can be "
                                                       f"made), got {str(logdir)!r}: {said}")):
            SummaryWriter(logdir)


def test_logdir_that_cannot_be_made_is_an_error_at_the_first_write_not_the_constructor(tmp_path):
    logdir = str(tmp_path / "f" / "run")
    w = SummaryWriter(logdir)  # like a read-only parent: the handlers' error policy wraps the writes
    os.rmdir(logdir)  # then a file takes the directory's place: it cannot be made again
    (tmp_path / "f" / "run").write_text("a file in the way")
    w.add_scalar("s", 1.0, 0)
    with pytest.raises(FileExistsError, match=f"cannot create an event file in {re.escape(logdir)}"):
        w.flush()
    w.add_scalar("s", 2.0, 1)  # the writer goes on taking calls, and fails again at the next write
    with pytest.raises(FileExistsError, match="cannot create an event file in"):
        w.close()


def test_url_logdir_makes_no_local_directory(tmp_path, monkeypatch):
    pytest.importorskip("fsspec")
    monkeypatch.chdir(tmp_path)
    with SummaryWriter("memory://gluon_tb_test_a2/run") as w:
        w.add_scalar("s", 1.0, 0)
    assert os.listdir(tmp_path) == []


def test_files_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with SummaryWriter(tmp_path) as w:
            w.add_scalar("a", 1.0)
    finally:
        os.umask(old)
    (path,) = readback.event_files(str(tmp_path))
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert mode & 0o027 == 0 and not mode & stat.S_IWOTH


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"logdir": 3}, TypeError, "logdir"),
    ({"logdir": ""}, ValueError, "logdir"),
    ({"logdir": "x", "flush_secs": 0}, ValueError, "flush_secs"),
    ({"logdir": "x", "max_queue": 0}, ValueError, "max_queue"),
    ({"logdir": "x", "max_queue_bytes": 10}, ValueError, "max_queue_bytes"),
    ({"logdir": "x", "on_full": "explode"}, ValueError, "on_full"),
    ({"logdir": "x", "purge_step": -1}, ValueError, "purge_step"),
    ({"logdir": "x", "filename_suffix": "a/b"}, ValueError, "filename_suffix"),
    ({"logdir": "x", "worker_nice": 20}, ValueError, "worker_nice must be None or an int from 0 to 19, got int 20"),
    ({"logdir": "x", "worker_nice": -1}, ValueError, "worker_nice"),
    ({"logdir": "x", "worker_nice": True}, TypeError, "worker_nice"),  # a bool is not a nice level
    ({"logdir": "x", "worker_nice": "19"}, TypeError, "worker_nice"),
    # a wrong type is a TypeError, a wrong value of the right type a ValueError (issue 26)
    ({"logdir": "x", "flush_secs": "2"}, TypeError, r"flush_secs must be a positive number, got str '2'"),
    ({"logdir": "x", "flush_sec": 2}, TypeError, r"^SummaryWriter\(\) has no argument 'flush_sec'; did you mean 'flush_secs'\?$"),
    ({"log_dir": "x"}, TypeError, r"^SummaryWriter\(\) has no argument 'log_dir' \(another tool's name\): pass logdir"),
    ({"logdir": "x", "comment": "_lr0.1"}, TypeError,
     r"^SummaryWriter\(\) has no argument 'comment' \(another tool's name\): pass the whole directory as logdir"),
    ({"logdir": "x", "max_queue": 8.0}, TypeError, "max_queue must be a positive int, got float 8.0"),
    ({"logdir": "x", "max_queue_bytes": 4096.0}, TypeError, "max_queue_bytes"),
    ({"logdir": "x", "on_full": None}, TypeError, "on_full must be one of 'block', 'drop', got NoneType None"),
])
def test_constructor_validates_arguments(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        SummaryWriter(**kwargs)


IMG = np.zeros((3, 4, 4), np.float32)
# tensorboardX 2.6.5's argument names (its SummaryWriter's signatures): what each call says to pass
TBX_KEYWORDS = [
    ("add_image", ("i",), {"img_tensor": IMG}, "pass image"),
    ("add_images", ("i",), {"img_tensor": IMG[None]}, "pass images"),
    ("add_audio", ("a",), {"snd_tensor": np.zeros(8)}, "pass audio"),
    ("add_text", ("t",), {"text_string": "x"}, "pass text"),
    ("add_video", ("v",), {"vid_tensor": IMG[None]}, "pass video"),
    ("add_histogram", ("h", np.arange(4.0)), {"max_bins": 5}, "pass bins"),
    ("add_embedding", ("e",), {"mat": np.zeros((2, 2))}, "pass embedding"),
    ("add_embedding", ("e", np.zeros((2, 2))), {"metadata": ["a", "b"]}, "pass labels"),
    ("add_embedding", ("e", np.zeros((2, 2))), {"label_img": IMG[None]}, "pass images"),
    ("add_embedding", ("e", np.zeros((2, 2))), {"metadata_header": ["a"]},
     "pass labels as a dict {column name: values}"),
    ("add_graph", (), {"model": None}, "pass net"),
    ("add_graph", (None,), {"input_to_model": IMG},
     "pass input_shapes (the input's shape, x.shape, or a list or {name: shape} dict of them; not the input: "
     "run the hybridized net on it once before add_graph)"),
    ("add_hparams", ({"lr": 0.1}, {"m": 1.0}), {"name": "trial"}, "pass run_name"),
]


@pytest.mark.parametrize("method,args,kwargs,hint", TBX_KEYWORDS, ids=[f"{c[0]}-{next(iter(c[2]))}" for c in TBX_KEYWORDS])
def test_a_tensorboardx_keyword_says_what_to_pass(tmp_path, method, args, kwargs, hint):
    (name,) = kwargs
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(TypeError) as info:
            getattr(w, method)(*args, **kwargs)
        assert str(info.value) == f"SummaryWriter.{method}() has no argument {name!r} (tensorboardX's name): {hint}"
        w.add_text("after", "still writing", 2)
    assert readback.tags(str(tmp_path)) == {(".", "after")}  # nothing of the refused call
    [e] = readback.tensor_events(str(tmp_path), ".", "after")
    assert (e.step, e.tensor_proto.string_val) == (2, [b"still writing"])


@pytest.mark.parametrize("call,message", [
    (lambda w: w.add_histogram("h", np.arange(4.0), bin=3),
     "SummaryWriter.add_histogram() has no argument 'bin'; did you mean 'bins'?"),
    (lambda w: w.add_scalars("s", {"a": 1.0}, step=1),
     "SummaryWriter.add_scalars() has no argument 'step'; its arguments: main_tag, tag_scalar_dict, "
     "global_step, walltime"),
    (lambda w: w.for_run("r").add_pr_curve("p", [0, 1], [0.2, 0.8], num_threshold=9),
     "SummaryWriter.add_pr_curve() has no argument 'num_threshold'; did you mean 'num_thresholds'?"),
], ids=["typo", "no-close-name", "for_run"])
def test_an_unknown_keyword_of_a_method_names_the_closest_argument(tmp_path, call, message):
    with SummaryWriter(tmp_path) as w, pytest.raises(TypeError) as info:
        call(w)
    assert str(info.value) == message


def test_the_methods_keep_their_signature_and_their_own_type_errors(tmp_path):
    import inspect

    from gluon_tb.writer._writer_base import WriterBase

    methods = [m for m in dir(SummaryWriter) if m.startswith("add_")]
    for m in methods:  # every add_* checks its keywords but the two whose call costs under a microsecond
        assert hasattr(getattr(SummaryWriter, m), "__wrapped__") == (m not in ("add_scalar", "add_mean")), m
    assert list(inspect.signature(SummaryWriter.add_image).parameters) == [
        "self", "tag", "image", "global_step", "dataformats", "walltime"]
    assert SummaryWriter.add_scalars.__doc__ == WriterBase.add_scalars.__wrapped__.__doc__
    with SummaryWriter(tmp_path) as w, pytest.raises(TypeError, match="^text must be a str, got int 3$"):
        w.add_text("t", text=3)  # the method's own TypeError, with known keywords: as it was


def test_drop_mode_counts_what_it_dropped(tmp_path):
    w = SummaryWriter(tmp_path, max_queue_bytes=1024, on_full="drop", max_queue=1, flush_secs=3600)
    w._p._wake.wait = lambda timeout=None: True  # noqa: E731  never sleep: keep it simple
    for i in range(20000):
        w.add_scalar("s", float(i), i)
    w.close()
    kept = readback.scalars(str(tmp_path), ".", "s")
    dropped = readback.scalars(str(tmp_path), ".", "gluon_tb/dropped_events")
    assert dropped, "nothing was dropped: the test did not exercise drop mode"
    assert len(kept) + dropped[-1][1] == 20000


def test_steps_at_every_varint_size_boundary(tmp_path):
    steps = [0, 1, 127, 128, 129, 16383, 16384, 2097151, 2097152, 2**35, 2**62]
    with SummaryWriter(tmp_path) as w:
        for s in steps:
            w.add_scalar("s", float(s % 1000), s)
    assert readback.scalars(str(tmp_path), ".", "s") == [(s, float(s % 1000)) for s in steps]


def test_the_writer_thread_starts_with_the_writer_and_ends_with_it(tmp_path):
    """Started by the constructor (a first add_* never waits for a thread to start, nor does the
    constructor: the starter thread starts it); a writer
    dropped without close() still ends it, and what it was given is written."""
    import gc
    import time

    def writer_threads():
        return {t for t in threading.enumerate() if t.name == "gluon_tb-writer" and t.is_alive()}

    before = writer_threads()
    w = SummaryWriter(tmp_path)
    deadline = time.monotonic() + 10  # handed to the starter thread: running soon, not waited for
    while not writer_threads() - before and time.monotonic() < deadline:
        time.sleep(0.001)
    (mine,) = writer_threads() - before
    assert readback.event_files(str(tmp_path)) == []  # no event file before something is logged
    w.add_scalar("x", 1.0, 3)
    del w
    gc.collect()
    deadline = time.monotonic() + 10
    while mine.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not mine.is_alive()
    assert readback.scalars(str(tmp_path), ".", "x") == [(3, 1.0)]


def test_a_slow_low_priority_kernel_sends_the_kernels_to_normal_priority(monkeypatch):
    """A nice-19 kernel that took far longer than its work found no idle CPU: the kernels then
    count at normal priority for a while, so that flush_secs holds on a saturated machine."""
    from gluon_tb.writer._common import threads

    monkeypatch.setattr(threads, "_saturated_until", 0.0)
    monkeypatch.setattr(threads._local, "nice", 19, raising=False)
    if not sys.platform.startswith("linux"):
        assert threads.kernel_nice() == 19
        return
    assert threads.kernel_nice() == 19
    threads.kernel_took(0.05, 10_000_000)  # 50 ms for 10M values: the CPU had time for it
    assert threads.kernel_nice() == 19
    threads.kernel_took(0.5, 10_000_000)  # 500 ms: starved
    assert threads.kernel_nice() == 0
    monkeypatch.setattr(threads, "_saturated_until", 0.0)  # SATURATED_FOR later
    assert threads.kernel_nice() == 19


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value is per thread on Linux only")
@pytest.mark.parametrize("worker_nice", [19, 7, None])
def test_writer_thread_keeps_normal_priority_and_its_kernels_run_low(tmp_path, worker_nice, monkeypatch):
    """No thread that takes the GIL runs at a low priority (on a busy CPU it would stall the
    training thread: writer/_common/threads.py); the histogram kernels of large arrays run at
    ``worker_nice`` on a thread of their own, small ones where they are."""
    from gluon_tb.writer._common import threads
    from gluon_tb.writer._common.threads import KERNEL_MIN_VALUES
    from gluon_tb.writer._summaries import histogram_counts

    fast = histogram_counts._fast
    if fast is None:
        pytest.skip("the C histogram kernel is not built")
    seen = []

    class Spy:  # the kernel, recording the nice value each call asked for
        def __getattr__(self, name):
            def call(*args):
                seen.append((name, args[0].size, args[-1] if len(args) in (2, 4) else None))
                return getattr(fast, name)(*args)
            return call

    monkeypatch.setattr(histogram_counts, "_fast", Spy())
    monkeypatch.setattr(threads, "_saturated_until", 0.0)  # a slow kernel of another test: forgotten
    monkeypatch.setattr(threads, "SATURATED_AFTER", 3600.0)  # and none of this one's counts as slow

    def writer_threads():
        return {t.native_id for t in threading.enumerate() if t.name.startswith("gluon_tb") and t.is_alive()}

    mine = os.getpriority(os.PRIO_PROCESS, 0)
    before = writer_threads()
    w = SummaryWriter(tmp_path, worker_nice=worker_nice)  # the threads start with the writer
    # from the moment anyone can see it (CI once sampled the worker under SCHED_OTHER in a fit's
    # first batch, while it was still starting its catch-up thread): sampled at first sight (with
    # worker_nice the starter thread starts it, so SummaryWriter() may return before it runs)
    at_once: list = []
    deadline = time.monotonic() + 10
    while not at_once and time.monotonic() < deadline:
        at_once = [os.sched_getscheduler(t.native_id) for t in threading.enumerate()
                   if t.name == "gluon_tb-writer" and t.native_id is not None and t.native_id not in before]
    assert at_once == [os.SCHED_OTHER if worker_nice is None else os.SCHED_BATCH], at_once
    big = np.linspace(-1, 1, KERNEL_MIN_VALUES, dtype=np.float32)
    for step in range(2):
        w.add_scalar("x", float(step), step)
        w.add_histogram("big", big, step)
        w.add_histogram("small", big[:100], step, bins=5)
        w.flush()
        new = writer_threads() - before
        assert new and all(os.getpriority(os.PRIO_PROCESS, t) == mine for t in new)
        # the writer thread does not preempt training's threads when it wakes (SCHED_BATCH)
        policies = {t.name: os.sched_getscheduler(t.native_id) for t in threading.enumerate() if t.native_id in new}
        assert policies["gluon_tb-writer"] == (os.SCHED_OTHER if worker_nice is None else os.SCHED_BATCH)
        # the catch-up thread, started by the worker (not by the thread that made the writer), before
        # the worker changed its own scheduling: it stays at the process's
        assert policies["gluon_tb-writer-catch-up"] == os.SCHED_OTHER, policies
        assert os.getpriority(os.PRIO_PROCESS, 0) == mine
        w.close()
        before = writer_threads()
        w.reopen()  # a reopened writer's new threads too
    # a large array's kernel is given worker_nice (None: no nice argument); a small one's none
    assert seen == [("count", KERNEL_MIN_VALUES, worker_nice), ("stats", 100, None), ("uniform", 100, None)] * 2
    want = worker_nice or 0
    assert fast.probe_nice(want) == (want if want else mine)  # what a kernel given it runs at
    assert readback.scalars(str(tmp_path), ".", "x") == [(0, 0.0), (1, 1.0)]
    assert [e.step for e in readback.tensor_events(str(tmp_path), ".", "big")] == [0, 1]


def test_no_logdir_writes_under_runs_as_tensorboardx_does(tmp_path, monkeypatch):
    """SummaryWriter() (tensorboardX's and torch's habit) was a TypeError naming WriterBase.__init__;
    it now writes into runs/<Mon><DD>_<HH>-<MM>-<SS>_<host> under the working directory, as they do."""
    import re
    import socket

    monkeypatch.chdir(tmp_path)
    with SummaryWriter() as w:
        w.add_scalar("a", 1.0, 3)
    (made,) = os.listdir(tmp_path / "runs")
    assert re.fullmatch(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname()), made)
    assert w.logdir == os.path.join("runs", made)
    assert readback.scalars(str(tmp_path / "runs" / made), ".", "a") == [(3, 1.0)]
