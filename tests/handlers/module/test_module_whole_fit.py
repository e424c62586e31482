"""TensorBoardCallback through whole ``Module.fit`` runs, read back: every see-inside option at once
(the exact runs, tags and steps), what is on disk when ``fit`` returns, the ``module_digits``
example and a ``BucketingModule``. Each option alone, under both adapters, is tested in
``tests/handlers/options/`` (``test_conv_filters.py``, ``test_embeddings.py``, ``test_grad_health.py``)."""
import os

import mxnet as mx
import pytest

import readback
import repo_paths
from gluon_tb.handlers import Embeddings, TensorBoardCallback
from gluon_tb.writer import SummaryWriter
from module_setup import BATCH, EPOCHS, LR, PARAMS, data, fit, steps, symbol


# ------------------------------------------------------------ the layout with every option
def test_every_option_exact_runs_tags_and_steps(tmp_path):
    d = str(tmp_path)
    fit(TensorBoardCallback(d, conv_filters=True, embeddings=Embeddings(20, every=1), grad_health=True,
                            histogram_period=3))
    checks = [0, 3, 6]
    expected = {("train", "__run_graph__"): [0], ("train_batch", "batch_accuracy"): list(range(8)),
                ("train", "epoch_accuracy"): [0, 1], ("validation", "epoch_accuracy"): [0, 1],
                ("train", "conv_filters/conv1"): [0, 1], ("train", "feature_maps/conv1"): [0, 1],
                **{("train", t): [0, 1] for t in readback.EPOCH_EXTRAS}}
    for p in PARAMS:
        expected[("train_batch", f"weights/{p}")] = expected[("train_batch", f"gradients/{p}")] = checks
    for kind in ("grad_norm", "weight_norm", "update_ratio"):
        for p in PARAMS + ["global"]:
            expected[("train_batch", f"{kind}/{p}")] = checks
    assert steps(d) == expected
    assert sorted(os.listdir(d)) == ["train", "train_batch", "validation"]
    assert sorted(os.listdir(os.path.join(d, "train", "embedding"))) == ["00000", "00001"]


# ------------------------------------------------------------ the end of fit
@pytest.mark.parametrize("eval_data", [True, False])
def test_last_epoch_is_on_disk_when_fit_returns_without_close(tmp_path, eval_data):
    d = str(tmp_path)
    cb = TensorBoardCallback(d, flush_secs=3600)  # nothing is written by time in this test
    try:
        fit(cb, eval_data=eval_data, close=False)
        run = "validation" if eval_data else "train"
        assert [s for s, _ in readback.scalars(d, run, "epoch_accuracy")] == [0, 1]
        assert [e.step for e in readback.tensor_events(d, "train_batch", "weights/fc2_weight")] == [3, 7]
    finally:
        cb.close()


def test_fit_ends_with_a_flush_of_every_run_after_the_last_values(tmp_path, monkeypatch):
    """The writer thread may write earlier on its own; what fit guarantees is this flush."""
    order = []
    for name in ("add_scalar", "flush"):
        inner = getattr(SummaryWriter, name)

        def spy(self, *a, _inner=inner, _name=name, **k):
            order.append((_name, os.path.basename(self.logdir)) + tuple(a[:1]) + tuple(a[2:3]))
            return _inner(self, *a, **k)
        monkeypatch.setattr(SummaryWriter, name, spy)
    d = str(tmp_path)
    cb = TensorBoardCallback(d, flush_secs=3600, batch_period=None)
    try:
        fit(cb, close=False)
        root = os.path.basename(d)  # the runs' writers share one queue: one flush writes them all
        assert order[-8:] == [("add_scalar", "train", "epoch_accuracy", 1),
                              ("add_scalar", "train", "epoch_learning_rate", 1),
                              ("add_scalar", "train", "epoch_samples_per_second", 1),
                              ("add_scalar", "train", "epoch_input_wait_seconds", 1),
                              ("add_scalar", "train", "epoch_batch_seconds", 1),
                              ("add_scalar", "train", "epoch_input_wait_fraction", 1),
                              ("add_scalar", "validation", "epoch_accuracy", 1),
                              ("flush", root)]
        assert [o for o in order if o[0] == "flush"] == [("flush", root)]
    finally:
        cb.close()


# ------------------------------------------------------------ the example and BucketingModule


def test_module_example_runs_offline(tmp_path):
    import runpy

    d = str(tmp_path / "digits")
    runpy.run_path(os.path.join(repo_paths.EXAMPLES, "module_digits.py"),
                   run_name="example")["main"](["--logdir", d, "--epochs", "2"])
    got = steps(d)
    assert got[("train_batch", "grad_norm/global")] == [22, 45]  # 1438 digits in 23 batches of 64
    assert got[("validation", "epoch_accuracy")] == [0, 1]
    assert os.listdir(os.path.join(d, "train", "embedding")) == ["00001"]
    rows = open(os.path.join(d, "train", "embedding", "00001", "metadata.tsv")).read().splitlines()
    assert len(rows) == 301 and rows[0] == "label\tpredicted"


def test_bucketing_module_gets_the_same_tags(tmp_path):
    """BucketingModule trains through its current Module: the options reach its executors."""
    class Bucketed(mx.io.NDArrayIter):  # what BucketingModule reads of each batch
        default_bucket_key = 0

        def next(self):
            b = super().next()
            b.bucket_key, b.provide_data, b.provide_label = 0, self.provide_data, self.provide_label
            return b

    d = str(tmp_path)
    x, y, xv, yv = data()
    train = Bucketed(x, y, BATCH, label_name="softmax_label")
    val = Bucketed(xv, yv, BATCH, label_name="softmax_label")
    mod = mx.mod.BucketingModule(lambda key: (symbol(), ("data",), ("softmax_label",)),
                                 default_bucket_key=0, context=mx.cpu())
    cb = TensorBoardCallback(d, conv_filters=True, embeddings=8, grad_health=True, histogram_period=4,
                             graph=False)
    mod.fit(train, eval_data=val, num_epoch=EPOCHS, optimizer="sgd", optimizer_params={"learning_rate": LR},
            initializer=mx.init.Xavier(), batch_end_callback=cb, epoch_end_callback=cb.epoch_end,
            eval_end_callback=cb.eval_end)
    cb.close()
    got = steps(d)
    assert got[("train_batch", "grad_norm/global")] == got[("train_batch", "weights/fc1_weight")] == [0, 4]
    assert got[("train", "feature_maps/conv1")] == [0, 1]
    assert len({t for r, t in got if t.startswith("update_ratio/")}) == len(PARAMS) + 1
    assert os.listdir(os.path.join(d, "train", "embedding")) == ["00001"]
