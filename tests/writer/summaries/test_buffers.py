"""BufferPool: histogram copies reuse buffers the worker has handed back, never one still in use."""
from __future__ import annotations

import numpy as np
import pytest

import readback

from gluon_tb import SummaryWriter
from gluon_tb.writer._summaries.copy_buffers import BufferPool
from gluon_tb.writer._summaries.histogram_counts import default_edges

mx = pytest.importorskip("mxnet")


def meta(arrays):
    """What ``copy_ndarrays`` takes: ``(array, shape, dtype)`` of each."""
    return [(a, a.shape, np.dtype(a.dtype)) for a in arrays]


def test_numpy_buffer_is_reused_only_after_it_is_given_back():
    pool = BufferPool(1 << 20)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = pool.copy_numpy(x)
    b = pool.copy_numpy(x)  # a is not given back yet: a new buffer
    assert a is not b and np.shares_memory(a, x) is False
    pool.give(a)
    assert pool.idle_bytes == a.nbytes
    x += 100
    c = pool.copy_numpy(x)
    assert c is a and (c == x).all() and pool.idle_bytes == 0
    assert pool.copy_numpy(x) is not a  # handed out once only


def test_numpy_copy_of_any_layout_is_c_contiguous_and_equal():
    pool = BufferPool(1 << 20)
    x = np.asfortranarray(np.arange(20.0).reshape(4, 5))[:, ::2]
    a = pool.copy_numpy(x)
    assert a.flags.c_contiguous and (a == x).all()
    pool.give(a)
    assert pool.copy_numpy(x) is a
    view = a[1:]
    pool.give(view)  # not a buffer the pool made: ignored
    assert pool.idle_bytes == 0


def test_idle_bytes_stay_under_the_bound_oldest_kind_first():
    pool = BufferPool(3 * 400)
    bufs = [pool.copy_numpy(np.zeros(100, np.float32)) for _ in range(2)]  # 400 bytes each
    other = pool.copy_numpy(np.zeros(50, np.float64))  # 400 bytes, another kind
    for b in bufs:
        pool.give(b)
    pool.give(other)
    assert pool.idle_bytes == 1200
    pool.give(pool.copy_numpy(np.zeros(100, np.int32)))  # a fourth: the oldest kind goes
    assert pool.idle_bytes == 1200
    assert pool.copy_numpy(np.zeros(50, np.float64)) is other
    pool.give(np.zeros(1000, np.float32))  # larger than the whole bound: not kept
    assert pool.idle_bytes == 800
    pool.clear()
    assert pool.idle_bytes == 0


def test_ndarray_copies_in_one_operation_are_private_and_reused():
    pool = BufferPool(1 << 20)
    rng = np.random.default_rng(0)
    srcs = [mx.nd.array(rng.standard_normal(s)) for s in [(30, 7), (5,), (3, 2, 2)]]
    srcs += [mx.nd.array(rng.standard_normal(6), dtype="float64"), mx.nd.array([1, 2, 3], dtype="int32"),
             mx.nd.array(rng.standard_normal(4), dtype="float16"), mx.np.array([1.5, 2.5])]
    want = [s.asnumpy() for s in srcs]
    copies = pool.copy_ndarrays(meta(srcs))
    for s in srcs:
        s[:] = 7  # queued after the copies on MXNet's engine
    for c, w, s in zip(copies, want, srcs):
        assert c is not s and c.ctx == mx.cpu() and c.dtype == s.dtype and c.shape == s.shape
        np.testing.assert_array_equal(c.asnumpy(), w)
    for c in copies:
        pool.give(c)
    again = pool.copy_ndarrays(meta(srcs))
    assert [id(a) for a in again[:6]] == [id(c) for c in copies[:6]]  # every mx.nd one reused
    assert again[6] is not copies[6]  # mx.np arrays: never pooled
    for a in again:
        assert (a.asnumpy() == 7).all()


def test_ndarray_copies_without_the_multi_copy_operator(monkeypatch):
    def missing(*args, **kwargs):
        raise AttributeError("no amp_multicast in this build")

    monkeypatch.setattr(mx.nd, "amp_multicast", missing)
    srcs = [mx.nd.ones((4, 3)) * i for i in range(3)]
    copies = BufferPool(1 << 20).copy_ndarrays(meta(srcs))
    for s in srcs:
        s += 10
    assert [float(c.sum().asscalar()) for c in copies] == [0.0, 12.0, 24.0]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
