"""Gluon MLP 784-512-512-10, batch 128, CPU, synthetic data: ms/batch with and without logging.

Two harnesses (``mode``):

* ``estimator``: ``Estimator.fit`` over pre-made batches. gluon_tb is measured through its
  ``TensorBoardHandler(batch_period=1, histogram_period=10)`` (loss and metrics every batch,
  gradient *and* weight histograms of every parameter every 10 batches); each peer through a
  small ``BatchEnd`` handler doing what its users do (below). ``none``: no extra handler.
* ``loop``: a plain ``autograd`` loop; gluon_tb is called the way the handler calls it (the loss
  NDArray straight into ``add_scalar`` every batch; gradient NDArrays into ``add_histogram``
  every 10 batches, before ``trainer.step``).

``auto`` picks ``estimator`` when ``gluon_tb.TensorBoardHandler`` imports, else ``loop``.
Peers log the same things as users of each do: the loss as ``.asscalar()`` (mxboard's
``add_scalar`` calls ``float()`` on it, which an NDArray refuses); gradients as ``.asnumpy()``
for tensorboardX and torch, as NDArrays for mxboard (it converts them itself).
"""
from __future__ import annotations

import time

import numpy as np

BATCH, N_DATA = 128, 16
pc = time.perf_counter


def _net_and_data():
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon import nn

    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(512, activation="relu", in_units=784), nn.Dense(512, activation="relu", in_units=512),
            nn.Dense(10, in_units=512))
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize()
    rng = np.random.default_rng(0)
    data = [[mx.nd.array(rng.random((BATCH, 784), dtype=np.float32)),
             mx.nd.array(rng.integers(0, 10, BATCH).astype(np.float32))] for _ in range(N_DATA)]
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    return net, data, trainer, gluon.loss.SoftmaxCrossEntropyLoss()


class _PeerLog:
    """What a user of each peer writes: loss every batch, gradient histograms every k batches."""

    def __init__(self, name: str, logdir: str, params, hist_every: int) -> None:
        from _worker import DEFAULT_BINS, make_writer

        self.name, self.w, self.k = name, make_writer(name, logdir), hist_every
        self.bins = DEFAULT_BINS[name]
        self.params = [(n, p) for n, p in params.items() if p.grad_req != "null"]

    def log(self, step: int, loss) -> None:
        w = self.w
        if self.name == "gluon_tb":  # as the handler does: NDArrays, read on the writer thread
            w.add_scalar("batch_loss", loss.mean(), step)
        else:
            w.add_scalar("batch_loss", loss.mean().asscalar(), step)
        if step % self.k == 0:
            for n, p in self.params:
                g = p.grad()
                w.add_histogram(f"gradients/{n}", g if self.name in ("mxboard", "gluon_tb") else g.asnumpy(),
                                step, bins=self.bins)

    def close(self) -> None:
        self.w.close()


def _handler_available() -> bool:
    try:
        from gluon_tb import TensorBoardHandler  # noqa: F401
        return True
    except Exception:
        return False


def run_mlp(name: str, logdir: str, *, batches: int, warm: int, mode: str, hist_every: int) -> dict:
    import mxnet as mx

    if mode == "auto":
        mode = "estimator" if _handler_available() else "loop"
    net, data, trainer, loss_fn = _net_and_data()
    total = warm + batches
    if mode == "loop":
        from mxnet import autograd

        peer = None if name == "none" else _PeerLog(name, logdir, net.collect_params(), hist_every)
        t0 = 0.0
        for i in range(total):
            if i == warm:
                mx.nd.waitall()
                t0 = pc()
            x, y = data[i % N_DATA]
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            if peer is not None:
                peer.log(i, loss)
            trainer.step(BATCH)
        mx.nd.waitall()
        t1 = pc()
        if peer is not None:
            peer.close()
        return {"mode": mode, "ms_per_batch": (t1 - t0) / batches * 1e3, "batches": batches,
                "what": "manual loop"}

    import logging

    from mxnet.gluon.contrib.estimator import BatchEnd, Estimator

    logging.getLogger().setLevel(logging.WARNING)

    class Timer(BatchEnd):
        priority = 10_000  # after every other handler, ours included

        def __init__(self) -> None:
            self.i, self.t0, self.t1 = 0, 0.0, 0.0

        def batch_end(self, estimator, *args, **kwargs):
            self.i += 1
            if self.i == warm:
                mx.nd.waitall()
                self.t0 = pc()
            elif self.i == total:
                mx.nd.waitall()
                self.t1 = pc()
            return False

    class PeerHandler(BatchEnd):
        priority = 1000  # where TensorBoardHandler runs

        def __init__(self) -> None:
            self.step, self.peer = 0, None

        def batch_end(self, estimator, *args, **kwargs):
            if self.peer is None:
                self.peer = _PeerLog(name, logdir, estimator.net.collect_params(), hist_every)
            self.peer.log(self.step, kwargs["loss"][0])
            self.step += 1
            return False

    est = Estimator(net, loss_fn, trainer=trainer, context=mx.cpu())
    est.logger.setLevel(logging.WARNING)
    timer = Timer()
    handlers = [timer]
    what = "Estimator.fit, no logging handler"
    peer_handler = None
    if name == "gluon_tb":
        from gluon_tb import TensorBoardHandler

        handlers.append(TensorBoardHandler(logdir, batch_period=1, histogram_period=hist_every))
        what = "Estimator.fit + TensorBoardHandler(batch_period=1, histogram_period=%d)" % hist_every
    elif name != "none":
        peer_handler = PeerHandler()
        handlers.append(peer_handler)
        what = "Estimator.fit + BatchEnd handler calling the writer"
    from mxnet.gluon.data import DataLoader

    class Batches(DataLoader):  # the Estimator takes only DataLoaders: pre-made batches, no loading cost
        def __init__(self) -> None:
            self._worker_pool = None

        def __iter__(self):
            return (data[i % N_DATA] for i in range(total))

        def __len__(self) -> int:
            return total

    est.fit(Batches(), epochs=1, event_handlers=handlers)
    if peer_handler is not None and peer_handler.peer is not None:
        peer_handler.peer.close()
    return {"mode": mode, "ms_per_batch": (timer.t1 - timer.t0) / (total - warm) * 1e3, "batches": batches,
            "what": what}
