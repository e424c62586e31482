"""The Module setup the callback's option tests share: a small conv symbol (conv1, fc1, fc2) on
random 8x8 "digits" in 4 batches an epoch, ``fit`` that trains it for 2 epochs with a callback, and
``steps`` that reads back every tag's steps.

``from module_setup import fit, steps`` (``tests/conftest.py`` puts this folder on ``sys.path``).
"""
import mxnet as mx
import numpy as np

import readback

N, BATCH, CLASSES, EPOCHS, LR = 64, 16, 4, 2, 0.1  # 4 batches an epoch, global batches 0..7

PARAMS = ["conv1_weight", "conv1_bias", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def data():
    rs = np.random.RandomState(0)
    x, y = rs.rand(N, 1, 8, 8).astype("float32"), rs.randint(0, CLASSES, N).astype("float32")
    xv, yv = rs.rand(24, 1, 8, 8).astype("float32"), rs.randint(0, CLASSES, 24).astype("float32")
    return x, y, xv, yv


def iters():
    x, y, xv, yv = data()
    return (mx.io.NDArrayIter(x, y, BATCH, label_name="softmax_label"),
            mx.io.NDArrayIter(xv, yv, BATCH, label_name="softmax_label"))


def symbol():
    d = mx.sym.var("data")
    c = mx.sym.Activation(mx.sym.Convolution(d, kernel=(3, 3), num_filter=4, name="conv1"),
                          act_type="relu", name="relu1")
    h = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.flatten(c), num_hidden=8, name="fc1"),
                          act_type="relu", name="relu2")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=CLASSES, name="fc2"), name="softmax")


def fit(cb, ctx=None, eval_data=True, extra=(), close=True):
    mx.random.seed(0)
    train, val = iters()
    mod = mx.mod.Module(symbol(), context=ctx or mx.cpu())
    mod.fit(train, eval_data=val if eval_data else None, num_epoch=EPOCHS, optimizer="sgd",
            optimizer_params={"learning_rate": LR}, initializer=mx.init.Xavier(),
            batch_end_callback=[cb, *extra], epoch_end_callback=cb.epoch_end, eval_end_callback=cb.eval_end)
    if close:
        cb.close()
    return mod


def steps(logdir):
    """``{(run, tag): [steps]}`` of everything TensorBoard reads in ``logdir``."""
    return {rt: [e.step for e in readback.tensor_events(logdir, *rt)] for rt in readback.tags(logdir)}

