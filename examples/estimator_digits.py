"""Train a small CNN on the shipped 8x8 digits with Gluon's Estimator, logged to TensorBoard.

    python examples/estimator_digits.py --logdir logs/estimator_digits --epochs 10
    .venv/bin/tensorboard --logdir logs/estimator_digits   # the venv beside the Python that ran it

Runs offline in a few seconds on 2 CPU cores.
"""
import argparse
import os
import sys
import warnings

import mxnet as mx
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _digits import loaders  # noqa: E402
from _logs import fresh_logdir, print_how_to_open  # noqa: E402

from gluon_tb.handlers import TensorBoardHandler  # noqa: E402


def build_net() -> gluon.nn.HybridSequential:
    net = gluon.nn.HybridSequential(prefix="digits_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(16, kernel_size=3, padding=1, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2),
                gluon.nn.Conv2D(32, kernel_size=3, padding=1, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2),
                gluon.nn.Flatten(),
                gluon.nn.Dense(64, activation="relu"),
                gluon.nn.Dense(10))
    return net


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/estimator_digits")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs

    mx.random.seed(0)
    train, val = loaders(args.batch_size)

    net = build_net()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": 0.9})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=mx.cpu())

    tb = TensorBoardHandler(args.logdir, hparams={"lr": args.lr, "batch_size": args.batch_size,
                                                   "optimizer": "sgd"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(train, val_data=val, epochs=args.epochs, event_handlers=[tb])

    # the train and validation epoch curves, one chart per tag
    print_how_to_open(args.logdir, "runs: train, train_batch, validation", "http://localhost:6006/#scalars&tagFilter=%5Eepoch_")


if __name__ == "__main__":
    main()
