"""Histograms: the counting code's exact buckets against numpy.histogram; SummaryWriter.add_histogram's
statistics, copies and errors, read back through TensorBoard."""
from __future__ import annotations

import logging
import numbers

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensorboard.compat.proto import summary_pb2

import readback
from readback import plugin_name, summary_values, tensor_events

from gluon_tb import SummaryWriter
from gluon_tb.writer._summaries import histogram_counts as _buckets
from gluon_tb.writer._summaries import histogram as _histogram
# the counting code, checked bucket for bucket against numpy without a writer; and the queued payload
from gluon_tb.writer._summaries.histogram import HistogramPayload, build_histogram, capture_histogram
from gluon_tb.writer._summaries.histogram_counts import default_edges

EDGES = default_edges()


@pytest.fixture(autouse=True, params=["c", "numpy"])
def kernel(request, monkeypatch):
    """Every test runs with the C kernel and with the numpy code: they must agree exactly."""
    monkeypatch.setattr(_histogram, "_warned", set())  # warnings are once per tag and process
    if request.param == "numpy":
        monkeypatch.setattr(_buckets, "_fast", None)
    elif _buckets._fast is None:
        pytest.skip("the C kernel is not built here (see test_c_kernel_is_built)")
    return request.param


def expected(values, bins="default"):
    """``(bucket_limit, bucket)`` as numpy counts the finite values, empty ends trimmed."""
    x = np.asarray(values).reshape(-1)
    if x.dtype.kind == "f":
        x = x[np.isfinite(x)]
    if x.size == 0:
        return [], []
    edges = EDGES if isinstance(bins, str) and bins == "default" else bins
    counts, used = np.histogram(x, edges)
    nz = np.flatnonzero(counts)
    if nz.size == 0:
        return [], []
    s, e = nz[0], nz[-1] + 1
    return list(used[1:][s:e]), list(counts[s:e].astype(float))


def histo(values, bins="default", tag="h"):
    return summary_pb2.Summary.Value.FromString(
        build_histogram(tag, capture_histogram(values, bins))).histo


def histos(logdir):
    """``{tag: [HistogramProto, ...]}`` of the run in ``logdir``, as written, in order."""
    out = {}
    for _step, v in summary_values(str(logdir)):
        out.setdefault(v.tag, []).append(v.histo)
    return out


def assert_like_numpy(values, bins="default"):
    h = histo(values, bins)
    limits, counts = expected(values, bins)
    assert list(h.bucket_limit) == limits
    assert list(h.bucket) == counts
    return h


# ---------------------------------------------------------------- default edges
def test_default_edges_are_tensorflows():
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    big = np.finfo(np.float64).max
    assert list(EDGES) == [-big] + [-p for p in pos[::-1]] + [0.0] + pos + [big]
    assert len(pos) == 774


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_values_on_and_beside_every_edge(dtype):
    inner = EDGES[1:-1]
    x = np.concatenate([inner, np.nextafter(inner, np.inf), np.nextafter(inner, -np.inf)])
    x = x.astype(dtype)
    x = x[np.isfinite(x)]
    near = x.astype(np.float32) if dtype != np.float64 else x
    if dtype == np.float32:  # float32 neighbours of the float64 edges
        e32 = inner.astype(np.float32)
        inf32 = np.float32(np.inf)
        near = np.concatenate([e32, np.nextafter(e32, inf32), np.nextafter(e32, -inf32)])
    assert_like_numpy(x)
    assert_like_numpy(near)


@pytest.mark.parametrize("values", [
    np.zeros(7, np.float32), -np.zeros(3), np.array([0.0, -0.0, 1e-45, -1e-45], np.float32),
    np.array([3.4e38, -3.4e38, 1e30, -1e25], np.float32), np.array([1e300, -1e300, 5e-324]),
    np.arange(-50, 50, dtype=np.int8), np.arange(-2 ** 40, 2 ** 40, 2 ** 33, dtype=np.int64),
    np.array([True, False, True]), np.array(2.5), np.array(-3, dtype=np.int16),
    np.linspace(-1, 1, 9999, dtype=np.float32).reshape(101, 99),
    [1, 2, 3], 4.0,
])
def test_default_bins_match_numpy(values):
    assert_like_numpy(values)


