"""TensorBoardCallback in each of ``Module.fit``'s four slots: the right thing, or a warning that says
what to pass; and ``cb.fit_callbacks()``, which fills every slot, merged with the user's."""
import logging

import mxnet as mx
import pytest

import readback
from gluon_tb.handlers import TensorBoardCallback
from test_module_callback import BATCH, PARAMS, Oracle, iters, module

ALL = {("train", t) for t in ["epoch_accuracy", "__run_graph__", *readback.EPOCH_EXTRAS]} | {
    ("train_batch", t) for t in ["batch_accuracy"] + [f"{k}/{p}" for k in ("weights", "gradients") for p in PARAMS]
} | {("validation", "epoch_accuracy")}
HISTOGRAMS = {("train", "__run_graph__")} | {("train_batch", f"weights/{p}") for p in PARAMS}
EVERY_SLOT = "or every slot at once with mod.fit(..., **cb.fit_callbacks())"


def run(logdir, slots, caplog):
    """Module.fit (4 batches per epoch, 2 epochs, validation) with the callbacks ``slots(cb)`` gives."""
    train, val = iters()
    cb = TensorBoardCallback(logdir)
    oracle = Oracle()
    kw = slots(cb)
    kw["batch_end_callback"] = [oracle.on_batch] + list(kw.get("batch_end_callback", []))
    kw["eval_end_callback"] = [oracle.on_eval] + list(kw.get("eval_end_callback", []))
    with caplog.at_level(logging.INFO):
        module().fit(train, eval_data=val, num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
                     initializer=mx.init.Xavier(), **kw)
    cb.close()
    return oracle, [r.getMessage() for r in caplog.records
                    if r.name.startswith("gluon_tb") and r.levelno >= logging.WARNING]


def assert_whole_training(logdir, oracle):
    """Every tag, each at the steps and with the values of a callback in the right slots."""
    assert readback.tags(logdir) == ALL
    batch = readback.scalars(logdir, "train_batch", "batch_accuracy")
    assert [s for s, _ in batch] == list(range(8))
    assert [v for _, v in batch] == pytest.approx([b[0][1] for b in oracle.batch])
    train = readback.scalars(logdir, "train", "epoch_accuracy")
    assert train == [(0, pytest.approx(oracle.train[0][0][1])), (1, pytest.approx(oracle.train[1][0][1]))]
    val = readback.scalars(logdir, "validation", "epoch_accuracy")
    assert val == [(0, pytest.approx(oracle.val[0][0][1])), (1, pytest.approx(oracle.val[1][0][1]))]
    for p in PARAMS:
        assert [e.step for e in readback.tensor_events(logdir, "train_batch", f"weights/{p}")] == [3, 7]


RIGHT_THING = {
    # the object itself as eval_end_callback: MXNet's score() calls it, and it logs the validation values
    "eval_end_callback=cb": lambda cb: dict(batch_end_callback=[cb], epoch_end_callback=cb.epoch_end,
                                            eval_end_callback=[cb]),
    # eval_end as batch_end_callback: called with fit's BatchEndParam, it logs the batch
    "batch_end_callback=cb.eval_end": lambda cb: dict(batch_end_callback=[cb.eval_end],
                                                      epoch_end_callback=cb.epoch_end,
                                                      eval_end_callback=[cb.eval_end]),
    # epoch_end as batch_end_callback: was a TypeError (tuple + int)
    "batch_end_callback=cb.epoch_end": lambda cb: dict(batch_end_callback=[cb.epoch_end],
                                                       epoch_end_callback=cb.epoch_end,
                                                       eval_end_callback=[cb.eval_end]),
    # every slot swapped: still the right thing
    "all swapped": lambda cb: dict(batch_end_callback=[cb.eval_end], epoch_end_callback=cb,
                                   eval_end_callback=[cb.epoch_end]),
    "fit_callbacks()": lambda cb: cb.fit_callbacks(),
    # eval_end as epoch_end_callback: MXNet calls it with 4 arguments (was a TypeError after epoch 0)
    "epoch_end_callback=cb.eval_end": lambda cb: dict(batch_end_callback=[cb], epoch_end_callback=cb.eval_end,
                                                      eval_end_callback=[cb.eval_end]),
}


