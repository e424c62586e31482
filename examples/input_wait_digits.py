"""Is the model waiting for its data? The same fit with a slow and a fast data loader, side by side.

    python examples/input_wait_digits.py --logdir logs/input_wait
    .venv/bin/tensorboard --logdir logs/input_wait   # runs slow/train and fast/train: epoch_input_wait_fraction

The slow loader's ``Dataset.__getitem__`` sleeps (``--delay`` seconds a sample, as a JPEG decode or a
network read would); the fast one reads the shipped 8x8 digits from memory. Every epoch logs
``epoch_input_wait_seconds``, ``epoch_batch_seconds`` and ``epoch_input_wait_fraction``: the slow fit's
fraction is near 1, the fast one's far lower (0.1-0.25 here: a tiny CNN's batches are about as short
as the in-memory loader's own batching). After two slow epochs the handler warns once, naming the
fraction and what to try, and writes the same advice as the text ``input_wait/advice``. With
``--profile`` the slow fit's batches 3 to 8 are profiled too: the Profile dashboard's Overview Page and
Input Pipeline Analysis then show each step's input time against its compute time
(``.venv-xprof/bin/tensorboard``, see docs/profiling.md). Offline, a few seconds on 2 CPU cores.
"""
import argparse
import os
import sys
import time
import warnings

import mxnet as mx
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _digits import load_digits  # noqa: E402
from _logs import fresh_logdir, print_how_to_open  # noqa: E402
from estimator_digits import build_net  # noqa: E402

from gluon_tb.handlers import TensorBoardHandler  # noqa: E402


class SlowDigits(gluon.data.Dataset):
    """The digits, each sample ``delay`` seconds late (0: straight from memory)."""

    def __init__(self, delay: float, n: int) -> None:
        images, labels = load_digits()
        self.x, self.y = images[:n], labels[:n].astype("float32")
        self.delay = delay

    def __getitem__(self, i: int):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]

    def __len__(self) -> int:
        return len(self.x)


def fit(logdir: str, delay: float, args: argparse.Namespace, profile: bool) -> None:
    mx.random.seed(0)
    data = gluon.data.DataLoader(SlowDigits(delay, args.samples), batch_size=args.batch_size, shuffle=True)
    net = build_net()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), train_metrics=mx.metric.Accuracy(),
                    trainer=trainer, context=mx.cpu())
    tb = TensorBoardHandler(logdir, profile_batch=(3, 8) if profile else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MXNet's "no trainer specified"-style notes
        est.fit(data, epochs=args.epochs, event_handlers=[tb])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/input_wait")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=640)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--delay", type=float, default=0.002, help="seconds each slow sample waits")
    ap.add_argument("--profile", action="store_true", help="profile the slow fit's batches 3 to 8")
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs

    for name, delay in (("slow", args.delay), ("fast", 0.0)):
        fit(os.path.join(args.logdir, name), delay, args, args.profile and name == "slow")
    print_how_to_open(args.logdir, "runs: slow/train, fast/train (and their train_batch)",
                      "http://localhost:6006/#scalars&tagFilter=input_wait")


if __name__ == "__main__":
    main()
