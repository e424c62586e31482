"""A script that passes ``CheckpointHandler(..., resume_from_checkpoint=True)`` from its very
first launch (one script for launch and relaunch), resumed in a new process.

MXNet names that first launch's checkpoints one batch short (``epoch1batch7`` after 8 batches:
``trained_batch`` is -1 when nothing was found, and the epoch-end name is ``current_batch +
trained_batch``); a first launch without ``resume_from_checkpoint`` names the same checkpoint
``epoch1batch8``. Either way every batch must be logged once, at its global index, with the value
the training computed (a recorder beside the handler keeps each batch's mean loss).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import readback

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.filterwarnings("ignore")
    import mxnet as mx
    from mxnet.gluon.contrib.estimator import CheckpointHandler
    from mxnet.gluon.contrib.estimator.event_handler import BatchEnd, EpochEnd
    import test_estimator_configs as t
    from gluon_tb.handlers import TensorBoardHandler

    logdir, model_dir, epochs, resume = sys.argv[2:6]

    class Recorder(BatchEnd, EpochEnd):
        priority = 2000  # after gluon_tb (1000)
        def __init__(self):
            self.batches, self.epochs = [], []
        def batch_end(self, estimator, *a, **k):
            self.batches.append(float(sum(l.mean().asscalar() for l in k["loss"]) / len(k["loss"])))
        def epoch_end(self, estimator, *a, **k):
            self.epochs.append(float(estimator.trainer.learning_rate))

    mx.random.seed(0)
    ctx = [mx.cpu()]
    est = t.make_est(t.make_net(ctx), ctx)
    ck = CheckpointHandler(model_dir, model_prefix="m", epoch_period=1, resume_from_checkpoint=resume == "1")
    tb = TensorBoardHandler(logdir, histogram_period=None, images=False)
    rec = Recorder()
    est.fit(t.loader(), val_data=t.loader(32, seed=1), event_handlers=[ck, tb, rec], epochs=int(epochs))
    print(json.dumps({"resumed_from": tb.resumed_from, "batches": rec.batches, "epochs": rec.epochs,
                      "names": sorted(f for f in __import__("os").listdir(model_dir) if f.endswith(".params"))}))
""")


def launch(logdir, model_dir, epochs, resume):
    p = subprocess.run([sys.executable, "-c", SCRIPT, HERE, logdir, model_dir, str(epochs), str(resume)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("first_resume, name", [(1, "m-epoch1batch7.params"), (0, "m-epoch1batch8.params")])
def test_every_batch_once_at_its_index_whatever_the_first_launch(tmp_path, first_resume, name):
    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    first = launch(d, m, 2, first_resume)  # 2 epochs of 4 batches
    assert name in first["names"]  # MXNet's own naming, which the handler must read right
    second = launch(d, m, 4, 1)  # resumes after epoch 1, trains epochs 2 and 3
    assert second["resumed_from"].startswith("CheckpointHandler (epoch 1, batch")
    trained = first["batches"] + second["batches"]
    assert len(trained) == 16
    got = readback.scalars(d, "train_batch", "batch_loss")
    assert [s for s, _ in got] == list(range(16))  # each batch once, at its index
    assert [v for _, v in got] == pytest.approx(trained, rel=1e-5)  # and the value it trained with
    assert [s for s, _ in readback.scalars(d, "train", "epoch_loss")] == [0, 1, 2, 3]
    # one graph in run train: the resumed process leaves it to the first
    graphs = [e for f in readback.event_files(os.path.join(d, "train")) for e in readback.raw_events(f)
              if e.HasField("graph_def")]
    assert len(graphs) == 1


def test_the_count_comes_from_the_loader_when_the_optimizer_cannot_say():
    from types import SimpleNamespace

    from gluon_tb.handlers._options.resume import _batches_trained

    no_count = SimpleNamespace(trainer=None)
    four = list(range(4))  # a loader of 4 batches an epoch
    assert _batches_trained(no_count, four, 1, 7) == 8  # named one short (first launch resumed)
    assert _batches_trained(no_count, four, 1, 8) == 8
    assert _batches_trained(no_count, None, 1, 7) == 7  # nothing to tell: the name
    counted = SimpleNamespace(trainer=SimpleNamespace(optimizer=SimpleNamespace(num_update=8)))
    assert _batches_trained(counted, None, 1, 7) == 8
    assert _batches_trained(counted, None, 1, 30) == 30  # a count that does not fit the name: the name


@pytest.mark.parametrize("first_resume", [1, 0])
def test_a_fit_by_batches_resumes_at_the_next_batch_whatever_the_first_launch(tmp_path, first_resume):
    """``fit(batches=)`` checkpoints name the last trained batch's index either way (``epoch1batch5``
    after 6 batches): the next batch is that index + 1."""
    import test_estimator_configs as t

    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    crashed = t.run_script(d, m, "batches", 12, first_resume, 8)  # checkpoints after batches 2 and 5, dies at 7
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    assert sorted(f for f in os.listdir(m) if f.endswith(".params"))[-1] == "m-epoch1batch5.params"
    second = t.run_script(d, m, "batches", 12, 1, 0)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "CheckpointHandler (epoch 1, batch 5)" in second.stdout
    assert [s for s, _ in readback.scalars(d, "train_batch", "batch_loss")] == list(range(12))
    newest = readback.event_files(os.path.join(d, "train_batch"))[-1]
    assert {e.step for e in readback.raw_events(newest) if e.summary.value} == set(range(6, 12))
