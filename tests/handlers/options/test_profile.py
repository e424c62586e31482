"""``profile_batch=``: MXNet's profiler over global batches, as an XSpace for TensorBoard's Profile
dashboard and a ``profile/operator_stats`` text; the XSpace decoded back by a wire decoder here."""
import collections
import glob
import os
import re
import socket
import time
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

from gluon_tb import SummaryWriter
from gluon_tb.handlers import TensorBoardHandler
from gluon_tb.handlers._mxnet.profiler import stats_markdown
from gluon_tb.handlers._options.profile_batch import check_profile_batch
from gluon_tb.writer._summaries.profile import build_xspace, trace_spans, xspace_from_trace
import readback
from readback import multiplexer

warnings.filterwarnings("ignore", message="No trainer specified")
N, BATCH = 96, 16  # 6 batches an epoch


# ------------------------------------------------------------ a protobuf wire decoder
def _varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def fields(b):
    """``{field: [values]}`` of one message: ints for varints, bytes for length-delimited."""
    out = collections.defaultdict(list)
    i = 0
    while i < len(b):
        k, i = _varint(b, i)
        f, wt = k >> 3, k & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"unexpected wire type {wt} for field {f}")
        out[f].append(v)
    return out


def decode_xspace(data):
    """XSpace -> (hostnames, [plane dicts]) following xplane.proto's field numbers."""
    space = fields(data)
    planes = []
    for pb in space[1]:
        p = fields(pb)
        meta = {}
        for entry in p[4]:
            e = fields(entry)
            m = fields(e[2][0])
            assert m[1] == e[1]  # XEventMetadata.id == the map key
            meta[e[1][0]] = m[2][0].decode()
        lines = []
        for lb in p[3]:
            ln = fields(lb)
            events = []
            for eb in ln[4]:
                ev = fields(eb)
                events.append((meta[ev[1][0]], ev.get(2, [0])[0], ev.get(3, [0])[0]))
            lines.append({"id": ln[1][0], "name": ln[2][0].decode(), "timestamp_ns": ln[3][0],
                          "duration_ps": ln[9][0], "display_name": ln[11][0].decode(), "events": events})
        planes.append({"name": p[2][0].decode(), "lines": lines, "meta": meta})
    return [h.decode() for h in space[4]], planes


# ------------------------------------------------------------ pure conversion
def test_spans_from_chrome_trace_phases():
    events = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
        {"ph": "B", "name": "outer", "ts": 10, "pid": 0, "tid": 1},
        {"ph": "B", "name": "FullyConnected", "ts": 11.5, "pid": 0, "tid": 1},
        {"ph": "E", "name": "FullyConnected", "ts": 13, "pid": 0, "tid": 1},
        {"ph": "E", "name": "outer", "ts": 20, "pid": 0, "tid": 1},
        {"ph": "X", "name": "copy", "ts": 15, "dur": 2, "pid": 0, "tid": 2},
        {"ph": "b", "name": "MXInvoke", "ts": 5, "id": 7, "pid": 9, "tid": 2 ** 63 + 5},
        {"ph": "e", "name": "MXInvoke", "ts": 6, "id": 7, "pid": 9, "tid": 2 ** 63 + 5},
        {"ph": "C", "name": "counter", "ts": 1, "pid": 0, "args": {"x": 1}},
        {"ph": "E", "name": "stray", "ts": 30, "pid": 0, "tid": 3},
        {"ph": "B", "name": "unfinished", "ts": 30, "pid": 0, "tid": 3},
    ]
    spans = trace_spans(events)
    assert sorted(spans) == sorted([(0, 1, "FullyConnected", 11500, 1500), (0, 1, "outer", 10000, 10000),
                                    (0, 2, "copy", 15000, 2000), (9, 2 ** 63 + 5, "MXInvoke", 5000, 1000)])
    data, count = xspace_from_trace({"traceEvents": events}, host="h1")
    assert count == 4
    hosts, planes = decode_xspace(data)
    assert hosts == ["h1"] and [p["name"] for p in planes] == ["/host:CPU"]
    lines = {ln["name"]: ln for ln in planes[0]["lines"]}
    assert set(lines) == {"cpu/0 / tid 1", "cpu/0 / tid 2", f"pid 9 / tid {2 ** 63 + 5}"}
    ln = lines["cpu/0 / tid 1"]
    assert ln["timestamp_ns"] == 10000 - 5000 and ln["duration_ps"] == 10_000_000  # from the first event
    assert ln["events"] == [("outer", 0, 10_000_000), ("FullyConnected", 1_500_000, 1_500_000)]
    assert ln["display_name"] == ln["name"]
    assert sorted(planes[0]["meta"].values()) == ["FullyConnected", "MXInvoke", "copy", "outer"]


