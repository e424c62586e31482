"""Horovod: two workers under ``horovodrun --gloo`` on this machine, hvd.DistributedTrainer.

Skipped when ``horovod.mxnet`` is not installed (scripts/install_horovod.sh builds it; it
takes about 5 minutes), unless GLUON_TB_REQUIRE_HOROVOD=1 (what .ci/run sets) makes that a failure.
"""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import readback
from test_distributed import EPOCHS, HIST_STEPS, PARAMS, ROOT, SUPPORT, assert_is_histogram_of, epoch_values, histo

pytest.importorskip("mxnet")
try:
    import horovod.mxnet  # noqa: F401
except Exception as e:  # ImportError, or a Horovod built without MXNet
    if os.environ.get("GLUON_TB_REQUIRE_HOROVOD") == "1":
        raise
    pytest.skip(f"horovod.mxnet is not available ({e}); scripts/install_horovod.sh builds it",
                allow_module_level=True)


def horovodrun(tmp_path, mode):
    logdir, out = str(tmp_path / "logs"), str(tmp_path / "worker_{rank}.json")
    run = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    cmd = [run, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
           os.path.join(SUPPORT, "dist_worker.py"), logdir, mode, "horovod", "0", out]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, text=True)
    try:
        output, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        output, _ = p.communicate()
        raise AssertionError("horovodrun timed out:\n" + output[-3000:])
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # anything it left behind
        except ProcessLookupError:
            pass
    assert p.returncode == 0, output[-3000:]
    recs = []
    for r in range(2):
        with open(out.format(rank=r)) as f:
            recs.append(json.load(f))
    assert [rec["worker"] for rec in recs] == [[0, 2, "horovod"], [1, 2, "horovod"]]
    return logdir, recs


def test_horovod_rank0_writes_the_mean_and_local_gradients(tmp_path):
    logdir, recs = horovodrun(tmp_path, "rank0")
    assert {os.path.basename(p).split(".")[-2] for p in readback.event_files(logdir)} == {str(recs[0]["pid"])}
    assert {run for run, _ in readback.tags(logdir)} == {"train", "train_batch", "validation"}
    for run in ("train", "validation"):
        own = [[rec["epochs"][str(e)][run]["accuracy"] for e in range(EPOCHS)] for rec in recs]
        assert own[0] != own[1]
        want = [(a + b) / 2 for a, b in zip(*own)]
        assert epoch_values(logdir, run, "epoch_accuracy") == pytest.approx(want, rel=1e-6)
    for p in PARAMS:
        assert [e.step for e in readback.tensor_events(logdir, "train_batch", f"gradients/{p}")] == HIST_STEPS
        assert_is_histogram_of(histo(logdir, "train_batch", f"gradients/{p}", 2), recs[0]["grad_before"][p])
        # hvd.DistributedTrainer leaves the sum over workers in the buffers: not what was logged
        before = [np.asarray(rec["grad_before"][p]) for rec in recs]
        np.testing.assert_allclose(recs[0]["grad_after"][p], before[0] + before[1], rtol=1e-5, atol=1e-7)


def test_horovod_all_writes_one_run_per_worker(tmp_path):
    logdir, recs = horovodrun(tmp_path, "all")
    assert {run for run, _ in readback.tags(logdir)} == {
        f"worker_{r}/{run}" for r in (0, 1) for run in ("train", "train_batch", "validation")}
    for rank, rec in enumerate(recs):
        own = [rec["epochs"][str(e)]["train"]["accuracy"] for e in range(EPOCHS)]
        assert epoch_values(logdir, f"worker_{rank}/train", "epoch_accuracy") == pytest.approx(own, rel=1e-6)
