"""``Estimator.fit`` as users configure it, with and without logging, in one process.

Three configurations (:data:`CONFIGS`), each a plain ``Estimator(net, SoftmaxCrossEntropyLoss(),
train_metrics=Accuracy(), val_metrics=Accuracy(), trainer=...)`` (no Loss metric) fitted over
pre-made batches (no loading cost: the overhead is not diluted), 10 training and 2 validation
batches an epoch, validation data given to ``fit``:

* ``typical``: MLP 784-512-512-10, batch 128, SGD; gluon_tb: ``TensorBoardHandler(logdir)``
  (defaults: batch loss and accuracy every batch, epoch values, gradient and weight histograms
  at every epoch's last batch, the graph).
* ``alloptions``: a Conv2D(16, 3×3) + MaxPool(2) front on the same MLP, 1×28×28 inputs;
  gluon_tb: :data:`ALL_OPTIONS` (histograms and gradient health every batch, conv filters and
  feature maps every epoch, ``first_batch`` images, graph, hparams).
* ``sweep``: ``Embedding(V, 128)`` + Flatten + ``Dense(10)`` over 4 token ids a sample, batch
  64, Adam; V sets the parameter count (:func:`sweep_params`); default handler.

The peer (tensorboardX) logs the same things through :class:`_peer_fit.PeerFitLog`.
:func:`run_paired` alternates blocks (one ``fit`` of ``epochs`` epochs) without and with
logging; :func:`run_once` is one fit for the peak-RSS processes.
"""
from __future__ import annotations

import logging
import resource
import statistics
import time
from typing import Any, Dict, List, Optional

import numpy as np

pc = time.perf_counter
BATCHES, VAL_BATCHES, EMB_DIM, TOKENS = 10, 2, 128, 4
ALL_OPTIONS = dict(histogram_period=1, grad_health=True, conv_filters=True, images=True, graph=True,
                   hparams={"lr": 0.01, "batch_size": 128})
CONFIGS = ("typical", "alloptions", "sweep")


def sweep_params(vocab: int) -> int:
    """Parameters of Embedding(V, 128) + Dense(4*128 -> 10)."""
    return vocab * EMB_DIM + TOKENS * EMB_DIM * 10 + 10


def build(config: str, vocab: int = 0) -> Dict[str, Any]:
    """Net (initialized, hybridized), trainer, loss, pre-made train and validation batches."""
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon import nn

    mx.random.seed(0)
    rng = np.random.default_rng(0)
    net = nn.HybridSequential(prefix="net_")
    with net.name_scope():
        if config == "sweep":
            v, batch = vocab, 64
            net.add(nn.Embedding(v, EMB_DIM), nn.Flatten(), nn.Dense(10, in_units=TOKENS * EMB_DIM))
            shape: tuple = (TOKENS,)
            make_x = lambda: rng.integers(0, v, (batch,) + shape).astype(np.float32)  # noqa: E731
            opt, opt_args = "adam", {}
        else:
            batch = 128
            if config == "alloptions":
                net.add(nn.Conv2D(16, 3, activation="relu", in_channels=1), nn.MaxPool2D(2), nn.Flatten())
                shape, first = (1, 28, 28), 16 * 13 * 13
            else:
                shape, first = (784,), 784
            net.add(nn.Dense(512, activation="relu", in_units=first), nn.Dense(512, activation="relu", in_units=512),
                    nn.Dense(10, in_units=512))
            make_x = lambda: rng.random((batch,) + shape, dtype=np.float32)  # noqa: E731
            opt, opt_args = "sgd", {"learning_rate": 0.01}
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize()

    def batches(n: int) -> list:
        return [[mx.nd.array(make_x()), mx.nd.array(rng.integers(0, 10, batch).astype(np.float32))]
                for _ in range(n)]

    n_params = sum(p.data().size for p in net.collect_params().values())
    return {"net": net, "sizes": {n: int(p.data().size) for n, p in net.collect_params().items()
                                  if p.grad_req != "null"},
            "train": batches(BATCHES), "val": batches(VAL_BATCHES), "params": int(n_params),
            "trainer": gluon.Trainer(net.collect_params(), opt, opt_args), "batch": batch,
            "loss": gluon.loss.SoftmaxCrossEntropyLoss()}