@pytest.mark.parametrize("slots", list(RIGHT_THING.values()), ids=list(RIGHT_THING))
def test_a_callback_in_a_wrong_slot_does_what_that_slot_needs(tmp_path, caplog, slots):
    oracle, said = run(str(tmp_path), slots, caplog)
    assert_whole_training(str(tmp_path), oracle)
    assert said == []


def test_eval_batch_end_callback_logs_nothing_and_says_what_to_pass(tmp_path, caplog):
    """Validation batches used to be logged as training batches (steps 8, 9, ... of batch_accuracy)."""
    oracle, said = run(str(tmp_path), lambda cb: dict(**cb.fit_callbacks(), eval_batch_end_callback=cb),
                       caplog)
    assert_whole_training(str(tmp_path), oracle)  # no validation batch among the training batches
    assert said == ["gluon_tb: TensorBoardCallback was passed as eval_batch_end_callback, which MXNet calls after "
                    "every validation batch; it logs nothing there. Pass eval_end_callback=cb.eval_end for the "
                    f"validation values, {EVERY_SLOT}"]  # once, not once per validation batch


def test_eval_end_method_as_eval_batch_end_callback_warns_too(tmp_path, caplog):
    oracle, said = run(str(tmp_path), lambda cb: dict(batch_end_callback=[cb], epoch_end_callback=cb.epoch_end,
                                                      eval_batch_end_callback=cb.eval_end), caplog)
    assert readback.tags(str(tmp_path)) == ALL - {("validation", "epoch_accuracy")}
    assert [s for s, _ in readback.scalars(str(tmp_path), "train_batch", "batch_accuracy")] == list(range(8))
    assert said == [
        f"gluon_tb: TensorBoardCallback is not in fit's eval_end_callback, so validation values are not logged; "
        f"pass eval_end_callback=cb.eval_end, {EVERY_SLOT}",
        "gluon_tb: TensorBoardCallback was passed as eval_batch_end_callback, which MXNet calls after "
        "every validation batch; it logs nothing there. Pass eval_end_callback=cb.eval_end for the "
        f"validation values, {EVERY_SLOT}"]


def test_epoch_end_callback_alone_says_what_to_pass(tmp_path, caplog):
    """No scalars at all used to come with no word."""
    _, said = run(str(tmp_path), lambda cb: dict(epoch_end_callback=cb), caplog)
    assert readback.tags(str(tmp_path)) == HISTOGRAMS
    assert said == ["gluon_tb: TensorBoardCallback is not in fit's batch_end_callback, so no training values are "
                    f"logged; pass batch_end_callback=cb, {EVERY_SLOT}"]


def test_batch_end_callback_alone_names_the_missing_slots(tmp_path, caplog):
    _, said = run(str(tmp_path), lambda cb: dict(batch_end_callback=[cb]), caplog)
    assert readback.tags(str(tmp_path)) == {("train_batch", "batch_accuracy"), ("train", "__run_graph__")} | {
        ("train_batch", f"gradients/{p}") for p in PARAMS}  # taken in the batch callback
    assert said == [
        "gluon_tb: TensorBoardCallback is not in fit's epoch_end_callback, so epoch_* values and weight "
        f"histograms are not logged; pass epoch_end_callback=cb.epoch_end, {EVERY_SLOT}",
        "gluon_tb: TensorBoardCallback is not in fit's eval_end_callback, so validation values are not logged; "
        f"pass eval_end_callback=cb.eval_end, {EVERY_SLOT}"]