def test_step_tasks_become_the_step_events_xprof_groups():
    """The handler's ``train <k>`` and ``input <k>`` tasks (domain ``gluon_tb.step``) become XProf's
    step convention on one line of their own; they are not operator events."""
    dom = {"cat": "gluon_tb.step", "pid": 5, "tid": 1, "id": 1}
    events = [
        {"ph": "B", "name": "FullyConnected", "ts": 100, "pid": 0, "tid": 1},
        {"ph": "E", "name": "FullyConnected", "ts": 101, "pid": 0, "tid": 1},
        dict(dom, ph="b", name="train 7", ts=99), dict(dom, ph="e", name="train 7", ts=104),
        dict(dom, ph="b", name="input 7", ts=99.001), dict(dom, ph="e", name="input 7", ts=100.5),
        dict(dom, ph="b", name="train 8", ts=104), dict(dom, ph="e", name="train 8", ts=110),
        dict(dom, ph="b", name="input 9", ts=110), {"ph": "b", "name": "train 3", "ts": 1, "pid": 6, "id": 1,
                                                   "cat": "user"},
        {"ph": "e", "name": "train 3", "ts": 2, "pid": 6, "id": 1, "cat": "user"},
    ]
    data, count = xspace_from_trace(events)
    assert count == 2  # FullyConnected and the user's own "train 3"
    _, planes = decode_xspace(data)
    names = {ln["name"]: [e[0] for e in ln["events"]] for ln in planes[0]["lines"]}
    assert names == {"pid 0 / tid 1": ["FullyConnected"], "pid 6 / tid None": ["train 3"],
                     "Training steps": ["train", "input", "batch", "train", "batch"]}
    # picoseconds from the trace's first event (the user's task at 1 us)
    assert steps_of(decode_steps(data)) == {7: (98_000_000, 5_000_000, 1_500_000, 3_500_000),
                                            8: (103_000_000, 6_000_000, 0, 6_000_000)}


def test_empty_trace_is_one_empty_plane():
    hosts, planes = decode_xspace(build_xspace([], host="h"))
    assert hosts == ["h"] and planes == [{"name": "/host:CPU", "lines": [], "meta": {}}]


def test_add_profile_writes_the_file_under_the_run(tmp_path):
    trace = [{"ph": "X", "name": "FullyConnected", "ts": 1, "dur": 1, "pid": 0, "tid": 0}]
    with SummaryWriter(str(tmp_path / "run")) as w:
        rel = w.add_profile(trace, session="2026_11_24_02_30_00", host="box")
    assert rel == "plugins/profile/2026_11_24_02_30_00/box.xplane.pb"
    _, planes = decode_xspace((tmp_path / "run" / rel).read_bytes())
    assert planes[0]["lines"][0]["events"] == [("FullyConnected", 0, 1_000_000)]
    with SummaryWriter(str(tmp_path / "run2")) as w:
        with pytest.raises(ValueError, match="host must be a plain file name"):
            w.add_profile(trace, host="../x")
        with pytest.raises(TypeError, match="trace must be a Chrome trace"):
            w.add_profile({"events": 1})


