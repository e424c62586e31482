"""The epoch-level scalars of :class:`~._estimator.TensorBoardHandler`, combined over workers.

``epoch_<metric>`` of runs ``train`` and ``validation`` (validation only for the epochs
in which the estimator validated): each metric's epoch-wide value (``get_global()``, which a
``reset_local()`` inside the epoch, as gluon-nlp's ``MetricResetHandler`` makes, leaves intact).
``epoch_learning_rate``: the rate the epoch's batches trained with: read as ``trainer.step`` (or
``update``) returns from the epoch's first update, so a handler that decays the rate at
``epoch_end`` changes the next epoch's point, and one that sets each batch's rate at
``batch_begin`` and puts the base rate back at its ``batch_end`` has its batch rate logged.
``epoch_samples_per_second``: the samples of the epoch's batches (each batch's data size along
``fit(batch_axis=)``, as the estimator splits it) over the epoch's time.

``epoch_loss`` is always there: the estimator's own loss metric when it has one, otherwise the
mean of every value the batch processor returned as its loss in the epoch (train) or in the last
validation pass (validation). That is the mean per-sample loss when it returns per-sample losses
(MXNet's default), and the mean of its per-batch values when it returns one value per batch
(a summed loss): the value is what the training computed, not rescaled. Python numbers, numpy
arrays and NDArrays of any shape are accepted; anything else is left out with one warning.
The writer thread adds up the batch losses as it reads them for ``batch_loss`` (each batch's
losses go to it in one queued item, with no event when ``batch_loss`` is not due), and reads the
epoch's value after them (a running ``Mean``, ``loss_into``): nothing waits for a value, and
nothing is added up, on the training thread or on MXNet's engine. With several workers and
``distributed="rank0"`` the values are the mean over the workers (the throughput their sum), see
``_options/distributed.py``: combined at the epoch's end on the training thread, the loss is then
summed there, on MXNet's engine a chunk of batches at a time (:class:`LossSum`).
"""
from __future__ import annotations

