"""One worker of tests/system/test_distributed.py for the legacy ``Module.fit`` API.

Usage: python dist_module_worker.py LOGDIR MODE OUT_JSON  (OUT_JSON has {rank})
Trains with ``TensorBoardCallback(LOGDIR, distributed=MODE)`` on a ``dist_sync`` kvstore
and records this worker's own epoch values for the test to compare with.
"""
from __future__ import annotations

import json
import os
import sys

import mxnet as mx
import numpy as np

from gluon_tb import TensorBoardCallback
from gluon_tb.handlers._mxnet.metric_names import scores

logdir, mode, out_path = sys.argv[1:4]
kv = mx.kv.create("dist_sync")
rank = kv.rank
rng = np.random.default_rng(2000 + rank)
x = rng.normal(size=(96, 6)).astype(np.float32)
y = (x[:, 0] - (rank + 1) * x[:, 2] > 0).astype(np.float32)
if rank == 1:
    y[::4] = 1 - y[::4]
train = mx.io.NDArrayIter(x[:64], y[:64], batch_size=16, label_name="softmax_label")
val = mx.io.NDArrayIter(x[64:], y[64:], batch_size=16, label_name="softmax_label")
net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=8, name="fc1")
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=2, name="fc2"), name="softmax")
mod = mx.mod.Module(net, context=mx.cpu())
record: dict = {"rank": rank, "pid": os.getpid(), "train": [], "validation": []}
last: dict = {}


def remember(param):  # before the callback: the epoch-wide values it will see
    last["train"] = dict(scores([param.eval_metric], use_global=True))


def epoch_done(epoch, *args):
    record["train"].append(last["train"]["accuracy"])


def eval_done(param):
    record["validation"].append(dict(scores([param.eval_metric], use_global=True))["accuracy"])


cb = TensorBoardCallback(logdir, distributed=mode)
mx.random.seed(3)
mod.fit(train, eval_data=val, num_epoch=2, kvstore=kv, optimizer="sgd",
        optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
        batch_end_callback=[remember, cb], epoch_end_callback=[epoch_done, cb.epoch_end],
        eval_end_callback=[eval_done, cb.eval_end])
cb.close()
record["worker"] = [cb.worker.rank, cb.worker.size, cb.worker.source]
with open(out_path.format(rank=rank), "w") as f:
    json.dump(record, f)
