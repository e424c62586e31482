"""The queue's bound (``max_queue_bytes``): sized from the memory the process may use, large
arrays handed over back to back without waiting, scalars held to their own share of it."""
import json
import threading

import numpy as np
import pytest

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer import DEFAULT_MAX_QUEUE_BYTES
from gluon_tb.writer._io import pipeline, queue_bound
from gluon_tb.writer._summaries import histogram

MiB, GiB = 1 << 20, 1 << 30


@pytest.mark.parametrize("memory, bound", [(0, 64 * MiB), (1 * GiB, 64 * MiB), (8 * GiB, 256 * MiB),
                                           (128 * GiB, 1 * GiB)])
def test_the_default_bound_is_a_share_of_memory_within_limits(monkeypatch, memory, bound):
    monkeypatch.setattr(queue_bound, "memory_limit", lambda: memory)
    assert queue_bound.default_max_queue_bytes() == bound


def test_a_container_limit_below_the_machine_is_the_memory(tmp_path, monkeypatch):
    limit = tmp_path / "memory.max"
    limit.write_text("2147483648\n")
    unlimited = tmp_path / "v1"
    unlimited.write_text("max\n")
    monkeypatch.setattr(queue_bound, "CGROUP_LIMITS", (str(unlimited), str(limit)))
    assert queue_bound.memory_limit() == 2 * GiB
    monkeypatch.setattr(queue_bound, "CGROUP_LIMITS", (str(unlimited),))
    machine = queue_bound.memory_limit()
    assert machine > 2 * GiB  # the machine's memory: "max" is no limit
    assert 64 * MiB <= DEFAULT_MAX_QUEUE_BYTES <= GiB


def test_none_is_the_default_bound(tmp_path):
    with SummaryWriter(tmp_path, max_queue_bytes=None) as w:
        assert w._p.max_queue_bytes == DEFAULT_MAX_QUEUE_BYTES
        w.add_scalar("x", 1.0, 0)
    assert readback.scalars(str(tmp_path), ".", "x") == [(0, 1.0)]


@pytest.fixture
def held_writer_thread(monkeypatch):
    """Histograms wait in the writer thread until the test lets them go."""
    gate = threading.Event()
    real = histogram.build_histogram

    def held(tag, payload):
        gate.wait(60)
        return real(tag, payload)

    monkeypatch.setattr(histogram, "build_histogram", held)
    yield gate
    gate.set()


def test_large_arrays_fill_the_bound_and_scalars_only_their_share(tmp_path, monkeypatch, held_writer_thread):
    monkeypatch.setattr(pipeline, "SCALAR_BOUND", 64 << 10)  # scalars: at most 64 KiB of an 8 MiB bound
    w = SummaryWriter(tmp_path, max_queue_bytes=8 * MiB, on_full="drop")
    arrays = [np.random.RandomState(i).rand(256 << 10).astype(np.float32) for i in range(5)]  # 1 MiB each
    for i, a in enumerate(arrays):
        w.add_histogram("h", a, i)
    assert w._p.dropped == 0  # 5 MiB waiting: under the bound, nothing dropped
    for i in range(2000):  # 2000 scalars would fit the 8 MiB bound, not the scalars' 64 KiB
        w.add_scalar("s", float(i), i)
    assert w._p.dropped > 0
    held_writer_thread.set()
    w.close()
    d = str(tmp_path)
    assert [e.step for e in readback.tensor_events(d, ".", "h")] == [0, 1, 2, 3, 4]
    kept, dropped = readback.scalars(d, ".", "s"), readback.scalars(d, ".", "gluon_tb/dropped_events")
    assert len(kept) + dropped[-1][1] == 2000
    assert len(kept) >= (64 << 10) // pipeline.SCALAR_COST - 8 * 5  # about the share, less the histograms' items


def test_a_blocking_writer_takes_large_arrays_under_the_bound_without_waiting(tmp_path, held_writer_thread):
    w = SummaryWriter(tmp_path, max_queue_bytes=8 * MiB)
    done = threading.Event()

    def produce():
        for i in range(5):
            w.add_histogram("h", np.full(256 << 10, float(i), np.float32), i)  # 1 MiB each
        done.set()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    assert done.wait(30), "add_histogram waited for the writer thread under the bound"
    late = threading.Thread(target=w.add_histogram, args=("h", np.zeros(4 << 20, np.float32), 5), daemon=True)
    late.start()  # 16 MiB: over the bound, it waits for the writer thread
    late.join(0.5)
    assert late.is_alive()
    held_writer_thread.set()
    late.join(30)
    w.close()
    assert [e.step for e in readback.tensor_events(str(tmp_path), ".", "h")] == [0, 1, 2, 3, 4, 5]