import ctypes
import logging
import math
import numbers
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...writer import SummaryWriter
from ...writer._common.arrays import Mean
from .._common.run_writers import TRAIN, VALIDATION, RunWriters
from .._mxnet.hooks import FitScope, Wrap, wrap
from .._mxnet.metric_names import is_loss, scores
from .._options.distributed import Worker, WorkerMean, detect, place

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
        self._samples_known = True
        self._batches = 0
        self._lr: Any = None
        self._own_loss: Optional[LossSum] = None
        #: the epoch's loss as the writer thread adds up the batch losses it reads (None: summed
        #: here by ``_own_loss``, or by the estimator's Loss metric); see :meth:`epoch_begin`
        self.loss_into: Optional[Mean] = None
        self._into_batches = 0
        self._val_own = False  # the estimator has no validation loss metric: sum it here
        self._val_loss = LossSum()
        self._val_into: Optional[Mean] = None  # as loss_into, for the validation pass
        self._val_into_batches = 0

    def place_worker(self, estimator: Any) -> None:
        """Find this worker's place (a rank other than 0 in ``"rank0"`` mode: muted), before the
        handler's first words of a ``fit`` (a used log directory is rank 0's to say)."""
        self.worker = detect(estimator.trainer)
        self._mean = place(self._out, self.worker, self._mode)

    def train_begin(self, estimator: Any, scope: FitScope, on_dead: Any = None) -> List[Wrap]:
        """After :meth:`place_worker` for this fit; returns the hooks that follow validation."""
        self.final = {}
        taps = []
        self._val_own = not any(is_loss(m) for m in estimator.val_metrics)
        self._new_validation()
        tap = wrap(estimator.batch_processor, ("evaluate_batch",), self._count_validation, scope=scope,
                   after=self._see_validation if self._val_own else None, on_dead=on_dead)
        self._val_hooked = tap is not None
        self._val_seen = self._val_batches if tap is not None else None
        # the rate as the update that used it left it: a handler may change it for each batch at
        # batch_begin and put the base rate back at its batch_end, before ours (gluon-nlp's word
        # language model scales it by the batch's sequence length); an lr_scheduler has counted
        # the update by then
        rate = wrap(estimator.trainer, ("step", "update"), None, scope=scope,
                    after=lambda _result: self._updated(estimator), on_dead=on_dead)
        if rate is not None:
            taps.append(rate)
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
        self._samples_known, self._lr = True, None
        has_loss = any(is_loss(m) for m in estimator.train_metrics)
        # without a Loss metric: the writer thread adds up the batch losses it reads for batch_loss
        # (nothing more on the training thread or MXNet's engine), unless the value is combined
        # over workers here at the epoch's end (it must then be read here: LossSum)
        shared = self._mean.shared
        self._own_loss = None if has_loss or not shared else LossSum()
        self.loss_into = None if has_loss or shared else Mean([], (0.0, 0))
        self._into_batches = 0
        self._t0 = time.perf_counter()

    def see_batch(self, estimator: Any, losses: Sequence[Any], batch: Any) -> bool:
        """After the batch's update; returns whether its losses can be averaged (``batch_loss``)."""
        if not self._batches and self._lr is None:  # no update seen (the trainer could not be hooked)
            self._lr = _learning_rate(estimator)
        self._batches += 1
        n = batch_size(batch, getattr(estimator, "batch_axis", 0))
        if n is None:
            self._samples_known = False
            self._out.say_once("samples", "gluon_tb: the batch's data has no size along the estimator's "
                               "batch_axis; epoch_samples_per_second is not logged", logging.WARNING)
        else:
            self._samples += n
        kinds = [loss_kind(l) for l in losses]
        if None in kinds:
            bad = losses[kinds.index(None)]
            self._out.say_once("loss", f"gluon_tb: the batch processor's loss is a {type(bad).__name__}, "
                               "not a number or array; batch_loss and epoch_loss (without a loss metric) "
                               "are not logged for such batches", logging.WARNING)
            return False
        if self._own_loss is not None:
            for l, kind in zip(losses, kinds):
                self._own_loss.add(l, kind)
        elif self.loss_into is not None and losses:  # the handler queues them into loss_into
            self._into_batches += 1
        return True

    def _updated(self, estimator: Any) -> None:
        """After ``trainer.step``/``update``: the epoch's first update's rate."""
        if self._lr is None:
            self._lr = _learning_rate(estimator)

    def epoch_end(self, estimator: Any, epoch: int) -> None:
        pairs = scores(estimator.train_metrics, use_global=True)
        if self._own_loss is not None and self._own_loss.count:
            pairs.insert(0, ("loss", self._own_loss.mean()))
        elif self.loss_into is not None and self._into_batches:  # read after the batches' losses
            summed: Any = self.loss_into
            pairs.insert(0, ("loss", summed))
        dt = time.perf_counter() - self._t0
        known = dt > 0 and self._batches and self._samples_known
        rate = self._samples / dt if known else float("nan")
        val, fresh = self._validation(estimator.val_metrics)
        pairs, rate, val = self._combine(pairs, rate, val)
        self._log(TRAIN, pairs, epoch)
        lr = self._lr if self._lr is not None else _learning_rate(estimator)
        if lr is not None:
            self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_learning_rate", lr, epoch)
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
        shared = self._mean.shared
        self._val_loss = LossSum()
        self._val_into = None if shared else Mean([], (0.0, 0))
        self._val_into_batches = 0

    def _see_validation(self, result: Any) -> None:
        """After ``evaluate_batch``: add its losses (NDArrays: MXNet ops, no host read)."""
        losses = result[3] if isinstance(result, (list, tuple)) and len(result) == 4 else None
        if losses is None:
            return
        losses = losses if isinstance(losses, (list, tuple)) else [losses]
        kinds = [loss_kind(l) for l in losses]
        if None not in kinds:
            if self._val_into is None:
                for l, kind in zip(losses, kinds):
                    self._val_loss.add(l, kind)
            elif losses:  # read and added up by the writer thread
                self._val_into_batches += 1
                self._out.later(VALIDATION, None, list(losses), 0, self._val_into)
        else:
            self._out.say_once("val-loss", "gluon_tb: evaluate_batch's loss is not a number or array; "
                               "validation/epoch_loss is not logged for such batches", logging.WARNING)

    def _validation(self, ms: List[Any]) -> Tuple[Pairs, bool]:
        """The validation values, and whether the estimator validated in this epoch."""
        if self._val_hooked:
            fresh = self._val_batches != self._val_seen
            self._val_seen = self._val_batches
        else:  # no hook: new values mean a new validation
            snap = tuple(tuple(m.get_name_value()) for m in ms)
            fresh, self._val_seen = snap != self._val_seen, snap
        pairs = scores(ms, use_global=True)
        if self._val_own and self._val_hooked:
            if self._val_into is not None:
                own: Any = self._val_into if self._val_into_batches else float("nan")
            else:
                own = self._val_loss.mean() if self._val_loss.count else float("nan")
            pairs.insert(0, ("loss", own))
            self._new_validation()
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


def batch_size(batch: Any, axis: int) -> Optional[int]:
    """The size of a batch's data (its first element) along ``axis``; ``None``: unknown."""
    data = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    shape = getattr(data, "shape", None)  # one call into MXNet
    if not isinstance(shape, tuple) or not -len(shape) <= axis < len(shape):
        return None
    return int(shape[axis])


_KINDS: Dict[type, str] = {}  # types whose every value is of one kind ("number", "ndarray")


