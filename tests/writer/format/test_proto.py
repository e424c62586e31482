"""Hand-encoded messages parse, with TensorBoard's own classes, to what we meant."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, graph_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.util import tensor_util

from gluon_tb.writer._format import proto as _proto
from gluon_tb.writer._format import wire as _wire


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trips_through_protobuf(n):
    ev = event_pb2.Event.FromString(_proto.event(0.0, n))
    assert ev.step == n


@given(st.floats(allow_nan=False, width=64), st.integers(0, 2**62), st.text(min_size=1, max_size=50),
       st.floats(allow_nan=True, width=64))
def test_scalar_event_equals_the_protobuf_built_event(wall, step, tag, value):
    ours = _proto.scalar_event(wall, step, _proto.scalar_prefix(tag), value)
    ref = event_pb2.Event(wall_time=wall, step=step)
    v = ref.summary.value.add(tag=tag)
    v.simple_value = float(np.float32(value)) if math.isfinite(value) else value
    parsed = event_pb2.Event.FromString(ours)
    assert parsed.wall_time == wall and parsed.step == step
    assert parsed.summary.value[0].tag == tag
    got = parsed.summary.value[0].simple_value
    want = v.simple_value
    assert (math.isnan(got) and math.isnan(want)) or got == want
    if not math.isnan(value) and wall != 0 and float(np.float32(value)) != 0:
        # byte for byte as protobuf writes it (protobuf leaves out zero defaults; we keep them)
        assert ours == ref.SerializeToString()


def test_huge_finite_scalar_becomes_infinite_float32_not_an_error():
    parsed = event_pb2.Event.FromString(_proto.scalar_event(0.0, 1, _proto.scalar_prefix("x"), 1e300))
    assert parsed.summary.value[0].simple_value == math.inf


def test_file_version_and_session_log():
    ev = event_pb2.Event.FromString(_proto.event(3.0, 0, file_version="brain.Event:2"))
    assert ev.file_version == "brain.Event:2"
    ev = event_pb2.Event.FromString(
        _proto.event(3.0, 42, session_log=_proto.session_log(_proto.SESSION_START)))
    assert ev.session_log.status == event_pb2.SessionLog.START and ev.step == 42


def test_value_with_histogram_image_audio_and_metadata():
    h = _proto.histogram(-1.0, 2.0, 3.0, 1.5, 5.25, [0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
    md = _proto.metadata("histograms", b"\x01\x02", display_name="d", description="x",
                         data_class=_proto.DATA_CLASS_TENSOR)
    s = summary_pb2.Summary.FromString(_proto.summary([
        _proto.value("h", histo=h, metadata=md),
        _proto.value("i", image=_proto.image(2, 3, 1, b"png")),
        _proto.value("a", audio=_proto.audio(16000.0, 2, 10, b"wav")),
    ]))
    hv, iv, av = s.value
    assert (hv.histo.min, hv.histo.max, hv.histo.num, hv.histo.sum, hv.histo.sum_squares) == (-1, 2, 3, 1.5, 5.25)
    assert list(hv.histo.bucket_limit) == [0, 1, 2] and list(hv.histo.bucket) == [1, 1, 1]
    assert hv.metadata.plugin_data.plugin_name == "histograms"
    assert hv.metadata.plugin_data.content == b"\x01\x02"
    assert hv.metadata.display_name == "d" and hv.metadata.summary_description == "x"
    assert hv.metadata.data_class == summary_pb2.DATA_CLASS_TENSOR
    assert (iv.image.height, iv.image.width, iv.image.colorspace, iv.image.encoded_image_string) == (2, 3, 1, b"png")
    assert (av.audio.sample_rate, av.audio.num_channels, av.audio.length_frames) == (16000.0, 2, 10)
    assert av.audio.content_type == "audio/wav"


@pytest.mark.parametrize("arr", [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array([1.5, -2.0]),
    np.array([[1, 2], [3, 4]], dtype=np.int64),
    np.array([1, 2], dtype=np.int32),
    np.array([0, 255], dtype=np.uint8),
    np.array([True, False]),
    np.array([1.0, 2.0], dtype=np.float16),
    np.zeros((0, 3), dtype=np.float32),
])
def test_tensor_array_round_trips(arr):
    t = tensor_pb2.TensorProto.FromString(_proto.tensor_array(arr))
    back = tensor_util.make_ndarray(t)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def test_string_tensor_and_scalar_tensors():
    t = tensor_pb2.TensorProto.FromString(_proto.tensor_strings(["a", "ü"], shape=[2, 1]))
    assert tensor_util.make_ndarray(t).tolist() == [[b"a"], ["ü".encode()]]
    t = tensor_pb2.TensorProto.FromString(_proto.tensor_array(np.array(2.5, np.float32)))
    assert tensor_util.make_ndarray(t).item() == 2.5 and t.tensor_shape.dim == []
    assert t.dtype == types_pb2.DT_FLOAT
    t = tensor_pb2.TensorProto.FromString(_proto.tensor_array(np.array(0.1, np.float64)))
    assert tensor_util.make_ndarray(t).item() == 0.1 and t.tensor_shape.dim == []
    assert t.dtype == types_pb2.DT_DOUBLE


def test_graph_def_nodes_and_attrs():
    n = _proto.node_def("a/b", "Dense", ["x", "y:1"], {
        "s": _proto.attr_value("str"), "i": _proto.attr_value(3), "f": _proto.attr_value(0.5),
        "b": _proto.attr_value(True), "_output_shapes": _proto.attr_shapes([[2, 3], [-1]])})
    g = graph_pb2.GraphDef.FromString(_proto.graph_def([n]))
    node = g.node[0]
    assert (node.name, node.op, list(node.input)) == ("a/b", "Dense", ["x", "y:1"])
    assert node.attr["s"].s == b"str" and node.attr["i"].i == 3 and node.attr["f"].f == 0.5
    assert node.attr["b"].b is True
    shapes = [[d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]
    assert shapes == [[2, 3], [-1]]
    assert g.versions.producer == 22
    with pytest.raises(TypeError, match="attr value"):
        _proto.attr_value([1])


def test_packed_helpers():
    assert _wire.f_packed_doubles(6, [1.0]) == b"\x32\x08" + np.float64(1.0).tobytes()
    assert _wire.varint(300) == b"\xac\x02"
    assert _wire.varint(-1) == b"\xff" * 9 + b"\x01"


def test_package_never_imports_protobuf():
    import subprocess
    import sys

    code = ("import sys; sys.modules['google.protobuf'] = None; sys.modules['google'] = None\n"
            "import gluon_tb, tempfile, os\n"
            "d = tempfile.mkdtemp()\n"
            "with gluon_tb.SummaryWriter(d) as w:\n"
            "    w.add_scalar('x', 1.0, 1); w.add_histogram('h', [1.0, 2.0], 1); w.add_text('t', 'hi')\n"
            "print(sorted(os.listdir(d))[0][:20])")
    import os

    from repo_paths import ROOT as root
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("events.out.tfevents")


@given(st.lists(st.integers(0, 3), min_size=0, max_size=40), st.integers(0, 1 << 40),
       st.floats(allow_nan=False, width=64), st.floats(allow_nan=False, width=64))
def test_trimmed_histogram_in_c_writes_the_python_bytes(counts, big, lo, hi):
    """The C encoder of a histogram's non-zero span (``_fastframe.trimmed_histogram``): the same
    bytes as the Python one, for zero runs at either end, no non-zero count at all, and counts
    beyond float32's exact integers; TensorBoard's own classes read the span back."""
    from gluon_tb.writer._format import _fastframe

    c = np.array(counts + [0, big] if counts else [], dtype=np.int64)
    edges = np.cumsum(np.linspace(0.5, 2.0, c.size)) if c.size else np.zeros(0)
    args = (lo, hi, float(c.sum()), 1.25, 3.5, edges, c)
    got = _fastframe.trimmed_histogram(*args)
    assert got == _proto.trimmed_histogram_py(*args)
    assert _proto.trimmed_histogram(*args) == got
    h = summary_pb2.HistogramProto.FromString(got)
    nz = np.flatnonzero(c)
    span = slice(nz[0], nz[-1] + 1) if nz.size else slice(0, 0)
    assert list(h.bucket) == [float(x) for x in c[span]] and list(h.bucket_limit) == list(edges[span])
    assert (h.min, h.max, h.num) == (lo, hi, float(c.sum()))


def test_trimmed_histogram_refuses_arrays_of_other_types_by_name():
    from gluon_tb.writer._format import _fastframe

    with pytest.raises(TypeError, match="right_edges must be float64 and counts int64"):
        _fastframe.trimmed_histogram(0.0, 1.0, 2.0, 1.0, 1.0, np.zeros(2), np.zeros(2, np.int32))
    # the Python entry point takes them, through the Python encoder
    assert _proto.trimmed_histogram(0.0, 1.0, 2.0, 1.0, 1.0, np.ones(2), np.array([0, 2], np.int32)) == \
        _proto.trimmed_histogram_py(0.0, 1.0, 2.0, 1.0, 1.0, np.ones(2), np.array([0, 2], np.int64))
