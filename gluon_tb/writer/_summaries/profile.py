"""MXNet's Chrome-trace profile as an XSpace, the file TensorBoard's Profile dashboard reads.

The dashboard (``tensorboard-plugin-profile``, XProf) reads
``<run>/plugins/profile/<session>/<host>.xplane.pb``: one ``XSpace`` protobuf (the public
``xplane.proto`` of openxla/xla, package ``tensorflow.profiler``). This module turns the events
of ``mx.profiler.dump()`` into one, with pure functions of Python data:

- :func:`trace_spans`: the Chrome-trace events (``ts`` in µs) as complete spans. ``X`` events
  are spans already; ``B``/``E`` pairs (operators) are matched per ``(pid, tid)`` as a stack,
  ``b``/``e`` async pairs (MXNet's C API calls) per ``(pid, id, name)``. Counters (``C``),
  metadata (``M``) and an unmatched begin or end are not spans.
- :func:`build_xspace`: the spans as one plane ``/host:CPU`` with one ``XLine`` per
  ``(pid, tid)`` of the trace (named by MXNet's process name and the thread id), event
  metadata = the operator names, each event's offset and duration in picoseconds relative to
  its line's ``timestamp_ns`` (the line's first start). Line timestamps count from the trace's
  first event, as TensorFlow's profiler normalizes them: XProf computes picoseconds
  ``timestamp_ns * 1000 + offset_ps`` in int64, which wall-clock nanoseconds (~1.8e18) overflow.
- :func:`step_spans`: the steps. The handlers mark each profiled batch with MXNet profiler tasks
  in the domain :data:`STEP_DOMAIN` (``handlers/_mxnet/profiler.py``): ``train <k>`` for the step of
  global batch k and, where the loop calls ``batch_begin``, ``input <k>`` for its wait for the
  batch. They are not operator spans: :func:`build_xspace` puts them on a line of their own,
  ``Training steps``, in XProf's step convention (the one JAX's
  ``StepTraceAnnotation("train", step_num=k)`` records): an event ``train`` with the stats
  ``step_num`` = k and ``_r`` = 1 (a root; XProf gives it and the events nested in it on its
  line one group, a step, and calls it ``train k``), and nested in it ``input`` (with the stat
  ``_ipl_stage_name``: XProf counts it as time waiting for input) and ``batch``, the rest of
  the step (host compute: XProf shows a CPU step only if it holds some).

What runs where. ``add_profile(path)`` calls :func:`read_trace_file` on the caller's thread:
it reads the file's bytes and looks at their first character, nothing more (about 2 ms for a
20k-event, 1.4 MB trace; parsing it there cost 35-65 ms). The writer thread hands the bytes of
a trace of 64 KiB or more to a child process (``_io/child.py``) that runs
:func:`xspace_from_trace_bytes`: the parsing and the conversion, about 190 ms of pure Python
for that trace, hold no GIL of the training process (a smaller trace, a few ms, is converted
on the writer thread: a child costs ~0.3 s of CPU). Memory: the file's bytes stay in the training process from the call until the child
answers (they count against ``max_queue_bytes``), plus their copy sent to the child and the
XSpace it returns; the child holds the parsed JSON (roughly 10 times the file) until it exits.
A dict or an event list given to ``add_profile`` is already Python objects: sending them would
cost a pickle holding the GIL anyway, so they are converted on the writer thread, by
:func:`xspace_from_trace`. Both give the same bytes.

Field numbers, checked against xplane.proto: XSpace planes=1, hostnames=4; XPlane id=1 name=2
lines=3 event_metadata=4 stat_metadata=5 (each a map<int64, message>: entry key=1 value=2);
XLine id=1 name=2 timestamp_ns=3 events=4 duration_ps=9 display_id=10 display_name=11; XEvent
metadata_id=1 offset_ps=2 duration_ps=3 stats=4; XStat metadata_id=1 int64_value=4
str_value=5; XEventMetadata id=1 name=2 display_name=4; XStatMetadata id=1 name=2. The stat
names are XProf's (``xplane_schema.cc`` of TSL): ``step_num``, ``_r``, ``_ipl_stage_name``.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
from typing import Any, Dict, Iterable, List, Mapping, Tuple, Union

from .._common.checks import check_file_name, describe
from .._common.profile_steps import STEP_DOMAIN, STEP_EVENT, WAIT_EVENT
from .._format.wire import f_bytes, f_str, f_varint

__all__ = ["trace_events", "read_trace_file", "xspace_from_trace_bytes", "trace_spans", "step_spans",
           "build_xspace", "xspace_from_trace", "PLANE_NAME", "STEP_DOMAIN", "STEP_EVENT", "WAIT_EVENT"]

PLANE_NAME = "/host:CPU"

# (pid, tid, name, start_ns, duration_ns)
Span = Tuple[Any, Any, str, int, int]
# (step number, start_ns, duration_ns, wait_ns)
Step = Tuple[int, int, int, int]
BATCH_EVENT = "batch"
STEP_LINE = "Training steps"
_STEP_RE = re.compile(rf"({STEP_EVENT}|{WAIT_EVENT}) (\d+)")
_STAT_STEP_NUM, _STAT_IS_ROOT, _STAT_INPUT_STAGE = 1, 2, 3
_STATS = ((_STAT_STEP_NUM, "step_num"), (_STAT_IS_ROOT, "_r"), (_STAT_INPUT_STAGE, "_ipl_stage_name"))
_EXPECTED = ("trace must be a Chrome trace (a JSON file path, its dict with 'traceEvents', "
             "or a list of event dicts)")
Trace = Union[str, "os.PathLike[str]", Mapping[str, Any], List[Mapping[str, Any]]]


def profile_path(session: Any = None, host: Any = None) -> Tuple[str, str]:
    """Where the Profile dashboard looks for a session's file, relative to the run, and
    the host name used: ``session`` defaults to the local time (``2026_11_24_02_30_00``),
    ``host`` to this machine's name; each must be a plain file name (no '/', '\\' or NUL,
    UTF-8, ``<host>.xplane.pb`` and ``session`` at most 255 bytes): a ValueError naming it."""
    session = check_file_name(session or time.strftime("%Y_%m_%d_%H_%M_%S"), "session")
    host = check_file_name(host or socket.gethostname() or "localhost", "host", ".xplane.pb")
    return f"plugins/profile/{session}/{host}.xplane.pb", host


def trace_events(trace: Trace) -> List[Mapping[str, Any]]:
    """The event list of a Chrome trace: a path to its JSON file, its dict, or its event list.

    A file may be an unfinished dump: MXNet 1.9.1's ``dump(finished=True)`` closes the JSON but
    leaves the profiler unable to take a new ``set_config``, so gluon_tb dumps unfinished: the
    first dump of a process ends inside its event list, a later one is the continuation of a
    list (``, {...}, {...}``, without the process names)."""
    found: object = trace  # what the file or dict holds is checked below
    if isinstance(found, (str, os.PathLike)):
        with open(found, "rb") as f:
            found = _parse(f.read())
    return _event_list(found)


def read_trace_file(path: Union[str, "os.PathLike[str]"]) -> bytes:
    """The bytes of a trace file, read on the caller's thread (the file may be deleted next),
    with only a cheap check: UTF-8 that starts with ``{``, ``[`` or ``,`` (an unfinished dump's
    continuation) after white space; else the TypeError of :func:`trace_events`. The parsing
    is :func:`xspace_from_trace_bytes`'s."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        head = data.decode("utf-8").lstrip()[:1]
    except UnicodeDecodeError:
        head = ""
    if head not in ("{", "[", ","):
        raise TypeError(f"{_EXPECTED}, got the file {os.fspath(path)!r}, which is not UTF-8 JSON text "
                        f"(it starts {data[:20]!r})")
    return data


def _parse(data: bytes) -> object:
    """A trace file's JSON: the whole of it, or of an unfinished dump (:func:`trace_events`)."""
    text = data.decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:  # an unfinished dump: the list left open, or its continuation
        body = text.strip().strip(",")
        return json.loads(body + "\n]}" if body.startswith("{") else f"[{body}]")


def _event_list(found: object) -> List[Mapping[str, Any]]:
    if isinstance(found, Mapping):
        found = found.get("traceEvents")
    if not isinstance(found, list) or not all(isinstance(e, Mapping) for e in found):
        raise TypeError(f"{_EXPECTED}, got {describe(found)}")
    return found


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000))