@pytest.mark.parametrize("bins", [1, 3, 1000, "auto", "fd", "doane", "scott", "stone", "rice",
                                  "sturges", "sqrt", [-1.0, 0.0, 0.5, 1.0],
                                  np.linspace(-2, 2, 1001), np.linspace(-3, 3, 7)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_other_bins_match_numpy(bins, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(5000) * 2).astype(dtype)
    assert_like_numpy(x, bins)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bins", [1, 2, 7, 100, 1000, 65536])
@pytest.mark.parametrize("case", ["normal", "constant", "tiny range", "huge", "with nan and inf", "steps"])
def test_uniform_bins_match_numpy_bucket_for_bucket(dtype, bins, case):
    """bins=<int>: numpy's uniform edges over the finite range (the C kernel's own path)."""
    rng = np.random.default_rng(bins)
    x = {"normal": lambda: rng.standard_normal(20000) * 1e-3,
         "constant": lambda: np.full(300, 0.1),
         "tiny range": lambda: 1.0 + np.arange(500) * np.finfo(dtype).eps,
         "huge": lambda: rng.uniform(-1e38, 1e38, 5000),
         "with nan and inf": lambda: np.concatenate([rng.standard_normal(999), [np.nan, np.inf, -np.inf]]),
         "steps": lambda: np.repeat(np.linspace(-1, 1, 11), 7)}[case]().astype(dtype)
    h = assert_like_numpy(x, bins)
    f = x[np.isfinite(x)].astype(np.float64)
    assert (h.num, h.min, h.max) == (f.size, f.min(), f.max())
    assert h.sum == pytest.approx(f.sum(), rel=1e-9, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=1, max_side=300),
                    elements=st.floats(allow_nan=True, allow_infinity=True, width=32)),
       bins=st.integers(1, 3000))
def test_property_uniform_bins_match_numpy(x, bins):
    f = x[np.isfinite(x)]
    if not f.size:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(np.ptp(f) * bins):
            return  # numpy itself overflows computing these edges
        try:
            np.histogram(f, bins)
        except IndexError:  # numpy cannot split this range in float32: all counted all the same
            h = histo(x, bins)
            assert h.num == f.size == sum(h.bucket)
            assert list(h.bucket_limit) == list(np.histogram_bin_edges(f, bins)[1:][:len(h.bucket)])
            return
    assert_like_numpy(x, bins)


def test_stats_over_finite_values_only(tmp_path, caplog):
    x = np.array([1.0, -2.0, np.nan, np.inf, -np.inf, 4.0], np.float32)
    payload = capture_histogram(x)  # what add_histogram queues; the builder counts what it left out
    build_histogram("payload", payload)
    assert payload.nonfinite == 3
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path)) as w:
            w.add_histogram("stats_tag", x, 0)
            w.add_histogram("stats_tag", x, 1)
    h, _ = histos(tmp_path)["stats_tag"]
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (-2.0, 4.0, 3.0, 3.0, 21.0)
    assert sum(h.bucket) == 3
    warnings = [r for r in caplog.records if "stats_tag" in r.getMessage()]
    assert len(warnings) == 1 and "3" in warnings[0].getMessage()


def test_sums_in_float64(tmp_path):
    x = np.full(1_000_001, 0.1, np.float32)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("h", x)
    (h,) = histos(tmp_path)["h"]
    assert h.sum == pytest.approx(float(np.float32(0.1)) * x.size, rel=1e-12)
    assert h.sum_squares == pytest.approx(float(np.float32(0.1)) ** 2 * x.size, rel=1e-12)


def test_caller_copy_is_private(tmp_path):
    x = np.ones(100, np.float32)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("p", x)
        x[:] = -5
    (h,) = histos(tmp_path)["p"]
    assert h.min == 1.0


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("values,exc,words", [
    (np.zeros(0), ValueError, "values must be a non-empty"),
    ([], ValueError, "values"),
    (np.array(["a", "b"]), TypeError, "values must be a numeric"),
    ("abc", TypeError, "values"),
    (None, TypeError, "values"),
    (np.array([1 + 2j]), TypeError, "values"),
    ([[1, 2], [3]], TypeError, "values"),
])
@pytest.mark.filterwarnings("ignore::numpy.VisibleDeprecationWarning")
def test_bad_values(tmp_path, values, exc, words):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match=words):
        w.add_histogram("h", values)


@pytest.mark.parametrize("bins,exc", [
    ("TENSORFLOW", ValueError), ("Default", ValueError), (0, ValueError), (-3, ValueError), (2.5, TypeError),
    (True, TypeError), (None, TypeError), ([1.0], ValueError), ([1.0, 1.0], ValueError),
    ([2.0, 1.0], ValueError), ([0.0, np.nan], ValueError), ([[0.0, 1.0]], ValueError),
    (["a", "b"], TypeError),
])
def test_bad_bins(tmp_path, bins, exc):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(exc, match="bins"):
        w.add_histogram("h", np.ones(3), bins=bins)