def _loader(batches: list):
    from mxnet.gluon.data import DataLoader

    class Batches(DataLoader):  # the Estimator takes DataLoaders; these hand out pre-made batches
        def __init__(self) -> None:
            self._worker_pool = None

        def __iter__(self):
            return iter(batches)

        def __len__(self) -> int:
            return len(batches)

    return Batches()


def _estimator(s: Dict[str, Any]):
    import mxnet as mx
    from mxnet.gluon.contrib.estimator import Estimator

    logging.getLogger().setLevel(logging.WARNING)
    est = Estimator(s["net"], s["loss"], train_metrics=mx.metric.Accuracy(), val_metrics=mx.metric.Accuracy(),
                    trainer=s["trainer"], context=mx.cpu())
    est.logger.setLevel(logging.WARNING)
    return est


def handler(writer: str, config: str, logdir: str):
    """``writer``'s logging for ``config``, as one Estimator event handler."""
    if writer == "gluon_tb":
        from gluon_tb import TensorBoardHandler

        return TensorBoardHandler(logdir, **(ALL_OPTIONS if config == "alloptions" else {}))
    from _peer_fit import PeerFitLog

    return PeerFitLog(writer, logdir, every_batch=(config == "alloptions"))


def _timer():
    from mxnet.gluon.contrib.estimator import BatchEnd, EpochBegin, EpochEnd, TrainBegin, TrainEnd

    class Timer(TrainBegin, EpochBegin, BatchEnd, EpochEnd, TrainEnd):
        """After every other handler: when each train_begin, batch_end, epoch_end, train_end ended."""

        priority = 10 ** 9

        def __init__(self) -> None:
            self.epochs: List[tuple] = []
            self.ends: List[float] = []
            self.begun = self.ended = 0.0

        def train_begin(self, estimator, *args, **kwargs):
            self.begun = pc()

        def train_end(self, estimator, *args, **kwargs):
            self.ended = pc()

        def epoch_begin(self, estimator, *args, **kwargs):
            self.ends = []

        def batch_end(self, estimator, *args, **kwargs):
            self.ends.append(pc())
            return False

        def epoch_end(self, estimator, *args, **kwargs):
            self.epochs.append((self.ends, pc()))
            return False

    return Timer()


def _fit(est, s: Dict[str, Any], epochs: int, handlers: list) -> Dict[str, float]:
    """One ``fit``: its wall time (``waitall`` before and after); medians over epochs of the ms
    of batches 1..n-2, of batch 0 (from the previous ``epoch_end`` or ``train_begin``) and of
    the histogram step (from the end of batch n-2 to the end of ``epoch_end``: the last batch,
    validation, every handler's epoch end); the ms from the call to the end of ``train_begin``,
    and from the last ``epoch_end`` to the return (``train_end``: writers closed; ``waitall``)."""
    import mxnet as mx

    timer = _timer()
    mx.nd.waitall()
    t0 = pc()
    est.fit(_loader(s["train"]), val_data=_loader(s["val"]), epochs=epochs, event_handlers=handlers + [timer])
    mx.nd.waitall()
    wall = pc() - t0
    mid = [b - a for ends, _e in timer.epochs for a, b in zip(ends[:-2], ends[1:-1])]
    step = [e - ends[-2] for ends, e in timer.epochs if len(ends) >= 2]
    starts = [timer.begun] + [e for _ends, e in timer.epochs[:-1]]
    first = [ends[0] - t for (ends, _e), t in zip(timer.epochs, starts) if ends]
    return {"wall": wall, "begin_ms": (timer.begun - t0) * 1e3,
            "end_ms": (t0 + wall - timer.epochs[-1][1]) * 1e3, "first_ms": float(np.median(first)) * 1e3,
            "batch_ms": float(np.median(mid)) * 1e3 if mid else 0.0,
            "hist_step_ms": float(np.median(step)) * 1e3 if step else 0.0}


