"""The ``grad_health=`` option: gradient/weight norms and detectors, on the histogram schedule.

Scalars (run ``train_batch``, step = the global batch index of the check), per selected parameter
and ``global`` (over all of them):

* ``grad_norm/<name>``: ``rescale_grad · ‖g‖`` — the batch's gradient (summed over devices)
  as the optimizer applies it (for a per-sample loss, the gradient of the batch mean);
* ``weight_norm/<name>``: ``‖w‖`` before the update;
* ``update_ratio/<name>``: ``u / max(weight_norm, u)`` with ``u = lr · lr_mult · grad_norm``:
  plain SGD's step relative to the weight (momentum, Adam's scaling and weight decay are not
  modelled), at most 1. A step as large as the weight or larger counts as 1, so a
  zero-initialised bias's first steps read 1, not ``u / 1e-12`` (a spike of 1e10 that
  would flatten the chart); a parameter with neither gradient nor weight reads 0. ``global``'s
  ``u`` is the norm of the whole step (each parameter's ``lr_mult`` in its part).

Detectors, each reported once (a ``logging`` warning on ``gluon_tb.handlers`` and an
``add_text`` at tag ``grad_health`` at the step where the problem was seen, naming the
parameters), each optionally stopping training (``batch_end``/``epoch_end`` return True):

* ``nonfinite``: a gradient's sum of squares is NaN/±Inf (it holds NaN/±Inf, or values whose
  squares overflow), or a weight's (an earlier batch's NaN reached it through an update that was
  not checked), or the batch's loss's is;
* ``vanishing``: a parameter's gradient norm below ``vanish_below`` for ``vanish_checks``
  consecutive checks;
* ``exploding``: a gradient norm (a parameter's, or the global one) above
  ``explode_factor`` times the mean of its previous (up to 5) checks.

How the norms are computed without the training thread waiting: ``grad_health_monitor.py``.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

from ...writer._common.checks import check_bool, describe
from .._common.checks import check_option, check_positive_int, check_positive_number
from .._common.run_writers import RunWriters
from .grad_health_monitor import HealthMonitor
from .protocol import Batch, Epoch, Fit, Option, Part

KINDS = ("nonfinite", "vanishing", "exploding")


class GradHealth:
    """Options of ``TensorBoardHandler(grad_health=...)`` (``True`` means the defaults).

    Args:
        vanish_below: a gradient norm under this is "vanishing".
        vanish_checks: ... for this many consecutive checks.
        explode_factor: a norm above this many times its recent mean is "exploding".
        stop: stop training when a detector fires: ``False``, ``True`` (any detector) or a
            collection of detector names from ``"nonfinite"``, ``"vanishing"``, ``"exploding"``.
        per_param: log the per-parameter scalars (``False``: only ``global``).
    """

    def __init__(self, *, vanish_below: float = 1e-7, vanish_checks: int = 3,
                 explode_factor: float = 100.0, stop: Union[bool, Sequence[str]] = False,
                 per_param: bool = True) -> None:
        self.vanish_below = check_positive_number(vanish_below, "vanish_below")
        if not math.isfinite(self.vanish_below):  # every norm would be "vanishing"
            raise ValueError(f"vanish_below must be a finite positive number, got {vanish_below!r}")
        self.vanish_checks = check_positive_int(vanish_checks, "vanish_checks")
        self.explode_factor = check_positive_number(explode_factor, "explode_factor")
        if not self.explode_factor > 1:  # a norm that merely does not shrink would be "exploding"
            raise ValueError(f"explode_factor must be a number above 1 (how many times its recent mean a norm "
                             f"must exceed), got {explode_factor!r}")
        expect = f"a bool or a collection of {', '.join(map(repr, KINDS))}"
        if isinstance(stop, bool):
            self.stop = frozenset(KINDS if stop else ())
        elif not isinstance(stop, (list, tuple, set, frozenset)):
            raise TypeError(f"stop must be {expect}, got {describe(stop)}")
        elif not all(k in KINDS for k in stop):  # a name that is not a detector's (a typo)
            raise ValueError(f"stop must be {expect}, got {describe(stop)}")
        else:
            self.stop = frozenset(stop)
        self.per_param = check_bool(per_param, "per_param")


def check_grad_health(value: Any) -> Optional[GradHealth]:
    return check_option(value, "grad_health", GradHealth)


class HealthPart(Part):
    """What both adapters' grad_health parts share: the :class:`HealthMonitor` (which the gradient
    histograms feed: ``Parts.health``), the last turn at every event, and every check judged
    before the writers close."""
    rank = 1

    def __init__(self, cfg: GradHealth, out: RunWriters) -> None:
        self.monitor = HealthMonitor(cfg, out)

    def end(self, last_step: int, last_epoch: int) -> None:
        self.monitor.settle(wait=True)  # every check judged (and its text queued) before closing


class GluonHealth(HealthPart):
    """``grad_health`` for the Estimator: the histogram hook observes, each batch and epoch end judges.

    It hears every event on every worker: a worker that does not write observes nothing, so it
    only settles what is pending.
    """
    runs_muted = True

    def begin(self, fit: Fit) -> None:
        self.monitor.stop = False

    def batch_end(self, batch: Batch) -> None:
        self.monitor.finish(batch.trainer, batch.losses)

    def epoch_end(self, epoch: Epoch) -> None:
        self.monitor.finish(epoch.trainer)
        self.monitor.settle()

    def abandon(self, last_step: int) -> None:
        self.monitor.forget()


class ModuleHealth(HealthPart):
    """``grad_health`` for Module: the callback observes due batches; here, what settles them.

    A callback cannot stop ``Module.fit``, so ``GradHealth(stop=...)`` is refused.
    """

    def __init__(self, cfg: GradHealth, out: RunWriters) -> None:
        if cfg.stop:
            raise ValueError(f"grad_health: a callback cannot stop Module.fit, so GradHealth(stop=...) "
                             f"must be False with TensorBoardCallback, got stop={sorted(cfg.stop)}")
        super().__init__(cfg, out)

    def begin(self, fit: Fit) -> None:
        self.monitor.forget()  # checks of an earlier fit that raised

    def batch_end(self, batch: Batch) -> None:
        if not batch.histograms_due:
            self.monitor.settle()


OPTION = Option("grad_health", check_grad_health, GluonHealth, ModuleHealth, on_histograms=True)
