"""One worker of tests/system/test_distributed.py: a small Estimator fit on this rank's own data.

Usage: python dist_worker.py LOGDIR MODE KVSTORE UPDATE_ON_KVSTORE OUT_JSON  (OUT_JSON has {rank})
KVSTORE is a dist kvstore type (started by tests/support/pscluster.py), given to the Trainer as a
KVStore; ``<type>:name`` gives the Trainer only the name, as most scripts do, so that the rank is
known only once the handler's train_begin has made the kvstore (the data are drawn lazily);
or ``horovod`` (under horovodrun, with ``hvd.DistributedTrainer``).

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
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd, TrainBegin

from gluon_tb import TensorBoardHandler
from gluon_tb.handlers._mxnet.metric_names import scores

logdir, mode, kv_type, on_kv, out_path = sys.argv[1:6]
if kv_type == "horovod":
    import horovod.mxnet as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
elif kv_type.endswith(":name"):
    kv_type = kv = kv_type[:-len(":name")]
    rank = size = None  # from the handler, at train_begin
else:
    kv = mx.kv.create(kv_type)
    rank, size = kv.rank, kv.num_workers
mx.random.seed(7)  # same initial weights everywhere (rank 0's are pushed anyway)


class Shard(gluon.data.Dataset):
    """This rank's data, drawn on first use (the rank may be known only when fit starts)."""

    data: dict = {}

    def __init__(self, part):
        self.part = part

    def __len__(self):
        return 64 if self.part == "train" else 32

    def __getitem__(self, i):
        if not Shard.data:
            rng = np.random.default_rng(1000 + rank)  # each rank its own data
            x = rng.normal(size=(96, 6)).astype(np.float32)
            y = (x[:, 0] + (rank + 1) * x[:, 1] > 0).astype(np.float32)
            if rank == 1:  # a harder shard: different accuracies on the two workers
                y[::3] = 1 - y[::3]
            Shard.data.update(train=(x[:64], y[:64]), val=(x[64:], y[64:]))
        x, y = Shard.data[self.part]
        return x[i], y[i]


train = gluon.data.DataLoader(Shard("train"), batch_size=16)
val = gluon.data.DataLoader(Shard("val"), batch_size=16)

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
record: dict = {"pid": os.getpid(), "epochs": {}}
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


class Rank(TrainBegin):
    priority = 1001  # right after TensorBoardHandler's train_begin, before the first batch

    def train_begin(self, estimator, *args, **kwargs):
        global rank, size
        if rank is None:
            rank, size = handler.worker.rank, handler.worker.size


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
est.fit(train, val_data=val, epochs=2, event_handlers=[Recorder(), Rank(), handler])
record.update(rank=rank, size=size)
record["worker"] = [handler.worker.rank, handler.worker.size, handler.worker.source]
with open(out_path.format(rank=rank), "w") as f:
    json.dump(record, f)
