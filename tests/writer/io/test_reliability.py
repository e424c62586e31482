"""Faults caused for real: kills, signals, full disks, I/O errors, threads, forks."""
import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer._io.local_output import LocalOutput
from gluon_tb.writer._io.memory_output import MemoryOutput

from repo_paths import ROOT  # noqa: E402


def _spawn(code, *args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_ready(proc, timeout=60):
    line = proc.stdout.readline()
    assert line.strip() == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")


def _scalar_steps(logdir, tag="s"):
    return [s for s, _ in readback.scalars(str(logdir), ".", tag)]


# ---------------------------------------------------------------- crashes
def test_sigkill_after_flush_keeps_everything_flushed_and_a_new_writer_carries_on(tmp_path):
    p = _spawn("""
        import sys, time
        from gluon_tb import SummaryWriter
        w = SummaryWriter(sys.argv[1], flush_secs=3600)
        for i in range(3000):
            w.add_scalar("s", float(i), i)
        w.flush()
        print("ready", flush=True)
        for i in range(3000, 10**9):   # keeps logging, unflushed, until killed
            w.add_scalar("s", float(i), i)
            if i % 100 == 0:
                time.sleep(0.001)
    """, tmp_path)
    try:
        _wait_ready(p)
        time.sleep(0.2)
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    finally:
        p.kill()
    steps = _scalar_steps(tmp_path)
    assert steps[:3000] == list(range(3000))
    assert steps == list(range(len(steps)))  # whatever else got out is whole and in order
    with SummaryWriter(tmp_path, purge_step=len(steps)) as w:
        w.add_scalar("s", -1.0, len(steps))
    assert _scalar_steps(tmp_path) == list(range(len(steps) + 1))
    assert len(readback.event_files(str(tmp_path))) == 2


def test_torn_tail_costs_only_the_torn_record(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for i in range(10):
            w.add_scalar("s", float(i), i)
    (path,) = readback.event_files(str(tmp_path))
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 3)  # a half-written last record, as a crash mid-write leaves
    assert _scalar_steps(tmp_path) == list(range(9))
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("s", 10.0, 10)
    assert _scalar_steps(tmp_path) == list(range(9)) + [10]


@pytest.mark.parametrize("ending", [
    "os.kill(os.getpid(), signal.SIGTERM); time.sleep(30)",
    "sys.exit(3)",
    "raise RuntimeError('escaped from fit')",
    "pass  # the interpreter simply ends, close() never called",
])
def test_everything_logged_is_on_disk_however_the_process_ends(tmp_path, ending):
    p = _spawn(f"""
        import os, signal, sys, time
        import numpy as np
        from gluon_tb import SummaryWriter
        w = SummaryWriter(sys.argv[1], flush_secs=3600)
        for i in range(2000):
            w.add_scalar("s", float(i), i)
        w.add_histogram("h", np.arange(100.0), 5)
        {ending}
    """, tmp_path)
    _out, err = p.communicate(timeout=60)
    assert _scalar_steps(tmp_path) == list(range(2000)), err
    assert len(readback.tensor_events(str(tmp_path), ".", "h")) == 1
    if "SIGTERM" in ending:
        assert p.returncode == -signal.SIGTERM  # still dies the way SIGTERM kills


def test_sigterm_handler_of_the_user_is_left_alone(tmp_path):
    p = _spawn("""
        import signal, sys
        signal.signal(signal.SIGTERM, lambda *a: print("user handler", flush=True))
        from gluon_tb import SummaryWriter
        w = SummaryWriter(sys.argv[1])
        w.add_scalar("s", 1.0)
        import os; os.kill(os.getpid(), signal.SIGTERM)
        print(signal.getsignal(signal.SIGTERM).__name__, flush=True)
    """, tmp_path)
    out, err = p.communicate(timeout=60)
    assert out.split() == ["user", "handler", "<lambda>"], err


# ---------------------------------------------------------------- file system faults
class FailingWrite:
    """``os.write`` until :meth:`fail`: then write number ``after + 1`` and every later one
    write half their buffer and fail with ``err_no``, as a filling disk does, until :meth:`heal`."""

    def __init__(self):
        self.err_no, self.after, self.calls = None, 0, 0

    def fail(self, err_no, after=0):
        self.err_no, self.after, self.calls = err_no, after, 0
        return self.heal

    def heal(self):
        self.err_no = None

    def __call__(self, fd, data):
        if self.err_no is not None:
            self.calls += 1
            if self.calls > self.after:
                os.write(fd, bytes(data[: len(data) // 2]))
                raise OSError(self.err_no, os.strerror(self.err_no))
        return os.write(fd, data)


class WriterOn(SummaryWriter):
    """A ``SummaryWriter`` whose local output writes event records through ``records`` and
    whole files through ``files`` (``os.write`` by default): the disk as the test makes it.
    Or, given ``output`` (a ``MemoryOutput``, say), one that writes there."""

    def __init__(self, logdir, records=os.write, files=os.write, output=None, **kwargs):
        self._writes = records, files, output
        super().__init__(logdir, **kwargs)

    def _open_output(self, logdir, remote, suffix, look_for_others):
        records, files, output = self._writes
        if output is not None:
            return output
        return LocalOutput(logdir, suffix, look_for_others, record_write=records, file_write=files)


@pytest.mark.parametrize("err_no", [errno.ENOSPC, errno.EIO])
def test_injected_write_error_reaches_the_user_and_nothing_before_is_lost(tmp_path, err_no):
    disk = FailingWrite()
    w = WriterOn(tmp_path, records=disk)
    for i in range(100):
        w.add_scalar("s", float(i), i)
    w.flush()
    heal = disk.fail(err_no)
    for i in range(100, 200):
        w.add_scalar("s", float(i), i)
    with pytest.raises(OSError) as exc:
        w.flush()
    assert exc.value.errno == err_no
    heal()
    w.add_scalar("s", 1000.0, 1000)  # the writer keeps working after the error was reported
    w.close()
    assert _scalar_steps(tmp_path) == list(range(100)) + [1000]
    for path in readback.event_files(str(tmp_path)):
        readback.raw_events(path)  # strict: no torn record anywhere


class ByteBudget:
    """``os.write`` onto a disk that holds ``budget`` bytes of the file: a write past it writes what
    fits and the next one fails with ENOSPC (what a filling disk does); truncation frees room."""

    def __init__(self, budget):
        self.budget = budget

    def __call__(self, fd, data):
        room = self.budget - os.fstat(fd).st_size
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, bytes(data[:room]))


def test_a_write_the_disk_has_no_room_for_keeps_what_fits_and_names_the_file(tmp_path):
    """One flush of 100 scalars and a large text does not fit whole: the records that fit are
    written one by one (all the scalars), the text is lost, and the error names the event file
    and counts what was not written. The file stays whole."""
    w = WriterOn(tmp_path, records=ByteBudget(100 * 60 + 200))
    for i in range(50):
        w.add_scalar("s", float(i), i)
    w.add_text("t", "x" * 5000, 0)
    for i in range(50, 100):
        w.add_scalar("s", float(i), i)
    with pytest.raises(OSError) as exc:
        w.flush()
    (path,) = readback.event_files(str(tmp_path))
    assert exc.value.errno == errno.ENOSPC
    assert path in str(exc.value) and "1 event record not written" in str(exc.value), str(exc.value)
    assert exc.value.lost_records == 1
    w.close()
    assert _scalar_steps(tmp_path) == list(range(100))
    assert (".", "t") not in readback.tags(str(tmp_path)) and (".", "s") in readback.tags(str(tmp_path))
    readback.raw_events(path)  # strict: no torn record


def test_a_write_error_names_the_event_file_for_every_errno(tmp_path):
    disk = FailingWrite()
    w = WriterOn(tmp_path, records=disk)
    w.add_scalar("s", 0.0, 0)
    w.flush()
    (path,) = readback.event_files(str(tmp_path))
    disk.fail(errno.EIO)
    for i in range(1, 4):
        w.add_scalar("s", float(i), i)
    with pytest.raises(OSError) as exc:
        w.flush()
    assert exc.value.errno == errno.EIO and path in str(exc.value) and "3 event records not written" in str(exc.value)
    disk.heal()
    w.close()
    assert _scalar_steps(tmp_path) == [0]


def test_a_full_disk_when_the_file_is_created_leaves_no_file_without_its_first_event(tmp_path):
    """The first write of a new file (its file_version event) fails: no file is kept, and the next
    write starts a new one with that event, so TensorBoard reads it as a new-format file (an old-
    format one is purged whenever a step goes back)."""
    disk = FailingWrite()
    w = WriterOn(tmp_path, records=disk)
    heal = disk.fail(errno.ENOSPC)
    w.add_scalar("s", 1.0, 1)
    with pytest.raises(OSError) as exc:
        w.flush()
    assert exc.value.errno == errno.ENOSPC
    assert str(exc.value).startswith(f"[Errno {errno.ENOSPC}] cannot start an event file in {tmp_path}: ")
    assert readback.event_files(str(tmp_path)) == []
    heal()
    for step in (5, 3, 4, 10):  # steps going back: kept in a new-format file
        w.add_scalar("s", float(step), step)
    w.close()
    (path,) = readback.event_files(str(tmp_path))
    assert readback.raw_events(path)[0].file_version == "brain.Event:2"
    assert readback.scalars(str(tmp_path), ".", "s") == [(5, 5.0), (3, 3.0), (4, 4.0), (10, 10.0)]


def test_a_scalar_whose_tag_cannot_be_encoded_costs_only_itself(tmp_path):
    """The producer refuses such a tag (a ValueError: tests/writer/test_bad_input.py); one that gets past it
    into the queue is reported once and the worker goes on with the rest."""
    w = SummaryWriter(tmp_path)
    w.add_scalar("s", 0.0, 0)
    w._p.put_scalar((None, "a\udc80b", 1.0, 1, 0.0))  # past the check, as a bug elsewhere could
    w.add_scalar("s", 2.0, 2)
    with pytest.raises(UnicodeEncodeError):
        w.flush()
    w.add_scalar("s", 3.0, 3)
    w.close()
    assert _scalar_steps(tmp_path) == [0, 2, 3]


def test_a_writer_freed_on_its_own_writer_thread_finishes_without_deadlock(tmp_path, monkeypatch):
    """The cyclic collector can free a forgotten writer on any thread, its own writer thread too,
    which may hold its wake-up Event's lock at that moment (inside Event.wait). __del__ there must
    neither wake nor wait for that thread: the thread finishes and writes what it had."""
    from gluon_tb.writer._summaries import histogram

    w = SummaryWriter(tmp_path, flush_secs=0.1)
    p, real = w._p, histogram.build_histogram
    freed = threading.Event()

    def build(tag, payload):
        if not freed.is_set():
            freed.set()
            with p._wake._cond:  # as inside Event.wait, when a collection frees the writer
                w.__del__()
        return real(tag, payload)

    monkeypatch.setattr(histogram, "build_histogram", build)
    for i in range(3):
        w.add_scalar("s", float(i), i)
    w.add_histogram("h", np.arange(10.0), 0)
    worker = p._thread
    assert p._launched.wait(10)  # the starter thread has started it
    worker.join(20)
    assert not worker.is_alive(), "the writer thread did not finish"
    assert _scalar_steps(tmp_path) == [0, 1, 2]
    assert [e.step for e in readback.tensor_events(str(tmp_path), ".", "h")] == [0]


def test_injected_error_is_raised_by_the_next_add_call(tmp_path):
    out = MemoryOutput()
    w = WriterOn(tmp_path, output=out)
    w.add_scalar("s", 0.0, 0)
    w.flush()
    out.fail(errno.EIO)
    w.add_scalar("s", 1.0, 1)
    w._p.flush()  # let the worker meet the fault without reporting it (the writer's flush() would)
    with pytest.raises(OSError):
        w.add_scalar("s", 2.0, 2)
    w.add_scalar("s", 3.0, 3)  # reported once; then it goes on


@pytest.fixture
def tiny_tmpfs(mount_tmpfs):
    return mount_tmpfs("64k")


def test_real_full_disk_raises_enospc_and_keeps_what_was_written(tiny_tmpfs):
    w = SummaryWriter(tiny_tmpfs / "run")
    for i in range(200):
        w.add_scalar("s", float(i), i)
    w.flush()
    with pytest.raises(OSError) as exc:
        for i in range(200, 20000):
            w.add_text("t", "x" * 1000, i)
            if i % 50 == 0:
                w.flush()
    assert exc.value.errno == errno.ENOSPC
    w.close()
    assert _scalar_steps(tiny_tmpfs / "run") == list(range(200))
    for path in readback.event_files(str(tiny_tmpfs / "run")):
        readback.raw_events(path)  # every record whole


def test_event_records_are_framed_and_written_by_one_c_call(tmp_path, monkeypatch):
    """With the C kernel, each drained batch of a run is framed, checked against a deleted file
    and appended by one call that releases the GIL once (not three: frame_many, fstat, write);
    the full-disk and deleted-directory tests here run through it."""
    from gluon_tb.writer._io import event_file

    if event_file.frame_append is None:
        pytest.skip("the C kernel is not built here")
    calls = []

    def spy(fd, records, start):
        calls.append(len(records))
        return real(fd, records, start)

    real = event_file.frame_append
    monkeypatch.setattr(event_file, "frame_append", spy)
    w = SummaryWriter(tmp_path)
    w.add_scalar("s", 0.0, 0)
    w.flush()  # the first write opens the file and writes through write()
    for i in range(1, 6):
        w.add_scalar("s", float(i), i)
    w.add_text("t", "x", 5)
    w.close()
    assert sum(calls) == 6 and len(calls) >= 1
    assert readback.scalars(str(tmp_path), ".", "s") == [(i, float(i)) for i in range(6)]


def test_deleted_log_directory_is_reported_and_logging_goes_on(tmp_path):
    import shutil

    run = tmp_path / "run"
    w = SummaryWriter(run)
    w.add_scalar("s", 1.0, 1)
    w.flush()
    shutil.rmtree(run)
    w.add_scalar("s", 2.0, 2)
    with pytest.raises(OSError, match="was deleted"):
        w.flush()
    w.add_scalar("s", 3.0, 3)
    w.close()
    assert _scalar_steps(run) == [2, 3]


def test_worker_error_from_a_builder_is_raised_once(tmp_path):
    w = SummaryWriter(tmp_path)

    def broken(tag, payload):
        raise ValueError("builder broke")

    w._queue("bad", broken, None, 0, None)
    with pytest.raises(ValueError, match="builder broke"):
        w.flush()
    w.add_scalar("ok", 1.0)
    w.close()
    assert readback.tags(str(tmp_path)) == {(".", "ok")}


# ---------------------------------------------------------------- backpressure
def test_queue_is_bounded_in_bytes_and_the_producer_blocks(tmp_path):
    peak = {"used": 0}

    def slow(fd, data):
        time.sleep(0.002)
        return os.write(fd, data)

    limit = 256 << 10
    w = WriterOn(tmp_path, records=slow, max_queue_bytes=limit, max_queue=64)
    arr = np.ones(4096, dtype=np.float32)  # 16 KiB each
    for i in range(300):
        w.add_histogram("h", arr, i)
        peak["used"] = max(peak["used"], w._p.queued_bytes())
    w.close()
    assert peak["used"] <= limit + arr.nbytes + 4096
    assert len(readback.tensor_events(str(tmp_path), ".", "h")) == 300


# ---------------------------------------------------------------- threads and processes
def test_eight_threads_writing_at_once_lose_and_tear_nothing(tmp_path):
    w = SummaryWriter(tmp_path, max_queue_bytes=1 << 20)
    n = 5000

    def work(k):
        for i in range(n):
            w.add_scalar(f"t{k}", float(i), i)
            if i % 1000 == 0:
                w.add_histogram(f"h{k}", np.arange(10.0) + i, i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    for k in range(8):
        assert readback.scalars(str(tmp_path), ".", f"t{k}") == [(i, float(i)) for i in range(n)]
        assert [e.step for e in readback.tensor_events(str(tmp_path), ".", f"h{k}")] == list(range(0, n, 1000))
    for path in readback.event_files(str(tmp_path)):
        readback.raw_events(path)


def test_forked_children_never_write_into_the_parents_file(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600)
    for i in range(100):
        w.add_scalar("parent", float(i), i)  # queued, not yet written, at the fork
    pid = os.fork()
    if pid == 0:  # child: log on its own, then leave the way worker processes do
        try:
            w.add_scalar("child", 1.0, 0)
            w.flush()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    for i in range(100, 200):
        w.add_scalar("parent", float(i), i)
    w.close()
    files = readback.event_files(str(tmp_path))
    assert len(files) == 2  # one per process
    by_pid = {int(os.path.basename(f).split(".")[-2]): f for f in files}
    assert set(by_pid) == {os.getpid(), pid}
    parent_tags = {v.tag for e in readback.raw_events(by_pid[os.getpid()]) for v in e.summary.value}
    child_tags = {v.tag for e in readback.raw_events(by_pid[pid]) for v in e.summary.value}
    assert parent_tags == {"parent"} and child_tags == {"child"}
    assert readback.scalars(str(tmp_path), ".", "parent") == [(i, float(i)) for i in range(200)]


def test_gluon_dataloader_with_forked_workers_leaves_the_log_intact(tmp_path):
    mx = pytest.importorskip("mxnet")
    from mxnet import gluon

    w = SummaryWriter(tmp_path)
    ds = gluon.data.ArrayDataset(mx.nd.arange(64).reshape(64, 1), mx.nd.arange(64))
    loader = gluon.data.DataLoader(ds, batch_size=8, num_workers=2, thread_pool=False)
    step = 0
    for _epoch in range(2):
        for data, _label in loader:
            w.add_scalar("s", float(data.sum().asscalar()), step)
            step += 1
    w.close()
    assert _scalar_steps(tmp_path) == list(range(16))
    assert len(readback.event_files(str(tmp_path))) == 1
