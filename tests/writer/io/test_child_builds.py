"""add_profile(path) and add_graph convert in a child process (``writer/_io/child.py``): the same
bytes as the conversion in the writer thread, the same bytes when the child cannot run, and bad
input reported without stopping the writer."""
import json
import logging
import os
import shutil
import socket
import sys

import mxnet as mx
import pytest
from mxnet import gluon

from readback import event_files, multiplexer, raw_events, scalars

import gluon_tb
from gluon_tb import SummaryWriter
from gluon_tb.handlers import TensorBoardHandler
from gluon_tb.writer import _summary_writer
from gluon_tb.writer._io import child
from gluon_tb.writer._summaries import graph as graph_mod
from gluon_tb.writer._summaries import profile as profile_mod
from gluon_tb.writer._summaries.profile import xspace_from_trace
from test_profile import decode_xspace, loader, make_estimator

PROFILE = "gluon_tb.writer._summaries.profile"


@pytest.fixture
def child_calls(monkeypatch):
    """The ``(module, function)`` of every build_in_child call that answered."""
    calls = []
    real = child.build_in_child

    def spy(module, function, args, *rest):
        out = real(module, function, args, *rest)
        calls.append((module, function))
        return out

    monkeypatch.setattr(child, "build_in_child", spy)
    return calls


@pytest.fixture(scope="module")
def fit_trace(tmp_path_factory):
    """A real MXNet trace (a profiled fit's dump) and the profile file the handler wrote from it."""
    tmp = tmp_path_factory.mktemp("fit")
    saved = tmp / "trace.json"
    real = SummaryWriter.add_profile

    def keep(self, trace, *a, **k):
        shutil.copy(trace, saved)
        return real(self, trace, *a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(SummaryWriter, "add_profile", keep)
    mp.delenv("MXNET_PROFILER_AUTOSTART", raising=False)
    try:
        make_estimator().fit(loader(), epochs=1,
                             event_handlers=[TensorBoardHandler(str(tmp / "logs"), profile_batch=(2, 3))])
    finally:
        mp.undo()
    [written] = (tmp / "logs" / "train_batch" / "plugins" / "profile").glob("*/*.xplane.pb")
    return str(saved), written


def test_a_fits_profile_is_converted_in_a_child_with_the_threads_bytes(fit_trace, tmp_path, child_calls):
    trace, written = fit_trace
    host = written.name[:-len(".xplane.pb")]
    assert host == socket.gethostname()
    expected = xspace_from_trace(trace, host)[0]
    _, planes = decode_xspace(expected)
    assert sum(e[0] == "FullyConnected" for ln in planes[0]["lines"] for e in ln["events"]) > 0
    assert written.read_bytes() == expected  # the handler's file, converted in the child
    with SummaryWriter(str(tmp_path)) as w:
        rel = w.add_profile(trace, session="s", host="box")
    assert (tmp_path / rel).read_bytes() == xspace_from_trace(trace, "box")[0]
    assert child_calls == [(PROFILE, "xspace_from_trace_bytes")]


def test_without_a_child_the_writer_thread_gives_the_same_bytes(fit_trace, tmp_path, monkeypatch, caplog):
    trace, _ = fit_trace
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with caplog.at_level(logging.DEBUG, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path / "run")) as w:
            rel = w.add_profile(trace, session="s", host="box")
    assert (tmp_path / "run" / rel).read_bytes() == xspace_from_trace(trace, "box")[0]
    assert f"{PROFILE}.xspace_from_trace_bytes in this thread: no Python executable" in caplog.text


def test_a_child_that_dies_falls_back_to_the_thread(fit_trace, tmp_path, monkeypatch, caplog):
    trace, _ = fit_trace
    monkeypatch.setattr(child, "_CHILD", "import os; os._exit(9)")
    with caplog.at_level(logging.DEBUG, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path)) as w:
            rel = w.add_profile(trace, session="s", host="box")
    assert (tmp_path / rel).read_bytes() == xspace_from_trace(trace, "box")[0]
    assert "child exited with status 9" in caplog.text


def test_the_caller_does_not_parse_the_trace(fit_trace, tmp_path, monkeypatch):
    trace, _ = fit_trace
    parsed, real = [], json.loads
    monkeypatch.setattr(profile_mod.json, "loads", lambda *a, **k: parsed.append(1) or real(*a, **k))
    with SummaryWriter(str(tmp_path)) as w:
        rel = w.add_profile(trace, session="s", host="box")
        assert parsed == []  # nothing parsed in this process before the call returned
        w.flush()
    assert parsed == []  # nor by the writer thread: the child did it
    monkeypatch.undo()
    assert (tmp_path / rel).read_bytes() == xspace_from_trace(trace, "box")[0]


