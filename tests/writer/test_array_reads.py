"""``prefetch``: the small NDArrays of many Means read in one release of the GIL give each Mean the
value its own read gives, to the bit; what it cannot read is left to the Mean."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from gluon_tb.writer._common.arrays import Mean  # noqa: E402
from gluon_tb.writer._io import array_reads  # noqa: E402
from gluon_tb.writer._io.array_reads import prefetch  # noqa: E402

pytestmark = pytest.mark.skipif(array_reads._read_arrays is None, reason="the C kernel is not built")


def own(m):
    """float(m) read the Mean's own way (a copy without ``read``)."""
    return float(Mean(m.parts, m.known))


def means(rng):
    out = []
    for dtype in ("float32", "float64", "float16", "int32", "uint8", "int64", "int8"):
        a = mx.nd.array(rng.random(37) * 100, dtype=dtype)
        b = mx.nd.array(rng.random((3, 5)) * 100, dtype=dtype)
        out.append(Mean([(a, 37, False), (b, 15, False)], (0.0, 0)))
    reduced = mx.nd.array(rng.random(64)).mean()
    out.append(Mean([(reduced, 64, True), (mx.nd.array(rng.random(5)), 5, False)], (2.5, 3)))  # host part too
    out.append(Mean([], (1.0, 4)))  # no arrays
    return out


def test_prefetched_means_read_what_their_own_read_gives():
    ms = means(np.random.default_rng(0))
    want = [own(m) for m in ms]
    prefetch(ms)
    assert all(m.read is not None for m in ms[:-1]) and ms[-1].read is None
    assert all(None not in m.read for m in ms[:-1])
    got = [float(m) for m in ms]
    assert got == want  # bit for bit: the same float64 sums of the same values


def test_a_prefetched_mean_makes_no_call_into_mxnet(monkeypatch):
    ms = means(np.random.default_rng(1))
    want = [own(m) for m in ms]
    prefetch(ms)

    def refuse(*a, **k):
        pytest.fail("an NDArray was read again")

    for name in ("to_dlpack_for_read", "asnumpy", "wait_to_read"):
        monkeypatch.setattr(mx.nd.NDArray, name, refuse)
    monkeypatch.setattr(mx.nd.NDArray, "context", property(refuse))
    assert [float(m) for m in ms] == want


def test_scratch_split_over_calls_and_large_or_sparse_parts_left_alone(monkeypatch):
    rng = np.random.default_rng(2)
    monkeypatch.setattr(array_reads, "MAX_BYTES", 8 * 100)  # at most 100 values a call
    calls = []
    real = array_reads._read_arrays
    monkeypatch.setattr(array_reads, "_read_arrays", lambda parts, *a: calls.append(len(parts)) or real(parts, *a))
    small = [Mean([(mx.nd.array(rng.random(60)), 60, False)], (0.0, 0)) for _ in range(3)]
    big = Mean([(mx.nd.array(rng.random(array_reads.MAX_VALUES + 1)), array_reads.MAX_VALUES + 1, False)], (0.0, 0))
    sparse = Mean([(mx.nd.array(rng.random((4, 3))).tostype("csr"), 12, False)], (0.0, 0))
    split = Mean([(mx.nd.array(rng.random(60)), 60, False), (mx.nd.array(rng.random(60)), 60, False)], (0.0, 0))
    ms = small + [big, sparse, split]
    want = [own(m) for m in ms]
    prefetch(ms)
    assert calls == [1, 1, 1, 1, 1]  # 60 values each: one part a call; the split Mean's over two calls
    assert big.read is None and sparse.read is None and None not in split.read
    assert [float(m) for m in ms] == want


def test_an_array_mxnet_refuses_is_read_by_its_mean():
    """A wrong count: MXNet's copy refuses it (its size is not the array's); the Mean reads it its
    own way, as before (the count is the caller's)."""
    a = mx.nd.array([1.0, 2.0, 3.0])
    m = Mean([(a, 4, False), (mx.nd.array([5.0]), 1, False)], (0.0, 0))
    prefetch([m])
    assert m.read is not None and m.read[0] is None and m.read[1] == 5.0
    assert float(m) == 11.0 / 5


def test_the_writer_reads_a_drains_means_together(tmp_path, monkeypatch):
    """The worker prefetches the Means of a drain once, at the first it meets; the values logged are
    the Means' own."""
    import readback
    from gluon_tb import SummaryWriter

    seen = []
    real = array_reads.prefetch
    from gluon_tb.writer._io import worker

    monkeypatch.setattr(worker, "prefetch", lambda ms: seen.append(len(ms)) or real(ms))
    rng = np.random.default_rng(3)
    losses = [[mx.nd.array(rng.random(8)), mx.nd.array(rng.random(8))] for _ in range(5)]
    with SummaryWriter(str(tmp_path), flush_secs=60) as w:
        w.add_scalar("x", 1.0, 0)
        for k, parts in enumerate(losses):
            w._add_values([("batch_loss", parts, k, 1.0 + k, None)])
    got = readback.scalars(str(tmp_path), ".", "batch_loss")
    want = [float(np.float32(np.concatenate([p.asnumpy() for p in parts]).astype(np.float64).mean()))
            for parts in losses]
    assert [s for s, _ in got] == list(range(5)) and [v for _, v in got] == want
    assert sum(seen) == 5 and len(seen) <= 2  # together (a drain may meet the first ones alone)