def test_fit_callbacks_merges_the_users_callbacks_after_its_own(tmp_path, caplog):
    cb = TensorBoardCallback(str(tmp_path))
    speed = mx.callback.Speedometer(BATCH, 1, auto_reset=True)
    epochs = []

    def saved(epoch, symbol, arg_params, aux_params):
        epochs.append(epoch)

    kw = cb.fit_callbacks(batch_end_callback=[speed], epoch_end_callback=saved)
    assert kw == {"batch_end_callback": [cb, speed], "epoch_end_callback": [cb.epoch_end, saved],
                  "eval_end_callback": [cb.eval_end]}
    assert cb.fit_callbacks(batch_end_callback=(cb, speed), eval_batch_end_callback=[cb.eval_end]) == \
        cb.fit_callbacks(batch_end_callback=[speed])  # its own entries are not listed twice
    cb.close()

    oracle, said = run(str(tmp_path), lambda cb: cb.fit_callbacks(batch_end_callback=[speed],
                                                                   epoch_end_callback=saved), caplog)
    assert_whole_training(str(tmp_path), oracle)
    assert epochs == [0, 1]
    # Speedometer ran: it reports from the second batch of each epoch on (its first call only starts its clock)
    assert len([r for r in caplog.records if "Speed: " in r.getMessage()]) == 6
    assert said == []


@pytest.mark.parametrize("kw,word", [
    (dict(batch_end_callback=3), "batch_end_callback must be a callable or a list of callables, got int 3"),
    (dict(eval_end_callback=[print, "x"]), "eval_end_callback must be a callable or a list of callables, got str"),
])
def test_fit_callbacks_checks_its_arguments(kw, word):
    with pytest.raises(TypeError, match=word):
        TensorBoardCallback("x").fit_callbacks(**kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_callback'"):
        TensorBoardCallback("x").fit_callbacks(batch_callback=print)


def test_slot_of_reads_what_mxnet_passes():
    """The unit under the tests above: fit's and score()'s locals, as MXNet 1.9.1 passes them."""
    from mxnet.model import BatchEndParam

    from gluon_tb.handlers._module.slots import BATCH_END, EVAL_BATCH_END, EVAL_END, slot_of

    cb, m = TensorBoardCallback("x"), object()
    wrapped = lambda p: cb(p)  # noqa: E731 - the user's own wrapper: found from the counters

    def param(n, loc):
        return BatchEndParam(epoch=0, nbatch=n, eval_metric=None, locals=loc)

    assert slot_of(param(0, dict(self=m, train_data=1, eval_end_callback=None)), cb) == BATCH_END
    score = dict(self=m, score_end_callback=[cb.eval_end], batch_end_callback=None, nbatch=1)
    assert slot_of(param(2, score), cb) == EVAL_END
    assert slot_of(param(1, dict(score, score_end_callback=None, batch_end_callback=cb)), cb) == EVAL_BATCH_END
    both = dict(score, score_end_callback=wrapped, batch_end_callback=[wrapped])
    assert slot_of(param(1, both), cb) == EVAL_BATCH_END  # score() counts the batch after its callbacks
    assert slot_of(param(2, both), cb) == EVAL_END
    empty = {k: v for k, v in both.items() if k != "nbatch"}
    assert slot_of(param(0, empty), cb) == EVAL_END  # empty eval_data: score()'s loop never ran
    # FeedForward's loop (a function: no self) and a hand-made param keep the method's own meaning
    assert slot_of(param(1, dict(train_data=1, eval_end_callback=cb, executor_manager=2)), cb) is None
    assert slot_of(BatchEndParam(epoch=0, nbatch=0, eval_metric=None, locals=None), cb) is None


def test_a_callback_listed_twice_in_batch_end_logs_each_batch_once(tmp_path, caplog):
    """``batch_end_callback=[cb, cb]`` put batch points at steps 0, 2, ... 30 for 16 batches and
    doubled the throughput; MXNet hands both entries one BatchEndParam, so the second is known."""
    oracle, said = run(str(tmp_path), lambda cb: dict(batch_end_callback=[cb, cb], epoch_end_callback=cb.epoch_end,
                                                       eval_end_callback=[cb.eval_end]), caplog)
    assert_whole_training(str(tmp_path), oracle)
    assert said == ["gluon_tb: TensorBoardCallback is listed more than once in batch_end_callback; it logs each "
                    "batch once (pass it once)"]