def test_tensorflow_bins_are_the_default_buckets(tmp_path):
    """tensorboardX's bins='tensorflow' (its default) names TensorBoard's exponential buckets: ours 'default'."""
    x = np.concatenate([np.random.default_rng(4).standard_normal(5000), [0.0, 1e-13, -7e20, np.nan]])
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("default", x, 1, bins="default")
        w.add_histogram("tensorflow", x, 1, bins="tensorflow")
        w.add_histograms({"group/default": x, "group/other": x[:10]}, 2)
        w.add_histograms({"group/tensorflow": x, "group/other": x[:10]}, 3, bins="tensorflow")
    read = {tag: tensor_events(str(tmp_path), ".", tag) for tag in ("default", "tensorflow", "group/default",
                                                                   "group/tensorflow")}
    from tensorboard.util import tensor_util

    arrays = {tag: tensor_util.make_ndarray(e.tensor_proto) for tag, (e,) in read.items()}
    limits, counts = expected(x)
    assert list(arrays["default"][:, 2]) == counts and list(arrays["default"][1:, 0]) == list(np.float32(limits[:-1]))
    for tag in ("tensorflow", "group/default", "group/tensorflow"):
        np.testing.assert_array_equal(arrays[tag], arrays["default"])
    written = {v.tag: v.histo for _, v in summary_values(str(tmp_path))}  # as written, before the loader
    assert written["tensorflow"] == written["default"] == written["group/tensorflow"]
    assert written["group/other"].bucket_limit  # the group's other tag went along


def test_a_bins_name_not_taken_says_what_is(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError) as info:
            w.add_histogram("h", np.ones(3), bins="TENSORFLOW")
        w.add_histogram("h", np.ones(3), 1, bins="tensorflow")
    assert str(info.value) == ("bins must be 'default' (or 'tensorflow'), a positive int, one of ['auto', 'doane', "
                               "'fd', 'rice', 'scott', 'sqrt', 'stone', 'sturges'] or a sequence of edges, "
                               "got 'TENSORFLOW'")
    [e] = tensor_events(str(tmp_path), ".", "h")
    assert e.step == 1


