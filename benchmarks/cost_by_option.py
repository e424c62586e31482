"""Where an every-option fit's overhead goes: CPU and wall time per batch, by option and by thread.

    benchmarks/.venv/bin/python benchmarks/cost_by_option.py [rounds=8] [variants=full,nohist,nohealth,noconv]
    benchmarks/.venv/bin/python benchmarks/cost_by_option.py config=sweep vocab=7800 [variants=full,nohist,bare]

Each variant runs in a fresh process: the ``alloptions`` fit of ``_fit.py`` (histograms and
grad_health every batch, conv filters and feature maps every epoch, images, graph, hparams),
with one group of options turned off, in blocks of 3 epochs without and with the handler,
alternated as in ``run_paired``. A variant prints the median over rounds of the extra **process
CPU** per batch (every thread: the training thread, MXNet's engine and OpenMP threads, the
writer's) beside the extra **wall** time per batch, and the extra CPU of each Python thread
(by name) and of the native threads together.

Why CPU: on a 2-core machine MXNet's operators keep both cores busy, so every millisecond of
CPU that logging takes anywhere is taken from them, and the per-thread split says where it
goes. CPU is also the steadier measure: the wall overhead of one process of 10 rounds has
ranged from +1% to +12% on the same code, its CPU about half as widely.

Variants: ``full`` (``ALL_OPTIONS``; for ``config=sweep`` the default handler), ``nohist`` (no
histograms, so no grad_health either: it reads the gradients at the histograms' hook), ``nohealth``
(histograms, no grad_health), ``noconv`` (no conv filters or feature maps), ``nograph``, ``bare``
(the epoch values alone: no batch values, histograms, graph, images or hparams).
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = {"full": {}, "nohist": {"histogram_period": None, "grad_health": False},
            "nohealth": {"grad_health": False}, "noconv": {"conv_filters": False}, "nograph": {"graph": False},
            "bare": {"batch_period": None, "histogram_period": None, "grad_health": False, "conv_filters": False,
                     "graph": False, "images": False, "hparams": None}}
EPOCHS = 3


def _thread_cpu() -> Counter:
    """CPU seconds of every thread of this process, by Python thread name ('native' for the rest)."""
    names = {t.native_id: t.name.rstrip("-0123456789") for t in threading.enumerate()}
    out: Counter = Counter()
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        name = "training" if int(tid) == os.getpid() else names.get(int(tid), "native")
        out[name] += (int(fields[11]) + int(fields[12])) / tick
    return out


_ENDED: Counter = Counter()  # CPU of Python threads that ended (the writer's, at close)


def _count_ended_threads() -> None:
    run = threading.Thread.run

    def counted(self: threading.Thread) -> None:
        try:
            run(self)
        finally:
            _ENDED[self.name.rstrip("-0123456789")] += time.thread_time()

    threading.Thread.run = counted  # type: ignore[method-assign]


def one_variant(variant: str, rounds: int, config: str = "alloptions", vocab: int = 0) -> dict:
    """In this process: the paired blocks of ``variant`` of ``config``; medians per batch, in ms."""
    sys.path.insert(0, HERE)
    _count_ended_threads()
    import _fit
    from gluon_tb import TensorBoardHandler

    options = dict(_fit.ALL_OPTIONS if config == "alloptions" else {}, **VARIANTS[variant])
    s = _fit.build(config, vocab)
    est = _fit._estimator(s)
    with tempfile.TemporaryDirectory(prefix="gluon_tb-cost-") as logdir:  # event files: not kept
        _fit._fit(est, s, 1, [])
        _fit._fit(est, s, 1, [TensorBoardHandler(f"{logdir}/warm", **options)])
        cpu: Dict[bool, List[float]] = {True: [], False: []}
        wall: Dict[bool, List[float]] = {True: [], False: []}
        threads: Dict[bool, List[Counter]] = {True: [], False: []}
        for r in range(rounds):
            for on in ((False, True) if r % 2 == 0 else (True, False)):
                hs = [TensorBoardHandler(f"{logdir}/block{r}", **options)] if on else []
                before, ended = _thread_cpu(), _ENDED.copy()
                t0, own0 = time.process_time(), time.thread_time()
                got = _fit._fit(est, s, EPOCHS, hs)
                t1, own1 = time.process_time(), time.thread_time()
                after = _thread_cpu()
                after.subtract(before)
                for name, secs in _ENDED.items():
                    after[name] += secs - ended.get(name, 0.0)
                # the clock ticks of /proc (10 ms) are too coarse for a fit: the precise clocks where there are
                after["native"] += after["training"] - (own1 - own0)
                after["training"] = own1 - own0
                after["native"] = (t1 - t0) - sum(v for k, v in after.items() if k != "native")
                cpu[on].append(t1 - t0)
                wall[on].append(got["wall"])
                threads[on].append(after)
    n = EPOCHS * _fit.BATCHES
    ms = 1e3 / n
    names = sorted(set().union(*threads[True], *threads[False]))
    return {"variant": variant, "rounds": rounds,
            "cpu_extra_ms": statistics.median(a - b for a, b in zip(cpu[True], cpu[False])) * ms,
            "wall_extra_ms": statistics.median(a - b for a, b in zip(wall[True], wall[False])) * ms,
            "wall_none_ms": statistics.median(wall[False]) * ms,
            "threads_extra_ms": {k: statistics.median(a[k] - b[k] for a, b in zip(threads[True], threads[False])) * ms
                                 for k in names}}


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    if "child" in args:
        print("RESULT " + json.dumps(one_variant(args["child"], int(args.get("rounds", 8)),
                                                 args.get("config", "alloptions"), int(args.get("vocab", 0)))))
        return
    rounds = int(args.get("rounds", 8))
    extra = [f"{k}={args[k]}" for k in ("config", "vocab") if k in args]
    for variant in args.get("variants", ",".join(VARIANTS)).split(","):
        if variant not in VARIANTS:
            raise SystemExit(f"variants: each one of {sorted(VARIANTS)}, got {variant!r}")
        cmd = [sys.executable, os.path.abspath(__file__), f"child={variant}", f"rounds={rounds}"] + extra
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        r = json.loads(out.split("RESULT ", 1)[1])
        split = ", ".join(f"{k} {v:+.2f}" for k, v in sorted(r["threads_extra_ms"].items(), key=lambda kv: -kv[1]))
        print(f"{variant:9s} extra per batch: CPU {r['cpu_extra_ms']:+.2f} ms, wall {r['wall_extra_ms']:+.2f} ms "
              f"of {r['wall_none_ms']:.1f} ({r['wall_extra_ms'] / r['wall_none_ms']:+.1%}); CPU by thread: {split}")


if __name__ == "__main__":
    main()