def run_paired(writer: str, config: str, logdir: str, *, rounds: int, epochs: int, vocab: int = 0) -> dict:
    """Blocks without and with ``writer``'s logging, alternated (A B, then B A) in one process.

    One block is one ``fit`` of ``epochs`` epochs, timed whole: every logging block makes a new
    handler writing to ``<logdir>/block<r>`` and closes it in ``train_end`` (everything on disk
    inside the block). A warm-up pair of one epoch each (``<logdir>/warm``) comes first. A
    round's ratio is (block with) / (block without); the overhead is their median. The
    histogram step's stall is the round's (with - without) of the step's median ms.
    """
    s = build(config, vocab)
    est = _estimator(s)
    _fit(est, s, 1, [])
    _fit(est, s, 1, [handler(writer, config, f"{logdir}/warm")])
    on: List[dict] = []
    off: List[dict] = []
    for r in range(rounds):
        for logging_on in ((False, True) if r % 2 == 0 else (True, False)):
            hs = [handler(writer, config, f"{logdir}/block{r}")] if logging_on else []
            (on if logging_on else off).append(_fit(est, s, epochs, hs))
    n = epochs * BATCHES
    ratios = [a["wall"] / b["wall"] for a, b in zip(on, off)]
    return {"config": config, "params": s["params"], "sizes": s["sizes"], "rounds": rounds, "epochs": epochs,
            "ratio": statistics.median(ratios), "ratios": [round(x, 4) for x in ratios],
            "ms_per_batch": statistics.median(x["wall"] for x in on) / n * 1e3,
            "ms_none": statistics.median(x["wall"] for x in off) / n * 1e3,
            "extra_ms_per_batch": statistics.median(a["wall"] - b["wall"] for a, b in zip(on, off)) / n * 1e3,
            "stall_ms": statistics.median(a["hist_step_ms"] - b["hist_step_ms"] for a, b in zip(on, off)),
            "batch_extra_ms": statistics.median(a["batch_ms"] - b["batch_ms"] for a, b in zip(on, off)),
            "first_extra_ms": statistics.median(a["first_ms"] - b["first_ms"] for a, b in zip(on, off)),
            "begin_extra_ms": statistics.median(a["begin_ms"] - b["begin_ms"] for a, b in zip(on, off)),
            "end_extra_ms": statistics.median(a["end_ms"] - b["end_ms"] for a, b in zip(on, off)),
            "hist_step_ms_none": statistics.median(x["hist_step_ms"] for x in off),
            "batch_ms_none": statistics.median(x["batch_ms"] for x in off)}


def run_once(writer: str, config: str, logdir: str, *, epochs: int, vocab: int = 0,
             logging_on: bool = True) -> dict:
    """One ``fit`` in a fresh process, for its peak RSS. Without logging the writer's package is
    imported all the same, so the difference is what logging holds, not the import."""
    import importlib

    importlib.import_module({"gluon_tb": "gluon_tb", "tensorboardX": "tensorboardX"}[writer])
    s = build(config, vocab)
    est = _estimator(s)
    before = _maxrss_mb()
    got = _fit(est, s, epochs, [handler(writer, config, f"{logdir}/block0")] if logging_on else [])
    return {"config": config, "params": s["params"], "sizes": s["sizes"], "epochs": epochs, "logging": logging_on,
            "maxrss_before_fit_mb": before, "maxrss_mb": _maxrss_mb(), "hwm_mb": _vm_hwm_mb(),
            "fit_s": got["wall"]}


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _vm_hwm_mb() -> Optional[float]:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None