@pytest.mark.parametrize("content", [b"\xff\xfe{", b"hello", b"", b"  \n"])
def test_an_obviously_wrong_file_is_a_type_error_of_the_call(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with SummaryWriter(str(tmp_path / "run")) as w:
        with pytest.raises(TypeError, match=r"trace must be a Chrome trace .*got the file '.*bad\.json', "
                                             r"which is not UTF-8 JSON text"):
            w.add_profile(str(bad))
        w.add_scalar("after", 1.0, 3)
    assert scalars(str(tmp_path / "run"), ".", "after") == [(3, 1.0)]


@pytest.mark.parametrize("content, why", [
    (b'{"traceEvents": [{"ph": "X", oops', "not JSON, nor an unfinished dump"),
    (b'{"events": 1}', "got NoneType None"),
    (b'[1, 2]', "got list [1, 2]"),
])
def test_a_file_found_bad_in_the_child_is_a_warning(tmp_path, caplog, content, why):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="gluon_tb"):
        with SummaryWriter(str(tmp_path / "run")) as w:
            rel = w.add_profile(str(bad), session="s", host="box")  # accepted: it looks like JSON
            w.add_scalar("after", 2.0, 5)
            w.flush()  # no error raised: the writer goes on
            w.add_scalar("after", 3.0, 6)
    assert scalars(str(tmp_path / "run"), ".", "after") == [(5, 2.0), (6, 3.0)]
    assert not (tmp_path / "run" / rel).exists()
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"gluon_tb: add_profile({str(bad)!r}): no profile written: trace must be a Chrome trace")
    assert why in warning


def test_the_child_imports_only_this_copy_of_the_builder_at_the_nice_given(tmp_path, monkeypatch):
    """What the child process has loaded when the builder has run (reported through its exit)."""
    monkeypatch.setattr(child, "_CHILD", child._CHILD + (
        "\nimport json\nm = sys.modules\nraise SystemExit(json.dumps({'file': m[module].__file__, "
        "'nice': os.getpriority(os.PRIO_PROCESS, 0), 'loaded': sorted(n for n in m if n.startswith("
        "('gluon_tb', 'mxnet')))}))"))
    with pytest.raises(child.ChildFailed) as e:
        child.build_in_child(PROFILE, "xspace_from_trace_bytes", (b"[]", "h"), 19)
    report = json.loads(str(e.value).split(": ", 1)[1])
    assert report["file"] == profile_mod.__file__
    assert os.path.dirname(gluon_tb.__file__) in report["file"]
    assert report["nice"] == 19
    assert set(report["loaded"]) == {"gluon_tb", "gluon_tb.writer", "gluon_tb.writer._summaries", PROFILE,
                                     "gluon_tb.writer._common", "gluon_tb.writer._common.checks",
                                     "gluon_tb.writer._common.arrays", "gluon_tb.writer._common.profile_steps",
                                     "gluon_tb.writer._format", "gluon_tb.writer._format.wire"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value is per thread on Linux only")
def test_the_writer_starts_its_child_at_worker_nice_and_at_normal_priority_on_a_saturated_cpu(
        tmp_path, monkeypatch):
    from gluon_tb.writer._common import threads

    monkeypatch.setattr(threads, "_saturated_until", 0.0)
    monkeypatch.setattr(_summary_writer, "PROFILE_CHILD_BYTES", 0)  # this small trace too
    nices = []
    real = child.build_in_child

    def spy(module, function, args, nice=0, timeout=None):
        nices.append((nice, timeout))
        return real(module, function, args, nice, timeout)

    monkeypatch.setattr(child, "build_in_child", spy)
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [{"name": "op", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]}))
    with SummaryWriter(str(tmp_path / "a"), worker_nice=7) as w:
        w.add_profile(str(trace), session="s1", host="h")
        w.flush()
        threads.cpu_saturated()  # a low-priority kernel found no idle CPU
        w.add_profile(str(trace), session="s2", host="h")
    with SummaryWriter(str(tmp_path / "b"), worker_nice=None) as w:
        w.add_profile(str(trace), session="s3", host="h")
    assert nices == [(7, child.STARVED_AFTER), (0, None), (0, None)]
    want = xspace_from_trace(str(trace), "h")[0]
    for run, session in (("a", "s1"), ("a", "s2"), ("b", "s3")):
        assert (tmp_path / run / "plugins" / "profile" / session / "h.xplane.pb").read_bytes() == want