def test_stats_markdown():
    table = ("\nProfile Statistics:\n\tNote the difference in units for different entries.\n"
             "operator\n=================\n"
             "Name                          Total Count        Time (ms)    Min Time (ms)\n"
             "----                          -----------        ---------    -------------\n"
             "FullyConnected                          4           0.3020           0.0140\n"
             "_backward_FullyConnected                4           0.1000           0.0100\n\n")
    md = stats_markdown(table)
    assert "**operator**" in md
    assert "| Name | Total Count | Time (ms) | Min Time (ms) |" in md
    assert "| FullyConnected | 4 | 0.3020 | 0.0140 |" in md and "----" not in md.replace("---|", "")


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), ((3, 2), ValueError), ((-1, 2), ValueError),
                                      (True, TypeError), ("2", TypeError), ((1, 2, 3), ValueError),
                                      ((1.0, 2), TypeError), ([1], ValueError), ([1, "2"], TypeError)])
def test_profile_batch_argument_errors(tmp_path, bad, exc):
    with pytest.raises(exc, match=r"profile_batch must be .*got " + re.escape(repr(bad) if exc is ValueError
                                                                              else "")):
        TensorBoardHandler(str(tmp_path), profile_batch=bad)


def test_profile_batch_accepted_forms():
    assert check_profile_batch(None) is None
    assert check_profile_batch(0) is None  # Keras's 0: off
    assert check_profile_batch((0, 0)) == (0, 0) and check_profile_batch(1) == (1, 1)
    assert check_profile_batch((2, 3)) == (2, 3) and check_profile_batch([4, 4]) == (4, 4)


def decode_steps(data):
    """The step line of an XSpace: ``[(name, start_ps, duration_ps, {stat name: value})]``, start
    from the trace's origin, with the stats decoded by the plane's ``stat_metadata`` (field 5)."""
    [pb] = fields(data)[1]
    p = fields(pb)
    names = {}
    for entry in p[4]:
        e = fields(entry)
        names[e[1][0]] = fields(e[2][0])[2][0].decode()
    stat_names = {}
    for entry in p[5]:
        e = fields(entry)
        m = fields(e[2][0])
        assert m[1] == e[1]  # XStatMetadata.id == the map key
        stat_names[e[1][0]] = m[2][0].decode()
    out = []
    for lb in p[3]:
        ln = fields(lb)
        if ln[2][0].decode() != "Training steps":
            continue
        for eb in ln[4]:
            ev = fields(eb)
            st = {}
            for sb in ev.get(4, []):
                x = fields(sb)
                st[stat_names[x[1][0]]] = x[4][0] if 4 in x else x[5][0].decode()
            out.append((names[ev[1][0]], ln[3][0] * 1000 + ev.get(2, [0])[0], ev.get(3, [0])[0], st))
    return out


def steps_of(events):
    """``{step_num: (start_ps, duration_ps, input_ps, batch_ps)}`` of decoded step events, checking
    that each step's ``input`` and ``batch`` follow each other and fill it exactly."""
    out, cur = {}, None
    for name, start, dur, st in events:
        if name == "train":
            assert st["_r"] == 1 and set(st) == {"step_num", "_r"}
            cur = st["step_num"]
            out[cur] = [start, dur, 0, 0, start]
        elif name == "input":
            assert st == {"_ipl_stage_name": "DataLoader"} and start == out[cur][4] == out[cur][0]
            out[cur][2], out[cur][4] = dur, start + dur
        else:
            assert name == "batch" and st == {} and start == out[cur][4]
            out[cur][3] = dur
            assert out[cur][2] + dur == out[cur][1]
    return {k: tuple(v[:4]) for k, v in out.items()}


# ------------------------------------------------------------ a real Estimator.fit
def make_estimator():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    return Estimator(net, loss, train_metrics=mx.metric.Accuracy(), trainer=tr)


def loader():
    rs = np.random.RandomState(0)
    x = rs.randn(N, 5).astype("float32")
    y = rs.randint(0, 3, size=N).astype("float32")
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=BATCH)


@pytest.fixture
def profiler_calls(monkeypatch):
    """Every ``mx.profiler.set_state`` call, in order."""
    calls = []
    real = mx.profiler.set_state
    monkeypatch.setattr(mx.profiler, "set_state", lambda state="stop", profile_process="worker":
                        (calls.append(state), real(state, profile_process))[1])
    monkeypatch.delenv("MXNET_PROFILER_AUTOSTART", raising=False)
    return calls