def test_several_ndarrays_of_every_dtype_are_copied_exactly(dtype):
    """float32 goes through one MXNet operation; the others one copy each (MXNet's CPU
    multi-copy fails on them, and only when the copy is read)."""
    rng = np.random.default_rng(11)
    srcs = [mx.nd.array(rng.standard_normal(s) * 9, dtype=dtype) for s in [(30, 7), (5,), (4, 4)]]
    want = [a.asnumpy() for a in srcs]
    copies = BufferPool(1 << 20).copy_ndarrays(meta(srcs))
    for a in srcs:
        a[:] = 0
    mx.nd.waitall()  # an asynchronous failure of the copies would be raised here
    for c, w in zip(copies, want):
        assert c.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(c.asnumpy(), w)


def test_many_ndarrays_and_sparse_ones():
    srcs = [mx.nd.full((i + 1,), float(i)) for i in range(300)]
    sparse = mx.nd.array(np.eye(4)).tostype("row_sparse")
    copies = BufferPool(1 << 20).copy_ndarrays(meta(srcs + [sparse]))
    assert [float(c.asnumpy()[0]) for c in copies[:-1]] == [float(i) for i in range(300)]
    assert copies[-1].stype == "row_sparse" and (copies[-1].asnumpy() == np.eye(4)).all()


def test_writer_logs_each_call_as_it_was_while_buffers_are_reused(tmp_path):
    """Arrays overwritten after every call, with and without flushes between: each step's
    histograms are numpy's of the values at that step's call."""
    rng = np.random.default_rng(5)
    nds = {"g/a": mx.nd.zeros((64, 9)), "g/b": mx.nd.zeros((17,))}
    npy = {"n/c": np.zeros((33,), np.float32)}
    want = {}
    with SummaryWriter(str(tmp_path)) as w:
        for step in range(12):
            for tag, a in nds.items():
                a[:] = mx.nd.array(rng.standard_normal(a.shape) * (step + 1))
            npy["n/c"][:] = rng.standard_normal(33) * (step + 1)
            for tag, a in list(nds.items()) + list(npy.items()):
                want[(tag, step)] = np.array(a.asnumpy() if hasattr(a, "asnumpy") else a)
            w.add_histograms({**nds, **npy}, step)
            w.add_histogram("single", nds["g/a"], step)
            want[("single", step)] = want[("g/a", step)]
            for a in nds.values():
                a[:] = -1e6  # right after the call: must not be seen
            npy["n/c"][:] = -1e6
            if step % 3 == 0:
                w.flush()  # the worker has handed the buffers back: the next step reuses them
    (path,) = readback.event_files(str(tmp_path))
    got = {(v.tag, ev.step): v.histo for ev in readback.raw_events(path) for v in ev.summary.value}
    assert set(got) == set(want)
    for key, values in want.items():
        h = got[key]
        x = values.reshape(-1).astype(np.float64)
        assert (h.min, h.max, h.num) == (x.min(), x.max(), x.size), key
        assert h.sum == pytest.approx(x.sum(), rel=1e-6, abs=1e-6)
        counts, _ = np.histogram(x, default_edges())
        nz = np.flatnonzero(counts)
        assert list(h.bucket) == list(counts[nz[0]:nz[-1] + 1].astype(float)), key


class _ScribblingPool(BufferPool):
    """Overwrites every buffer the moment it is handed back, as an immediate reuse would."""

    def give(self, buf, kind=None):
        buf[:] = np.nan if np.dtype(buf.dtype).kind == "f" else 123
        super().give(buf, kind)


@pytest.mark.parametrize("make", [np.asarray, mx.nd.array], ids=["numpy", "ndarray"])
def test_the_worker_hands_a_buffer_back_only_after_reading_it(make):
    from gluon_tb.writer._summaries.histogram import build_histograms, capture_histograms
    from tensorboard.compat.proto import summary_pb2

    x = np.linspace(-1, 1, 101, dtype=np.float32)
    pool = _ScribblingPool(1 << 20)
    group = capture_histograms({"a": make(x), "b": make(x * 2)}, pool=pool)
    values = [summary_pb2.Summary.Value.FromString(b) for b in build_histograms("a", group)]
    assert [(v.histo.num, v.histo.min, v.histo.max) for v in values] == [(101, -1, 1), (101, -2, 2)]
    assert pool.idle_bytes == 2 * x.nbytes  # and both were handed back