def test_a_starved_low_priority_child_is_killed_and_its_work_done_at_normal_priority(tmp_path, monkeypatch, caplog):
    """A nice-19 child on a CPU that other work keeps busy would keep the writer (and its files)
    waiting: after STARVED_AFTER it is killed, the CPU noted as saturated, and a child at normal
    priority does the work: the same bytes."""
    from gluon_tb.writer._common import threads

    monkeypatch.setattr(threads, "_saturated_until", 0.0)
    monkeypatch.setattr(child, "STARVED_AFTER", 0.0)  # every low-priority child is too late
    monkeypatch.setattr(_summary_writer, "PROFILE_CHILD_BYTES", 0)  # this small trace too
    caplog.set_level(logging.DEBUG, logger="gluon_tb")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [{"name": "op", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]}))
    with SummaryWriter(str(tmp_path / "run"), worker_nice=19) as w:
        w.add_profile(str(trace), session="s", host="h")
    got = (tmp_path / "run" / "plugins" / "profile" / "s" / "h.xplane.pb").read_bytes()
    assert got == xspace_from_trace(str(trace), "h")[0]
    assert any("no answer after 0.0 s at nice 19; again at normal priority" in r.getMessage() for r in caplog.records)
    assert not any("in this thread" in r.getMessage() for r in caplog.records)
    assert threads._saturated_until > 0


def test_small_traces_and_graphs_are_converted_on_the_writer_thread(tmp_path, child_calls):
    """A child costs ~0.3 s of CPU and delays what is queued behind it: a small payload (a few ms
    of GIL on the writer thread) is converted there, to the same bytes."""
    trace = tmp_path / "trace.json"
    events = [{"name": f"op{i % 5}", "ph": "X", "ts": i * 10, "dur": 5, "pid": 0, "tid": 0} for i in range(100)]
    trace.write_text(json.dumps({"traceEvents": events}))
    assert trace.stat().st_size < _summary_writer.PROFILE_CHILD_BYTES
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4), gluon.nn.Dense(2))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 3)))
    payload = graph_mod.capture_graph(net)
    assert len(payload.symbol_json) < _summary_writer.GRAPH_CHILD_BYTES
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.add_profile(str(trace), session="s", host="h")
        w.add_graph(net)
    assert child_calls == []
    got = (tmp_path / "run" / "plugins" / "profile" / "s" / "h.xplane.pb").read_bytes()
    assert got == xspace_from_trace(str(trace), "h")[0]
    assert graph_written(tmp_path / "run") == graph_mod.build_graph(payload)


# ---------------------------------------------------------------- graphs
@pytest.fixture(scope="module")
def resnet():
    net = gluon.model_zoo.vision.resnet18_v1(classes=10)
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 3, 32, 32)))
    return net


def graph_written(logdir):
    [path] = event_files(str(logdir))
    [graph] = [e.graph_def for e in raw_events(path) if e.HasField("graph_def")]
    return graph


@pytest.mark.parametrize("without_child", [False, True])
def test_a_resnet_graph_is_built_in_a_child_with_the_threads_bytes(resnet, tmp_path, child_calls, monkeypatch,
                                                                  without_child):
    if without_child:
        monkeypatch.setattr(sys, "executable", "")
    payload = graph_mod.capture_graph(resnet, input_shapes=(1, 3, 32, 32))
    expected = graph_mod.build_graph(payload)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_graph(resnet, input_shapes=(1, 3, 32, 32))
    assert graph_written(tmp_path) == expected
    assert child_calls == ([] if without_child else [("gluon_tb.writer._summaries.graph", "build_graph")])
    nodes = multiplexer(str(tmp_path)).Graph(".").node
    assert len(nodes) == len(json.loads(payload.symbol_json)["nodes"]) > 100


# ---------------------------------------------------------------- videos
def gif_written(logdir, tag):
    [path] = event_files(str(logdir))
    return [(e.step, v.image.encoded_image_string) for e in raw_events(path) for v in e.summary.value if v.tag == tag]


@pytest.mark.parametrize("without_child", [False, True])
def test_a_large_video_is_encoded_in_a_child_with_the_threads_bytes(tmp_path, child_calls, monkeypatch, without_child):
    """Pillow's GIF writer holds the GIL for most of its ~160 ms on 16 frames of 64x64: a child
    encodes large clips; the event is the one the writer thread makes, and small clips stay there."""
    import numpy as np

    from gluon_tb.writer._summaries.video import build_video, capture_video

    if without_child:
        monkeypatch.setattr(sys, "executable", "")
    rng = np.random.default_rng(7)
    big = rng.random((1, 16, 3, 64, 64)).astype(np.float32)
    small = rng.random((4, 3, 8, 8)).astype(np.float32)
    assert big.size >= _summary_writer.VIDEO_CHILD_BYTES > small.size  # the GIF frames: a byte a value
    with SummaryWriter(str(tmp_path)) as w:
        w.add_video("big", big, 3, fps=8)
        w.add_video("small", small, 4)
    assert child_calls == ([] if without_child else [("gluon_tb.writer._summaries.video", "encode_gif")])
    for tag, clip, step, fps in (("big", big, 3, 8), ("small", small, 4, 4)):
        want = build_video(tag, capture_video(clip, fps))  # encoded in this thread
        [(got_step, gif)] = gif_written(tmp_path, tag)
        assert got_step == step and gif[:6] == b"GIF89a"
        from tensorboard.compat.proto import summary_pb2

        assert gif == summary_pb2.Summary.Value.FromString(bytes(want)).image.encoded_image_string