def profiled(logdir, profile_batch, epochs=2):
    est = make_estimator()
    handler = TensorBoardHandler(str(logdir), profile_batch=profile_batch)
    est.fit(loader(), epochs=epochs, event_handlers=[handler])
    files = glob.glob(os.path.join(str(logdir), "train_batch", "plugins", "profile", "*", "*.xplane.pb"))
    return handler, files


def read_text(logdir, tag):
    acc = multiplexer(str(logdir)).GetAccumulator("train_batch")
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors(tag)]


def batch_fc_count(start, stop):
    """How many FullyConnected forward ops the profiled batches ran: 2 Dense a batch."""
    return 2 * (stop - start + 1)


@pytest.mark.parametrize("profile_batch, start, stop", [((2, 3), 2, 3), (7, 7, 7)])
def test_fit_profiles_exactly_the_range(tmp_path, profiler_calls, profile_batch, start, stop):
    handler, files = profiled(tmp_path, profile_batch)
    assert profiler_calls == ["run", "stop"]
    assert len(files) == 1
    session, name = files[0].split(os.sep)[-2:]
    assert re.fullmatch(r"\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d", session)
    assert name == f"{socket.gethostname()}.xplane.pb"
    hosts, planes = decode_xspace(open(files[0], "rb").read())
    assert hosts == [socket.gethostname()] and [p["name"] for p in planes] == ["/host:CPU"]
    # MXNet traces each operator twice: B/E on the device's line (process "cpu/0") and an async
    # b/e pair in its operator domain; each is a line of its own here. Process names are in the
    # first dump of a process only: later lines are named by pid
    on_cpu = collections.Counter(e[0] for ln in planes[0]["lines"]
                                 if ln["name"].startswith(("cpu/0 /", "pid 0 /")) for e in ln["events"])
    assert on_cpu["FullyConnected"] == batch_fc_count(start, stop)
    assert on_cpu["_backward_FullyConnected"] == batch_fc_count(start, stop)
    everywhere = collections.Counter(e[0] for ln in planes[0]["lines"] for e in ln["events"])
    assert everywhere["FullyConnected"] == 2 * batch_fc_count(start, stop)
    for ln in planes[0]["lines"]:
        assert all(off >= 0 and off + dur <= ln["duration_ps"] for _, off, dur in ln["events"])
    # relative to the trace's first event: XProf's int64 picoseconds must not overflow
    assert min(ln["timestamp_ns"] for ln in planes[0]["lines"]) == 0
    assert max(ln["timestamp_ns"] * 1000 + ln["duration_ps"] for ln in planes[0]["lines"]) < 2 ** 63
    [(step, text)] = read_text(tmp_path, "profile/operator_stats")
    assert step == stop
    assert f"global batches {start} to {stop}" in text
    assert re.search(r"^\| FullyConnected \| " + str(batch_fc_count(start, stop)) + r" \|", text, re.M)
    # the profiler is given back with MXNet's defaults; a second fit profiles nothing
    est = make_estimator()
    est.fit(loader(), epochs=1, event_handlers=[handler])
    assert profiler_calls == ["run", "stop"]


class SlowDataset(gluon.data.ArrayDataset):
    """Each sample takes ``delay`` seconds to read: a batch of 16 waits 16 * delay."""

    def __init__(self, delay, *arrays):
        super().__init__(*arrays)
        self.delay = delay

    def __getitem__(self, i):
        time.sleep(self.delay)
        return super().__getitem__(i)


def profiled_slow(logdir, profile_batch, delay, n=N, epochs=2):
    """An Estimator fit of ``n`` samples (batches of 16) whose loader sleeps ``delay`` s a sample;
    the path of its XSpace file."""
    rs = np.random.RandomState(0)
    data = SlowDataset(delay, rs.randn(n, 5).astype("float32"), rs.randint(0, 3, n).astype("float32"))
    est = make_estimator()
    est.fit(gluon.data.DataLoader(data, batch_size=BATCH), epochs=epochs,
            event_handlers=[TensorBoardHandler(str(logdir), profile_batch=profile_batch)])
    [f] = glob.glob(os.path.join(str(logdir), "train_batch", "plugins", "profile", "*", "*.xplane.pb"))
    return f