def loss_kind(value: Any) -> Optional[str]:
    """``"number"``, ``"numpy"`` or ``"ndarray"``: how a returned loss is summed; ``None``: it cannot be.
    Known by the value's type after the first batch: one dict lookup (every batch, cold)."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        kind = "number"
    elif isinstance(value, np.ndarray):
        return "numpy" if value.dtype.kind in "biuf" else None  # by its dtype: not by its type
    # looked up on the type first: on an NDArray, context and shape are properties, and reading
    # one is a call into MXNet (tens of microseconds while the engine is busy)
    elif all(hasattr(type(value), a) for a in ("detach", "context", "shape")):
        kind = "ndarray"
    elif all(hasattr(type(value), a) or hasattr(value, a) for a in ("detach", "context", "shape")):
        return "ndarray"  # attributes of its own: not known for its type
    else:
        return None
    if len(_KINDS) < 64:
        _KINDS[type(value)] = kind
    return kind


def _learning_rate(estimator: Any) -> Any:
    try:
        return estimator.trainer.learning_rate  # a Python number the optimizer keeps
    except (AttributeError, TypeError, ValueError, UserWarning):
        return None


class LossSum:
    """The sum and count of the loss values of many batches; NDArrays added up on MXNet's engine.

    A batch's loss arrays are kept (detached from autograd: a view, no operation) until
    :data:`CHUNK` have come; then those of each shape and device are added by one ``add_n``, an
    array that stands for their values: one MXNet operation per chunk instead of two per batch
    (each costs the training thread tens of microseconds while the engine is busy). :meth:`mean`
    hands those arrays to the writer thread as a :class:`~gluon_tb.writer._common.arrays.Mean`,
    which sums them on the host in float64 and divides there: nothing more is queued on MXNet's
    engine at the epoch's end, and nothing is read here. Loss arrays are fresh outputs that
    nothing writes afterwards. Python numbers and numpy arrays (already on the host) are added
    in Python."""

    CHUNK = 64

    __slots__ = ("count", "_pending", "_parts", "_host", "_host_n")

    def __init__(self) -> None:
        self.count = 0
        self._pending: List[Tuple[Any, Tuple[int, ...]]] = []
        self._parts: List[Tuple[Any, int, bool]] = []  # (an add_n of losses, their count of values, False)
        self._host = 0.0
        self._host_n = 0

    def add(self, loss: Any, kind: Optional[str] = None) -> None:
        """One loss value of a kind :func:`loss_kind` accepts (``kind``: its kind, when known):
        every element counts once."""
        kind = kind or loss_kind(loss)
        if kind == "number":
            self._host += float(loss)
            n = 1
            self._host_n += 1
        elif kind == "numpy":
            self._host += float(loss.sum(dtype=np.float64))
            n = int(loss.size)
            self._host_n += n
        else:
            shape = tuple(loss.shape)  # one call into MXNet
            self._pending.append((detached(loss), shape))
            n = math.prod(shape)
        self.count += n
        if len(self._pending) >= self.CHUNK:
            self._fold()

    def mean(self) -> Any:
        """The mean of every value added so far: a float, or a ``Mean`` the writer thread reads
        (``float()``; no host read here)."""
        self._fold()
        if not self._parts:
            return self._host / self.count if self.count else float("nan")
        return Mean(list(self._parts), (self._host, self._host_n))

    def _fold(self) -> None:
        groups: Dict[Tuple[Any, Tuple[int, ...]], List[Any]] = {}
        for arr, shape in self._pending:
            if math.prod(shape) == 0:
                continue
            groups.setdefault((arr.context, shape), []).append(arr)
        self._pending = []
        for (_ctx, shape), arrs in groups.items():
            self._parts.append((_add_n(arrs), len(arrs) * math.prod(shape), False))


def detached(a: Any) -> Any:
    """``a.detach()``: for a legacy dense NDArray, without the storage-type read that ``detach``
    makes for the new handle (one call into MXNet fewer, every batch: the type says it is dense)."""
    import mxnet as mx

    if type(a) is not mx.nd.NDArray:
        return a.detach()
    from mxnet.base import _LIB, NDArrayHandle, check_call

    handle = NDArrayHandle()
    check_call(_LIB.MXNDArrayDetach(a.handle, ctypes.byref(handle)))
    return mx.nd.NDArray(handle)


def _add_n(arrays: List[Any]) -> Any:
    """The element-wise sum of same-shaped arrays on one device (one operation)."""
    import mxnet as mx

    if len(arrays) == 1:
        return arrays[0]
    if type(arrays[0]) is not mx.nd.NDArray:  # mx.np arrays: added one by one
        total = arrays[0]
        for a in arrays[1:]:
            total = total + a
        return total
    return mx.nd.add_n(*arrays)
