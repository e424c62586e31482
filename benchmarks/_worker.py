"""One benchmark, one writer, one fresh process: prints one JSON line with its timings.

    python _worker.py BENCH WRITER LOGDIR [key=value ...]

BENCH: scalar | hist | images | mlp | memory | b2b | fit | fit_rss. WRITER: gluon_tb | tensorboardX |
torch | mxboard. Run by run.py; the output is checked there, with
TensorBoard's reader, after this process has exited.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

pc = time.perf_counter
PAGE = os.sysconf("SC_PAGE_SIZE")
HIST_SEED, SCALAR_SEED, IMAGE_SEED = 1, 2, 3


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def make_writer(name: str, logdir: str):
    if name == "gluon_tb":
        from gluon_tb import SummaryWriter
    elif name == "tensorboardX":
        from tensorboardX import SummaryWriter
    elif name == "torch":
        from torch.utils.tensorboard import SummaryWriter
    elif name == "mxboard":
        from mxboard import SummaryWriter
    else:
        raise SystemExit(f"unknown writer {name!r}")
    return SummaryWriter(logdir)


#: each writer's name for TensorBoard's default (exponential) buckets
DEFAULT_BINS = {"gluon_tb": "default", "mxboard": "default", "tensorboardX": "tensorflow",
                "torch": "tensorflow"}


def scalar_values(n: int) -> list:
    return np.random.default_rng(SCALAR_SEED).standard_normal(n).tolist()


WARM_MB = 512  # bench_b2b: memory touched and freed before it measures


def hist_values(n: int) -> np.ndarray:
    return np.random.default_rng(HIST_SEED).standard_normal(n, dtype=np.float32)


def image_batch() -> np.ndarray:
    return np.random.default_rng(IMAGE_SEED).random((64, 3, 32, 32), dtype=np.float32)


def add_images(name: str, w, tag: str, imgs, step: int) -> None:
    if name == "mxboard":  # mxboard has no add_images: add_image tiles a 4-D batch into a grid
        w.add_image(tag, imgs, step)
    else:
        w.add_images(tag, imgs, step)


# ---------------------------------------------------------------- benchmarks
def bench_scalar(name: str, logdir: str, n: int = 200_000, warm: int = 10_000) -> dict:
    values = scalar_values(n)
    dts = [0.0] * n
    w = make_writer(name, logdir)
    add = w.add_scalar
    rss_warm = 0
    t_start = pc()
    for i in range(n):
        t = pc()
        add("bench/scalar", values[i], i)
        dts[i] = pc() - t
        if i == warm:
            rss_warm = rss()
    t_calls = pc()
    rss_end = rss()
    w.flush()
    w.close()
    t_end = pc()
    # perf_counter pair overhead, to read the per-call figures against
    ovh = []
    for _ in range(10_000):
        t = pc()
        ovh.append(pc() - t)
    return {"call_us_median": float(np.median(dts)) * 1e6, "call_us_p99": float(np.percentile(dts, 99)) * 1e6,
            "calls_s": t_calls - t_start, "close_s": t_end - t_calls, "total_s": t_end - t_start,
            "events_per_s": n / (t_end - t_start), "rss_growth_mb": (rss_end - rss_warm) / 2**20,
            "timer_overhead_us": float(np.median(ovh)) * 1e6, "n": n}


def bench_hist(name: str, logdir: str, n: int = 10_000_000, k: int = 3, nd: int = 0,
               bins: str = "") -> dict:
    arr = hist_values(n)
    b = DEFAULT_BINS[name] if not bins else int(bins)
    if nd:
        import mxnet as mx

        arr = mx.nd.array(arr)
        mx.nd.waitall()
    w = make_writer(name, logdir)
    calls, out = _call_then_flush(w, k, lambda step: w.add_histogram("bench/hist", arr, step, bins=b))
    return dict(out, call_ms_all=[c * 1e3 for c in calls], n=n)


def bench_images(name: str, logdir: str, k: int = 10) -> dict:
    imgs = image_batch()
    w = make_writer(name, logdir)
    return _call_then_flush(w, k, lambda step: add_images(name, w, "bench/images", imgs, step))[1]


def _call_then_flush(w, k: int, call) -> tuple:
    """``call(step)`` then ``w.flush()``, ``k`` times, then close: the caller's times and the
    medians of the call and of call + flush (until on disk)."""
    calls, disk = [], []
    for step in range(k):
        t0 = pc()
        call(step)
        t1 = pc()
        w.flush()
        t2 = pc()
        calls.append(t1 - t0)
        disk.append(t2 - t0)
    w.close()
    return calls, {"call_ms_median": float(np.median(calls)) * 1e3,
                   "disk_ms_median": float(np.median(disk)) * 1e3, "k": k}


def bench_memory(name: str, logdir: str, n: int = 5_000_000, warm: int = 200_000,
                 every: int = 250_000) -> dict:
    w = make_writer(name, logdir)
    add = w.add_scalar
    v = 0.5
    samples = []
    base = 0
    t0 = pc()
    for i in range(n):
        add("bench/scalar", v, i)
        v = -v
        if i == warm:
            base = rss()
        if i > warm and i % every == 0:
            samples.append(rss())
    t1 = pc()
    end = rss()
    w.close()
    after_close = rss()
    grow = [(s - base) / 2**20 for s in samples] + [(end - base) / 2**20]
    return {"n": n, "warm": warm, "rss_warm_mb": base / 2**20, "rss_end_mb": end / 2**20,
            "rss_after_close_mb": after_close / 2**20, "growth_mb_max": max(grow),
            "growth_mb_end": grow[-1], "growth_mb_samples": [round(g, 1) for g in grow],
            "calls_s": t1 - t0}


def bench_mlp(name: str, logdir: str, batches: int = 100, warm: int = 10, rounds: int = 8,
              hist_every: int = 10) -> dict:
    from _mlp import run_mlp_paired

    return run_mlp_paired(name, logdir, batches=batches, warm=warm, rounds=rounds, hist_every=hist_every)


def bench_b2b(name: str, logdir: str, n: int = 10_000_000, k: int = 5, nd: int = 0) -> dict:
    """``k`` calls of ``add_histogram`` back to back (default bins), then ``flush()`` and
    ``close()``: each call's caller time (the first included) and the time until on disk.

    The process first touches and frees ``WARM_MB`` of memory, whichever writer it runs. This
    machine is a VM whose host backs guest memory lazily: a page the guest has not used for a
    while costs ~1 ms per MB of system time when first touched (measured in RESULTS-notes.md), so
    a fresh 40 MB copy took 5-7 ms or 30-50 ms by chance. Touched once, the memory is backed for
    every writer alike, as on a machine whose memory is its own."""
    warm = np.ones(WARM_MB << 20, np.uint8)
    del warm
    arr = hist_values(n)
    if nd:
        import mxnet as mx

        arr = mx.nd.array(arr)
        mx.nd.waitall()
    w = make_writer(name, logdir)
    b = DEFAULT_BINS[name]
    calls = []
    t0 = pc()
    for step in range(k):
        t = pc()
        w.add_histogram("bench/hist", arr, step, bins=b)
        calls.append(pc() - t)
    t_calls = pc()
    w.flush()
    t_flush = pc()
    w.close()
    t_close = pc()
    return {"call_ms_mean": float(np.mean(calls)) * 1e3, "call_ms_median": float(np.median(calls)) * 1e3,
            "call_ms_max": float(np.max(calls)) * 1e3, "call_ms_all": [round(c * 1e3, 3) for c in calls],
            "calls_ms": (t_calls - t0) * 1e3, "flush_ms": (t_flush - t0) * 1e3,
            "disk_ms": (t_close - t0) * 1e3, "n": n, "k": k, "nd": nd, "warm_mb": WARM_MB}


def bench_fit(name: str, logdir: str, config: str = "typical", rounds: int = 8, epochs: int = 5,
              vocab: int = 0) -> dict:
    from _fit import run_paired

    return run_paired(name, config, logdir, rounds=rounds, epochs=epochs, vocab=vocab)


def bench_fit_rss(name: str, logdir: str, config: str = "sweep", epochs: int = 2, vocab: int = 0,
                  logging_on: int = 1) -> dict:
    from _fit import run_once

    return run_once(name, config, logdir, epochs=epochs, vocab=vocab, logging_on=bool(logging_on))


BENCHES = {"scalar": bench_scalar, "hist": bench_hist, "images": bench_images,
           "memory": bench_memory, "mlp": bench_mlp, "b2b": bench_b2b, "fit": bench_fit,
           "fit_rss": bench_fit_rss}


def main() -> None:
    bench, name, logdir = sys.argv[1:4]
    kw = {}
    for a in sys.argv[4:]:
        k, v = a.split("=", 1)
        kw[k] = v if k in ("bins", "config") else int(v)
    out = BENCHES[bench](name, logdir, **kw)
    out["rss_peak_mb"] = _peak_rss_mb()
    print("RESULT " + json.dumps(out))


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
