"""The epoch-level scalars of :class:`TensorBoardHandler`, combined over workers.

``epoch_<metric>`` of runs ``train`` and ``validation`` (validation only for the epochs
in which the estimator validated), ``epoch_learning_rate`` and
``epoch_samples_per_second``. With several workers and ``distributed="rank0"`` the
values are the mean over the workers (the throughput their sum), see ``_dist.py``.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from ._base import TRAIN, VALIDATION, RunWriters, Wrap, is_loss, loss_total, scores, wrap
from ._dist import Worker, WorkerMean, detect, place

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

    def train_begin(self, estimator: Any) -> Optional[Wrap]:
        """Find this worker's place; returns the hook that counts validation batches."""
        self.worker = detect(estimator.trainer)
        self._mean = place(self._out, self.worker, self._mode)
        self.final = {}
        tap = wrap(estimator.batch_processor, ("evaluate_batch",), self._count_validation)
        self._val_hooked = tap is not None
        self._val_seen = self._val_batches if tap is not None else None
        return tap

    def epoch_begin(self, estimator: Any) -> None:
        self._samples = self._batches = 0
        has_loss = any(is_loss(m) for m in estimator.train_metrics)
        self._own_loss, self._own_count = (None if has_loss else 0), 0
        self._t0 = time.perf_counter()

    def see_batch(self, losses: List[Any], batch: Any) -> None:
        self._batches += 1
        if losses:
            for l in losses:
                shape = l.shape  # one call into MXNet each
                self._samples += int(shape[0]) if shape else 1
        elif isinstance(batch, (list, tuple)) and batch and hasattr(batch[0], "shape"):
            self._samples += int(batch[0].shape[0])
        if losses and self._own_loss is not None:  # the estimator has no loss metric
            total, count = loss_total(losses)
            self._own_loss = total if self._own_loss == 0 else self._own_loss + total
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
        self._out.write(TRAIN, "add_scalar", "epoch_learning_rate", estimator.trainer.learning_rate, epoch)
        if rate == rate:
            self._out.write(TRAIN, "add_scalar", "epoch_samples_per_second", rate, epoch)
        if fresh and not all(v != v for _, v in val):  # all NaN: nothing was evaluated
            self._log(VALIDATION, val, epoch)

    # ------------------------------------------------------------ pieces
    def _count_validation(self) -> None:
        self._val_batches += 1

    def _validation(self, ms: List[Any]) -> Tuple[Pairs, bool]:
        """The validation values, and whether the estimator validated in this epoch."""
        if self._val_hooked:
            fresh = self._val_batches != self._val_seen
            self._val_seen = self._val_batches
        else:  # no hook: new values mean a new validation
            snap = tuple(tuple(m.get_name_value()) for m in ms)
            fresh, self._val_seen = snap != self._val_seen, snap
        pairs = scores(ms)
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
            self._out.write(run, "add_scalar", f"epoch_{tag}", v, epoch)
