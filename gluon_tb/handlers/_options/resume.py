"""Where a handler's first ``fit`` starts counting: a resumed training goes on, it does not restart.

A training resumed from a checkpoint in a new process must continue its curves: epochs and
global batch indices from where the checkpoint left off, each step once. In order:

1. ``initial_epoch=`` / ``initial_step=`` given to the handler (Keras's word) win;
2. an MXNet ``CheckpointHandler(resume_from_checkpoint=True)`` in the same ``fit`` that
   found a checkpoint (it runs before this handler, priority 0 < 1000, and keeps what it
   loaded in ``trained_epoch``/``trained_batch``, parsed from the checkpoint's name
   ``<prefix>-epoch<E>batch<B>``): with ``fit(epochs=)`` the next epoch is ``E + 1`` and the
   next batch the count of batches trained, ``B`` or ``B + 1`` (MXNet names it one short when
   the first launch already passed ``resume_from_checkpoint=True``; the optimizer's restored
   update count, else the loader's length, tells which: :func:`_batches_trained`); with
   ``fit(batches=)`` the next batch is ``B + 1`` and the epoch ``E`` (the one in progress);
3. otherwise a trainer whose optimizer has already made updates (``trainer.load_states``
   by hand, or a second ``fit`` in the same process with a new handler): the next batch is
   ``optimizer.num_update`` (Keras's ``optimizer.iterations``), the epoch that count over the
   training loader's length rounded up, when it has one (an epoch a handler cut short ended,
   and was logged, in the earlier ``fit``).

Points that an earlier process logged past the resume point (it crashed after saving the
checkpoint, or the training resumes from an older checkpoint) are hidden by TensorBoard's purge:
the first event file of each resumed run starts with a ``SessionLog.START`` at its own next step
(see :class:`~gluon_tb.writer.SummaryWriter`'s ``purge_step``): ``train_batch`` (batch-level
points, step = global batch index) at the next batch, ``train`` and ``validation`` (epoch-level
points, step = epoch) at the next epoch. That is why the two kinds of point live in runs of their
own: TensorBoard's Python reader purges every tag of a run at a START step, so one run on two step
axes has no purge step that serves both. Its Rust loader (``--load_fast``, the default) ignores
``SessionLog.START``; it drops a series' points at and after a step when a point at or before that
step comes again, so there each tag shows the resumed process's points once it logs them, and an
earlier point of a tag that the resumed process never logs again stays visible.

``Module.fit`` (:class:`ModuleSteps`, for ``TensorBoardCallback``) has no checkpoint handler
to ask: a resumed ``fit`` says ``begin_epoch=``, and the batch index is that epoch times the
training ``DataIter``'s batches per epoch (:func:`batches_before`); the same purge follows.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Mapping, NamedTuple, Optional

from ...writer._common.checks import is_python_int
from .._common.run_writers import TRAIN, TRAIN_BATCH, VALIDATION, RunWriters
from .._mxnet.hooks import FitScope


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
        trained = _batches_trained(estimator, scope.fit_locals().get("train_data"), e, b)
        return Start(e + 1, trained, f"CheckpointHandler (epoch {e}, batch {b})")
    return None


def _batches_trained(estimator: Any, train_data: Any, epoch: int, named: int) -> int:
    """How many batches the epoch checkpoint ``epoch<epoch>batch<named>`` holds: ``named`` or ``named + 1``.

    MXNet's epoch-end name is ``current_batch + trained_batch``: the count when the first launch
    had ``resume_from_checkpoint=False``, one less when it had ``True`` (``trained_batch`` is then
    -1, and each resumed launch keeps the offset). The update count that ``trainer.load_states``
    brought back, else ``epoch + 1`` whole epochs of the loader, says which; else ``named``.
    """
    trainer: Any = getattr(estimator, "trainer", None)
    try:
        done = int(trainer.optimizer.num_update)  # restored from the checkpoint's .states
    except (AttributeError, TypeError, ValueError):
        done = -1
    if done in (named, named + 1):
        return done
    whole = batches_before(train_data, epoch + 1)
    return whole if whole is not None and whole in (named, named + 1) else named


def _from_optimizer(estimator: Any, scope: FitScope) -> Optional[Start]:
    trainer: Any = getattr(estimator, "trainer", None)
    try:
        done = int(trainer.optimizer.num_update)  # a Python int, kept by the optimizer
    except (AttributeError, TypeError, ValueError):
        return None
    if done <= 0:
        return None
    per_epoch = batches_before(scope.fit_locals().get("train_data"), 1)
    # an epoch that was cut short (a handler stopped it) still ended and was logged: go past it
    return Start(-(-done // per_epoch) if per_epoch else 0, done, f"the optimizer's update count ({done})")


def continue_at(out: RunWriters, epoch: int, step: int, source: str) -> None:
    """A first ``fit`` that starts past 0: hide what an earlier process logged from there on
    (``train_batch`` from the batch index, ``train`` and ``validation`` from the epoch) and say
    where it starts.

    An index of 0 purges nothing: it would hide every earlier point of its runs. A training that
    starts at 0 in a log directory that already holds another's events is told so (once): its
    points would hide the earlier ones (TensorBoard's Rust loader) or be drawn over them (its
    Python loader).
    """
    if not (step or epoch):
        if "://" not in out.logdir:  # a URL directory is not listed
            held = [r for r in (TRAIN, TRAIN_BATCH) if run_has_events(out.logdir, r)]
            if held:
                out.say_once("reused", f"gluon_tb: {os.path.join(out.logdir, held[0])} already holds the events "
                             "of an earlier training, and this one starts again at epoch 0, batch 0: "
                             "TensorBoard's default loader reads the step going back as a restart and shows "
                             "only this training's points, its Python loader (--load_fast=false) both on the "
                             "same curves. Give each training its own logdir "
                             "(logs/<name or time>), or delete the old one; to continue that training, pass "
                             "initial_epoch= and initial_step=", logging.WARNING)
        return
    if step:
        out.purge_from(TRAIN_BATCH, step)
    if epoch:
        out.purge_from(TRAIN, epoch)
        out.purge_from(VALIDATION, epoch)
    out.say_once("resume", f"gluon_tb: continuing at epoch {epoch}, batch {step} (from {source})")


def run_has_events(logdir: str, run: str) -> bool:
    """Whether the run directory already holds an event file (an earlier process logged there).

    Asked before this process writes anything. A URL log directory is not listed: taken as yes."""
    if "://" in logdir:
        return True
    try:
        return any(n.startswith("events.out.tfevents.") for n in os.listdir(os.path.join(logdir, run)))
    except OSError:
        return False


def graph_logged_before(out: RunWriters, continues: bool) -> bool:
    """Whether a first ``fit`` that continues a training in a run directory that already holds
    events (``continues``, found before anything was written) skips the graph: the process that
    began the training logged it in ``train``, and TensorBoard keeps one graph per run (a second
    one is a warning, and replaces the first). A resumed training in a new log directory logs it."""
    if continues:
        out.say_once("graph-resumed", "gluon_tb: the graph is not logged again: this fit continues a "
                     "training, whose first process logged it")
    return continues


# ---------------------------------------------------------------- Module.fit
def batches_before(data: Any, epochs: int) -> Optional[int]:
    """How many batches ``epochs`` whole epochs of the ``DataIter`` ``data`` make; ``None``: unknown.

    ``len(data)`` when it has one; a ``ResizeIter``'s ``size``; an ``NDArrayIter``'s
    ``num_data`` and ``batch_size`` by its ``last_batch_handle``: ``"pad"`` rounds the last
    batch up, ``"discard"`` drops it, ``"roll_over"`` carries it into the next epoch (what
    ``epochs`` epochs in one process make: ``epochs * num_data // batch_size``).
    """
    n: Any
    try:
        n = len(data)
    except TypeError:
        n = None
    if n is None and hasattr(data, "data_iter"):
        n = getattr(data, "size", None)  # mx.io.ResizeIter
    if is_python_int(n):
        return n * epochs if n > 0 else None
    total, size = getattr(data, "num_data", None), getattr(data, "batch_size", None)
    if not (is_python_int(total) and total > 0 and is_python_int(size) and size > 0):
        return None
    handle = getattr(data, "last_batch_handle", "pad")
    if handle == "pad":
        return -(-total // size) * epochs
    if handle == "discard":
        return total // size * epochs
    if handle == "roll_over":
        return epochs * total // size
    return None


class ModuleSteps:
    """The epoch and global batch indices of a ``TensorBoardCallback`` over its ``fit`` calls.

    ``Module.fit`` numbers its epochs from ``begin_epoch`` and tells a callback nothing of
    global batches. The callback's first ``fit`` starts at ``initial_epoch`` (else
    ``begin_epoch``) and ``initial_step`` (else that epoch times ``train_data``'s batches per
    epoch, see :func:`batches_before`); when it starts past 0, ``train_batch`` is purged at
    the step, ``train`` and ``validation`` at the epoch, as for the estimator. A later ``fit`` (or a refit
    after one that raised) continues: its batches go on from the last one logged, its epochs
    from ``max(begin_epoch, the epoch after the last one that ended)``.
    """

    def __init__(self, initial_epoch: Optional[int], initial_step: Optional[int]) -> None:
        self._initial = (initial_epoch, initial_step)
        self.step = 0  # global index of the next batch
        self.next_epoch = 0  # the epoch after the last one that ended
        self.shift = 0  # logged epoch - Module's epoch, for the running fit
        self.fits = 0
        self.resumed_from = ""  # what the first fit's starting point was found from
        self.continues_run = False  # resumed into a run directory an earlier process wrote

    def fit_begins(self, fit_locals: Mapping[str, Any], out: RunWriters) -> None:
        """At the first batch of a ``fit`` (before anything is written): where it starts."""
        begin = fit_locals.get("begin_epoch") or 0
        self.fits += 1
        if self.fits > 1:
            self.shift = max(begin, self.next_epoch) - begin
            return
        initial_epoch, initial_step = self._initial
        epoch = begin if initial_epoch is None else initial_epoch
        step, source = initial_step, "initial_epoch/initial_step"
        if initial_step is None and epoch:
            data = fit_locals.get("train_data")
            step = batches_before(data, epoch)
            if step is None:
                out.say_once("resume-len", f"gluon_tb: the batch steps start at 0 although fit starts at "
                             f"epoch {epoch}: the batches per epoch of {type(data).__name__} are unknown; "
                             f"pass TensorBoardCallback(initial_step=<epoch {epoch} x batches per epoch>) "
                             "to continue them", logging.WARNING)
            if initial_epoch is None:
                known = "the length" if step is not None else "no known length"
                source = f"begin_epoch={begin} and {known} of {type(data).__name__}"
        self.shift, self.step = epoch - begin, step or 0
        if self.step or epoch:
            self.resumed_from = source
        self.continues_run = bool(self.resumed_from) and run_has_events(out.logdir, TRAIN)
        continue_at(out, epoch, self.step, source)

    def next_batch(self) -> int:
        """The global index of this batch (and count it)."""
        k = self.step
        self.step += 1
        return k

    def epoch(self, module_epoch: int) -> int:
        """The logged index of Module's epoch ``module_epoch``."""
        return module_epoch + self.shift

    def epoch_ended(self, epoch: int) -> None:
        self.next_epoch = max(self.next_epoch, epoch + 1)
