"""What a straightforward tensorboardX user writes for ``Estimator.fit``: one event handler.

At the priority of gluon_tb's handler (after the optimizer step, the metrics and validation):
every batch, the batch's mean loss through ``.asscalar()``; at every epoch end, the train and
validation metrics (``metric.get()``) and, for every parameter with a gradient, gradient and
weight histograms through ``.asnumpy()`` (tensorboardX's default bins). After the step the
gradient buffers still hold the batch's gradients (one device, no kvstore), so the histograms
are of the same arrays gluon_tb logs, at the same moment of the epoch.

``every_batch=True`` (the all-options configuration) logs what gluon_tb's options do, the
same way: both histograms every batch, with gradient and weight norms and the update ratio
per parameter and the global gradient norm (from the same host copies); the first 16 inputs
of each epoch's first batch as an image grid; and at each epoch end the first Conv2D's
filters and its feature maps for the first input of the first batch; hparams at the end.
"""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np
from mxnet.gluon.contrib.estimator.event_handler import BatchEnd, EpochEnd, TrainBegin, TrainEnd


def _unit(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


class PeerFitLog(TrainBegin, BatchEnd, EpochEnd, TrainEnd):
    priority = 1000  # where gluon_tb's TensorBoardHandler runs

    def __init__(self, writer: str, logdir: str, every_batch: bool = False) -> None:
        self.name, self.logdir, self.every_batch = writer, logdir, every_batch
        self.w: Any = None
        self.params: List[Tuple[str, Any]] = []
        self.step = self.epoch = self.in_epoch = 0
        self.sample: Any = None
        self.lr = 0.0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        from _worker import make_writer

        self.w = make_writer(self.name, self.logdir)
        self.params = [(n, p) for n, p in estimator.net.collect_params().items() if p.grad_req != "null"]
        self.lr = estimator.trainer.learning_rate

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        w, k = self.w, self.step
        w.add_scalar("batch_loss", kwargs["loss"][0].mean().asscalar(), k)
        if self.every_batch:
            x = kwargs["batch"][0]
            if self.in_epoch == 0:
                w.add_images("first_batch", _unit(x[:16].asnumpy()), self.epoch)
            if self.sample is None:
                self.sample = x[:1].copy()
            self._params(k, health=True)
        self.step += 1
        self.in_epoch += 1
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        w, e = self.w, self.epoch
        for m in list(estimator.train_metrics) + list(estimator.val_metrics):
            name, value = m.get()
            w.add_scalar("epoch_" + name.replace(" ", "_"), value, e)
        if self.every_batch:
            from mxnet.gluon import nn

            conv = next(b for b in _blocks(estimator.net) if isinstance(b, nn.Conv2D))
            w.add_images("conv_filters", _unit(conv.weight.data().asnumpy()), e)
            maps = conv(self.sample).asnumpy()  # 1×C×H×W: one grey image per channel
            w.add_images("feature_maps", _unit(maps.transpose(1, 0, 2, 3)), e)
        else:
            self._params(self.step - 1)
        self.epoch += 1
        self.in_epoch = 0
        return False

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.every_batch:
            final = {"hparam/" + m.get()[0].replace(" ", "_"): m.get()[1] for m in estimator.val_metrics}
            self.w.add_hparams({"lr": self.lr, "batch_size": 128}, final)
        self.w.close()

    def _params(self, k: int, health: bool = False) -> None:
        w = self.w
        total = 0.0
        for n, p in self.params:
            g, v = p.grad().asnumpy(), p.data().asnumpy()
            w.add_histogram(f"gradients/{n}", g, k)
            w.add_histogram(f"weights/{n}", v, k)
            if health:
                gn, vn = float(np.linalg.norm(g)), float(np.linalg.norm(v))
                total += gn * gn
                w.add_scalar(f"grad_norm/{n}", gn, k)
                w.add_scalar(f"weight_norm/{n}", vn, k)
                w.add_scalar(f"update_ratio/{n}", min(1.0, self.lr * gn / vn) if vn else 1.0, k)
        if health:
            w.add_scalar("grad_norm/global", total ** 0.5, k)


def _blocks(block: Any):
    yield block
    for child in block._children.values():
        yield from _blocks(child)
