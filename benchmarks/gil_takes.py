"""Count the GIL hand-overs: how often each thread takes the GIL, and how long the training thread waits for it.

    benchmarks/.venv/bin/python benchmarks/gil_takes.py fit [rounds=2] [config=alloptions] [vocab=7800]
        # a fit of ``_fit.py`` (``config=sweep``: its ``vocab``), without and with logging
    benchmarks/.venv/bin/python benchmarks/gil_takes.py payload [kinds=none,audio,histogram,image] [n=20]
    benchmarks/.venv/bin/python benchmarks/gil_takes.py where [kinds=audio,image] [n=10]   # which call dropped it

Linux, as root, with ``perf`` (uprobes): it places probes on ``take_gil`` (entry and return) of
the ``libpython`` this interpreter runs on, records a child process, and removes the probes.
Each take of the GIL by a thread that had released it (a C call that dropped it: numpy on a large
array, a ctypes call into MXNet, a write) is one entry; entry to return is the time it waited.

Why count: ``bench_gil.py`` measures what a payload costs a pure-Python training loop, and that
cost is set less by how long the writer holds the GIL than by how often it takes it back. While
the loop runs Python, every take is a forced hand-over after the switch interval, and on a VM
each costs the loop two thread wake-ups (~130-280 us measured here), so a payload is judged by its
count of takes. ``fit`` says whether this matters in a real fit: the training thread's GIL wait
per batch with and without logging (the training thread releases the GIL at every call into
MXNet, so there the writer rarely has to force its way in).
"""
from __future__ import annotations

import ast
import collections
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

FIT = r"""
import sys, tempfile, time, threading, shutil
sys.path.insert(0, HERE)
import _fit
s = _fit.build(CONFIG, VOCAB); est = _fit._estimator(s)
d = tempfile.mkdtemp(prefix="gluon_tb-gil-takes-")
_fit._fit(est, s, 1, []); _fit._fit(est, s, 1, [_fit.handler("gluon_tb", CONFIG, f"{d}/warm")])
names = {threading.get_native_id(): "training"}
start = threading.Thread.start
def named_start(self):
    start(self)
    self._started.wait()
    names[self.native_id] = self.name.rstrip("-0123456789")
threading.Thread.start = named_start
for r in range(ROUNDS):
    for mode in ("off", "on"):
        hs = [_fit.handler("gluon_tb", CONFIG, f"{d}/{mode}{r}")] if mode == "on" else []
        t0 = time.monotonic(); _fit._fit(est, s, 3, hs); t1 = time.monotonic()
        print("SPAN", mode, 3 * _fit.BATCHES, t0, t1, flush=True)
print("NAMES", names, flush=True)
shutil.rmtree(d, ignore_errors=True)
"""

PAYLOAD = r"""
import sys, threading, time, numpy as np, tempfile, os, shutil
from gluon_tb import SummaryWriter
rng = np.random.default_rng(24)
X = {"audio": (rng.random(441000).astype(np.float32) * 2 - 1) * 0.5,
     "histogram": rng.standard_normal(1_000_000).astype(np.float32),
     "image": rng.random((3, 256, 256)).astype(np.float32), "images": rng.random((64, 3, 32, 32)).astype(np.float32),
     "emb": rng.standard_normal((5000, 300)).astype(np.float32), "emb_small": rng.standard_normal((1000, 64)).astype(np.float32),
     "emb_imgs": rng.random((1000, 3, 16, 16)).astype(np.float32), "labels": rng.integers(0, 2, 100_000),
     "preds": rng.random(100_000).astype(np.float32)}
WORDS = [f"w{i}" for i in range(1000)]
CALLS = {"none": lambda w, s: None, "audio": lambda w, s: w.add_audio("a", X["audio"], global_step=s, sample_rate=44100),
         "histogram": lambda w, s: w.add_histogram("h", X["histogram"], s),
         "image": lambda w, s: w.add_image("i", X["image"], s), "images": lambda w, s: w.add_images("i", X["images"], s),
         "embedding": lambda w, s: w.add_embedding("e", X["emb"], global_step=s),
         "embedding_images": lambda w, s: w.add_embedding("e", X["emb_small"], WORDS, X["emb_imgs"], global_step=s),
         "pr_curve": lambda w, s: w.add_pr_curve("p", X["labels"], X["preds"], global_step=s)}
logdir = tempfile.mkdtemp(prefix="gluon_tb-gil-takes-")
w = SummaryWriter(os.path.join(logdir, "run"))
def loop(n):
    s = 0
    for c in range(n):
        for k in range(20000):
            s += k ^ c
names = {threading.get_native_id(): "training"}
for kind in KINDS:
    CALLS[kind](w, 0); w.flush()
    for t in threading.enumerate():
        names.setdefault(t.native_id, t.name.rstrip("-0123456789"))
    t0 = time.monotonic()
    for step in range(1, N + 1):
        CALLS[kind](w, step)
        waiter = threading.Thread(target=w.flush, name="flush-waiter"); waiter.start(); loop(60); waiter.join()
    print("SPAN", kind, N, t0, time.monotonic(), flush=True)
w.close()
shutil.rmtree(logdir, ignore_errors=True)
print("NAMES", names, flush=True)
"""

