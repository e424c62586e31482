"""Where a handler's first ``fit`` starts counting: a resumed training goes on, it does not restart.

A training resumed from a checkpoint in a new process must continue its curves: epochs and
global batch indices from where the checkpoint left off, each step once. In order:

1. ``initial_epoch=`` / ``initial_step=`` given to the handler (Keras's word) win;
2. an MXNet ``CheckpointHandler(resume_from_checkpoint=True)`` in the same ``fit`` that
   found a checkpoint (it runs before this handler, priority 0 < 1000, and keeps what it
   loaded in ``trained_epoch``/``trained_batch``, parsed from the checkpoint's name
   ``<prefix>-epoch<E>batch<B>``): with ``fit(epochs=)`` the next epoch is ``E + 1`` and the
   next batch ``B`` (the count of batches trained); with ``fit(batches=)`` the next batch is
   ``B + 1`` and the epoch ``E`` (the one that was in progress);
3. otherwise a trainer whose optimizer has already made updates (``trainer.load_states``
   by hand, or a second ``fit`` in the same process with a new handler): the next batch is
   ``optimizer.num_update`` (Keras's ``optimizer.iterations``), the epoch that count over the
   training loader's length, when it has one.

Points that an earlier process logged past the resume point (it crashed after saving the
checkpoint) are hidden by TensorBoard's purge: the first event file of the resumed run
``train`` starts with a ``SessionLog.START`` at the next batch index, ``validation`` at the
next epoch (see :class:`~gluon_tb.writer.SummaryWriter`'s ``purge_step``). One purge step per
run: epoch-level points of ``train`` that the earlier process logged after its checkpoint
stay visible when checkpoints are further apart than epochs (``epoch_period > 1``).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ._hooks import FitScope


class Start(NamedTuple):
    epoch: int
    step: int
    source: str  # "" when nothing was resumed


def resume_point(estimator: Any, scope: FitScope, initial_epoch: Optional[int],
                 initial_step: Optional[int]) -> Start:
    """The epoch and global batch index at which this handler's first ``fit`` starts."""
    found = _from_checkpoint(estimator, scope) or _from_optimizer(estimator, scope)
    epoch = initial_epoch if initial_epoch is not None else (found.epoch if found else 0)
    step = initial_step if initial_step is not None else (found.step if found else 0)
    if initial_epoch is not None or initial_step is not None:
        return Start(epoch, step, "initial_epoch/initial_step")
    return Start(epoch, step, found.source if found else "")


def _from_checkpoint(estimator: Any, scope: FitScope) -> Optional[Start]:
    try:
        from mxnet.gluon.contrib.estimator import CheckpointHandler
    except ImportError:  # pragma: no cover - every MXNet with an Estimator has it
        return None
    for h in scope.fit_locals().get("event_handlers") or ():
        if not (isinstance(h, CheckpointHandler) and h.resume_from_checkpoint):
            continue
        e, b = getattr(h, "trained_epoch", -1), getattr(h, "trained_batch", -1)
        if not (isinstance(e, int) and isinstance(b, int)) or e < 0:
            continue
        if getattr(estimator, "max_batch", None):
            return Start(e, b + 1, f"CheckpointHandler (epoch {e}, batch {b})")
        return Start(e + 1, b, f"CheckpointHandler (epoch {e}, batch {b})")
    return None


def _from_optimizer(estimator: Any, scope: FitScope) -> Optional[Start]:
    trainer = getattr(estimator, "trainer", None)
    try:
        done = int(trainer.optimizer.num_update)  # a Python int, kept by the optimizer
    except (AttributeError, TypeError, ValueError):
        return None
    if done <= 0:
        return None
    epoch = 0
    data = scope.fit_locals().get("train_data")
    try:
        per_epoch = len(data)
    except TypeError:
        per_epoch = 0
    if per_epoch > 0:
        epoch = done // per_epoch
    return Start(epoch, done, f"the optimizer's update count ({done})")
