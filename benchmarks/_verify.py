"""Read a benchmark's log directory back with TensorBoard's reader and check it.

Scalars (hundreds of thousands of events) go through TensorBoard's record reader
(``RawEventFileLoader``, CRCs checked) and its ``Event`` proto; everything else through
``plugin_event_multiplexer`` (what TensorBoard shows: legacy summaries migrated to tensors).
Each check returns ``{"ok": bool, "summary": str, ...}``; a failed check is reported, not raised.
"""
from __future__ import annotations

import io
import math
import os
from typing import Dict, List

import numpy as np

from _worker import hist_values, scalar_values


def dir_bytes(logdir: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(logdir) for f in fs)


def event_files(logdir: str) -> List[str]:
    return sorted(os.path.join(r, f) for r, _d, fs in os.walk(logdir) for f in fs if ".tfevents." in f)


def _fail(msg: str) -> dict:
    return {"ok": False, "summary": "FAIL " + msg}


def check_scalars(logdir: str, n: int, values: bool = True, tag: str = "bench/scalar") -> dict:
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    parse = event_pb2.Event.FromString
    steps: List[int] = []
    vals: List[float] = []
    events = 0
    for path in event_files(logdir):
        for raw in RawEventFileLoader(path).Load():
            e = parse(raw)
            events += 1
            for v in e.summary.value:
                if v.tag != tag:
                    continue
                steps.append(e.step)
                if v.HasField("tensor"):
                    vals.append(v.tensor.float_val[0] if v.tensor.float_val else float("nan"))
                else:
                    vals.append(v.simple_value)
    if len(steps) != n:
        return _fail(f"{len(steps)} scalar events, expected {n}")
    if steps != list(range(n)):
        return _fail("steps are not 0..n-1 in order")
    if values:
        want = np.asarray(scalar_values(n), dtype=np.float32)
        got = np.asarray(vals, dtype=np.float32)
        bad = int(np.count_nonzero(got != want))
        if bad:
            return _fail(f"{bad} of {n} values differ from float32(given)")
    return {"ok": True, "summary": f"ok: {n} scalars" + (", values exact" if values else ""),
            "events_in_files": events}


def _mux(logdir: str):
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem

    mux = pem.EventMultiplexer(size_guidance={"tensors": 0, "scalars": 0, "histograms": 0, "images": 0})
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    return mux


def _tensors(mux, run: str, tag: str):
    from tensorboard.util import tensor_util

    try:
        evs = mux.Tensors(run, tag)
    except KeyError:
        return []
    return [(e.step, tensor_util.make_ndarray(e.tensor_proto)) for e in evs]


def check_hist(logdir: str, n: int, k: int, exact: bool, nbins: int = 0) -> dict:
    evs = _tensors(_mux(logdir), ".", "bench/hist")
    if len(evs) != k:
        return _fail(f"{len(evs)} histogram events, expected {k}")
    counts = [float(a[:, 2].sum()) for _s, a in evs]
    if any(abs(c - n) > 0.5 for c in counts):
        return _fail(f"bucket counts sum to {counts}, expected {n}")
    shapes = sorted({a.shape[0] for _s, a in evs})
    out = {"ok": True, "summary": f"ok: {k} histograms of {n} values, {shapes} buckets"}
    if exact:  # bucket for bucket against numpy on the same values: TensorFlow's default edges,
        a = evs[0][1]  # or nbins uniform ones
        if nbins:
            ref, edges = np.histogram(hist_values(n), nbins)
        else:
            edges = tf_default_edges()
            ref = np.histogram(hist_values(n), edges)[0]
        nz = np.flatnonzero(ref)
        ref, used = ref[nz[0]:nz[-1] + 1], edges[nz[0]:nz[-1] + 2]
        # TensorBoard reads edges back as float32 (and the outer ones as min/max): compare loosely
        same = (a.shape[0] == ref.size and np.array_equal(ref, a[:, 2].astype(np.int64))
                and np.allclose(used[1:-1], a[:-1, 1], rtol=1e-6, atol=0))
        out["numpy_equal"] = bool(same)
        out["summary"] += ", == numpy.histogram bucket for bucket" if same else ", != numpy.histogram"
        if not same:
            out["ok"] = False
            out["summary"] = "FAIL " + out["summary"]
    return out


