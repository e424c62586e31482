"""One worker of tests/test_distributed.py: a small Estimator fit on this rank's own data.

Usage: python dist_worker.py LOGDIR MODE KVSTORE UPDATE_ON_KVSTORE OUT_JSON  (OUT_JSON has {rank})
KVSTORE is a dist kvstore type (started by tests/pscluster.py) or ``horovod`` (under horovodrun,
with ``hvd.DistributedTrainer``).

Besides training with ``TensorBoardHandler(LOGDIR, distributed=MODE)`` it records, for
the test to compare with what rank 0 logged: this worker's own epoch values (through
the same ``scores`` the handler uses), its *local* gradients of batch 2 as they were
before ``trainer.step``, the same buffers after the step, and its pid.
"""
from __future__ import annotations

import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd

from gluon_tb import TensorBoardHandler
from gluon_tb.handlers._base import scores

logdir, mode, kv_type, on_kv, out_path = sys.argv[1:6]
if kv_type == "horovod":
    import horovod.mxnet as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
else:
    kv = mx.kv.create(kv_type)
    rank, size = kv.rank, kv.num_workers
mx.random.seed(7)  # same initial weights everywhere (rank 0's are pushed anyway)
rng = np.random.default_rng(1000 + rank)  # ... but each rank its own data
x = rng.normal(size=(96, 6)).astype(np.float32)
y = (x[:, 0] + (rank + 1) * x[:, 1] > 0).astype(np.float32)
if rank == 1:  # a harder shard: different accuracies on the two workers
    y[::3] = 1 - y[::3]
train = gluon.data.DataLoader(gluon.data.ArrayDataset(x[:64], y[:64]), batch_size=16)
val = gluon.data.DataLoader(gluon.data.ArrayDataset(x[64:], y[64:]), batch_size=16)

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(8, activation="relu", in_units=6), gluon.nn.Dense(2, in_units=8))
net.initialize(mx.init.Xavier())
net.hybridize()
if kv_type == "horovod":
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
else:
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv,
                            update_on_kvstore=(on_kv == "1"))
record: dict = {"rank": rank, "size": size, "pid": os.getpid(), "epochs": {}}
HIST_BATCH = 2  # a batch on the histogram_period=2 schedule
calls = {"n": 0}
inner_step = trainer.step


def step(*args, **kwargs):  # wrapped before the handler wraps it: sees the same gradients
    i = calls["n"]
    calls["n"] += 1
    if i == HIST_BATCH:
        record["grad_before"] = {n: p.grad().asnumpy().ravel().tolist()
                                 for n, p in net.collect_params().items()}
    inner_step(*args, **kwargs)
    if i == HIST_BATCH:
        record["grad_after"] = {n: p.grad().asnumpy().ravel().tolist()
                                for n, p in net.collect_params().items()}
        record["update_on_kvstore"] = bool(trainer._update_on_kvstore)


trainer.step = step


class Recorder(EpochEnd):
    priority = 999  # after the metrics (-1000), before TensorBoardHandler (1000)

    def epoch_end(self, estimator, *args, **kwargs):
        e = len(record["epochs"])
        record["epochs"][e] = {"train": dict(scores(estimator.train_metrics)),
                               "validation": dict(scores(estimator.val_metrics))}
        return False


est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=[mx.metric.Accuracy()],
                val_metrics=[mx.metric.Accuracy()], trainer=trainer, context=mx.cpu())
handler = TensorBoardHandler(logdir, distributed=mode, histogram_period=2, images=False)
est.fit(train, val_data=val, epochs=2, event_handlers=[Recorder(), handler])
record["worker"] = [handler.worker.rank, handler.worker.size, handler.worker.source]
with open(out_path.format(rank=rank), "w") as f:
    json.dump(record, f)