#: frames that only say the GIL was taken back, not which call had dropped it
PLUMBING = {"take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "[unknown]"}


def libpython() -> str:
    lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
    return lib if os.path.exists(lib) else os.path.realpath(sys.executable)


def _perf(code: str, record_args: List[str], script_fields: str) -> Tuple[str, str]:
    """Run ``code`` in a child under ``perf record`` with the probes; (its stdout, ``perf script``'s)."""
    lib = libpython()
    subprocess.run(["perf", "probe", "-q", "-d", "gluontb:*"], capture_output=True)
    for spec in ("gluontb:gil_take=take_gil", "gluontb:gil_took=take_gil%return"):  # the latter: gil_took__return
        subprocess.run(["perf", "probe", "-q", "-x", lib, "-a", spec], check=True, capture_output=True)
    try:
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "perf.data")
            out = subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", data, *record_args, "--",
                                  sys.executable, "-c", code], capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"the recorded process failed: {out.stderr.strip()[-2000:]}")
            txt = subprocess.run(["perf", "script", "-i", data, "-F", script_fields], capture_output=True,
                                 text=True, check=True).stdout
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", "gluontb:*"], capture_output=True)
    return out.stdout, txt


def record(code: str) -> Tuple[str, List[Tuple[int, float, bool]]]:
    """(the child's stdout, [(tid, time, is_return)] of every take of the GIL)."""
    out, txt = _perf(code, ["-e", "gluontb:gil_take", "-e", "gluontb:gil_took__return"], "tid,time,event")
    events = []
    for line in txt.splitlines():
        p = line.replace(":", " ").split()
        events.append((int(p[0]), float(p[1]), "return" in line))
    return out, events


def where(code: str) -> Tuple[str, List[Tuple[int, float, str]]]:
    """(the child's stdout, [(tid, time, call)]): for every take of the GIL, the C function whose
    release of it came before (``frame_append < cfunction_call``): its call stack, unwound with DWARF."""
    out, txt = _perf(code, ["-e", "gluontb:gil_take", "--call-graph", "dwarf,32768"], "tid,time,ip,sym,dso")
    takes = []
    for block in txt.strip().split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        head = lines[0].replace(":", " ").split()
        frames = []
        for line in lines[1:]:
            p = line.split()
            sym, dso = (p[1] if len(p) > 1 else "?"), os.path.basename(p[-1].strip("()"))
            if sym in PLUMBING or dso == "inlined":
                continue
            frames.append(f"{sym} ({dso})")
            if len(frames) == 2:
                break
        takes.append((int(head[0]), float(head[1]), " < ".join(frames)))
    return out, takes


def per_span(out: str, events: List[Tuple[int, float, bool]]) -> List[Tuple[str, int, Dict[str, Tuple[float, float]]]]:
    """For each ``SPAN label units t0 t1``: {thread: (takes a unit, ms waited a unit)}."""
    names = ast.literal_eval(re.search(r"NAMES (\{.*\})", out).group(1))
    rows = []
    for label, units, t0, t1 in re.findall(r"SPAN (\S+) (\d+) ([\d.]+) ([\d.]+)", out):
        units, t0, t1 = int(units), float(t0), float(t1)
        takes: Dict[str, int] = collections.Counter()
        wait: Dict[str, float] = collections.Counter()
        entered: Dict[int, float] = {}
        for tid, t, ret in events:
            if not t0 <= t <= t1:
                continue
            name = names.get(tid, "other")
            if not ret:
                entered[tid] = t
                takes[name] += 1
            elif tid in entered:
                wait[name] += t - entered.pop(tid)
        rows.append((label, units, {k: (takes[k] / units, 1e3 * wait[k] / units) for k in takes}))
    return rows


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "fit"
    args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
    if what == "fit":
        code = (f"HERE = {HERE!r}\nROUNDS = {int(args.get('rounds', 2))}\nCONFIG = {args.get('config', 'alloptions')!r}\n"
                f"VOCAB = {int(args.get('vocab', 7800))}\n" + FIT)
        unit = "batch"
    elif what == "payload":
        kinds = args.get("kinds", "none,audio,histogram,image").split(",")
        code = f"KINDS = {kinds!r}\nN = {int(args.get('n', 20))}\n" + PAYLOAD
        unit = "payload"
    elif what == "where":
        kinds = args.get("kinds", "audio,image").split(",")
        code = f"KINDS = {kinds!r}\nN = {int(args.get('n', 10))}\n" + PAYLOAD
        out, takes = where(code)
        names = ast.literal_eval(re.search(r"NAMES (\{.*\})", out).group(1))
        for label, units, t0, t1 in re.findall(r"SPAN (\S+) (\d+) ([\d.]+) ([\d.]+)", out):
            calls = collections.Counter(c for tid, t, c in takes if float(t0) <= t <= float(t1)
                                        and names.get(tid, "").startswith("gluon_tb-writer"))
            print(f"{label}: the writer's takes of the GIL per payload, by the call that had dropped it")
            for c, n in calls.most_common():
                print(f"  {n / int(units):5.1f}  {c}")
        return
    else:
        raise SystemExit("usage: gil_takes.py fit [rounds=N] | payload [kinds=a,b] [n=N] | where [kinds=a,b] [n=N]")
    for label, _units, by_thread in per_span(*record(code)):
        cells = ", ".join(f"{k} {n:.1f} takes / {ms:.2f} ms waited" for k, (n, ms) in
                          sorted(by_thread.items(), key=lambda kv: -kv[1][0]))
        print(f"{label:10s} per {unit}: {cells}")


if __name__ == "__main__":
    main()
