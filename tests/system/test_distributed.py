"""Real distributed training: a scheduler, a server and two workers on 127.0.0.1.

Each worker runs tests/support/dist_worker.py (an Estimator fit with TensorBoardHandler) and
reports its own values; the test reads back what was logged with TensorBoard's reader.
"""
import json
import math
import os
import sys

import numpy as np
import pytest

import readback
from pscluster import run_cluster
from repo_paths import ROOT, SUPPORT

pytest.importorskip("mxnet")

STEPS_PER_EPOCH, EPOCHS = 4, 2
HIST_STEPS = [0, 2, 4, 6]  # histogram_period=2 over 8 batches
PARAMS = ("dense0_weight", "dense0_bias", "dense1_weight", "dense1_bias")


def train(tmp_path, mode, kv_type="dist_sync", update_on_kvstore="1"):
    logdir = str(tmp_path / "logs")
    out = str(tmp_path / "worker_{rank}.json")
    run_cluster([sys.executable, os.path.join(SUPPORT, "dist_worker.py"), logdir, mode, kv_type,
                 update_on_kvstore, out], num_workers=2, timeout=120,
                env={"PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")})
    records = []
    for r in range(2):
        with open(out.format(rank=r)) as f:
            records.append(json.load(f))
    kind = kv_type.split(":")[0]  # "dist_sync:name": the Trainer was given only the name
    assert [rec["worker"] for rec in records] == [[0, 2, f"kvstore:{kind}"], [1, 2, f"kvstore:{kind}"]]
    return logdir, records


def histo(logdir, run, tag, step):
    """The HistogramProto that was logged (raw event, so num and sum are exact)."""
    for path in readback.event_files(os.path.join(logdir, run)):
        for ev in readback.raw_events(path):
            for v in ev.summary.value:
                if v.tag == tag and ev.step == step:
                    return v.histo
    raise AssertionError(f"no histogram {tag} at step {step} in {run}")


def assert_is_histogram_of(h, values):
    from gluon_tb.writer._summaries.histogram_counts import default_edges

    x = np.asarray(values, dtype=np.float32)
    counts, _ = np.histogram(x.astype(np.float64), default_edges())
    nz = np.flatnonzero(counts)
    assert h.num == x.size
    assert h.sum == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-12, abs=1e-12)
    assert list(h.bucket) == list(counts[nz[0]:nz[-1] + 1].astype(float))


def epoch_values(logdir, run, tag):
    got = readback.scalars(logdir, run, tag)
    assert [s for s, _ in got] == list(range(EPOCHS))
    return [v for _, v in got]


def test_rank0_writes_the_mean_over_workers(tmp_path):
    logdir, recs = train(tmp_path, "rank0")
    assert recs[0]["update_on_kvstore"] is True  # MXNet 1.9's default for dist_sync
    # only rank 0 wrote, and only the two usual runs exist
    pids = {os.path.basename(p).split(".")[-2] for p in readback.event_files(logdir)}
    assert pids == {str(recs[0]["pid"])}
    runs = {run for run, _ in readback.tags(logdir)}
    assert runs == {"train", "train_batch", "validation"}
    for run in ("train", "validation"):
        own = [[rec["epochs"][str(e)][run]["accuracy"] for e in range(EPOCHS)] for rec in recs]
        assert own[0] != own[1], "the shards should differ, or the mean proves nothing"
        want = [(a + b) / 2 for a, b in zip(*own)]
        assert epoch_values(logdir, run, "epoch_accuracy") == pytest.approx(want, rel=1e-6)
    assert len(epoch_values(logdir, "train", "epoch_loss")) == EPOCHS  # the handler's own mean loss
    assert all(v > 0 for v in epoch_values(logdir, "train", "epoch_samples_per_second"))
    # batch values and histograms are rank 0's own; gradients are its local ones, before the step
    assert [s for s, _ in readback.scalars(logdir, "train_batch", "batch_loss")] == list(range(8))
    for p in PARAMS:
        assert [e.step for e in readback.tensor_events(logdir, "train_batch", f"gradients/{p}")] == HIST_STEPS
        assert_is_histogram_of(histo(logdir, "train_batch", f"gradients/{p}", 2), recs[0]["grad_before"][p])