class _Count:
    """An integer of another library (gmpy2's ``mpz``, sympy's ``Integer``): a ``numbers.Integral``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __int__(self) -> int:
        return self.n

    __index__ = __int__

    def __lt__(self, other: int) -> bool:
        return self.n < other


numbers.Integral.register(_Count)


def test_any_integral_bins_is_a_bucket_count(tmp_path):
    """bins takes every integer type, as nrow, max_images and num_thresholds do (one is_int check)."""
    x = np.arange(10.0)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("count", x, bins=_Count(4))
        w.add_histogram("int", x, bins=4)
        with pytest.raises(ValueError, match="bins"):
            w.add_histogram("zero", x, bins=_Count(0))
    got = histos(tmp_path)
    assert got["count"] == got["int"]


# ---------------------------------------------------------------- TensorBoard readback
def read_back(tmp_path, values, bins="default", tag="w"):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram(tag, values, 1, bins=bins)
    assert plugin_name(str(tmp_path), ".", tag) == "histograms"
    (ev,) = tensor_events(str(tmp_path), ".", tag)
    from tensorboard.util import tensor_util

    return tensor_util.make_ndarray(ev.tensor_proto)


def test_readback_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(20000).astype(np.float32), [0, 0, np.nan, -np.inf]])
    arr = read_back(tmp_path, x)
    limits, counts = expected(x)
    finite = x[np.isfinite(x)]
    assert arr.shape == (len(counts), 3)
    assert list(arr[:, 2]) == counts
    assert list(arr[1:, 0]) == list(np.float32(limits[:-1]))
    assert arr[0, 0] == finite.min() and arr[-1, 1] == finite.max()
    [(_, v)] = summary_values(str(tmp_path))  # as written: float64 limits
    assert list(v.histo.bucket_limit) == limits


@pytest.mark.parametrize("values", [np.array([np.nan, np.inf, -np.inf]), np.array([np.nan])])
def test_no_finite_values_writes_empty_histogram(tmp_path, values):
    arr = read_back(tmp_path, values, tag="empty")
    assert arr.shape == (0, 3)
    [(_, v)] = summary_values(str(tmp_path))
    h = v.histo
    assert (h.num, list(h.bucket)) == (0.0, [])


def test_all_values_outside_user_edges(tmp_path):
    arr = read_back(tmp_path, np.array([5.0, 6.0]), bins=[0.0, 1.0], tag="out")
    assert arr.shape == (0, 3)


finite_or_not = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0.0, -0.0, 1e-12, -1e-12, 1.1e-12, 3.4e38]),
)


@settings(max_examples=60, deadline=None)
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=40),
                    elements=finite_or_not),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]))
def test_property_readback_counts_equal_numpy(tmp_path_factory, x, dtype):
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    tmp = tmp_path_factory.mktemp("prop")
    arr = read_back(tmp, x, tag="prop")
    _limits, counts = expected(x)
    assert list(arr[:, 2]) == counts


# ---------------------------------------------------------------- MXNet
mx = pytest.importorskip("mxnet")


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "uint8"])
def test_ndarray_counts_equal_numpy(dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(30000) * 50).astype(dtype)
    h = histo(mx.nd.array(x, dtype=dtype))
    assert (list(h.bucket_limit), list(h.bucket)) == expected(x)
    h = histo(mx.nd.array(x, dtype=dtype), bins=100)
    assert (list(h.bucket_limit), list(h.bucket)) == expected(x, 100)


def test_mx_numpy_array():
    x = np.linspace(-3, 3, 1001)
    h = histo(mx.np.array(x, dtype="float64"))
    assert (list(h.bucket_limit), list(h.bucket)) == expected(x)


def test_ndarray_capture_is_async_and_private(tmp_path):
    a = mx.nd.ones((1000,))
    payload = capture_histogram(a)  # what add_histogram queues
    assert isinstance(payload, HistogramPayload) and payload.data is not a
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("p", a)
        a[:] = 7  # queued after the copy on MXNet's engine
        a += 1
    (h,) = histos(tmp_path)["p"]
    assert (h.min, h.max, h.num) == (1.0, 1.0, 1000.0)


def test_ndarray_validation(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match="values must be a non-empty"):
            w.add_histogram("h", mx.nd.array(np.zeros((0, 3))))
        with pytest.raises(ValueError, match="bins"):
            w.add_histogram("h", mx.nd.ones((2,)), bins=-1)


def test_add_histograms_equals_add_histogram_one_by_one_at_the_call(tmp_path):
    mx = pytest.importorskip("mxnet")
    from gluon_tb import SummaryWriter

    rng = np.random.default_rng(3)
    arrays = {"w/a": mx.nd.array(rng.standard_normal((30, 7))), "w/b": mx.nd.array(rng.standard_normal(5)),
              "w/c": rng.standard_normal(11).astype(np.float32),
              "w/d": mx.nd.array(rng.standard_normal(4), dtype="float64"),
              "w/e": mx.nd.array(rng.standard_normal(9) * 1e-3)}
    one, many = tmp_path / "one", tmp_path / "many"
    with SummaryWriter(str(one)) as w:
        for tag, v in arrays.items():
            w.add_histogram(tag, v, 4)
    with SummaryWriter(str(many)) as w:
        w.add_histograms(arrays, 4)
        for v in arrays.values():
            v[:] = 7  # overwritten right after the call: not seen
        with pytest.raises(TypeError, match="values must be a non-empty dict of tag -> array"):
            w.add_histograms([], 5)
        with pytest.raises(ValueError, match="values must be a non-empty dict of tag -> array, got dict {}"):
            w.add_histograms({}, 5)  # a dict, but empty: a wrong value
        with pytest.raises(TypeError, match="values key must be a str"):
            w.add_histograms({3: np.ones(2)}, 5)
        with pytest.raises(ValueError, match="must be a non-empty array"):
            w.add_histograms({"x": mx.nd.ones((2,)), "y": np.zeros(0)}, 5)

    def histos(d):
        (path,) = readback.event_files(str(d))
        return {v.tag: (ev.step, v.histo) for ev in readback.raw_events(path) for v in ev.summary.value}

    got, want = histos(many), histos(one)
    assert sorted(got) == sorted(arrays) and got == want


def test_values_outside_given_edges_are_left_out_with_a_warning(tmp_path, caplog):
    """numpy.histogram leaves out what is outside the edges; the counts are numpy's, and the writer
    says how many were left out, once per tag (it was silence, even with every value outside)."""
    import logging

    x = np.random.default_rng(0).standard_normal(1000)
    edges = [-3, -1, 0, 0.5, 1, 3]
    tag = f"h{np.random.default_rng().integers(1 << 40)}"  # warned once per tag in a process
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path)) as w:
            w.add_histogram(tag, x, 0, bins=edges)
            w.add_histogram(tag, x, 1, bins=edges)
    said = [r.getMessage() for r in caplog.records if tag in r.getMessage()]
    outside = int(np.sum((x < -3) | (x > 3)))
    assert outside > 0 and said == [f"histogram {tag!r}: left out {outside} of 1000 value(s) outside the given "
                                    "bins' edges [-3, 3], as numpy.histogram does (warned once per tag)"]
