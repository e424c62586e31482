"""The thread contract, under load: every add_*, flush(), close() and reopen() at once.

Each test runs its threads as daemons and joins them against a deadline, so a hang
fails the test (with every thread's stack) instead of stalling the suite. Afterwards
TensorBoard's reader must find exactly what the callers were told was accepted:
with ``on_full="block"`` every call that did not raise; with ``"drop"`` those minus
the drops, and the drops counted in ``gluon_tb/dropped_events``.
"""
from __future__ import annotations

import faulthandler
import io
import os
import random
import sys
import threading
import time
import uuid

import numpy as np
import pytest
from PIL import Image

import readback
from gluon_tb import SummaryWriter
from gluon_tb.writer import WriterClosedError

mx = pytest.importorskip("mxnet")
DEADLINE = 60.0  # seconds every thread of a test gets to finish; a hang fails the test


def join_all(threads, deadline=DEADLINE):
    """Join ``threads`` by ``deadline`` seconds from now; fail with every stack if one hangs."""
    end = time.monotonic() + deadline
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        pytest.fail(f"threads still running after {deadline:.0f} s (a hang): {alive}")


def in_thread(fn, *args):
    """Run ``fn(*args)`` on a daemon thread within the deadline; return its result or raise its error."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # handed to the test thread
            out["error"] = e

    t = threading.Thread(target=run, name=getattr(fn, "__name__", "call"), daemon=True)
    t.start()
    join_all([t])
    if "error" in out:
        raise out["error"]
    return out.get("value")


# ---------------------------------------------------------------- the reported hang
def test_drop_mode_flush_beside_two_producers_returns(tmp_path):
    """The hang once reported here: the drop path popped the rightmost item, which could be
    flush()'s marker, and flush() waited for it for ever."""
    w = SummaryWriter(tmp_path, max_queue_bytes=4096, on_full="drop")
    n = 30000
    flushes = []

    def produce(k):
        for i in range(n):
            w.add_scalar(f"t{k}", float(i), i)

    def flush():
        for _ in range(40):
            w.flush()
            flushes.append(1)

    threads = [threading.Thread(target=produce, args=(k,), daemon=True) for k in range(2)]
    threads.append(threading.Thread(target=flush, daemon=True))
    for t in threads:
        t.start()
    join_all(threads, 30.0)
    assert len(flushes) == 40
    in_thread(w.close)
    tags = readback.tags(str(tmp_path))
    assert tags <= {(".", "t0"), (".", "t1"), (".", "gluon_tb/dropped_events")}
    dropped = readback.scalars(str(tmp_path), ".", "gluon_tb/dropped_events")
    kept = {k: readback.scalars(str(tmp_path), ".", f"t{k}") if (".", f"t{k}") in tags else []
            for k in range(2)}
    assert kept[0] or kept[1]
    for k in range(2):  # what was kept is exactly what was logged, each step once
        assert len({s for s, _ in kept[k]}) == len(kept[k])
        assert all(v == float(s) for s, v in kept[k])
    assert sum(len(v) for v in kept.values()) + (dropped[-1][1] if dropped else 0) == 2 * n


# ---------------------------------------------------------------- close() against one producer
def _scalar(step):
    return (None, "s", float(step), step, 1.0)  # a queued scalar: (run, tag, value, step, wall)


@pytest.mark.parametrize("on_full", ["block", "drop"])
def test_an_item_queued_ahead_of_close_is_written_and_one_after_it_refused(tmp_path, on_full):
    """The two ways a producer that sees ``closed`` after queueing can end, made deterministic."""
    from gluon_tb.writer._io.output import open_output
    from gluon_tb.writer._io.pipeline import Pipeline

    p = Pipeline(open_output(str(tmp_path)), on_full=on_full)
    p.put_scalar(_scalar(0))
    ahead, after = _scalar(1), _scalar(2)
    p._q.append(ahead)  # queued, then close() ran before the producer looked at `closed`
    assert in_thread(p.close) is True
    p._late(ahead)  # it went in ahead of STOP: written, so no error
    p._q.append(after)  # queued after STOP: the worker left it there
    with pytest.raises(WriterClosedError, match="closed while this call ran"):
        p._late(after)
    with pytest.raises(WriterClosedError):  # and through the public call
        p.put_scalar(_scalar(3))
    assert readback.scalars(str(tmp_path), ".", "s") == [(0, 0.0), (1, 1.0)]


