"""Property-based round trips: what goes into SummaryWriter is what TensorBoard reads back."""
import math
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter

tags = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.dictionaries(tags, st.lists(st.floats(width=32), min_size=1, max_size=20), min_size=1, max_size=4))
def test_scalars_round_trip(series):
    with tempfile.TemporaryDirectory() as d:
        with SummaryWriter(d) as w:
            for tag, values in series.items():
                for step, v in enumerate(values):
                    w.add_scalar(tag, v, step)
        assert readback.tags(d) == {(".", t) for t in series}
        for tag, values in series.items():
            got = readback.scalars(d, ".", tag)
            assert [s for s, _ in got] == list(range(len(values)))
            for (_, g), v in zip(got, values):
                assert (math.isnan(g) and math.isnan(v)) or g == v


@SETTINGS
@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=3, max_side=30),
                  elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_histograms_round_trip(values):
    finite = values[np.isfinite(values)].astype(np.float64)
    with tempfile.TemporaryDirectory() as d:
        with SummaryWriter(d) as w:
            w.add_histogram("h", values, 3)
        (ev,) = readback.tensor_events(d, ".", "h")  # TensorBoard loads it ...
        got = tensor_util.make_ndarray(ev.tensor_proto)
        assert ev.step == 3 and got[:, 2].sum() == finite.size
        # ... and the exact proto holds numpy's buckets: bucket_limit[i] is the right edge of
        # bucket i, every bucket but the last one half-open [left, right) as in numpy.histogram
        (path,) = readback.event_files(d)
        (h,) = [v.histo for e in readback.raw_events(path) for v in e.summary.value]
        limits, counts = np.array(h.bucket_limit), np.cumsum(h.bucket)
        assert h.num == finite.size
        if finite.size:
            assert (h.min, h.max) == (finite.min(), finite.max())
            below = np.array([(finite < lim).sum() for lim in limits[:-1]])
            np.testing.assert_array_equal(counts[:-1], below)
            assert counts[-1] == finite.size


@SETTINGS
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200), min_size=1, max_size=5))
def test_text_round_trips(texts):
    with tempfile.TemporaryDirectory() as d:
        with SummaryWriter(d) as w:
            for i, t in enumerate(texts):
                w.add_text("notes", t, i)
        got = [tensor_util.make_ndarray(e.tensor_proto).item().decode("utf-8")
               for e in readback.tensor_events(d, ".", "notes")]
        assert got == texts
