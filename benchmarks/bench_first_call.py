"""First-call latency: what the *first* ``add_*`` of each kind costs the caller in a fresh process.

    python benchmarks/bench_first_call.py                   # every writer importable here, 5 processes each
    python benchmarks/bench_first_call.py --reps 2 --writers gluon_tb
    python benchmarks/bench_first_call.py --gluon-tb-path /tmp/old   # another checkout of gluon_tb

Each (writer, kind, repetition) is one new ``sys.executable -c`` process, run from an empty
directory: import numpy, make the inputs, import the writer, make its ``SummaryWriter``, then
time the first ``add_*`` call (``perf_counter`` around it) and a second one of the same kind,
then close. Processes go round-robin over the writers; the table shows the median of the
processes. Inputs are numpy arrays (histogram: 1M float32, as a first gradient would be).
``import`` and the constructor are timed apart, and ``mxnet in sys.modules`` after the first
call is recorded (gluon_tb must not import MXNet for numpy input). Python writes bytecode
caches as an installed package has them: one untimed process per writer runs first. Peers that
lack a kind (mxboard: hparams, custom scalars, video) or fail on it (video without moviepy)
show ``-`` (a call that printed "needs package" and logged nothing counts as failed). Run by ``run.py`` as benchmark ``first_call``; also runnable on its own.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REGEN = os.path.join(HERE, ".venv", "mxboard-regen")
WRITERS = ["gluon_tb", "tensorboardX", "torch", "mxboard"]
KINDS = ["scalar", "histogram", "histograms", "image", "images", "audio", "text", "embedding",
         "pr_curve", "hparams", "custom_scalars", "video"]
TARGET_MS = 50.0

INPUTS = """
import numpy as np
rng = np.random.default_rng(15)
hist = rng.standard_normal(1_000_000).astype(np.float32)
hist_b = rng.standard_normal(100_000).astype(np.float32)
img = rng.random((3, 32, 32), dtype=np.float32)
imgs = rng.random((64, 3, 32, 32), dtype=np.float32)
aud = (rng.random(44100) * 2 - 1).astype(np.float32)
vid = rng.random((8, 3, 32, 32), dtype=np.float32)
emb = rng.standard_normal((100, 16)).astype(np.float32)
names = [str(i) for i in range(100)]
labels = rng.random(1000) > 0.5
preds = rng.random(1000)
layout = {"c": {"losses": ["Multiline", ["loss/.*"]]}}
"""

IMPORT = {"gluon_tb": "from gluon_tb import SummaryWriter",
          "tensorboardX": "from tensorboardX import SummaryWriter",
          "torch": "from torch.utils.tensorboard import SummaryWriter",
          "mxboard": "from mxboard import SummaryWriter"}

# each writer's first call of a kind, as its users write it; {s}: the step
_TBX = {
    "scalar": 'sw.add_scalar("loss", 1.5, {s})',
    "histogram": 'sw.add_histogram("h", hist, {s}, bins="tensorflow")',
    "image": 'sw.add_image("img", img, {s})',
    "images": 'sw.add_images("imgs", imgs, {s})',
    "audio": 'sw.add_audio("snd", aud, {s}, sample_rate=44100)',
    "text": 'sw.add_text("note", "hello **world**", {s})',
    "embedding": 'sw.add_embedding(emb, metadata=names, tag="emb{s}", global_step={s})',
    "pr_curve": 'sw.add_pr_curve("pr", labels, preds, {s})',
    "hparams": 'sw.add_hparams({{"lr": 0.1, "opt": "sgd"}}, {{"acc": 0.9 + {s}}})',
    "custom_scalars": "sw.add_custom_scalars(layout)",
    "video": 'sw.add_video("vid", vid[None], {s}, fps=4)',
}
CALLS: Dict[str, Dict[str, str]] = {
    "gluon_tb": {
        "scalar": 'sw.add_scalar("loss", 1.5, {s})',
        "histogram": 'sw.add_histogram("h", hist, {s})',
        "histograms": 'sw.add_histograms({{"ha": hist, "hb": hist_b}}, {s})',
        "image": 'sw.add_image("img", img, {s})',
        "images": 'sw.add_images("imgs", imgs, {s})',
        "audio": 'sw.add_audio("snd", aud, 44100, {s})',
        "text": 'sw.add_text("note", "hello **world**", {s})',
        "embedding": 'sw.add_embedding("emb", emb, labels=names, global_step={s})',
        "pr_curve": 'sw.add_pr_curve("pr", labels, preds, global_step={s})',
        "hparams": 'sw.add_hparams({{"lr": 0.1, "opt": "sgd"}}, {{"acc": 0.9}}, global_step={s})',
        "custom_scalars": "sw.add_custom_scalars(layout)",
        "video": 'sw.add_video("vid", vid, {s}, fps=4)',
    },
    "tensorboardX": _TBX,
    "torch": _TBX,
    "mxboard": {
        "scalar": 'sw.add_scalar("loss", 1.5, {s})',
        "histogram": 'sw.add_histogram("h", hist, {s}, bins="default")',
        "image": 'sw.add_image("img", img, {s})',
        "images": 'sw.add_image("imgs", imgs, {s})',  # mxboard's add_image tiles a batch
        "audio": 'sw.add_audio("snd", aud, 44100, {s})',
        "text": 'sw.add_text("note", "hello **world**", {s})',
        "embedding": 'sw.add_embedding("emb{s}", emb, labels=names, global_step={s})',
        "pr_curve": 'sw.add_pr_curve("pr", labels, preds, 127, {s})',
    },
}

CHILD = """
import json, sys, time
pc = time.perf_counter
{inputs}
t0 = pc()
{imp}
t1 = pc()
sw = SummaryWriter(sys.argv[1])
t2 = pc()
{first}
t3 = pc()
mx = "mxnet" in sys.modules
t4 = pc()
{second}
t5 = pc()
sw.close()
t6 = pc()
print("RESULT " + json.dumps({{"import_ms": 1e3 * (t1 - t0), "ctor_ms": 1e3 * (t2 - t1),
      "first_ms": 1e3 * (t3 - t2), "second_ms": 1e3 * (t5 - t4), "close_ms": 1e3 * (t6 - t5),
      "mxnet": mx}}))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def available(writer: str) -> bool:
    if writer == "mxboard" and os.path.isdir(REGEN):
        return True
    mod = {"torch": "torch.utils.tensorboard"}.get(writer, writer)
    try:
        return importlib.util.find_spec(mod) is not None
    except ImportError:  # torch absent: its parent package cannot be found
        return False


