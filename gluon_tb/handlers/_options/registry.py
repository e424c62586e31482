"""The see-inside options, and the one builder both adapters use.

:data:`OPTIONS` lists them in the order their values are checked. :class:`Parts` checks the
values given to an adapter's constructor (before training, so a mistake raises at once), makes
the part of each option that is on, and hands every event of ``fit`` to them (``protocol.py``
says which event comes when). It is the one place that knows which parts hear what on a worker
that does not write, and when a ``grad_health`` stop request is acted on.
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional

from . import conv_filters, embeddings, grad_health, profile_batch, word_vectors
from .._common.run_writers import RunWriters
from .._common.schedule import Schedule
from .grad_health_monitor import HealthMonitor
from .protocol import Batch, Epoch, Fit, Part

#: every see-inside option; adding one is its file plus a line here
OPTIONS = (conv_filters.OPTION, embeddings.OPTION, grad_health.OPTION, word_vectors.OPTION, profile_batch.OPTION)

GLUON, MODULE = "gluon", "module"


class Parts:
    """The parts of the options that are on, for one adapter (``"gluon"`` or ``"module"``).

    Example (what both adapters' constructors do)::

        parts = Parts(MODULE, out, hist, conv_filters=True, embeddings=None, grad_health=False,
                      word_vectors=False, profile_batch=None)
    """

    def __init__(self, adapter: str, out: RunWriters, hist: Schedule, **values: Any) -> None:
        self._out = out
        made: List[Part] = []
        for option in OPTIONS:
            settings = option.check(values[option.name])
            if not settings:
                continue
            if option.on_histograms and hist.never:
                raise ValueError(f"{option.name} runs on the histogram schedule: histogram_period must "
                                 f"not be None when {option.name} is set")
            made.append((option.gluon if adapter == GLUON else option.module)(settings, out))
        self._parts = sorted(made, key=lambda p: p.rank)  # stable: OPTIONS order within a rank
        self._at_batch_end = [p for p in self._parts if not p.last_at_batch_end] + \
            [p for p in self._parts if p.last_at_batch_end]
        #: grad_health's monitor, which the gradient histograms feed (None when it is off)
        self.health: Optional[HealthMonitor] = next(
            (p.monitor for p in self._parts if isinstance(p, grad_health.HealthPart)), None)

    def _hearing(self, parts: Optional[List[Part]] = None) -> List[Part]:
        parts = self._parts if parts is None else parts
        return parts if not self._out.muted else [p for p in parts if p.runs_muted]

    # ------------------------------------------------------------ events (protocol.py)
    def prepare(self, fit: Fit) -> None:
        for p in self._parts:
            p.prepare(fit)

    def begin(self, fit: Fit) -> List[Any]:
        """The hooks the parts made, to remove when the ``fit`` ends."""
        hooks = [p.begin(fit) for p in self._hearing()]
        return [h for h in hooks if h is not None]

    def batch_begin(self, step: int) -> None:
        for p in self._hearing():
            p.batch_begin(step)

    def batch_end(self, batch: Batch) -> None:
        for p in self._hearing(self._at_batch_end):
            p.batch_end(batch)

    def epoch_end(self, epoch: Epoch) -> None:
        for p in self._hearing():
            p.epoch_end(epoch)

    def between(self, step: int) -> None:
        for p in self._hearing():
            p.between(step)

    def end(self, last_step: int, last_epoch: int) -> None:
        for p in self._hearing():
            p.end(last_step, last_epoch)

    def abandon(self, last_step: int) -> None:
        for p in self._parts:
            p.abandon(last_step)
        self.close()

    def close(self) -> None:
        for p in self._parts:
            p.close()

    def stop_requested(self, workers: int) -> bool:
        """A grad_health detector's stop; not with several workers, whose collectives would hang."""
        if self.health is None or not self.health.stop:
            return False
        if workers > 1:
            self._out.say_once("dist-stop", "gluon_tb: grad_health does not stop distributed "
                               "training (the other workers would wait forever)", logging.WARNING)
            return False
        return True
