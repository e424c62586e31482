"""Micro-benchmark: histogram of 10M float32 values, gluon_tb vs a tensorboardX-style numpy baseline.

Run: ``python benchmarks/bench_histogram.py [--size N] [--repeat R]``.
The baseline is what tensorboardX does on the worker (``np.histogram`` with
TensorFlow's default edges, then min/max/sum/dot); tensorboardX is not a
dependency, so its few lines are reproduced here. Prints min and median ms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gluon_tb.writer._summaries.histogram import build_histogram, capture_histogram  # noqa: E402


def tensorboardx_default_bins() -> List[float]:
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-p for p in pos[::-1]] + [0.0] + pos


def baseline(values: np.ndarray, bins) -> None:
    """tensorboardX.summary.make_histogram's work, minus the protobuf."""
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    values.min(), values.max(), values.sum(), values.dot(values)


def timed(fn: Callable[[], object], repeat: int) -> List[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def report(name: str, ms: List[float]) -> None:
    print(f"{name:<44} min {min(ms):8.1f} ms   median {statistics.median(ms):8.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    x = (np.random.default_rng(0).standard_normal(args.size) * 0.01).astype(np.float32)
    build_histogram("warm", capture_histogram(x[:1000]))  # build the bucket table once
    print(f"{args.size:,} float32 values, {args.repeat} runs each")
    for bins, tbx_bins in (("default", tensorboardx_default_bins()), (1000, 1000)):
        report(f"baseline np.histogram, bins={bins}", timed(lambda: baseline(x, tbx_bins), args.repeat))
        report(f"gluon_tb capture (numpy), bins={bins}",
               timed(lambda: capture_histogram(x, bins), args.repeat))
        payload = capture_histogram(x, bins)
        report(f"gluon_tb build (numpy), bins={bins}",
               timed(lambda: build_histogram("h", payload), args.repeat))
    try:
        import mxnet as mx
    except ImportError:
        print("mxnet not installed: NDArray timings skipped")
        return
    nd = mx.nd.array(x)
    nd.wait_to_read()
    for bins in ("default", 1000):
        payloads = []
        report(f"gluon_tb capture (NDArray), bins={bins}",
               timed(lambda: payloads.append(capture_histogram(nd, bins)), args.repeat))
        mx.nd.waitall()
        report(f"gluon_tb build (NDArray, incl. asnumpy), bins={bins}",
               timed(lambda: build_histogram("h", payloads.pop()), args.repeat))


if __name__ == "__main__":
    main()
