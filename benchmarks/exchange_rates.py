"""What a millisecond of work costs a fit, by where it runs: the exchange rates of logging's costs.

    benchmarks/.venv/bin/python benchmarks/exchange_rates.py [config=alloptions] [vocab=7800] [ms=1] [rounds=12]
        [kinds=training,python_thread,c_thread,engine]

A handler with no logging at all does ``ms`` milliseconds of work at every ``batch_end`` of a fit of
``_fit.py``'s ``config``, in one of four places:

* ``training``: pure Python on the training thread;
* ``python_thread``: pure Python on a background thread (it holds the GIL while it runs);
* ``c_thread``: C on a background thread, the GIL released (``hashlib``'s SHA-256 of a buffer);
* ``engine``: operations on MXNet's engine (copies of a 1M-value array, as many as take ``ms``
  there, calibrated first in this process).

Fits without and with the handler alternate (paired, as ``_fit.run_paired``); the script prints,
per kind, the extra wall time per batch and its ratio to ``ms``: 1.0 means every millisecond of
that work lengthens the fit by a millisecond, 0 that it hides entirely (behind the engine, or on an
idle core). Which of the handler's costs are worth cutting depends on these rates, and they differ
by configuration: in ``alloptions`` (25 ms batches, MXNet's single CPU worker busy) the training
thread's Python is hidden and the engine's work is not; in ``sweep`` (5 ms batches) the other way
round (benchmarks/RESULTS-notes.md, "Issue 24, fourteenth part").
"""
from __future__ import annotations

import hashlib
import os
import statistics
import sys
import threading
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KINDS = ("training", "python_thread", "c_thread", "engine")


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _hash_for(seconds: float) -> None:
    buf = bytes(1 << 20)
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(buf).digest()  # releases the GIL (buffers over 2 KB)


def _engine_work(mx: Any, ms: float) -> Callable[[], None]:
    """A function that queues about ``ms`` of work on MXNet's engine, measured here."""
    src = mx.nd.ones((1 << 20,))
    mx.nd.waitall()
    t0 = time.perf_counter()
    for _ in range(50):
        src.copy()
    mx.nd.waitall()
    each = (time.perf_counter() - t0) / 50
    n = max(1, round(ms / 1e3 / each))

    def work() -> None:
        for _ in range(n):
            src.copy()
    return work


def rates(config: str = "alloptions", vocab: int = 7800, ms: float = 1.0, rounds: int = 12,
          kinds: List[str] = list(KINDS)) -> Dict[str, float]:
    """Extra wall ms per batch for ``ms`` of work a batch, by kind (medians over paired rounds)."""
    import _fit
    import mxnet as mx
    from mxnet.gluon.contrib.estimator import BatchEnd

    s = _fit.build(config, vocab if config == "sweep" else 0)
    est = _fit._estimator(s)
    work_of: Dict[str, Callable[[], None]] = {"training": lambda: _spin(ms / 1e3), "engine": _engine_work(mx, ms)}
    for kind, body in (("python_thread", _spin), ("c_thread", _hash_for)):
        wake = threading.Event()  # set at each batch_end: one piece of work

        def loop(body: Callable[[float], None] = body, wake: threading.Event = wake) -> None:
            while True:
                wake.wait()
                wake.clear()
                body(ms / 1e3)
        threading.Thread(target=loop, daemon=True, name=f"rates-{kind}").start()
        work_of[kind] = wake.set

    class Work(BatchEnd):
        def __init__(self, kind: str) -> None:
            self.kind, self.work = kind, work_of[kind]

        def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
            self.work()

    out: Dict[str, float] = {}
    for kind in kinds:
        extra: List[float] = []
        for r in range(rounds + 1):
            wall = {}
            for on in ((False, True) if r % 2 == 0 else (True, False)):
                got = _fit._fit(est, s, 2, [Work(kind)] if on else [])
                wall[on] = got["wall"]
            if r:  # the first round warms up
                extra.append((wall[True] - wall[False]) * 1e3 / (2 * _fit.BATCHES))
        out[kind] = statistics.median(extra)
    return out


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    config, ms = args.get("config", "alloptions"), float(args.get("ms", 1.0))
    got = rates(config, int(args.get("vocab", 7800)), ms, int(args.get("rounds", 12)),
                args.get("kinds", ",".join(KINDS)).split(","))
    for kind, extra in got.items():
        print(f"{config:10s} {kind:14s} {ms:.2f} ms of work a batch -> {extra:+.3f} ms wall a batch "
              f"(rate {extra / ms:.2f})")


if __name__ == "__main__":
    main()