@pytest.mark.parametrize("make", [np.asarray, lambda a: mx.nd.array(a, dtype=a.dtype)], ids=["numpy", "ndarray"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_an_image_copy_is_handed_back_only_after_its_png_is_made(make, dtype):
    """uint8 images are tiled without a conversion: the grid is a view of the copy, so the copy
    may go back only once the PNG is encoded."""
    from tensorboard.compat.proto import summary_pb2

    import io

    from PIL import Image

    from gluon_tb.writer._summaries.image import build_image, capture_image, capture_images

    def decode_png(data):
        return np.asarray(Image.open(io.BytesIO(data)))

    x = (np.random.RandomState(0).rand(4, 3, 8, 8) * (255 if dtype == np.uint8 else 1)).astype(dtype)
    pool = _ScribblingPool(1 << 20)
    payloads = [capture_images(make(x), pool=pool), capture_image(make(x[0]), pool=pool)]
    pngs = [summary_pb2.Summary.Value.FromString(bytes(build_image("i", p))).image.encoded_image_string
            for p in payloads]
    assert pool.idle_bytes == (x.nbytes + x[0].nbytes if make is np.asarray else 0)  # numpy's handed back
    want = x if dtype == np.uint8 else (x * 255).round().astype(np.uint8)  # the pixels' policy
    one = decode_png(pngs[1])
    np.testing.assert_allclose(one.astype(int), want[0].transpose(1, 2, 0).astype(int), atol=1)
    grid = decode_png(pngs[0])
    assert grid.shape[2] == 3 and not (grid == 0).all()


def test_histograms_of_arrays_whose_shapes_are_known_read_nothing_from_mxnet(tmp_path):
    """``_add_histograms_known`` (what the handlers use): the same events as ``add_histograms``,
    without reading a shape, dtype or context (each a call into MXNet on the training thread)."""
    from mxnet_calls import MXNetCalls

    rng = np.random.default_rng(1)
    srcs = {f"h/{i}": mx.nd.array(rng.standard_normal(s)) for i, s in enumerate([(30, 7), (5,), (400,)])}
    known = {t: (a.shape, np.dtype(a.dtype), a.context) for t, a in srcs.items()}
    with SummaryWriter(tmp_path / "known") as w, SummaryWriter(tmp_path / "read") as plain:
        for step in range(3):
            if step == 2:  # the buffers of steps 0 and 1 are back in the pool: no allocation
                w.flush()
                with MXNetCalls() as calls:
                    w._add_histograms_known(srcs, known, step)
                assert calls.names == ["_imperative_invoke"], calls.names  # the one copy
            else:
                w._add_histograms_known(srcs, known, step)
            plain.add_histograms(srcs, step)
            for a in srcs.values():
                a[:] = a + 1
    from tensorboard.util import tensor_util

    def buckets(run, tag):
        return [(e.step, tensor_util.make_ndarray(e.tensor_proto).tolist())
                for e in readback.tensor_events(str(tmp_path), run, tag)]

    for tag in srcs:
        got = buckets("known", tag)
        assert [s for s, _ in got] == [0, 1, 2]
        assert got == buckets("read", tag)


def test_private_samples_are_read_as_they_are_not_copied(tmp_path):
    """A handler's samples (``private``): new arrays of its own on the CPU. The writer reads them
    as they are (no copy on MXNet's engine, nothing pooled) and writes the events that
    ``add_histograms`` writes for them; the other arrays of the same call are still copied."""
    from mxnet_calls import MXNetCalls

    rng = np.random.default_rng(2)
    srcs = {f"s/{i}": mx.nd.array(rng.standard_normal(s)) for i, s in enumerate([(300,), (41,)])}
    known = {t: (a.shape, np.dtype(a.dtype), a.context) for t, a in srcs.items()}
    with SummaryWriter(tmp_path / "private") as w, SummaryWriter(tmp_path / "copied") as plain:
        with MXNetCalls() as calls:
            w._add_histograms_known(srcs, known, 0, private=list(srcs))
        assert calls.names == []  # nothing copied
        w.flush()
        assert w._pool.idle_bytes == 0  # and nothing handed to the pool: not its buffers
        plain.add_histograms(srcs, 0)
        both = {"s/0": srcs["s/0"], "s/1": mx.nd.array(rng.standard_normal((7,)))}
        known["s/1"] = (both["s/1"].shape, np.dtype(np.float32), both["s/1"].context)
        with MXNetCalls() as calls:
            w._add_histograms_known(both, known, 1, private=["s/0"])
        assert calls.names.count("_imperative_invoke") == 1, calls.names  # the one copy: s/1's
        plain.add_histograms(both, 1)
    from tensorboard.util import tensor_util

    def buckets(run, tag):
        return [(e.step, tensor_util.make_ndarray(e.tensor_proto).tolist())
                for e in readback.tensor_events(str(tmp_path), run, tag)]

    assert [s for s, _ in buckets("private", "s/0")] == [0, 1]
    for tag in srcs:
        assert buckets("private", tag) == buckets("copied", tag)
