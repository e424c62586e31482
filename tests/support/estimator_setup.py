"""The Estimator setup the handler tests share: a small conv net on random 8x8 "digits" in 4 batches
an epoch, its ``Estimator``, and two test oracles that record what the estimator holds.

``from estimator_setup import loader, make_est, make_net`` (``tests/conftest.py`` puts this folder on
``sys.path``).
"""
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.gluon.contrib.estimator.event_handler import BatchEnd, EpochEnd

N, BATCH, CLASSES = 64, 16, 4  # 4 batches per epoch

warnings.filterwarnings("ignore", message="No trainer specified")


def loader(n=N, shape=(1, 8, 8), seed=0, extra=False):
    rs = np.random.RandomState(seed)
    x = rs.rand(n, *shape).astype("float32")
    y = rs.randint(0, CLASSES, size=n).astype("float32")
    arrays = [x, y] + ([np.ones(n, "float32")] if extra else [])
    return gluon.data.DataLoader(gluon.data.ArrayDataset(*arrays), batch_size=BATCH)


def make_net(hybridize=True, ctx=None):
    net = gluon.nn.HybridSequential(prefix="net_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(3, kernel_size=3, activation="relu"), gluon.nn.Flatten(),
                gluon.nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier(), ctx=ctx or mx.cpu())
    if hybridize:
        net.hybridize()
    return net


def make_est(net, ctx=None, **kw):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=ctx or mx.cpu(), **kw)


class Recorder(BatchEnd, EpochEnd):
    """Records what the estimator itself holds, after everyone else (test oracle)."""

    priority = 10 ** 6

    def __init__(self):
        self.train, self.val, self.batch = [], [], []

    def batch_end(self, estimator, *args, **kwargs):
        m = estimator.train_metrics[0]
        self.batch.append((m.global_sum_metric, m.global_num_inst))  # running sums since the epoch began
        return False

    def per_batch(self, per_epoch):
        """Each batch's own metric value (differences of the running sums)."""
        out = []
        for i, (s, n) in enumerate(self.batch):
            ps, pn = self.batch[i - 1] if i % per_epoch else (0.0, 0)
            out.append((s - ps) / (n - pn))
        return out

    def epoch_end(self, estimator, *args, **kwargs):
        self.train.append({m.name: m.get()[1] for m in estimator.train_metrics})
        self.val.append({m.name: m.get()[1] for m in estimator.val_metrics})
        return False


class GradSpy(BatchEnd):
    """Before the optimizer step: the batch's gradients summed over devices (test oracle)."""

    priority = -3000

    def __init__(self, net):
        self.net, self.grads = net, []

    def batch_end(self, estimator, *args, **kwargs):
        self.grads.append({n: sum(g.asnumpy() for g in p.list_grad())
                           for n, p in self.net.collect_params().items() if p.grad_req != "null"})
        return False


def param_names(net, skip=()):
    return [n for n, p in net.collect_params().items() if p.grad_req != "null" and n not in skip]
