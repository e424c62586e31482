"""The optional C kernel of the histograms (its results are compared in test_histogram.py)."""
import shutil

import numpy as np
import pytest

from gluon_tb.writer._summaries import histogram_counts

EDGES = histogram_counts.default_edges()


def test_c_kernel_is_built():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the package falls back to numpy")
    assert histogram_counts._fast is not None, "setup.py should have built gluon_tb/writer/_summaries/_fasthist"


def test_c_kernel_rejects_what_it_cannot_count():
    if histogram_counts._fast is None:
        pytest.skip("the C kernel is not built here")
    count = histogram_counts._fast.count
    t = histogram_counts.cell_table(EDGES.tobytes(), "<f4")
    ok = np.zeros(t.nbuckets + 3, np.int64)
    with pytest.raises(TypeError, match="float32 or float64"):
        count(np.ones(3, np.int32), t.cells, ok)
    with pytest.raises(ValueError, match="wrong size"):
        count(np.ones(3, np.float64), t.cells, ok)  # the cells of float32
    with pytest.raises(ValueError, match="wrong size"):
        count(np.ones(3, np.float32), t.cells, np.zeros(t.nbuckets + 3, np.float64))
    small = np.zeros(5, np.int64)
    with pytest.raises(ValueError, match="outside counts"):
        count(np.ones(3, np.float32), t.cells, small)
    assert not small.any()  # nothing was written
    assert count(np.array([1.0, np.nan], np.float32), t.cells, ok)[0] == 1  # still fine


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [[], [np.nan], [np.inf], [-np.inf], [np.nan, np.inf, -np.inf]])
def test_c_kernel_statistics_leave_out_non_finite_values(dtype, special):
    """The kernel's one pass assumes finite values; any NaN/Inf sends it to an exact second pass."""
    if histogram_counts._fast is None:
        pytest.skip("the C kernel is not built here")
    rng = np.random.default_rng(7)
    finite = (rng.standard_normal(1001) * 3).astype(dtype)
    x = np.concatenate([finite[:500], np.array(special, dtype), finite[500:]])
    t = histogram_counts.cell_table(EDGES.tobytes(), np.dtype(dtype).str)
    counts = np.zeros(t.nbuckets + 3, np.int64)
    n, lo, hi, total, total_sq = histogram_counts._fast.count(x, t.cells, counts)
    f = finite.astype(np.float64)
    assert (n, lo, hi) == (f.size, f.min(), f.max())
    assert total == pytest.approx(f.sum(), rel=1e-12, abs=1e-9)
    assert total_sq == pytest.approx((f * f).sum(), rel=1e-12)
    assert (counts[1:t.nbuckets + 1] == np.histogram(f, EDGES)[0]).all()


def test_c_uniform_kernel_rejects_bad_edges_and_counts():
    if histogram_counts._fast is None:
        pytest.skip("the C kernel is not built here")
    fast = histogram_counts._fast
    x = np.linspace(0, 1, 11, dtype=np.float32)
    counts = np.zeros(2, np.int64)
    fast.uniform(x, np.array([0.0, 0.5, 1.0]), counts)
    assert list(counts) == [5, 6]  # 0.5 opens the second bucket; the last one is closed
    with pytest.raises(ValueError, match="finite and increasing"):
        fast.uniform(x, np.array([0.0, 0.0, 1.0]), counts)
    with pytest.raises(ValueError, match="finite and increasing"):
        fast.uniform(x, np.array([0.0, np.nan, 1.0]), counts)
    with pytest.raises(ValueError, match="edges"):
        fast.uniform(x, np.array([0.0, 0.5, 1.0]), np.zeros(1, np.int64))  # one count per bucket
    with pytest.raises(TypeError, match="float32 or float64"):
        fast.uniform(np.arange(3), np.array([0.0, 1.0]), counts)
    assert fast.stats(np.array([1.0, np.nan, -2.0, np.inf])) == (2, -2.0, 1.0, -1.0, 5.0)