def tf_default_edges() -> np.ndarray:
    """TensorFlow's default histogram edges: 1e-12 * 1.1**k below 1e20, mirrored, 0, +-DBL_MAX."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    big = np.finfo(np.float64).max
    return np.array([-big] + [-p for p in reversed(pos)] + [0.0] + pos + [big])


def check_images(logdir: str, k: int) -> dict:
    from PIL import Image

    evs = _tensors(_mux(logdir), ".", "bench/images")
    if len(evs) != k:
        return _fail(f"{len(evs)} image events, expected {k}")
    sizes = set()
    for _s, a in evs:
        w, h = int(a[0]), int(a[1])
        img = Image.open(io.BytesIO(a[2]))
        img.load()
        if img.size != (w, h):
            return _fail(f"PNG is {img.size}, event says {(w, h)}")
        if w * h < 64 * 32 * 32:
            return _fail(f"grid {w}x{h} cannot hold 64 images of 32x32")
        sizes.add((w, h))
    return {"ok": True, "summary": f"ok: {k} PNG grids {sorted(sizes)}"}


def check_mlp(logdir: str, writer: str, total: int, res: dict) -> dict:
    """Every logging block of a paired MLP process (``<logdir>/block<r>``), checked alone."""
    blocks = sorted(d for d in os.listdir(logdir) if d.startswith("block")) if os.path.isdir(logdir) else []
    if len(blocks) != res.get("rounds"):
        return _fail(f"{len(blocks)} block directories, expected {res.get('rounds')}")
    for b in blocks:
        got = _check_mlp_block(os.path.join(logdir, b), total)
        if not got["ok"]:
            return _fail(f"{b}: {got['summary']}")
    return {"ok": True, "summary": f"{len(blocks)} blocks, each {got['summary']}"}


def _check_mlp_block(logdir: str, total: int) -> dict:
    mux = _mux(logdir)
    runs = mux.Runs()
    run = next((r for r in ("train_batch", "train") if r in runs), ".")
    if run not in runs:
        return _fail(f"no run in {sorted(runs)}")
    tags = set(runs[run].get("tensors", []))
    loss = _tensors(mux, run, "batch_loss")
    if len(loss) != total:
        return _fail(f"{len(loss)} batch_loss events, expected {total}")
    if not all(math.isfinite(float(np.asarray(a).reshape(-1)[0])) for _s, a in loss):
        return _fail("non-finite batch_loss")
    grads = sorted(t for t in tags if t.startswith("gradients/"))
    if len(grads) != 6:
        return _fail(f"{len(grads)} gradient tags, expected 6: {grads}")
    want = len(range(0, total, 10))
    counts: Dict[str, int] = {t: len(_tensors(mux, run, t)) for t in grads}
    if set(counts.values()) != {want}:
        return _fail(f"gradient histogram counts {counts}, expected {want} each")
    extra = sorted(tags - set(grads) - {"batch_loss"})
    return {"ok": True, "summary": f"ok: {total} batch_loss, 6 gradient tags x {want}"
            + (f"; also {len(extra)} other tags" if extra else "")}


def check_fit(logdir: str, writer: str, config: str, res: dict) -> dict:
    """Every logging block of a ``fit`` process (``warm``: 1 epoch; ``block<r>``: ``epochs``)."""
    if res.get("logging") is False:
        got = os.listdir(logdir) if os.path.isdir(logdir) else []
        return {"ok": not got, "summary": "ok: no logging, nothing written" if not got else f"FAIL wrote {got}"}
    dirs = sorted(d for d in os.listdir(logdir) if d == "warm" or d.startswith("block")) \
        if os.path.isdir(logdir) else []
    want = (["warm"] if "rounds" in res else []) + [f"block{r}" for r in range(res.get("rounds", 1))]
    if dirs != sorted(want):
        return _fail(f"block directories {dirs}, expected {sorted(want)}")
    for d in dirs:
        got = _check_fit_block(os.path.join(logdir, d), writer, config, res["sizes"],
                               1 if d == "warm" else res["epochs"])
        if not got["ok"]:
            return _fail(f"{d}: {got['summary']}")
    return {"ok": True, "summary": f"{len(dirs)} blocks, each {got['summary']}"}


def _fit_expected(writer: str, config: str, names: List[str], epochs: int) -> Dict[tuple, int]:
    """``{(run, tag): events}`` that ``writer`` must have written for ``config`` in one fit."""
    from _fit import BATCHES

    batches = epochs * BATCHES
    every = config == "alloptions"
    hists = batches if every else epochs
    if writer == "gluon_tb":  # batch-level points in train_batch, epoch-level in train
        run, val, bat = "train", "validation", "train_batch"
        want = {(bat, t): batches for t in ("batch_loss", "batch_accuracy")}
        want.update({(run, f"epoch_{t}"): epochs for t in ("loss", "accuracy", "learning_rate",
                                                          "samples_per_second")})
        want.update({(val, "epoch_loss"): epochs, (val, "epoch_accuracy"): epochs, (run, "__run_graph__"): 1})
        health = ["global"] + names
        maps = ["first_batch", "conv_filters/net_conv0", "feature_maps/net_conv0"]
    else:
        run = bat = "."
        want = {(run, "batch_loss"): batches, (run, "epoch_training_accuracy"): epochs,
                (run, "epoch_validation_accuracy"): epochs}
        health = names
        want[(bat, "grad_norm/global")] = batches if every else 0
        maps = ["first_batch", "conv_filters", "feature_maps"]
    want.update({(bat, f"{k}/{n}"): hists for n in names for k in ("gradients", "weights")})
    if every:
        want.update({(bat, f"{k}/{n}"): batches for n in health for k in ("grad_norm", "weight_norm",
                                                                           "update_ratio")})
        want.update({(run, t): epochs for t in maps})
    return {k: v for k, v in want.items() if v}


def _check_fit_block(logdir: str, writer: str, config: str, sizes: Dict[str, int], epochs: int) -> dict:
    mux = _mux(logdir)
    have = {(run, t): len(mux.Tensors(run, t)) for run, kinds in mux.Runs().items()
            for t in kinds.get("tensors", [])}
    want = _fit_expected(writer, config, sorted(sizes), epochs)
    missing = sorted(k for k in want if k not in have)
    if missing:
        return _fail(f"{len(missing)} tags missing, e.g. {missing[:3]}")
    wrong = {f"{r}/{t}": (have[(r, t)], n) for (r, t), n in want.items() if have[(r, t)] != n}
    if wrong:
        return _fail(f"event counts (got, expected): {dict(list(wrong.items())[:3])}")
    # histograms: bucket counts sum to the parameter's size, or to a sample of it
    fractions = []
    for (r, t) in want:
        if t.startswith(("gradients/", "weights/")):
            a = _tensors(mux, r, t)[-1][1]
            fractions.append(float(a[:, 2].sum()) / sizes[t.split("/", 1)[1]])
    if not all(0 < f <= 1 + 1e-9 for f in fractions):
        return _fail(f"histogram counts / parameter size out of (0, 1]: {min(fractions)}..{max(fractions)}")
    full = min(fractions) > 1 - 1e-9
    extra = sorted(set(have) - set(want))
    return {"ok": True, "summary": f"ok: {len(want)} tags with the expected event counts, histograms "
            + ("of every value" if full else f"of a sample (down to {min(fractions):.2g} of the values)")
            + (f"; also {len(extra)} other tags" if extra else "")}