def trace_spans(events: Iterable[Mapping[str, Any]]) -> List[Span]:
    """Complete spans of a Chrome trace's events, in the order they end (see the module docs)."""
    spans: List[Span] = []
    stacks: Dict[Tuple[Any, Any], List[Mapping[str, Any]]] = {}
    open_async: Dict[Tuple[Any, Any, Any], List[Mapping[str, Any]]] = {}
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            spans.append((e.get("pid"), e.get("tid"), str(e.get("name", "")), _ns(e["ts"]),
                          max(_ns(e.get("dur", 0)), 0)))
        elif ph == "B":
            stacks.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        elif ph == "E":
            stack = stacks.get((e.get("pid"), e.get("tid")))
            if stack:
                b = stack.pop()
                start = _ns(b["ts"])
                spans.append((b.get("pid"), b.get("tid"), str(b.get("name", "")), start,
                              max(_ns(e["ts"]) - start, 0)))
        elif ph == "b":
            open_async.setdefault((e.get("pid"), e.get("id"), e.get("name")), []).append(e)
        elif ph == "e":
            pending = open_async.get((e.get("pid"), e.get("id"), e.get("name")))
            if pending:
                b = pending.pop()
                start = _ns(b["ts"])
                spans.append((b.get("pid"), b.get("tid"), str(b.get("name", "")), start,
                              max(_ns(e["ts"]) - start, 0)))
    return spans