def test_each_profiled_batch_is_a_step_with_its_wait_for_input(tmp_path, profiler_calls):
    """Steps 4..7 over an epoch's end (6 batches an epoch): a step runs from the previous batch's
    end to its own, its ``input`` part until its batch_begin; the first profiled batch and the
    first of an epoch start at their batch_begin (no input part, no validation or epoch end in a
    step). A loader that sleeps 2 ms a sample (32 ms a batch) shows in ``input``."""
    f = profiled_slow(tmp_path, (4, 7), 0.002)
    steps = steps_of(decode_steps(open(f, "rb").read()))
    assert sorted(steps) == [4, 5, 6, 7]
    for k, (start, dur, wait, batch) in steps.items():
        assert batch > 0
        if k in (5, 7):
            assert 0.9 * 32e9 < wait < dur  # in picoseconds
        else:
            assert wait == 0
    assert 0 <= steps[5][0] - (steps[4][0] + steps[4][1]) < 1e9  # back to back inside an epoch (< 1 ms)
    assert steps[6][0] > steps[5][0] + steps[5][1] + 0.9 * 32e9  # the epoch's end and first batch between


def test_event_count_equals_the_traces_complete_events(tmp_path, profiler_calls, monkeypatch):
    seen = []
    real = SummaryWriter.add_profile

    def spy(self, trace, *a, **k):
        from gluon_tb.writer._summaries.profile import trace_events
        seen.append(trace_spans(trace_events(trace)))
        return real(self, trace, *a, **k)

    monkeypatch.setattr(SummaryWriter, "add_profile", spy)
    _, files = profiled(tmp_path, (2, 3))
    [spans] = seen
    _, planes = decode_xspace(open(files[0], "rb").read())
    assert sum(len(ln["events"]) for ln in planes[0]["lines"] if ln["name"] != "Training steps") \
        == len(spans) - 3 > 0  # the tasks "train 2", "input 3" and "train 3" are on the step line only


def test_range_past_the_end_profiles_to_the_end_and_nothing_before(tmp_path, profiler_calls):
    handler, files = profiled(tmp_path, (10, 100), epochs=2)  # 12 batches: 10 and 11
    assert profiler_calls == ["run", "stop"] and len(files) == 1
    [(step, _)] = read_text(tmp_path, "profile/operator_stats")
    assert step == 11
    _, files = profiled(tmp_path / "never", (50, 60))
    assert profiler_calls == ["run", "stop"] and files == []


def test_a_range_the_fit_never_reaches_is_a_warning(tmp_path, profiler_calls, caplog):
    with caplog.at_level("WARNING", logger="gluon_tb"):
        _, files = profiled(tmp_path / "never", (50, 60), epochs=2)  # 12 batches: 0..11
    said = [r.getMessage() for r in caplog.records if "profile_batch" in r.getMessage()]
    assert said == ["gluon_tb: profile_batch=(50, 60) was not reached: this fit's last global batch was 11 "
                    "(global batches count from 0 over every fit of this handler); nothing was profiled"]
    assert files == [] and profiler_calls == []
    caplog.clear()
    with caplog.at_level("WARNING", logger="gluon_tb"):
        _, files = profiled(tmp_path / "reached", (10, 100), epochs=2)  # cut short by the fit: no warning
    assert len(files) == 1 and not [r for r in caplog.records if "profile_batch" in r.getMessage()]


def test_autostart_session_is_left_alone(tmp_path, profiler_calls, monkeypatch, caplog):
    monkeypatch.setenv("MXNET_PROFILER_AUTOSTART", "1")
    with caplog.at_level("WARNING", logger="gluon_tb"):
        _, files = profiled(tmp_path, 1)
    assert profiler_calls == [] and files == []
    assert "MXNET_PROFILER_AUTOSTART" in caplog.text


