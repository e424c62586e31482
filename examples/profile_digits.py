"""Profile a few batches of a small CNN on the shipped 8x8 digits: MXNet's profiler in TensorBoard.

    python examples/profile_digits.py --logdir logs/profile_digits
    bash scripts/install_xprof.sh                          # once: .venv-xprof, see below
    .venv-xprof/bin/tensorboard --logdir logs/profile_digits   # then the Profile tab

``TensorBoardHandler(logdir, profile_batch=(10, 12))`` runs MXNet's profiler over global batches
10 to 12 of ``Estimator.fit`` and writes their timeline as
``<logdir>/train_batch/plugins/profile/<session>/<host>.xplane.pb`` for TensorBoard's Profile dashboard,
and MXNet's per-operator table as the text ``profile/operator_stats`` (Text dashboard).

The Profile dashboard is the ``tensorboard-plugin-profile`` package (XProf 2.24), which needs
numpy >= 1.24, while MXNet 1.9.1 needs numpy < 1.24: TensorBoard only reads the files, so it runs
from a venv of its own (``scripts/install_xprof.sh`` makes ``.venv-xprof``). The Text dashboard's
table needs no plugin. Runs offline in a few seconds on 2 CPU cores.
"""
import argparse
import glob
import os
import sys
import warnings

import mxnet as mx
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _digits import loaders  # noqa: E402
from _logs import fresh_logdir  # noqa: E402

from gluon_tb.handlers import TensorBoardHandler  # noqa: E402


def build_net() -> gluon.nn.HybridSequential:
    net = gluon.nn.HybridSequential(prefix="digits_")
    with net.name_scope():
        net.add(gluon.nn.Conv2D(16, kernel_size=3, padding=1, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2),
                gluon.nn.Flatten(),
                gluon.nn.Dense(64, activation="relu"),
                gluon.nn.Dense(10))
    return net


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/profile_digits")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--profile-batch", type=int, nargs=2, default=[10, 12], metavar=("START", "STOP"),
                    help="the global batches to profile, both included (23 an epoch at --batch-size 64)")
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs (and its profile session)

    mx.random.seed(0)
    train, val = loaders(args.batch_size)
    net = build_net()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=mx.cpu())

    start, stop = args.profile_batch
    tb = TensorBoardHandler(args.logdir, profile_batch=(start, stop))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(train, val_data=val, epochs=args.epochs, event_handlers=[tb])

    files = glob.glob(os.path.join(args.logdir, "train_batch", "plugins", "profile", "*", "*.xplane.pb"))
    if not files:
        sys.exit(f"no profile was written: fewer than {start + 1} batches were trained")
    print(f"MXNet's profile of global batches {start} to {stop}: {os.path.abspath(files[0])}")
    print("and its per-operator table: the Text dashboard, tag profile/operator_stats.")
    print("The Profile dashboard (tensorboard-plugin-profile, XProf) needs numpy>=1.24 and MXNet\n"
          "numpy<1.24, so TensorBoard runs from a venv of its own: make it once with\n"
          f"    bash {here('scripts/install_xprof.sh')}\n"
          "then\n"
          f"    {here('.venv-xprof/bin/tensorboard')} --logdir {args.logdir}\n"
          "and open the Profile tab (http://localhost:6006/#profile), Tools: Trace Viewer.")


def here(path: str) -> str:
    """``path`` of the repository as seen from the working directory (relative when below it)."""
    rel = os.path.relpath(os.path.join(ROOT, path))
    return rel if not rel.startswith("..") else os.path.join(ROOT, path)


if __name__ == "__main__":
    main()