def _process_names(events: Iterable[Mapping[str, Any]]) -> Dict[Any, str]:
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
    return names


def step_spans(events: Iterable[Mapping[str, Any]]) -> List[Step]:
    """``(step, start_ns, duration_ns, wait_ns)`` of each ``train <step>`` task of
    :data:`STEP_DOMAIN`, by start; ``wait_ns`` is its ``input <step>`` task's part of it (0 without)."""
    steps: Dict[int, Tuple[int, int]] = {}
    waits: Dict[int, Tuple[int, int]] = {}
    for _, _, name, start, dur in trace_spans(e for e in events if _is_step_event(e)):
        m = _STEP_RE.fullmatch(name)
        if m:
            (steps if m.group(1) == STEP_EVENT else waits)[int(m.group(2))] = (start, dur)
    out = []
    for step, (start, dur) in steps.items():
        w_start, w_dur = waits.get(step, (start, 0))  # it starts with the step: up to its end
        out.append((step, start, dur, min(max(w_start + w_dur - start, 0), dur)))
    return sorted(out, key=lambda s: s[1])


def _is_step_event(e: Mapping[str, Any]) -> bool:
    return str(e.get("cat", "")).split(",")[0] == STEP_DOMAIN


def _event(meta_id: int, offset_ns: int, dur_ns: int, stats: bytes = b"") -> bytes:
    return f_bytes(4, f_varint(1, meta_id) + f_varint(2, offset_ns * 1000) + f_varint(3, dur_ns * 1000) + stats)


def _stat(stat_id: int, value: Union[int, str]) -> bytes:
    return f_bytes(4, f_varint(1, stat_id) + (f_str(5, value) if isinstance(value, str) else f_varint(4, value)))


def _steps_line(steps: List[Step], origin: int, line_id: int, meta: Dict[str, int]) -> bytes:
    """XProf's step convention (what JAX's ``StepTraceAnnotation("train", step_num=n)`` records):
    an event named ``train`` with the stats ``step_num`` = n and ``_r`` = 1 (a root: XProf's
    grouping gives it and the events nested in it on its line one ``group_id``). Nested in it:
    ``input`` (the wait for the batch, with ``_ipl_stage_name``: XProf counts it as input) and
    ``batch`` (the rest: host compute; a step needs some to be shown)."""
    t0 = steps[0][1]
    end = max(s[1] + s[2] for s in steps)
    events = []
    for step, start, dur, wait in steps:
        events.append(_event(meta[STEP_EVENT], start - t0, dur,
                             _stat(_STAT_STEP_NUM, step) + _stat(_STAT_IS_ROOT, 1)))
        if wait:
            events.append(_event(meta[WAIT_EVENT], start - t0, wait, _stat(_STAT_INPUT_STAGE, "DataLoader")))
        events.append(_event(meta[BATCH_EVENT], start + wait - t0, dur - wait))
    return f_bytes(3, f_varint(1, line_id) + f_str(2, STEP_LINE) + f_varint(3, t0 - origin) + b"".join(events)
                   + f_varint(9, (end - t0) * 1000) + f_varint(10, line_id) + f_str(11, STEP_LINE))