def test_unfinished_dumps_are_read(tmp_path):
    """MXNet's dump(finished=False): the first ends inside the list, a later one continues it."""
    from gluon_tb.writer._summaries.profile import trace_events
    first, later = tmp_path / "first.json", tmp_path / "later.json"
    first.write_text('{\n    "traceEvents": [\n        {"ph": "M", "name": "process_name", "pid": 0,'
                     ' "args": {"name": "cpu/0"}}\n,\n        {"ph": "X", "name": "a", "ts": 1, "dur": 1}\n')
    later.write_text(',\n\n    {"ph": "B", "name": "a", "ts": 1}\n,\n    {"ph": "E", "name": "a", "ts": 2}\n')
    assert [e["ph"] for e in trace_events(str(first))] == ["M", "X"]
    assert [e["ph"] for e in trace_events(later)] == ["B", "E"]


def test_xprof_reads_the_file(tmp_path, profiler_calls, xprof_python):
    """XProf's own C++ XSpace reader (``xprof.profile_data``) on a fit's file: names and counts."""
    import json
    import subprocess

    _, files = profiled(tmp_path, (2, 3))
    script = ("import collections, json, sys\nfrom xprof import profile_data as pd\n"
              "p = pd.ProfileData.from_file(sys.argv[1])\n"
              "print(json.dumps({pl.name: {ln.name: collections.Counter(e.name for e in ln.events)"
              " for ln in pl.lines} for pl in p.planes}))\n")
    out = subprocess.run([xprof_python, "-c", script, files[0]], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    planes = json.loads(out.strip().splitlines()[-1])
    _, mine = decode_xspace(open(files[0], "rb").read())
    assert list(planes) == ["/host:CPU"]
    assert {name: sum(c.values()) for name, c in planes["/host:CPU"].items()} == \
        {ln["name"]: len(ln["events"]) for ln in mine[0]["lines"]}
    assert sum(c.get("FullyConnected", 0) for c in planes["/host:CPU"].values()) == 2 * batch_fc_count(2, 3)


XPROF_STEPS = """import json, sys
from xprof.convert import raw_to_tool_data as r
def table(tool, i):
    data, _ = r.xspace_to_tool_data([sys.argv[1]], tool, {"use_saved_result": False})
    return json.loads(data)[i]
ipa, ov = table("input_pipeline_analyzer", 1), table("overview_page", 1)
cols = [c["id"] for c in ipa["cols"]]
rows = [dict(zip(cols, [c.get("v") for c in row["c"]])) for row in ipa["rows"]]
print(json.dumps({"rows": rows, "overview": ov["p"]}))
"""


def xprof_steps(python, path):
    """XProf's own step analysis of an XSpace file (its C++ converter, through ``raw_to_tool_data``):
    ``(rows of the step-time graph, the Overview page's step-time summary)``."""
    import json
    import subprocess

    out = subprocess.run([python, "-c", XPROF_STEPS, path], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    found = json.loads(out.strip().splitlines()[-1])
    return found["rows"], found["overview"]


def assert_xprof_steps(python, path, steps, slow=()):
    """XProf finds exactly ``steps`` (its step-time graph: ``train <k>``), with the step times of
    our file and their host compute + input split; ``slow`` steps are mostly input."""
    rows, ov = xprof_steps(python, path)
    mine = steps_of(decode_steps(open(path, "rb").read()))
    assert [r["stepnum"] for r in rows] == [f"train {k}" for k in steps]
    for k, r in zip(steps, rows):
        _, dur, wait, batch = mine[k]
        assert r["stepTimeMs"] == pytest.approx(dur / 1e9) and r["stepTimeMs"] > 0
        assert r["hostComputeTimeMs"] == pytest.approx(batch / 1e9)
        assert r["infeedTimeMs"] == pytest.approx(wait / 1e9)
        assert (r["infeedTimeMs"] > r["hostComputeTimeMs"]) == (k in slow)
    assert float(ov["steptime_ms_average"]) > 0 and ov["hardware_type"] == "CPU_ONLY"
    assert float(ov["steptime_ms_average"]) == pytest.approx(sum(r["stepTimeMs"] for r in rows) / len(rows), abs=0.06)
    return rows, ov


def test_xprof_finds_the_steps_and_their_input_wait(tmp_path, profiler_calls, xprof_python):
    """The Overview page's data: XProf groups our step events into steps 3..6 with their time (not
    "0.0 ms"), and steps 4 and 5 of a loader that sleeps 4 ms a sample are input-bound (3 is the
    first profiled batch and 6 the first of an epoch: their steps start at their batch_begin)."""
    f = profiled_slow(tmp_path, (3, 6), 0.004)
    _, ov = assert_xprof_steps(xprof_python, f, [3, 4, 5, 6], slow=(4, 5))
    assert "input-bound" in ov["input_conclusion"]


def test_nothing_left_in_the_working_directory(tmp_path):
    """MXNet closes an unfinished dump into its configured file at exit: not a profile.json here."""
    import subprocess
    import sys

    script = ("import sys; sys.path.insert(0, sys.argv[1])\nimport test_profile as t\n"
              "t.profiled('logs', (0, 0), epochs=1)\n")
    env = dict(os.environ)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    subprocess.run([sys.executable, "-c", script, os.path.dirname(__file__)], cwd=str(tmp_path),
                   env=env, check=True, timeout=120, capture_output=True)
    assert sorted(os.listdir(tmp_path)) == ["logs"]
    assert len(glob.glob(str(tmp_path / "logs/train_batch/plugins/profile/*/*.xplane.pb"))) == 1


def test_profile_batch_0_is_off_as_in_keras(tmp_path, profiler_calls):
    handler, files = profiled(tmp_path, 0, epochs=1)
    assert profiler_calls == [] and files == []
    assert ("train_batch", "profile/operator_stats") not in readback.tags(str(tmp_path))
    assert ("train_batch", "batch_loss") in readback.tags(str(tmp_path))  # the fit was logged


# ------------------------------------------------------------ profiler failures and on_error
def fail(monkeypatch, name):
    """Make ``mx.profiler.<name>`` raise (``set_config``: only when it starts the profiler)."""
    real = getattr(mx.profiler, name)

    def broken(*a, **k):
        if name != "set_config" or k.get("aggregate_stats"):
            raise RuntimeError(f"injected {name} failure")
        return real(*a, **k)
    monkeypatch.setattr(mx.profiler, name, broken)


@pytest.mark.parametrize("name", ["dump", "set_config"])
def test_profiler_failure_follows_on_error(tmp_path, profiler_calls, monkeypatch, name):
    """A failing profiler call raises under on_error="raise"; under "warn" one warning, and the fit
    goes on with everything but the profile."""
    fail(monkeypatch, name)
    with pytest.raises(RuntimeError, match=f"injected {name} failure"):
        make_estimator().fit(loader(), epochs=1, event_handlers=[TensorBoardHandler(str(tmp_path / "r"),
                                                                                    profile_batch=(2, 3))])
    assert profiler_calls[-1:] == ["stop"]  # the profiler is given back stopped
    del profiler_calls[:]
    handler = TensorBoardHandler(str(tmp_path / "w"), profile_batch=(2, 3), on_error="warn")
    with pytest.warns(RuntimeWarning) as w:
        make_estimator().fit(loader(), epochs=2, event_handlers=[handler])
    assert [str(x.message) for x in w if "gluon_tb" in str(x.message)] == \
        [f"gluon_tb: writing to {tmp_path / 'w'} failed (RuntimeError: injected {name} failure); training "
         "goes on (on_error='warn'), later writer errors are only counted"]
    assert profiler_calls[-1:] == ["stop"]
    acc = multiplexer(str(tmp_path / "w")).GetAccumulator("train_batch")
    assert [e.step for e in acc.Tensors("batch_loss")] == list(range(12))
    assert "profile/operator_stats" not in acc.Tags()["tensors"]
    assert glob.glob(str(tmp_path / "w" / "train_batch" / "plugins" / "profile" / "*" / "*")) == []


def test_failing_step_marks_leave_the_profile_without_steps(tmp_path, profiler_calls, monkeypatch, caplog):
    """mx.profiler.Task failing: one warning, and the profile, its operators and its table as without steps."""
    def broken(*a, **k):
        raise RuntimeError("injected Task failure")

    monkeypatch.setattr(mx.profiler, "Task", broken)
    with caplog.at_level("WARNING", logger="gluon_tb"):
        _, files = profiled(tmp_path, (2, 3))
    assert [r.getMessage() for r in caplog.records if "step markers" in r.getMessage()] == \
        ["gluon_tb: profile_batch: no step markers (RuntimeError: injected Task failure)"]
    assert profiler_calls == ["run", "stop"] and len(files) == 1
    data = open(files[0], "rb").read()
    assert decode_steps(data) == []
    assert sum(e[0] == "FullyConnected" for ln in decode_xspace(data)[1][0]["lines"] for e in ln["events"]) == \
        2 * batch_fc_count(2, 3)
    [(step, _)] = read_text(tmp_path, "profile/operator_stats")
    assert step == 3


def test_operator_stats_tables_keep_their_columns():
    """MXNet's "Min Use  (kB)" holds two spaces and long names overrun their column: every row of
    every table has its header's cell count."""
    from gluon_tb.handlers._mxnet.profiler import stats_markdown

    table = "\n".join([
        "", "Profile Statistics:", "\tNote the difference in units for different entries.",
        "Device Storage", "=================",
        "Name                          Total Count    Min Use  (kB)    Max Use  (kB)    Avg Use  (kB)",
        "----                          -----------    -------------    -------------    -------------",
        "Memory: cpu/0                           2          40.0000          80.0000          20.0000",
        "", "operator", "=================",
        "Name                          Total Count        Time (ms)    Min Time (ms)    Max Time (ms)    Avg Time (ms)",
        "----                          -----------        ---------    -------------    -------------    -------------",
        "ResourceParallelRandomSetSeed               1           5.3130           5.3130           5.3130           5.3130",
        "dot                                     1           4.1250           4.1250           4.1250           4.1250",
        ""])
    md = stats_markdown(table)
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows == [
        "| Name | Total Count | Min Use  (kB) | Max Use  (kB) | Avg Use  (kB) |",
        "| Memory: cpu/0 | 2 | 40.0000 | 80.0000 | 20.0000 |",
        "| Name | Total Count | Time (ms) | Min Time (ms) | Max Time (ms) | Avg Time (ms) |",
        "| ResourceParallelRandomSetSeed | 1 | 5.3130 | 5.3130 | 5.3130 | 5.3130 |",
        "| dot | 1 | 4.1250 | 4.1250 | 4.1250 | 4.1250 |"]


BUSY_THREAD = """
import sys, threading
sys.path.insert(0, sys.argv[1])
import mxnet as mx
import test_profile as t

stop = threading.Event()

def busy():  # another thread inside MXNet calls (a DataLoader's, the writer's waits) all along
    a = mx.nd.ones((300, 300))
    while not stop.is_set():
        mx.nd.dot(a, a).wait_to_read()

th = threading.Thread(target=busy, daemon=True)
th.start()
for i in range(int(sys.argv[2])):
    t.profiled(f"logs/{i}", (1, 1), epochs=1)
stop.set()
th.join()
print("done")
"""


def test_profiling_beside_a_thread_inside_mxnet_calls_does_not_abort(tmp_path):
    """With MXNet's API calls profiled (``profile_all``), a call of another thread that spans the
    profiler's start aborted the process (apache/mxnet#15486): 20 fits, each starting the profiler
    while a thread waits on MXNet, and every profile written."""
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    p = subprocess.run([sys.executable, "-c", BUSY_THREAD, os.path.dirname(__file__), "20"], cwd=str(tmp_path),
                       env=env, timeout=300, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip().endswith("done"), p.stderr[-2000:]
    assert len(glob.glob(str(tmp_path / "logs/*/train_batch/plugins/profile/*/*.xplane.pb"))) == 20
