"""A training script that knows nothing of gluon_tb but the one autolog line (tests/test_autolog.py runs it).

Two fits logged (an Estimator, then a Module with its callbacks in positional slots), then
``autolog(disable=True)`` and the same two fits again, not logged. Prints what MXNet itself saw (JSON).
"""
import json
import sys
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
from mxnet.gluon.contrib.estimator.event_handler import EpochEnd

import gluon_tb
gluon_tb.autolog(sys.argv[1], batch_period=2, histogram_period=None, images=False)

warnings.filterwarnings("ignore", message="No trainer specified")
rs = np.random.RandomState(0)
x, y = rs.rand(64, 10).astype("float32"), rs.randint(0, 4, 64).astype("float32")
seen = {"estimator": [], "module_train": [], "module_val": [], "module_epochs": []}


class Record(EpochEnd):
    priority = 10 ** 6

    def epoch_end(self, estimator, *args, **kwargs):
        seen["estimator"].append(estimator.train_metrics[0].get()[1])


def estimator_fit(epochs):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=16)
    est.fit(data, epochs=epochs, event_handlers=[Record()])


def module_fit(epochs):
    out = mx.sym.FullyConnected(mx.sym.Activation(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=8),
                                                  act_type="relu"), num_hidden=4)
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(out, name="softmax"), context=mx.cpu())
    train = mx.io.NDArrayIter(x, y, 16, label_name="softmax_label")
    val = mx.io.NDArrayIter(x[:32], y[:32], 16, label_name="softmax_label")
    mod.fit(train, val, "acc", lambda epoch, *a: seen["module_epochs"].append(epoch),  # positional slots
            [mx.callback.Speedometer(16, 2), lambda p: p.nbatch == 3 and seen["module_train"].append(
                p.eval_metric.get_global()[1])],
            num_epoch=epochs, optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
            eval_end_callback=lambda p: seen["module_val"].append(p.eval_metric.get()[1]))


estimator_fit(2)
module_fit(2)
gluon_tb.autolog(disable=True)
estimator_fit(1)  # not logged
module_fit(1)
print(json.dumps(seen))
