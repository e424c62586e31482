"""The epoch-level scalars of :class:`~._estimator.TensorBoardHandler`, combined over workers.

``epoch_<metric>`` of runs ``train`` and ``validation`` (validation only for the epochs
in which the estimator validated), ``epoch_learning_rate`` and
``epoch_samples_per_second``. ``epoch_loss`` is always there: the estimator's own loss
metric when it has one, otherwise the mean per-sample loss of the epoch's batches (train)
or of the last validation pass (validation), summed on MXNet's engine as the batches come
and read by the writer thread: nothing waits for a value on the training thread. With
several workers and ``distributed="rank0"`` the values are the mean over the workers (the
throughput their sum), see ``_dist.py``.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Tuple

from ..writer import SummaryWriter
from ._dist import Worker, WorkerMean, detect, place
from ._hooks import FitScope, Wrap, wrap
from ._metric_names import is_loss, scores
from ._run_writers import TRAIN, VALIDATION, RunWriters

Pairs = List[Tuple[str, float]]


class EpochValues:
    """Counts what an epoch needs (samples, the loss when there is no loss metric) and logs it."""

    def __init__(self, out: RunWriters, mode: str) -> None:
        self._out, self._mode = out, mode
        self.worker = Worker()
        self._mean = WorkerMean(self.worker)
        self.final: Dict[str, float] = {}  # "hparams/<run>/epoch_<tag>" -> the last value
        self._val_batches = 0
        self._val_seen: Any = None
        self._val_hooked = False
        self._t0 = time.perf_counter()
        self._samples = 0
        self._batches = 0
        self._own_loss: Any = None
        self._own_count = 0
        self._val_own = False  # the estimator has no validation loss metric: sum it here
        self._val_loss: Any = None
        self._val_count = 0

    def train_begin(self, estimator: Any, scope: FitScope, on_dead: Any = None) -> List[Wrap]:
        """Find this worker's place; returns the hooks that follow validation."""
        self.worker = detect(estimator.trainer)
        self._mean = place(self._out, self.worker, self._mode)
        self.final = {}
        taps = []
        self._val_own = not any(is_loss(m) for m in estimator.val_metrics)
        self._val_loss, self._val_count = None, 0
        tap = wrap(estimator.batch_processor, ("evaluate_batch",), self._count_validation, scope=scope,
                   after=self._see_validation if self._val_own else None, on_dead=on_dead)
        self._val_hooked = tap is not None
        self._val_seen = self._val_batches if tap is not None else None
        if tap is not None:
            taps.append(tap)
            if self._val_own and estimator.val_metrics:  # evaluate() resets them first: a new pass
                reset = wrap(estimator.val_metrics[0], ("reset",), self._new_validation, scope=scope,
                             on_dead=on_dead)
                if reset is not None:
                    taps.append(reset)
        return taps

    def epoch_begin(self, estimator: Any) -> None:
        self._samples = self._batches = 0
        has_loss = any(is_loss(m) for m in estimator.train_metrics)
        self._own_loss, self._own_count = (None if has_loss else 0), 0
        self._t0 = time.perf_counter()

    def see_batch(self, losses: Sequence[Any], batch: Any) -> None:
        self._batches += 1
        if losses:
            for l in losses:
                shape = l.shape  # one call into MXNet each
                self._samples += int(shape[0]) if shape else 1
        elif isinstance(batch, (list, tuple)) and batch and hasattr(batch[0], "shape"):
            self._samples += int(batch[0].shape[0])
        if losses and self._own_loss is not None:  # the estimator has no loss metric
            total, count = loss_total(losses)
            self._own_loss = total if not self._own_count else self._own_loss + total
            self._own_count += count

    def epoch_end(self, estimator: Any, epoch: int) -> None:
        pairs = scores(estimator.train_metrics)
        if self._own_count:
            pairs.insert(0, ("loss", self._own_loss / float(self._own_count)))
        dt = time.perf_counter() - self._t0
        rate = self._samples / dt if dt > 0 and self._batches else float("nan")
        val, fresh = self._validation(estimator.val_metrics)
        pairs, rate, val = self._combine(pairs, rate, val)
        self._log(TRAIN, pairs, epoch)
        self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_learning_rate", estimator.trainer.learning_rate,
                       epoch)
        if rate == rate:
            self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_samples_per_second", rate, epoch)
        if self._val_own:  # no loss seen (a batch processor of its own): no point rather than NaN
            val = [(t, v) for t, v in val if not (t == "loss" and isinstance(v, float) and v != v)]
        if fresh and val and not all(isinstance(v, float) and v != v for _, v in val):  # all NaN: none
            self._log(VALIDATION, val, epoch)

    # ------------------------------------------------------------ pieces
    def _count_validation(self) -> None:
        self._val_batches += 1

    def _new_validation(self) -> None:
        self._val_loss, self._val_count = None, 0

    def _see_validation(self, result: Any) -> None:
        """After ``evaluate_batch``: add its per-sample losses (MXNet ops, no host read)."""
        losses = result[3] if isinstance(result, (list, tuple)) and len(result) == 4 else None
        if isinstance(losses, (list, tuple)) and losses and all(hasattr(l, "context") for l in losses):
            total, count = loss_total(list(losses))
            self._val_loss = total if not self._val_count else self._val_loss + total
            self._val_count += count

    def _validation(self, ms: List[Any]) -> Tuple[Pairs, bool]:
        """The validation values, and whether the estimator validated in this epoch."""
        if self._val_hooked:
            fresh = self._val_batches != self._val_seen
            self._val_seen = self._val_batches
        else:  # no hook: new values mean a new validation
            snap = tuple(tuple(m.get_name_value()) for m in ms)
            fresh, self._val_seen = snap != self._val_seen, snap
        pairs = scores(ms)
        if self._val_own and self._val_hooked:
            own: Any = self._val_loss / float(self._val_count) if self._val_count else float("nan")
            pairs.insert(0, ("loss", own))
            self._val_loss, self._val_count = None, 0
        if not fresh:  # still shared with the other workers, as NaN, so every call matches
            pairs = [(tag, float("nan")) for tag, _ in pairs]
        return pairs, fresh

    def _combine(self, pairs: Pairs, rate: float, val: Pairs) -> Tuple[Pairs, float, Pairs]:
        """Means over the workers (the throughput: their sum); as they are with one worker."""
        if not self._mean.shared:
            return pairs, rate, val
        n = len(pairs)
        got = self._mean([v for _, v in pairs] + [rate] + [v for _, v in val])
        return ([(t, got[i]) for i, (t, _) in enumerate(pairs)], got[n] * self.worker.size,
                [(t, got[n + 1 + i]) for i, (t, _) in enumerate(val)])

    def _log(self, run: str, pairs: Pairs, epoch: int) -> None:
        for tag, v in pairs:
            self.final[f"hparams/{run}/epoch_{tag}"] = v
            self._out.call(run, SummaryWriter.add_scalar, f"epoch_{tag}", v, epoch)


def loss_total(losses: Sequence[Any]) -> Tuple[Any, int]:
    """Sum over all elements of the per-device losses (an NDArray, no host sync) and their count."""
    ctx = losses[0].context
    total = losses[0].sum()
    for l in losses[1:]:
        total = total + l.sum().as_in_context(ctx)
    return total, sum(int(l.size) for l in losses)
