"""TensorBoard's fast loader (the Rust data server, its default where installed), live.

Our other tests read with TensorBoard's Python loader, after the writer closed. Here
``tensorboard --load_fast=true`` reloads the log directory every second *while* a writer
adds scalars (two runs), histograms, images and text with a short ``flush_secs``, so the
data server meets growing files and tails still being written. At the end every value
must be served exactly, through the HTTP API, and nothing may be logged about our files.
"""
from __future__ import annotations

import io
import re
import threading
import time

import numpy as np
import pytest
from PIL import Image
from tensorboard.util import tensor_util

import readback
from gluon_tb import SummaryWriter
from tb_server import tensorboard

pytest.importorskip("tensorboard_data_server")
# keep everything (0 would mean "all" to the data server but "none" to the scalars route)
ALL = ["--samples_per_plugin", "scalars=100000,histograms=100000,images=100000,text=100000"]


def f32(x):
    return float(np.float32(x))


def write_for(w, seconds, expected, stop):
    """Log every type until ``seconds`` pass; ``expected`` gets what was logged."""
    end, i = time.monotonic() + seconds, len(expected["loss"])
    while time.monotonic() < end and not stop.is_set():
        w.add_scalar("loss", 1.0 / (i + 1), i)
        expected["loss"].append((i, f32(1.0 / (i + 1))))
        w.add_scalar("acc", {"train": i / 1000.0, "val": i / 2000.0}, i)
        expected["acc/train"].append((i, f32(i / 1000.0)))
        expected["acc/val"].append((i, f32(i / 2000.0)))
        if i % 5 == 0:
            w.add_histogram("weights", np.arange(50, dtype=np.float32) + i, i)
            expected["weights"].append(i)
        if i % 10 == 0:
            w.add_image("img", np.full((4, 6), i % 256, dtype=np.uint8), i)
            expected["img"].append(i)
        if i % 7 == 0:
            w.add_text("note", f"note of step {i}", i)
            expected["note"].append(i)
        i += 1
        time.sleep(0.003)


def served(tb):
    """Everything the server has now, in the shape of ``expected``."""
    out = {"loss": [(s, v) for _, s, v in tb.get("/data/plugin/scalars/scalars", run=".", tag="loss")]}
    for run in ("acc/train", "acc/val"):
        out[run] = [(s, v) for _, s, v in tb.get("/data/plugin/scalars/scalars", run=run, tag="acc")]
    # this route samples 51 histograms (the last one kept) whatever the flags say
    hist = tb.get("/data/plugin/histograms/histograms", run=".", tag="weights")
    out["weights"] = {s: [tuple(map(f32, b)) for b in buckets] for _, s, buckets in hist}
    out["img"] = [e["step"] for e in tb.get("/data/plugin/images/images", run=".", tag="img", sample=0)]
    texts = tb.get("/data/plugin/text/text", run=".", tag="note")
    assert all(f"note of step {e['step']}" in e["text"] for e in texts)
    out["note"] = [e["step"] for e in texts]
    return out


def problems(stderr, logdir):
    """Lines of TensorBoard's stderr that warn or err about reading our log directory."""
    bad = re.compile(r"warn|error|corrupt|crc|truncat|fail|panic", re.I)
    return [line for line in stderr.splitlines() if bad.search(line)
            and "TensorFlow installation not found" not in line]


def test_fast_loader_serves_every_value_written_while_it_was_reading(tmp_path):
    logdir = str(tmp_path)
    w = SummaryWriter(logdir, flush_secs=0.05)
    expected = {k: [] for k in ("loss", "acc/train", "acc/val", "weights", "img", "note")}
    stop = threading.Event()
    write_for(w, 0.2, expected, stop)
    w.flush()  # a run is there when TensorBoard starts
    with tensorboard(logdir, load_fast="true", extra=ALL) as tb:
        t = threading.Thread(target=write_for, args=(w, 4.0, expected, stop), daemon=True)
        t.start()
        partial = []
        while t.is_alive():  # the server reads while the files grow
            time.sleep(1.0)
            partial.append(len(tb.get("/data/plugin/scalars/scalars", run=".", tag="loss")))
        t.join(30)
        assert not t.is_alive()
        w.close()
        # what TensorBoard's Python reader finds in the files: the histograms' buckets (it
        # serves float32 edges, the data server float64: compared as float32)
        hist = {e.step: [tuple(map(f32, b)) for b in tensor_util.make_ndarray(e.tensor_proto).tolist()]
                for e in readback.tensor_events(logdir, ".", "weights")}
        assert sorted(hist) == expected["weights"]
        steps = expected["weights"]
        expected["weights"] = {s: hist[s] for s in steps}
        deadline, got = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            got = served(tb)
            sampled = got["weights"]
            if (got == dict(expected, weights=sampled) and len(sampled) == min(51, len(steps))
                    and steps[-1] in sampled):
                break
            time.sleep(0.5)
        assert {k: v for k, v in got.items() if k != "weights"} == {  # every value, exactly, once
            k: v for k, v in expected.items() if k != "weights"}
        assert len(sampled) == min(51, len(steps)) and steps[-1] in sampled
        assert sampled == {s: expected["weights"][s] for s in sampled}  # bucket for bucket
        assert all(sum(c for _, _, c in b) == 50 for b in sampled.values())
        assert sorted(tb.get("/data/runs")) == [".", "acc/train", "acc/val"]
        tags = tb.get("/data/plugin/scalars/tags")
        assert {run: set(t) for run, t in tags.items()} == {".": {"loss"}, "acc/train": {"acc"},
                                                          "acc/val": {"acc"}}
        last = expected["img"][-1]  # and the pixels of the last image
        imgs = tb.get("/data/plugin/images/images", run=".", tag="img", sample=0)
        png = tb.get("/data/plugin/images/individualImage?" + imgs[-1]["query"])
        assert (np.asarray(Image.open(io.BytesIO(png))) == last % 256).all()
        assert len(expected["loss"]) > 300 and any(0 < n < len(expected["loss"]) for n in partial)
        assert problems(tb.stderr(), logdir) == []
