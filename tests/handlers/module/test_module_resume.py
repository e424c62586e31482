"""TensorBoardCallback continues its steps: a ``Module.fit`` resumed in a new process
(``begin_epoch``), a second ``fit`` with the same callback, ``initial_epoch``/``initial_step``.

Read back through TensorBoard's loader; each step must appear exactly once.
"""
import logging
import os
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest

import readback
import tb_server
from gluon_tb.handlers import TensorBoardCallback
from gluon_tb.handlers._options.resume import batches_before

HERE = os.path.dirname(os.path.abspath(__file__))
N, BATCH, CLASSES = 40, 4, 3  # 10 batches an epoch
PARAMS = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def arrays(n=N, seed=0):
    rs = np.random.RandomState(seed)
    return rs.rand(n, 6).astype("float32"), rs.randint(0, CLASSES, n).astype("float32")


def iters(n=N, handle="pad"):
    x, y = arrays(n)
    xv, yv = arrays(12, seed=1)
    return (mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label", last_batch_handle=handle),
            mx.io.NDArrayIter(xv, yv, BATCH, label_name="softmax_label"))


def module():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=5, name="fc1"), act_type="relu")
    out = mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc2")
    return mx.mod.Module(mx.sym.SoftmaxOutput(out, name="softmax"), context=mx.cpu())


class Opaque(mx.io.DataIter):
    """A DataIter that tells nothing of its length (like a record file reader)."""

    def __init__(self, inner):
        super().__init__(inner.batch_size)
        self._it = inner

    provide_data = property(lambda self: self._it.provide_data)
    provide_label = property(lambda self: self._it.provide_label)

    def reset(self):
        self._it.reset()

    def next(self):
        return self._it.next()


class Sized(Opaque):
    def __init__(self, inner, n):
        super().__init__(inner)
        self._n = n

    def __len__(self):
        return self._n


def fit(cb, train=None, crash_at=0, **kw):
    """``mod.fit`` with ``cb`` in all three places; ``crash_at``: raise at that batch of this fit."""
    t, val = iters()
    seen = [0]

    def boom(param):
        seen[0] += 1
        if seen[0] == crash_at:
            raise RuntimeError("boom")

    mod = kw.pop("mod", None) or module()
    mx.random.seed(0)
    mod.fit(train or t, eval_data=val, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
            initializer=mx.init.Xavier(), batch_end_callback=[cb, boom], epoch_end_callback=cb.epoch_end,
            eval_end_callback=cb.eval_end, **kw)
    return mod


def steps(d, run, tag):
    return [e.step for e in readback.tensor_events(d, run, tag)]


def assert_steps(d, batches, epochs, hists, train_epochs=None):
    assert steps(d, "train_batch", "batch_accuracy") == batches
    assert steps(d, "train", "epoch_accuracy") == (epochs if train_epochs is None else train_epochs)
    assert steps(d, "validation", "epoch_accuracy") == epochs
    for p in PARAMS:
        assert steps(d, "train_batch", f"weights/{p}") == hists, p


def purges(run_dir):
    """``[(file index, step)]`` of the purges (SessionLog.START; the writer writes each twice)."""
    from tensorboard.compat.proto import event_pb2

    return sorted({(i, e.step) for i, f in enumerate(readback.event_files(run_dir)) for e in readback.raw_events(f)
            if e.HasField("session_log") and e.session_log.status == event_pb2.SessionLog.START})


# ------------------------------------------------------------ a new process resumes
SCRIPT = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.filterwarnings("ignore")
    import mxnet as mx
    import test_module_resume as t
    from gluon_tb.handlers import TensorBoardCallback

    logdir, prefix, load, num_epoch, crash_at = sys.argv[2:7]
    load, num_epoch, crash_at = int(load), int(num_epoch), int(crash_at)
    seen = [0]

    def crash(param):
        seen[0] += 1
        if seen[0] == crash_at:
            raise SystemExit(3)  # the process dies here; its writers are flushed at exit

    arg = aux = None
    if load:
        _, arg, aux = mx.model.load_checkpoint(prefix, load)
    mx.random.seed(0)
    train, val = t.iters()
    cb = TensorBoardCallback(logdir)
    t.module().fit(train, eval_data=val, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
                   initializer=mx.init.Xavier(), arg_params=arg, aux_params=aux, begin_epoch=load,
                   num_epoch=num_epoch, batch_end_callback=[cb, crash], eval_end_callback=cb.eval_end,
                   epoch_end_callback=[cb.epoch_end, mx.callback.do_checkpoint(prefix)])
    cb.close()
    print("resumed_from", cb.resumed_from)
