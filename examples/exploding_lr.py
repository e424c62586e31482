"""A learning rate far too high makes the gradients explode; gluon_tb's detector says so and stops.

    python examples/exploding_lr.py --logdir logs/exploding_lr
    .venv/bin/tensorboard --logdir logs/exploding_lr   # the venv beside the Python that ran it

Scalars ``grad_norm/``, ``weight_norm/`` and ``update_ratio/`` (per parameter and ``global``)
every 5 batches show the blow-up; the text dashboard's ``grad_health`` names the parameters
and the batch. The detector reads each check's values at the next check, so it fires (and
training stops) at most 9 batches (2 × 5 - 1) after the batch that went wrong. ``--lr 0.05``
trains fine. ``tb.health_events`` is ``{detector: batch}`` of what fired.
"""
import argparse
import logging
import os
import sys
import warnings

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _digits import load_digits, split  # noqa: E402
from _logs import fresh_logdir, print_how_to_open  # noqa: E402

from gluon_tb.handlers import GradHealth, TensorBoardHandler  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/exploding_lr")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--lr", type=float, default=8.0)
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    mx.random.seed(0)
    np.random.seed(0)  # the DataLoader's shuffle: the same batches at every run
    (x_tr, y_tr), _ = split(*load_digits())
    train = gluon.data.DataLoader(gluon.data.ArrayDataset(x_tr.reshape(len(x_tr), -1), y_tr.astype("float32")),
                                  batch_size=64, shuffle=True)
    net = gluon.nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(128, activation="relu"),
                gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": 0.9})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=mx.cpu())
    tb = TensorBoardHandler(args.logdir, histogram_period=5,
                            grad_health=GradHealth(explode_factor=20, stop=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(train, epochs=args.epochs, event_handlers=[tb])
    fired = tb.health_events
    print(f"detectors fired: {fired or 'none'}")
    print_how_to_open(args.logdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
