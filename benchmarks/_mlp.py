"""Gluon MLP 784-512-512-10, batch 128, CPU, synthetic data: ms/batch with and without logging.

``Estimator.fit`` over pre-made batches, blocks with and without logging alternated in one
process (:func:`run_mlp_paired`). gluon_tb is measured through its
``TensorBoardHandler(batch_period=1, histogram_period=10)`` (loss and metrics every batch,
gradient *and* weight histograms of every parameter every 10 batches); each peer through a
small ``BatchEnd`` handler doing what its users do: the loss as ``.asscalar()`` (mxboard's
``add_scalar`` calls ``float()`` on it, which an NDArray refuses); gradients as ``.asnumpy()``
for tensorboardX and torch, as NDArrays for mxboard (it converts them itself).
"""
from __future__ import annotations

import statistics
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


def run_mlp_paired(name: str, logdir: str, *, batches: int, warm: int, rounds: int,
                   hist_every: int) -> dict:
    """``Estimator.fit`` blocks with and without ``name``'s logging, alternated in one process.

    Each round runs one block of ``warm + batches`` batches without logging and one with it
    (A B, then B A the next round, so a drift of the machine's speed cancels), on the same
    net, trainer and data. Each block is timed from its batch ``warm`` to the end of
    ``train_end`` (the writer closed: everything it was given is on disk), ended by
    ``waitall()``. The ratio of a round is (block with logging) / (block without); the
    process reports their median. Each logging block writes to ``<logdir>/block<r>`` with a
    new handler and a new writer, so every block pays for opening and closing its writer.
    """
    import logging

    import mxnet as mx
    from mxnet.gluon.contrib.estimator import BatchEnd, Estimator, TrainBegin, TrainEnd
    from mxnet.gluon.data import DataLoader

    logging.getLogger().setLevel(logging.WARNING)
    net, data, trainer, loss_fn = _net_and_data()
    total = warm + batches

    class Timer(TrainBegin, BatchEnd, TrainEnd):
        priority = 10_000  # after every other handler, ours included (train_end too)

        def train_begin(self, estimator, *args, **kwargs):
            self.i, self.t0, self.t1, self.ends = 0, 0.0, 0.0, []

        def batch_end(self, estimator, *args, **kwargs):
            self.i += 1
            if self.i == warm:
                mx.nd.waitall()
                self.t0 = pc()
            if self.i >= warm:
                self.ends.append(pc())  # batch_end of batch i - 1 (from 0)
            return False

        def train_end(self, estimator, *args, **kwargs):
            mx.nd.waitall()
            self.t1 = pc()

    class PeerHandler(BatchEnd, TrainEnd):
        priority = 1000  # where TensorBoardHandler runs

        def __init__(self, logdir: str) -> None:
            self.step, self.peer, self.logdir = 0, None, logdir

        def batch_end(self, estimator, *args, **kwargs):
            if self.peer is None:
                self.peer = _PeerLog(name, self.logdir, estimator.net.collect_params(), hist_every)
            self.peer.log(self.step, kwargs["loss"][0])
            self.step += 1
            return False

        def train_end(self, estimator, *args, **kwargs):
            if self.peer is not None:
                self.peer.close()

    class Batches(DataLoader):  # the Estimator takes only DataLoaders: pre-made batches, no loading cost
        def __init__(self) -> None:
            self._worker_pool = None

        def __iter__(self):
            return (data[i % N_DATA] for i in range(total))

        def __len__(self) -> int:
            return total

    est = Estimator(net, loss_fn, trainer=trainer, context=mx.cpu())
    est.logger.setLevel(logging.WARNING)
    timer = Timer()

    def block(r: int, logging_on: bool) -> float:
        handlers = [timer]
        if logging_on:
            d = f"{logdir}/block{r}"
            if name == "gluon_tb":
                from gluon_tb import TensorBoardHandler

                handlers.append(TensorBoardHandler(d, batch_period=1, histogram_period=hist_every))
            else:
                handlers.append(PeerHandler(d))
        est.fit(Batches(), epochs=1, event_handlers=handlers)
        # ms of each batch from the previous batch_end to its own, by position k mod hist_every
        # (0: the histogram batches), for a breakdown of where logging costs
        took = np.diff(timer.ends) * 1e3
        pos = np.arange(warm, warm + took.size) % hist_every
        positions[logging_on].append([float(np.median(took[pos == p])) for p in range(hist_every)])
        return (timer.t1 - timer.t0) / (total - warm) * 1e3

    on, off = [], []
    positions: dict = {True: [], False: []}
    for r in range(rounds):
        for logging_on in ((False, True) if r % 2 == 0 else (True, False)):
            (on if logging_on else off).append(block(r, logging_on))
    ratios = [a / b for a, b in zip(on, off)]
    by_pos = {k: [round(float(x), 4) for x in np.median(np.array(v), axis=0)] for k, v in positions.items()}
    what = ("Estimator.fit + TensorBoardHandler(batch_period=1, histogram_period=%d)" % hist_every
            if name == "gluon_tb" else "Estimator.fit + BatchEnd handler calling the writer")
    return {"mode": "paired", "ms_per_batch": statistics.median(on), "ms_none": statistics.median(off),
            "ratio": statistics.median(ratios), "ratios": [round(x, 4) for x in ratios],
            "position_ms": by_pos[True], "position_ms_none": by_pos[False],
            "batches": batches, "rounds": rounds, "what": what}