def test_second_close_waits_for_the_first_and_add_after_close_raises(tmp_path):
    w = SummaryWriter(tmp_path, flush_secs=3600)
    for i in range(20000):
        w.add_scalar("s", float(i), i)
    sizes = []

    def close():
        w.close()
        sizes.append(sum(os.path.getsize(f) for f in readback.event_files(str(tmp_path))))

    closers = [threading.Thread(target=close, daemon=True) for _ in range(3)]
    for t in closers:
        t.start()
    join_all(closers)
    assert len(readback.scalars(str(tmp_path), ".", "s")) == 20000
    final = sum(os.path.getsize(f) for f in readback.event_files(str(tmp_path)))
    assert sizes == [final] * 3  # each close() returned with everything already written
    with pytest.raises(WriterClosedError):
        w.add_scalar("s", 1.0, 20000)
    with pytest.raises(WriterClosedError):
        w.flush()


def test_dataloader_worker_threads_log_beside_the_training_loop(tmp_path):
    """A Dataset that logs from Gluon's DataLoader worker threads (thread_pool=True)."""
    from mxnet import gluon

    w = SummaryWriter(tmp_path, max_queue_bytes=8 << 10)

    class Logged(gluon.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            w.add_scalar("sample", float(i), i)
            w.add_text("sample_text", f"item {i}", i)
            return np.float32(i)

    loader = gluon.data.DataLoader(Logged(), batch_size=8, num_workers=3, thread_pool=True)

    def train():
        step = 0
        for _epoch in range(2):
            for batch in loader:
                w.add_scalar("batch_sum", float(batch.sum().asscalar()), step)
                w.add_histogram("batch", batch, step)
                w.flush()
                step += 1

    in_thread(train)
    in_thread(w.close)
    assert readback.tags(str(tmp_path)) == {(".", "sample"), (".", "sample_text"), (".", "batch_sum"),
                                            (".", "batch")}
    # every item twice (two epochs), every batch once
    assert sorted(readback.scalars(str(tmp_path), ".", "sample")) == sorted(
        [(i, float(i)) for i in range(64)] * 2)
    assert len(readback.tensor_events(str(tmp_path), ".", "sample_text")) == 128
    assert readback.scalars(str(tmp_path), ".", "batch_sum") == [
        (s, float(sum(range(8 * (s % 8), 8 * (s % 8) + 8)))) for s in range(16)]
    assert [e.step for e in readback.tensor_events(str(tmp_path), ".", "batch")] == list(range(16))


# ---------------------------------------------------------------- everything at once
KINDS = ["scalar"] * 8 + ["hist_np"] * 2 + ["hist_nd"] * 2 + ["image"] * 2 + ["text"] * 2 + ["embedding"]


def _call(w, kind, k, i):
    """One add_* call of thread ``k``; returns the key TensorBoard should read back."""
    if kind == "scalar":
        w.add_scalar(f"s{k}", float(i * 8 + k), i)
        return ("s", f"s{k}", i, float(i * 8 + k))
    if kind == "hist_np":
        n = 16 + i % 50
        w.add_histogram(f"h{k}", np.arange(n, dtype=np.float32) - i, i)
        return ("h", f"h{k}", i, n)
    if kind == "hist_nd":
        n = 16 + i % 40
        w.add_histogram(f"n{k}", mx.nd.arange(n) * 0.5, i)
        return ("h", f"n{k}", i, n)
    if kind == "image":
        w.add_image(f"i{k}", np.full((2 + i % 4, 3), i % 256, dtype=np.uint8), i)
        return ("i", f"i{k}", i, (3, 2 + i % 4, i % 256))
    if kind == "text":
        w.add_text(f"t{k}", f"thread {k} call {i}", i)
        return ("t", f"t{k}", i, f"thread {k} call {i}")
    w.add_embedding(f"e{k}", np.full((3, 2), i, dtype=np.float32), labels=["a", "b", "c"], global_step=i)
    return ("e", f"e{k}", i, None)


def _read_back(logdir):
    """``{(kind, tag, step, value)}`` of everything our tags hold, and the final drop count."""
    from tensorboard.util import tensor_util

    mux = readback.multiplexer(logdir)
    got = set()
    dropped = 0
    for run, kinds in mux.Runs().items():
        assert run == ".", f"spurious run {run!r}"
        for tag in kinds.get("tensors", []):
            events = mux.Tensors(run, tag)
            if tag == "gluon_tb/dropped_events":
                dropped = max(int(tensor_util.make_ndarray(e.tensor_proto)) for e in events)
                continue
            for e in events:
                if tag[0] == "s":
                    got.add(("s", tag, e.step, float(tensor_util.make_ndarray(e.tensor_proto))))
                elif tag[0] in "hn":
                    buckets = tensor_util.make_ndarray(e.tensor_proto)
                    got.add(("h", tag, e.step, int(buckets[:, 2].sum())))
                elif tag[0] == "i":
                    w, h, png = e.tensor_proto.string_val
                    px = np.asarray(Image.open(io.BytesIO(png)))
                    assert (px == px.flat[0]).all()
                    got.add(("i", tag, e.step, (int(w), int(h), int(px.flat[0]))))
                else:
                    got.add(("t", tag, e.step, e.tensor_proto.string_val[0].decode()))
    from tensorboard.plugins.projector import projector_plugin as pp

    for root, _dirs, files in os.walk(logdir):
        for name in {"tensors.tsv", "tensors.bytes"} & set(files):  # read as the projector reads them
            rel = os.path.relpath(root, logdir).split(os.sep)
            path = os.path.join(root, name)
            rows = (pp._read_tensor_tsv_file(path) if name.endswith(".tsv")
                    else pp._read_tensor_binary_file(path, [3, 2])).tolist()
            step = int(rel[1])
            assert rows == [[float(step)] * 2] * 3
            got.add(("e", rel[0], step, None))
    return got, dropped


def _stress(logdir, on_full, seconds=3.0, **kw):
    """8 producers for ``seconds``, 2 flushing threads and one closing and reopening;
    returns the keys of every call that was accepted (did not raise)."""
    w = SummaryWriter(logdir, flush_secs=0.2, on_full=on_full, worker_nice=None, **kw)
    accepted, errors, slowest, refused, cycles = [], [], [0.0], [], []
    done = threading.Event()
    end = time.monotonic() + seconds

    def timed(fn, *args):
        t = time.monotonic()
        try:
            return fn(*args)
        finally:
            slowest[0] = max(slowest[0], time.monotonic() - t)

    def produce(k):
        rnd = random.Random(k)
        try:
            i = 0
            while time.monotonic() < end:
                kind = rnd.choice(KINDS)
                try:
                    accepted.append(timed(_call, w, kind, k, i))
                except WriterClosedError:
                    refused.append(i)  # refused while closed: must not show up
                i += 1
                if i % 4 == 0:
                    time.sleep(0.001)  # a pace the worker can follow, so close() comes often
        except BaseException as e:
            errors.append(e)

    def flush():
        try:
            while not done.is_set():
                try:
                    timed(w.flush)
                except WriterClosedError:
                    pass
                time.sleep(0.005)
        except BaseException as e:
            errors.append(e)

    def close_reopen():
        try:
            while not done.is_set():
                time.sleep(0.05)
                timed(w.close)
                time.sleep(0.005)
                w.reopen()
                cycles.append(1)
        except BaseException as e:
            errors.append(e)

    producers = [threading.Thread(target=produce, args=(k,), name=f"producer{k}", daemon=True)
                 for k in range(8)]
    others = [threading.Thread(target=flush, name=f"flush{j}", daemon=True) for j in range(2)]
    others.append(threading.Thread(target=close_reopen, name="close_reopen", daemon=True))
    for t in producers + others:
        t.start()
    join_all(producers)
    done.set()
    join_all(others)
    in_thread(w.close)
    assert not errors, errors
    assert slowest[0] < DEADLINE
    print(f"{len(accepted)} accepted, {len(refused)} refused, {len(cycles)} close/reopen cycles")
    assert len(cycles) >= 3 and refused, "close() never raced the producers"
    return set(accepted)


@pytest.mark.parametrize("where", ["local", "memory"])
@pytest.mark.parametrize("max_queue_bytes", [16 << 10, None], ids=["16KiB", "default"])
@pytest.mark.parametrize("on_full", ["block", "drop"])
def test_every_call_at_once_loses_nothing_it_accepted(tmp_path, on_full, max_queue_bytes, where):
    kw = {} if max_queue_bytes is None else {"max_queue_bytes": max_queue_bytes}
    if where == "local":
        logdir = local = str(tmp_path / "run")
        accepted = _stress(logdir, on_full, **kw)
    else:
        fsspec = pytest.importorskip("fsspec")
        fs, root = fsspec.filesystem("memory"), f"/gluon_tb_stress/{uuid.uuid4().hex}"
        try:
            accepted = _stress("memory://" + root, on_full, **kw)
            local = tmp_path / "copy"
            fs.invalidate_cache()
            for p in fs.find(root):
                dst = local / p[len(root):].lstrip("/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(fs.cat_file(p))
            local = str(local)
        finally:
            if fs.exists(root):
                fs.rm(root, recursive=True)
    got, dropped = _read_back(local)
    assert len(accepted) > 100  # the close/reopen thread left most calls through
    if on_full == "block":
        assert dropped == 0
        assert got == accepted
    else:
        assert got <= accepted  # nothing that was refused or never logged shows up
        assert len(accepted - got) == dropped  # and exactly the counted drops are missing
        if max_queue_bytes is not None:
            assert dropped > 0, "nothing was dropped: the bound was never reached"
