"""The one protocol every option's part speaks, whichever adapter drives it.

An option that looks inside the training (``conv_filters=``, ``embeddings=``, ``word_vectors=``,
``grad_health=``, ``profile_batch=``) is one file in this folder. That file holds the check of
the option's value and one :class:`Part` per adapter (the Gluon one reads the net, the Module
one the symbol), and ends with an :class:`Option` that names them; ``registry.py`` lists the
options and builds the parts that are on. Both adapters hand the parts the same events, with
what they know of ``fit`` at that point:

================  ===========================================  ===========================================
event             ``TensorBoardHandler`` (Estimator)           ``TensorBoardCallback`` (Module)
================  ===========================================  ===========================================
``prepare``       first in ``train_begin``                     the first batch of a ``fit``, first thing
``begin``         end of ``train_begin``                       the first batch of a ``fit``
``batch_begin``   ``batch_begin``                              (none: Module calls nothing before a batch)
``batch_end``     ``batch_end``, after the histograms          ``batch_end_callback``, after the histograms
``epoch_end``     ``epoch_end``                                ``epoch_end_callback``
``between``       (none)                                       after an epoch and its validation
``end``           ``train_end``                                the last epoch (and its validation) is over
``abandon``       the ``fit`` raised                           (none)
``close``         after ``end`` and ``abandon``                (none: ``close()`` sends ``end``)
================  ===========================================  ===========================================

Every method does nothing unless a part overrides it. A part hears nothing but ``prepare``,
``abandon`` and ``close`` on a worker that does not write (``distributed="rank0"``, rank > 0)
unless it sets :attr:`Part.runs_muted`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence

from .._common.run_writers import RunWriters
from .._common.schedule import every_epochs


@dataclass
class Fit:
    """What a part may read at the start of a ``fit``: the Gluon fields or the Module ones."""
    net: Any = None           # Gluon: the estimator's net
    estimator: Any = None     # Gluon: the estimator (its trainer and batch processor)
    scope: Any = None         # Gluon: the FitScope that bounds hooks to this fit
    on_dead: Optional[Callable[[], None]] = None  # Gluon: called by a hook that outlived its fit
    module: Any = None        # Module: the module (BatchEndParam.locals["self"])
    eval_data: Any = None     # Module: fit's eval_data


@dataclass
class Batch:
    """A batch that has ended (global index ``step``), after its update and its histograms."""
    step: int
    first_of_epoch: bool = False
    data: Any = None          # Gluon: the batch ([data, label]); Module: the DataBatch
    module: Any = None        # Module
    first_of_fit: bool = False
    last_of_epoch: bool = False
    last_of_fit: bool = False
    histograms_due: bool = False  # the histogram schedule was due (Module: grad_health read the batch)
    trainer: Any = None       # Gluon: the estimator's trainer
    losses: Sequence[Any] = ()  # Gluon: the loss arrays the batch processor returned


@dataclass
class Epoch:
    """An epoch that has ended (index ``epoch``)."""
    epoch: int
    last_of_fit: bool = False
    arg_params: Any = None    # Module: the host copies fit hands epoch_end_callback
    aux_params: Any = None
    trainer: Any = None       # Gluon: the estimator's trainer


class Part:
    """One option's work in a ``fit``: every event is a no-op unless overridden."""

    #: whether the part hears every event on a worker that does not write
    runs_muted: ClassVar[bool] = False
    #: the order in which the parts hear an event: the profiler first (its step spans the
    #: others' work), grad_health last (it judges after the others have logged)
    rank: ClassVar[int] = 0
    #: Module's profiler opens the next batch's range at ``batch_end``: it hears that event last
    last_at_batch_end: ClassVar[bool] = False

    def prepare(self, fit: Fit) -> None:
        """On every worker, before anything is hooked or written: raise on an option that does
        not fit the network (a layer that is not there)."""

    def begin(self, fit: Fit) -> Any:
        """The ``fit`` starts; may return a hook (``Wrap``) to remove when it ends."""
        return None

    def batch_begin(self, step: int) -> None:
        """Global batch ``step`` is about to be trained (Gluon only)."""

    def batch_end(self, batch: Batch) -> None:
        """A batch has ended."""

    def epoch_end(self, epoch: Epoch) -> None:
        """An epoch has ended."""

    def between(self, step: int) -> None:
        """An epoch and its validation are over; global batch ``step`` comes next (Module only)."""

    def end(self, last_step: int, last_epoch: int) -> None:
        """The ``fit`` is over; the writers are still open."""

    def abandon(self, last_step: int) -> None:
        """The ``fit`` raised: drop what is pending, log nothing more."""

    def close(self) -> None:
        """Release what the part holds (hooks on the net, probes)."""


class EveryEpochs(Part):
    """A part that logs every ``cfg.every`` epochs (``None``: only the last) and at the end of ``fit``.

    ``log(step)`` writes once per step. With ``last_at_epoch_end`` (the Module's parts) the last
    epoch is logged at its ``epoch_end``, before the validation that follows, and ``end`` adds nothing.
    """
    cfg: Any
    last_at_epoch_end: ClassVar[bool] = False

    def log(self, step: int) -> None:
        raise NotImplementedError

    def epoch_end(self, epoch: Epoch) -> None:
        if (self.last_at_epoch_end and epoch.last_of_fit) or every_epochs(self.cfg.every, epoch.epoch):
            self.log(epoch.epoch)

    def end(self, last_step: int, last_epoch: int) -> None:
        if not self.last_at_epoch_end:
            self.log(last_epoch)


@dataclass(frozen=True)
class Option:
    """A see-inside option: its argument name, its check, and its part for each adapter.

    ``check(value)`` returns the option's settings, or a false value when it is off; ``gluon`` and
    ``module`` make the part from those settings and the run writers. An option that works on
    the histogram schedule (``on_histograms``) is refused when ``histogram_period=None``.
    """
    name: str
    check: Callable[[Any], Any]
    gluon: Callable[[Any, RunWriters], Part]
    module: Callable[[Any, RunWriters], Part]
    on_histograms: bool = False
