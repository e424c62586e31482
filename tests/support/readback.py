"""Read a log directory back with TensorBoard's own loader (the test oracle)."""
from __future__ import annotations

import os
from typing import List, Tuple

from tensorboard.backend.event_processing import plugin_event_multiplexer as event_multiplexer

SIZE_ALL = {"scalars": 0, "histograms": 0, "images": 0, "audio": 0, "tensors": 0,
            "compressedHistograms": 0}


_cache: dict = {}


def _signature(logdir: str) -> tuple:
    out = []
    for root, _dirs, files in os.walk(logdir):
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            out.append((p, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(sorted(out))


def multiplexer(logdir: str) -> event_multiplexer.EventMultiplexer:
    """An EventMultiplexer over ``logdir`` with every event kept (no sampling).

    Loaded anew whenever any file under ``logdir`` changed (size, mtime or inode);
    otherwise the last one is reused, so many assertions on one directory stay fast.
    """
    logdir = str(logdir)
    sig = _signature(logdir)
    hit = _cache.get(logdir)
    if hit is not None and hit[0] == sig:
        return hit[1]
    mux = event_multiplexer.EventMultiplexer(size_guidance=SIZE_ALL)
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    _cache.clear()
    _cache[logdir] = (sig, mux)
    return mux


def run_name(logdir: str, run_dir: str) -> str:
    rel = os.path.relpath(run_dir, logdir)
    return "." if rel == "." else rel


def tags(logdir: str) -> set:
    """The set of ``(run, tag)`` pairs of every tensor-like summary in ``logdir``.

    TensorBoard migrates legacy summaries (simple_value, histo, image, audio)
    to tensors on load, so this covers scalars, histograms, images, audio,
    text, pr curves and every other plugin's data.
    """
    mux = multiplexer(logdir)
    out = set()
    for run, kinds in mux.Runs().items():
        for tag in kinds.get("tensors", []):
            out.add((run, tag))
    return out


def scalars(logdir: str, run: str, tag: str) -> List[Tuple[int, float]]:
    """``[(step, value), ...]`` of one scalar series, as TensorBoard reads it."""
    mux = multiplexer(logdir)
    import numpy as np
    from tensorboard.util import tensor_util

    return [
        (e.step, float(np.asarray(tensor_util.make_ndarray(e.tensor_proto)).reshape(())))
        for e in mux.Tensors(run, tag)
    ]


def tensor_events(logdir: str, run: str, tag: str):
    """TensorBoard's TensorEvent list (wall_time, step, tensor_proto) for one tag."""
    return multiplexer(logdir).Tensors(run, tag)


def plugin_name(logdir: str, run: str, tag: str) -> str:
    mux = multiplexer(logdir)
    return mux.SummaryMetadata(run, tag).plugin_data.plugin_name


def raw_events(path: str):
    """Every Event proto of one event file, parsed by TensorBoard's protobuf."""
    from tensorboard.compat.proto import event_pb2

    from gluon_tb.writer._format.record import read_records

    with open(path, "rb") as f:
        return [event_pb2.Event.FromString(r) for r in read_records(f, strict=True)]


def event_files(logdir: str) -> List[str]:
    out = []
    for root, _dirs, files in os.walk(logdir):
        out += [os.path.join(root, f) for f in files if ".tfevents." in f]
    return sorted(out)


def summary_values(logdir: str, run: str = ".") -> list:
    """``[(step, Summary.Value), ...]`` of every event file directly in ``logdir/run``, in file order.

    The values as written (TensorBoard's protobuf, before its loader migrates legacy
    fields to tensors): for the fields the loader drops (an image's colorspace, an
    audio clip's sample rate, a histogram's sums) and the order of values in an event.
    """
    d = os.path.join(str(logdir), run)
    paths = sorted(os.path.join(d, f) for f in os.listdir(d) if ".tfevents." in f)
    return [(e.step, v) for p in paths for e in raw_events(p) for v in e.summary.value]


def projector_tensors(run_dir: str) -> dict:
    """``{tensor_name: matrix}`` of a run's ``projector_config.pbtxt``, each tensor file read as
    TensorBoard's projector plugin reads it: as TSV text, else (not UTF-8) as raw float32 of the
    config's ``tensor_shape``."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector import projector_plugin as pp
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    with open(os.path.join(run_dir, "projector_config.pbtxt")) as f:
        cfg = text_format.Parse(f.read(), ProjectorConfig())
    out = {}
    for e in cfg.embeddings:
        path = os.path.join(run_dir, e.tensor_path)
        try:
            out[e.tensor_name] = pp._read_tensor_tsv_file(path)
        except UnicodeDecodeError:
            out[e.tensor_name] = pp._read_tensor_binary_file(path, list(e.tensor_shape))
    return out


BATCH_LEVEL = ("batch_", "gradients/", "weights/", "grad_norm/", "weight_norm/", "update_ratio/", "grad_health",
               "profile/")


def train_run(tag: str) -> str:
    """The handlers' run of a training tag: ``train_batch`` for batch-level ones, else ``train``."""
    return "train_batch" if tag.startswith(BATCH_LEVEL) else "train"

#: what every training epoch adds to run ``train`` (both adapters): rate, throughput, time split
EPOCH_EXTRAS = ("epoch_learning_rate", "epoch_samples_per_second", "epoch_input_wait_seconds",
                "epoch_batch_seconds", "epoch_input_wait_fraction")