""")


def run_script(logdir, prefix, load, num_epoch, crash_at=0):
    return subprocess.run([sys.executable, "-c", SCRIPT, HERE, logdir, prefix, str(load), str(num_epoch),
                           str(crash_at)], capture_output=True, text=True, timeout=300)


def test_a_new_process_with_begin_epoch_continues_the_steps(tmp_path):
    d, prefix = str(tmp_path / "logs"), str(tmp_path / "m")
    first = run_script(d, prefix, 0, 3)
    assert first.returncode == 0, first.stderr[-3000:]
    before = readback.scalars(d, "train_batch", "batch_accuracy")
    assert [s for s, _ in before] == list(range(30))
    second = run_script(d, prefix, 3, 5)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed_from begin_epoch=3 and the length of NDArrayIter" in second.stdout
    assert_steps(d, list(range(50)), [0, 1, 2, 3, 4], [9, 19, 29, 39, 49])
    assert readback.scalars(d, "train_batch", "batch_accuracy")[:30] == before  # the first process's points stay
    # the resumed process's first files purge at its first batch and at its first epoch
    assert purges(os.path.join(d, "train_batch")) == [(1, 30)]
    assert purges(os.path.join(d, "train")) == purges(os.path.join(d, "validation")) == [(1, 3)]


def test_a_resume_hides_what_a_crashed_process_logged_after_the_checkpoint(tmp_path):
    d, prefix = str(tmp_path / "logs"), str(tmp_path / "m")
    crashed = run_script(d, prefix, 0, 5, crash_at=36)  # checkpoints 1, 2, 3; dies after batch 35
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    assert_steps(d, list(range(36)), [0, 1, 2], [9, 19, 29])
    second = run_script(d, prefix, 2, 5)  # from an older checkpoint: epoch 2 and batches 20-35 again
    assert second.returncode == 0, second.stderr[-3000:]
    # each batch, histogram and epoch once: train_batch is purged at the batch index, train and
    # validation at the epoch, so the crashed process's epoch 2 is hidden too
    assert_steps(d, list(range(50)), [0, 1, 2, 3, 4], [9, 19, 29, 39, 49])
    files = readback.event_files(os.path.join(d, "train_batch"))
    assert len(files) == 2
    newest = {e.step for e in readback.raw_events(files[-1]) if e.summary.value}
    assert set(range(20, 50)) <= newest  # batches 20-35 shown are the resumed process's
    # TensorBoard's default loader, the Rust data server, shows the same steps and values
    want = {k: readback.scalars(d, *k) for k in [("train_batch", "batch_accuracy"), ("train", "epoch_accuracy"),
                                                  ("validation", "epoch_accuracy")]}
    got = tb_server.served_scalars(d, list(want), [[s for s, _ in v] for v in want.values()])
    assert got == {k: [(s, pytest.approx(v, rel=1e-6)) for s, v in pts] for k, pts in want.items()}


# ------------------------------------------------------------ one process, one callback, several fits
def test_a_second_fit_with_the_same_callback_continues(tmp_path):
    d = str(tmp_path)
    cb = TensorBoardCallback(d)
    mod = fit(cb, num_epoch=2)
    fit(cb, mod=mod, num_epoch=2)  # Module numbers these epochs 0 and 1 again
    cb.close()
    assert_steps(d, list(range(40)), [0, 1, 2, 3], [9, 19, 29, 39])
    assert cb.resumed_from == ""
    assert purges(os.path.join(d, "train")) == [] and purges(os.path.join(d, "validation")) == []
    assert purges(os.path.join(d, "train_batch")) == []


def test_a_refit_after_a_fit_that_raised_continues(tmp_path):
    d = str(tmp_path)
    cb = TensorBoardCallback(d)
    with pytest.raises(RuntimeError, match="boom"):
        fit(cb, num_epoch=3, crash_at=14)  # epoch 0 done; epoch 1 raises after its batch 3 (global 13)
    fit(cb, num_epoch=1)
    cb.close()
    assert_steps(d, list(range(24)), [0, 1], [9, 23])


def test_begin_epoch_beyond_the_next_epoch_wins(tmp_path):
    d = str(tmp_path)
    cb = TensorBoardCallback(d, weights=False)
    mod = fit(cb, num_epoch=1)
    fit(cb, mod=mod, begin_epoch=3, num_epoch=4)
    cb.close()
    assert steps(d, "train", "epoch_accuracy") == [0, 3]
    assert steps(d, "validation", "epoch_accuracy") == [0, 3]
    assert steps(d, "train_batch", "batch_accuracy") == list(range(20))  # batches go on, no gap


# ------------------------------------------------------------ batches per epoch; initial_*
def test_batches_before_reads_the_iterators_length():
    x, y = arrays(42)
    nd = lambda h: mx.io.NDArrayIter(x, y, 4, last_batch_handle=h)  # noqa: E731
    assert batches_before(nd("pad"), 3) == 33  # 11 batches, the last one padded
    assert batches_before(nd("discard"), 3) == 30
    assert batches_before(nd("roll_over"), 3) == 31  # 126 samples in one process: 31 whole batches
    assert batches_before(mx.io.ResizeIter(nd("pad"), 7), 3) == 21
    assert batches_before(Sized(nd("pad"), 5), 3) == 15
    assert batches_before(Opaque(nd("pad")), 3) is None
    assert batches_before(Sized(nd("pad"), 0), 3) is None
    assert batches_before(None, 3) is None


@pytest.mark.parametrize("handle, first", [("pad", 22), ("discard", 20)])
def test_begin_epoch_in_a_fresh_callback_starts_at_its_batches(tmp_path, handle, first):
    d = str(tmp_path)
    train, _ = iters(42, handle)  # 11 batches an epoch ("pad") or 10 ("discard")
    with TensorBoardCallback(d, weights=False) as cb:
        fit(cb, train=train, begin_epoch=2, num_epoch=3)
    assert steps(d, "train_batch", "batch_accuracy") == list(range(first, first + first // 2))
    assert steps(d, "train", "epoch_accuracy") == [2]
    assert purges(os.path.join(d, "train_batch")) == [(0, first)]
    assert purges(os.path.join(d, "train")) == purges(os.path.join(d, "validation")) == [(0, 2)]


def test_an_iterator_without_a_length_starts_at_0_and_says_how_to_set_it(tmp_path, caplog):
    d = str(tmp_path / "a")
    train, _ = iters()
    with caplog.at_level(logging.INFO, logger="gluon_tb.handlers"):
        with TensorBoardCallback(d, weights=False) as cb:
            fit(cb, train=Opaque(train), begin_epoch=2, num_epoch=4)
    said = [r.getMessage() for r in caplog.records if "initial_step" in r.getMessage()]
    assert len(said) == 1 and "Opaque" in said[0] and "epoch 2" in said[0], said
    assert cb.resumed_from == "begin_epoch=2 and no known length of Opaque"
    assert steps(d, "train_batch", "batch_accuracy") == list(range(20))
    assert steps(d, "train", "epoch_accuracy") == [2, 3]
    assert purges(os.path.join(d, "train_batch")) == []  # a purge at 0 would hide every earlier point
    assert purges(os.path.join(d, "train")) == purges(os.path.join(d, "validation")) == [(0, 2)]
    # the advice taken: initial_step continues them
    d = str(tmp_path / "b")
    train, _ = iters()
    with TensorBoardCallback(d, weights=False, initial_step=20) as cb:
        fit(cb, train=Opaque(train), begin_epoch=2, num_epoch=3)
    assert steps(d, "train_batch", "batch_accuracy") == list(range(20, 30))
    assert cb.resumed_from == "initial_epoch/initial_step"


def test_initial_epoch_and_step(tmp_path):
    d = str(tmp_path / "both")
    with TensorBoardCallback(d, initial_epoch=5, initial_step=100) as cb:
        fit(cb, num_epoch=1)
    assert_steps(d, list(range(100, 110)), [5], [109])
    assert purges(os.path.join(d, "train_batch")) == [(0, 100)]
    assert purges(os.path.join(d, "train")) == [(0, 5)]
    d = str(tmp_path / "epoch")
    with TensorBoardCallback(d, weights=False, initial_epoch=5) as cb:
        fit(cb, num_epoch=2)  # the batch index follows the epoch: 5 x 10 batches
    assert steps(d, "train_batch", "batch_accuracy") == list(range(50, 70))
    assert steps(d, "validation", "epoch_accuracy") == [5, 6]


@pytest.mark.parametrize("kw, err, msg", [
    ({"initial_step": -1}, ValueError, "initial_step must be None or an int >= 0, got -1"),
    ({"initial_epoch": "3"}, TypeError, "initial_epoch must be None or an int >= 0, got str"),
    ({"initial_epoch": True}, TypeError, "initial_epoch must be None or an int >= 0, got bool"),
    ({"initial_step": 2.0}, TypeError, "initial_step must be None or an int >= 0, got float"),
    ({"initial_step": 2**63}, ValueError, r"initial_step must be at most 2\*\*63 - 1"),
])
def test_initial_arguments_are_checked_up_front(tmp_path, kw, err, msg):
    with pytest.raises(err, match=msg):
        TensorBoardCallback(str(tmp_path), **kw)
    assert os.listdir(tmp_path) == []
