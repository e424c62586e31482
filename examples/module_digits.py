"""Train an MLP on the shipped 8x8 digits with the legacy Module API, logged to TensorBoard.

    python examples/module_digits.py --logdir logs/module_digits --epochs 10
    .venv/bin/tensorboard --logdir logs/module_digits   # the venv beside the Python that ran it

Runs offline in a few seconds on 2 CPU cores.
"""
import argparse
import logging
import os
import sys

import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _digits import load_digits, split  # noqa: E402
from _logs import fresh_logdir, print_how_to_open  # noqa: E402

from gluon_tb.handlers import TensorBoardCallback  # noqa: E402


def build_symbol() -> mx.sym.Symbol:
    data = mx.sym.flatten(mx.sym.var("data"))
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=128, name="fc1"), act_type="relu")
    h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=64, name="fc2"), act_type="relu")
    out = mx.sym.FullyConnected(h, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(out, name="softmax")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logdir", default="logs/module_digits")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args(argv)
    fresh_logdir(args.logdir)  # a re-run replaces the previous run's logs
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    mx.random.seed(0)
    (x_tr, y_tr), (x_val, y_val) = split(*load_digits())
    train = mx.io.NDArrayIter(x_tr, y_tr.astype("float32"), args.batch_size, shuffle=True,
                              label_name="softmax_label")
    val = mx.io.NDArrayIter(x_val, y_val.astype("float32"), args.batch_size, label_name="softmax_label")

    mod = mx.mod.Module(build_symbol(), context=mx.cpu())
    # embeddings: 300 validation digits at the input of fc3 in the projector (labels, sprites);
    # grad_health: grad_norm/, weight_norm/, update_ratio/ at each epoch's last batch
    with TensorBoardCallback(args.logdir, embeddings=300, grad_health=True) as cb:
        mod.fit(train, eval_data=val, eval_metric=["acc", "ce"], num_epoch=args.epochs,
                optimizer="sgd", optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
                initializer=mx.init.Xavier(),
                batch_end_callback=[mx.callback.Speedometer(args.batch_size, 10), cb],
                epoch_end_callback=cb.epoch_end, eval_end_callback=cb.eval_end)

    print_how_to_open(args.logdir, "runs: train, train_batch, validation; projector in train")


if __name__ == "__main__":
    main()