def test_all_writes_one_run_per_worker_with_its_own_values(tmp_path):
    logdir, recs = train(tmp_path, "all", update_on_kvstore="0")
    assert recs[0]["update_on_kvstore"] is False
    runs = {run for run, _ in readback.tags(logdir)}
    assert runs == {f"worker_{r}/{run}" for r in (0, 1) for run in ("train", "train_batch", "validation")}
    for rank, rec in enumerate(recs):
        own = [rec["epochs"][str(e)]["train"]["accuracy"] for e in range(EPOCHS)]
        assert epoch_values(logdir, f"worker_{rank}/train", "epoch_accuracy") == pytest.approx(own, rel=1e-6)
        for p in PARAMS:
            h = histo(logdir, f"worker_{rank}/train_batch", f"gradients/{p}", 2)
            assert_is_histogram_of(h, rec["grad_before"][p])
    # with update_on_kvstore=False the step leaves the sum over workers in the gradient
    # buffers: what was logged is each worker's own gradient, not that sum
    for p in PARAMS:
        before = [np.asarray(rec["grad_before"][p]) for rec in recs]
        after = np.asarray(recs[0]["grad_after"][p])
        np.testing.assert_allclose(after, before[0] + before[1], rtol=1e-5, atol=1e-7)
        assert not math.isclose(float(np.abs(after - before[0]).max()), 0.0, abs_tol=1e-9)


def test_trainer_given_only_the_kvstore_name(tmp_path):
    """Trainer(kvstore="dist_sync"): the handler makes the kvstore at train_begin, as step would."""
    logdir, recs = train(tmp_path, "rank0", kv_type="dist_sync:name")
    own = [[rec["epochs"][str(e)]["train"]["accuracy"] for e in range(EPOCHS)] for rec in recs]
    assert own[0] != own[1]
    want = [(a + b) / 2 for a, b in zip(*own)]
    assert epoch_values(logdir, "train", "epoch_accuracy") == pytest.approx(want, rel=1e-6)
    assert recs[0]["update_on_kvstore"] is True  # the trainer went on as with its own kvstore


def test_dist_async_averages_too(tmp_path):
    logdir, recs = train(tmp_path, "rank0", kv_type="dist_async")
    own = [[rec["epochs"][str(e)]["train"]["accuracy"] for e in range(EPOCHS)] for rec in recs]
    want = [(a + b) / 2 for a, b in zip(*own)]
    assert epoch_values(logdir, "train", "epoch_accuracy") == pytest.approx(want, rel=1e-6)
    assert {run for run, _ in readback.tags(logdir)} == {"train", "train_batch", "validation"}


@pytest.mark.parametrize("on_kvstore", ["0", "1"])
def test_module_callback_rank0(tmp_path, on_kvstore):
    """Module names its keys: averaged with MXNET_UPDATE_ON_KVSTORE=0, else rank 0's own values."""
    logdir, out = str(tmp_path / "logs"), str(tmp_path / "worker_{rank}.json")
    run_cluster([sys.executable, os.path.join(SUPPORT, "dist_module_worker.py"), logdir, "rank0", out],
                num_workers=2, timeout=120,
                env={"PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                     "MXNET_UPDATE_ON_KVSTORE": on_kvstore})
    recs = []
    for r in range(2):
        with open(out.format(rank=r)) as f:
            recs.append(json.load(f))
    assert [rec["worker"] for rec in recs] == [[0, 2, "kvstore:dist_sync"], [1, 2, "kvstore:dist_sync"]]
    assert {os.path.basename(p).split(".")[-2] for p in readback.event_files(logdir)} == {str(recs[0]["pid"])}
    assert {run for run, _ in readback.tags(logdir)} == {"train", "train_batch", "validation"}
    for run in ("train", "validation"):
        assert recs[0][run] != recs[1][run]
        want = [(a + b) / 2 for a, b in zip(recs[0][run], recs[1][run])] if on_kvstore == "0" else recs[0][run]
        assert epoch_values(logdir, run, "epoch_accuracy") == pytest.approx(want, rel=1e-6)
