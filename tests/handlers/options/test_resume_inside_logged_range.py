"""A training resumed inside the range it already logged: each epoch once and
the abandoned points hidden, in TensorBoard's Python reader and in its Rust loader alike.

Epoch points (step: the epoch) and batch points (step: the global batch) live in runs of their own
(``train`` and ``train_batch``), so a resumed process purges each at its own step; ``validation``
is purged at the epoch like ``train``. What the two loaders do with a resumed run:

* the Python reader (``EventAccumulator``, files of ``brain.Event:2``) hides every point of the
  run at or after the step of a ``SessionLog.START``; a step that goes back is not purged;
* the Rust loader (``--load_fast``, TensorBoard's default) ignores ``SessionLog.START``; it drops
  a series' points at or after a step when a point at that step (or before it) comes again.

Both set-ups resume with another learning rate than the first process trained with, so the values
shown tell which process logged them. A recorder beside the handler keeps what each process computed.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import readback
import tb_server

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------ Module.fit, like fit.py --load-epoch
MODULE = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.filterwarnings("ignore")
    import mxnet as mx
    import test_module_resume as t
    from gluon_tb.handlers import TensorBoardCallback

    logdir, prefix, load, num_epoch, lr = sys.argv[2:7]
    load, num_epoch, lr = int(load), int(num_epoch), float(lr)
    rec = {"train": [], "validation": [], "batches": 0}

    def on_batch(param):
        rec["batches"] += 1
        if param.locals["end_of_batch"]:
            rec["train"].append(param.eval_metric.get_global_name_value()[0][1])

    arg = aux = None
    if load:
        _, arg, aux = mx.model.load_checkpoint(prefix, load)
    mx.random.seed(0)
    train, val = t.iters()
    cb = TensorBoardCallback(logdir)
    t.module().fit(train, eval_data=val, optimizer="sgd", optimizer_params={"learning_rate": lr},
                   initializer=mx.init.Xavier(), arg_params=arg, aux_params=aux, begin_epoch=load,
                   num_epoch=num_epoch, batch_end_callback=[cb, on_batch],
                   eval_end_callback=[cb.eval_end,
                                      lambda p: rec["validation"].append(p.eval_metric.get_name_value()[0][1])],
                   epoch_end_callback=[cb.epoch_end, mx.callback.do_checkpoint(prefix)])
    cb.close()
    print(json.dumps(rec))
""")


def run(script, *args):
    p = subprocess.run([sys.executable, "-c", script, HERE, *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def both_loaders(d, want):
    """``want``: ``{(run, tag): [(step, value)]}``; the Python reader and the Rust loader return it."""
    for key, pts in want.items():
        assert readback.scalars(d, *key) == [(s, pytest.approx(v, rel=1e-5)) for s, v in pts], key
    got = tb_server.served_scalars(d, list(want), [[s for s, _ in v] for v in want.values()], load_fast="true")
    assert got == {k: [(s, pytest.approx(v, rel=1e-5)) for s, v in pts] for k, pts in want.items()}


def test_module_fit_resumed_at_an_epoch_it_logged(tmp_path):
    d, prefix = str(tmp_path / "logs"), str(tmp_path / "m")
    first = run(MODULE, d, prefix, 0, 5, 0.1)  # epochs 0-4, a checkpoint after each
    second = run(MODULE, d, prefix, 2, 5, 0.3)  # fit.py --load-epoch 2: epochs 2-4 again, another rate
    assert first["batches"] == 50 and second["batches"] == 30
    assert first["train"][2:] != second["train"]  # the values tell the processes apart
    both_loaders(d, {
        ("train", "epoch_accuracy"): list(enumerate(first["train"][:2] + second["train"])),
        ("validation", "epoch_accuracy"): list(enumerate(first["validation"][:2] + second["validation"])),
        ("train", "epoch_learning_rate"): list(enumerate([0.1, 0.1, 0.3, 0.3, 0.3]))})
    assert [s for s, _ in readback.scalars(d, "train_batch", "batch_accuracy")] == list(range(50))
    files = readback.event_files(os.path.join(d, "train_batch"))
    assert len(files) == 2  # batches 20-49 shown are the second process's
    assert {e.step for e in readback.raw_events(files[-1]) if e.summary.value} == set(range(20, 50))


# ------------------------------------------------------------ Estimator, checkpoints two epochs apart
ESTIMATOR = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.filterwarnings("ignore")
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon.contrib.estimator import CheckpointHandler
    from mxnet.gluon.contrib.estimator.event_handler import BatchEnd, EpochEnd, TrainBegin
    import test_estimator_configs as t
    from gluon_tb.handlers import TensorBoardHandler

    logdir, model_dir, epochs, lr = sys.argv[2:6]

    class Recorder(BatchEnd, EpochEnd):
        priority = 2000  # after gluon_tb (1000)
        def __init__(self):
            self.batches, self.train, self.val = [], [], []
        def batch_end(self, estimator, *a, **k):
            self.batches.append(float(sum(l.mean().asscalar() for l in k["loss"]) / len(k["loss"])))
        def epoch_end(self, estimator, *a, **k):
            self.train.append(estimator.train_metrics[0].get()[1])
            self.val.append(estimator.val_metrics[0].get()[1])

    mx.random.seed(0)
    ctx = [mx.cpu()]
    net = t.make_net(ctx)
    est = t.make_est(net, ctx)
    class SetRate(TrainBegin):
        priority = 1  # after CheckpointHandler (0) restored the trainer's states, rate included
        def train_begin(self, estimator, *a, **k):
            estimator.trainer.set_learning_rate(float(lr))

    ck = CheckpointHandler(model_dir, model_prefix="m", epoch_period=2, resume_from_checkpoint=True)
    rec = Recorder()
    est.fit(t.loader(), val_data=t.loader(32, seed=1), epochs=int(epochs),
            event_handlers=[ck, SetRate(), TensorBoardHandler(logdir, images=False), rec])
    print(json.dumps({"batches": rec.batches, "train": rec.train, "val": rec.val}))
""")


def test_estimator_resumed_from_checkpoints_two_epochs_apart(tmp_path):
    d, m = str(tmp_path / "logs"), str(tmp_path / "model")
    first = run(ESTIMATOR, d, m, 5, 0.1)  # epochs 0-4 logged; checkpoints after epochs 1 and 3
    second = run(ESTIMATOR, d, m, 6, 0.3)  # resumes after epoch 3: epochs 4 and 5, 4 a second time
    assert len(first["batches"]) == 20 and len(second["batches"]) == 8  # 4 batches an epoch
    assert first["batches"][16:] != pytest.approx(second["batches"][:4], rel=1e-3)  # tells the processes apart
    both_loaders(d, {
        ("train", "epoch_accuracy"): list(enumerate(first["train"][:4] + second["train"])),
        ("validation", "epoch_accuracy"): list(enumerate(first["val"][:4] + second["val"])),
        ("train", "epoch_learning_rate"): list(enumerate([0.1] * 4 + [0.3] * 2)),
        ("train_batch", "batch_loss"): list(enumerate(first["batches"][:16] + second["batches"]))})
    for p in ("net_dense0_weight", "net_conv0_bias"):  # epoch 4's histograms are the second process's too
        assert [e.step for e in readback.tensor_events(d, "train_batch", f"gradients/{p}")] == [3, 7, 11, 15, 19, 23]
    graphs = [e for f in readback.event_files(os.path.join(d, "train")) for e in readback.raw_events(f)
              if e.HasField("graph_def")]
    assert len(graphs) == 1