def child_env(writer: str, gluon_tb_path: Optional[str], mxboard_pb: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: with bytecode caches
    path = [p for p in [gluon_tb_path if writer == "gluon_tb" else None,
                        REGEN if writer == "mxboard" and os.path.isdir(REGEN) else None] if p]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if writer == "mxboard" and mxboard_pb == "python":
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    return env


def run_one(writer: str, kind: str, env: Dict[str, str], timeout: int = 300) -> dict:
    code = CHILD.format(inputs=INPUTS, imp=IMPORT[writer], first=CALLS[writer][kind].format(s=0),
                        second=CALLS[writer][kind].format(s=1))
    with tempfile.TemporaryDirectory(prefix="first_call_") as d:
        p = subprocess.run([sys.executable, "-c", code, os.path.join(d, "run")], cwd=d, env=env,
                           capture_output=True, text=True, timeout=timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": err[:160]}
    skipped = [l for l in (p.stdout + p.stderr).splitlines() if "needs package" in l]
    if skipped:  # tensorboardX and torch print this for add_video without moviepy, and log nothing
        return {"error": "logged nothing: " + skipped[0].strip()[:140]}
    return json.loads(lines[-1][7:])


def run_all(writers: List[str], kinds: List[str], reps: int, gluon_tb_path: Optional[str] = None,
            mxboard_pb: str = "python", progress: Callable[[str], None] = log) -> Dict[str, Dict[str, List[dict]]]:
    """``{writer: {kind: [result of each process]}}``, processes round-robin over the writers."""
    R: Dict[str, Dict[str, List[dict]]] = {w: {k: [] for k in kinds if k in CALLS[w]} for w in writers}
    envs = {w: child_env(w, gluon_tb_path, mxboard_pb) for w in writers}
    for w in writers:  # untimed: writes the bytecode caches of everything the writer imports
        run_one(w, "image", envs[w])
    for r in range(reps):
        order = writers[r % len(writers):] + writers[:r % len(writers)]
        for k in kinds:
            for w in order:
                if k not in R[w]:
                    continue
                res = run_one(w, k, envs[w])
                R[w][k].append(res)
                progress(f"  first_call {w:12s} {k:14s} round {r}: " + (
                    res["error"] if "error" in res else
                    f"first {res['first_ms']:.2f} ms, second {res['second_ms']:.3f} ms, "
                    f"import {res['import_ms']:.0f} ms" + (", mxnet imported" if res["mxnet"] else "")))
    return R


def _med(rs: List[dict], key: str) -> Optional[float]:
    ok = [r[key] for r in rs if "error" not in r]
    return statistics.median(ok) if ok else None


def _ms(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def table(R: Dict[str, Dict[str, List[dict]]]) -> str:
    """Markdown: median first-call caller time per kind and writer, with peer / gluon_tb ratios."""
    writers = list(R)
    peers = [w for w in writers if w != "gluon_tb"]
    kinds = [k for k in KINDS if any(k in R[w] for w in writers)]
    head = ["kind"] + (["gluon_tb first (ms)", "second (ms)", "MXNet imported"] if "gluon_tb" in R else [])
    head += [f"{p} first (ms)" + (" / ratio" if "gluon_tb" in R else "") for p in peers]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    worst = 0.0
    for k in kinds:
        row = [f"`{k}`"]
        g = _med(R["gluon_tb"].get(k, []), "first_ms") if "gluon_tb" in R else None
        if "gluon_tb" in R:
            rs = R["gluon_tb"].get(k, [])
            worst = max(worst, g or 0.0)
            errs = [r["error"] for r in rs if "error" in r]
            row += [_ms(g) + (f" ({len(errs)} failed: {errs[0]})" if errs else ""),
                    _ms(_med(rs, "second_ms")),
                    "yes" if any(r.get("mxnet") for r in rs) else "no"]
        for p in peers:
            v = _med(R[p].get(k, []), "first_ms")
            row.append(_ms(v) + (f" / {v / g:.1f}x" if v is not None and g else ""))
        out.append("| " + " | ".join(row) + " |")
    for what in ("import_ms", "ctor_ms"):
        row = [f"({what[:-3]} of the writer)"]
        for w in writers:
            vals = [r[what] for rs in R[w].values() for r in rs if "error" not in r]
            v = statistics.median(vals) if vals else None
            row += [_ms(v)] + (["", ""] if w == "gluon_tb" else [])
        out.append("| " + " | ".join(row) + " |")
    if "gluon_tb" in R:
        mx = any(r.get("mxnet") for rs in R["gluon_tb"].values() for r in rs)
        ok = worst <= TARGET_MS and not mx
        out.append("")
        out.append(f"Target: every first gluon_tb call <= {TARGET_MS:.0f} ms on the caller and MXNet never "
                   f"imported for numpy input: {'pass' if ok else 'FAIL'} (slowest first call {worst:.2f} ms). "
                   "Ratios: the peer's first call / gluon_tb's; median of each writer's processes.")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="fresh processes per (writer, kind)")
    ap.add_argument("--writers", default=",".join(WRITERS))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--gluon-tb-path", default=None, help="a directory holding the gluon_tb package to measure")
    ap.add_argument("--mxboard-protobuf", choices=["python", "upb"], default=os.environ.get("MXBOARD_PROTOBUF", "python"))
    ap.add_argument("--json", default=None, help="also write the raw results here")
    a = ap.parse_args()
    writers = [w for w in a.writers.split(",") if w in WRITERS]
    missing = [w for w in writers if not available(w)]
    if missing:
        log(f"not installed here, skipped: {', '.join(missing)}")
    writers = [w for w in writers if w not in missing]
    R = run_all(writers, a.kinds.split(","), a.reps, a.gluon_tb_path, a.mxboard_protobuf)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=1)
    print(table(R))


if __name__ == "__main__":
    main()