def test_a_dropped_profile_returns_no_path(tmp_path, held_writer_thread):
    """``add_profile`` returns where its file will be; with ``on_full="drop"`` and the queue full,
    nothing will be there: it returns None, and the drop is counted."""
    w = SummaryWriter(tmp_path, max_queue_bytes=4 * MiB, on_full="drop")
    w.add_histogram("h", np.ones(1 << 20, np.float32), 0)  # 4 MiB: the queue is full behind the held thread
    trace = {"traceEvents": [{"name": "op", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    dropped = w.add_profile(str(path), session="full", host="h")  # its bytes do not fit
    held_writer_thread.set()
    w.flush()
    kept = w.add_profile(trace, session="room", host="h")
    w.close()
    assert dropped is None and w._p.dropped == 1
    assert kept == "plugins/profile/room/h.xplane.pb" and (tmp_path / kept).stat().st_size > 0
    assert not (tmp_path / "plugins" / "profile" / "full").exists()
    assert readback.scalars(str(tmp_path), ".", "gluon_tb/dropped_events")[-1][1] == 1


def test_drop_mode_queues_an_event_larger_than_the_bound_when_nothing_else_waits(tmp_path, held_writer_thread):
    """A histogram of 8 MiB against a 4 MiB bound: alone, it is taken (as "block" takes it once the
    queue is empty); behind another, it is dropped and counted."""
    w = SummaryWriter(tmp_path, max_queue_bytes=4 * MiB, on_full="drop")
    w.add_histogram("big", np.ones(2 << 20, np.float32), 0)  # nothing queued: taken
    w.add_histogram("big", np.ones(2 << 20, np.float32), 1)  # the first still waits: dropped
    held_writer_thread.set()
    w.close()
    assert w._p.dropped == 1
    assert [e.step for e in readback.tensor_events(str(tmp_path), ".", "big")] == [0]


def test_histogram_groups_queued_lazily_are_read_a_little_later_in_one_round(tmp_path, monkeypatch):
    """``wake=False`` (what a handler passes every batch, so that MXNet has copied the arrays by
    the time they are read): the first such group wakes the worker, which waits ``LAZY_DELAY``
    before it drains; groups queued while it waits do not wake it again; past the bytes' cap one
    does. All are written without a flush, long before the worker's own round (2 s here)."""
    import time

    from gluon_tb.writer._io import worker

    built = []
    real = histogram.build_histograms
    monkeypatch.setattr(histogram, "build_histograms", lambda tag, group: built.append((tag, time.monotonic()))
                        or real(tag, group))
    monkeypatch.setattr(pipeline, "LAZY_MAX_BYTES", 1 * MiB)
    w = SummaryWriter(tmp_path, flush_secs=4.0)
    w.add_scalar("s", 1.0, 0)
    w.flush()  # the worker has just drained: its own round is 2 s away
    p = w._p
    t0 = time.monotonic()
    w._add_histograms_known({"a": np.arange(10.0)}, None, 0, wake=False)
    assert p._lazy.is_set()  # the worker is woken, and waits LAZY_DELAY
    w._add_histograms_known({"b": np.arange(10.0)}, None, 0, wake=False)  # read in the same round
    deadline = t0 + 10

    def steps(tag):
        try:
            return [e.step for e in readback.tensor_events(str(tmp_path), ".", tag)]
        except KeyError:  # not on disk yet
            return []

    while len(built) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert [t for t, _ in built] == ["a", "b"]
    assert worker.LAZY_DELAY * 0.8 <= built[0][1] - t0 <= 1.5  # after the delay, not at the round
    while not (steps("a") and steps("b")) and time.monotonic() < deadline:
        time.sleep(0.01)  # written without a flush
    assert steps("a") == steps("b") == [0]
    p._lazy.set()  # as while the worker waits: a small group does not wake it, a large one does
    w._add_histograms_known({"c": np.arange(10.0)}, None, 1, wake=False)
    assert not p._wake.is_set()
    w._add_histograms_known({"big": np.ones((2 * MiB) // 4, np.float32)}, None, 1, wake=False)  # over the cap
    assert p._wake.is_set() or len(built) > 2
    t1 = time.monotonic()
    while len(built) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert [t for t, _ in built[2:]] == ["c", "big"] and built[2][1] - t1 <= 1.5
    w.close()
    assert steps("c") == steps("big") == [1]
