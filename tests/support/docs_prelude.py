"""What the code blocks of README.md and docs/*.md may take as given (tests/test_docs.py runs each
block after ``from docs_prelude import *``, in a fresh process and a temporary directory).

Small data, a few seconds a fit on a CPU:

* Gluon: ``net`` (a hybridized CNN for 1x8x8 images, its parameters initialised), ``loss``, ``trainer``, ``est`` (an
  ``Estimator`` with an accuracy metric), ``train_data`` and ``val_data`` (DataLoaders of 64 and 32
  random images in 10 classes, batches of 16).
* Module: ``sym`` (an MLP symbol), ``mod`` (a ``Module`` of it), ``train_iter`` and ``val_iter``
  (``NDArrayIter`` over the same images).
* The usual names: ``mx``, ``gluon``, ``nd``, ``np``, ``Estimator``.
"""
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon, nd
from mxnet.gluon.contrib.estimator import Estimator

warnings.simplefilter("ignore", UserWarning)  # the Estimator's "no validation handler" chatter
mx.random.seed(0)
_rng = np.random.RandomState(0)
_x = _rng.rand(96, 1, 8, 8).astype("float32")
_y = _rng.randint(0, 10, 96).astype("float32")

train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(_x[:64], _y[:64]), batch_size=16, shuffle=True)
val_data = gluon.data.DataLoader(gluon.data.ArrayDataset(_x[64:], _y[64:]), batch_size=16)

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Conv2D(8, kernel_size=3, padding=1, activation="relu"),
        gluon.nn.MaxPool2D(pool_size=2),
        gluon.nn.Flatten(),
        gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net.hybridize()
net(nd.zeros((1, 1, 8, 8)))  # one forward pass: the parameters have their shapes
loss = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
est = Estimator(net, loss, train_metrics=[mx.metric.Accuracy()], trainer=trainer, context=mx.cpu())

_data = mx.sym.var("data")
_fc1 = mx.sym.FullyConnected(mx.sym.flatten(_data), num_hidden=32, name="fc1")
_fc2 = mx.sym.FullyConnected(mx.sym.Activation(_fc1, act_type="relu"), num_hidden=10, name="fc2")
sym = mx.sym.SoftmaxOutput(_fc2, name="softmax")
mod = mx.mod.Module(sym, context=mx.cpu())
train_iter = mx.io.NDArrayIter(_x[:64], _y[:64], batch_size=16, shuffle=True, label_name="softmax_label")
val_iter = mx.io.NDArrayIter(_x[64:], _y[64:], batch_size=16, label_name="softmax_label")

__all__ = ["mx", "gluon", "nd", "np", "Estimator", "train_data", "val_data", "net", "loss", "trainer",
           "est", "sym", "mod", "train_iter", "val_iter"]
