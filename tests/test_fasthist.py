"""The optional C kernel of the histograms (its results are compared in test_histogram.py)."""
import shutil

import numpy as np
import pytest

from gluon_tb.writer import _histogram

EDGES = _histogram.default_edges()


def test_c_kernel_is_built():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the package falls back to numpy")
    assert _histogram._fast is not None, "setup.py should have built gluon_tb/writer/_fasthist"


def test_c_kernel_rejects_what_it_cannot_count():
    if _histogram._fast is None:
        pytest.skip("the C kernel is not built here")
    count = _histogram._fast.count
    t = _histogram._table(EDGES.tobytes(), "<f4")
    ok = np.zeros(t.nbuckets + 3, np.int64)
    with pytest.raises(TypeError, match="float32 or float64"):
        count(np.ones(3, np.int32), t.base, t.inner, ok)
    with pytest.raises(ValueError, match="wrong size"):
        count(np.ones(3, np.float64), t.base, t.inner, ok)  # inner is float32
    with pytest.raises(ValueError, match="outside counts"):
        count(np.ones(3, np.float32), t.base, t.inner, np.zeros(5, np.int64))
    assert count(np.array([1.0, np.nan], np.float32), t.base, t.inner, ok)[0] == 1  # still fine