def build_xspace(spans: List[Span], process_names: Mapping[Any, str] = {}, host: str = "",
                 steps: List[Step] = []) -> bytes:
    """The serialized XSpace of ``spans`` (one plane, one line per (pid, tid)) and ``steps``."""
    meta: Dict[str, int] = {}
    lines: Dict[Tuple[Any, Any], List[Span]] = {}
    for s in spans:
        lines.setdefault((s[0], s[1]), []).append(s)
        meta.setdefault(s[2], len(meta) + 1)
    origin = min([s[3] for s in spans] + [s[1] for s in steps], default=0)
    body = [f_varint(1, 1), f_str(2, PLANE_NAME)]
    if steps:
        for name in (STEP_EVENT, WAIT_EVENT, BATCH_EVENT):
            meta.setdefault(name, len(meta) + 1)
        body.append(_steps_line(steps, origin, len(lines) + 1, meta))
        for sid, sname in _STATS:
            body.append(f_bytes(5, f_varint(1, sid) + f_bytes(2, f_varint(1, sid) + f_str(2, sname))))
    for line_id, ((pid, tid), items) in enumerate(sorted(lines.items(), key=lambda kv: min(
            s[3] for s in kv[1])), start=1):
        items.sort(key=lambda s: (s[3], -s[4]))  # by start; an enclosing span first
        t0 = items[0][3]
        end = max(s[3] + s[4] for s in items)
        name = f"{process_names.get(pid) or f'pid {pid}'} / tid {tid}"
        events = b"".join(f_bytes(4, f_varint(1, meta[s[2]]) + f_varint(2, (s[3] - t0) * 1000)
                                  + f_varint(3, s[4] * 1000)) for s in items)
        body.append(f_bytes(3, f_varint(1, line_id) + f_str(2, name) + f_varint(3, t0 - origin) + events
                            + f_varint(9, (end - t0) * 1000) + f_varint(10, line_id) + f_str(11, name)))
    for name, mid in meta.items():
        entry = f_varint(1, mid) + f_bytes(2, f_varint(1, mid) + f_str(2, name) + f_str(4, name))
        body.append(f_bytes(4, entry))
    out = f_bytes(1, b"".join(body))
    return out + f_str(4, host) if host else out


def xspace_from_trace(trace: Trace, host: str = "") -> Tuple[bytes, int]:
    """``(serialized XSpace, number of operator events)`` of a Chrome trace (see
    :func:`trace_events`); the step tasks become the ``Training steps`` line (:func:`step_spans`)."""
    return _xspace(trace_events(trace), host)


def xspace_from_trace_bytes(data: bytes, host: str = "") -> bytes:
    """The serialized XSpace of a trace file's bytes (:func:`read_trace_file`): what
    ``add_profile(path)`` runs in a child process. Not JSON, or not a Chrome trace: a
    ValueError or TypeError (:func:`trace_events`'s)."""
    try:
        found = _parse(data)
    except UnicodeDecodeError as e:
        raise TypeError(f"{_EXPECTED}, got bytes that are not UTF-8 ({e})") from None
    except ValueError as e:
        raise ValueError(f"{_EXPECTED}, got a file that is not JSON, nor an unfinished dump: {e}") from None
    return _xspace(_event_list(found), host)[0]


def _xspace(events: List[Mapping[str, Any]], host: str) -> Tuple[bytes, int]:
    spans = trace_spans(e for e in events if not _is_step_event(e))
    return build_xspace(spans, _process_names(events), host, step_spans(events)), len(spans)
