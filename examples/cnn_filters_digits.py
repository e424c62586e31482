"""Watch a small CNN's first-layer filters and feature maps form, and its digits cluster.

    python examples/cnn_filters_digits.py --logdir logs/cnn_filters --epochs 10
    .venv/bin/tensorboard --logdir logs/cnn_filters   # the venv beside the Python that ran it

Images dashboard: ``conv_filters/digits_conv0`` (16 filters of 3x3, each scaled by its own
min and max) and ``feature_maps/digits_conv0`` (that layer's output for the first training
image) once per epoch. Projector: 300 validation digits as the network sees them just before
its classifier, with their true and predicted labels and their images. Runs offline in a few
seconds on 2 CPU cores.
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
from estimator_digits import build_net  # noqa: E402

from gluon_tb.handlers import Embeddings, TensorBoardHandler  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/cnn_filters")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--layer", default=None, help="the Conv2D to show (default: the first), e.g. conv1")
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs

    mx.random.seed(0)
    train, val = loaders(64)

    net = build_net()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=mx.cpu())
    tb = TensorBoardHandler(args.logdir, conv_filters=args.layer or True,
                            embeddings=Embeddings(300, every=max(1, args.epochs // 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(train, val_data=val, epochs=args.epochs, event_handlers=[tb])

    print_how_to_open(args.logdir, "images: conv_filters/, feature_maps/; projector: embedding")


if __name__ == "__main__":
    main()
