"""The ``profile_batch=`` option: MXNet's profiler over a range of global batches.

``profile_batch=(start, stop)`` (Keras's word: global batch indices from 0, both included; an int
``k`` is ``(k, k)``, and ``0``, as in Keras, turns profiling off: ``(0, 0)`` profiles batch 0): at ``batch_begin`` of batch ``start`` the profiler is
configured (operators, memory, ``aggregate_stats``, a temporary trace file) and started; after
``batch_end`` of batch ``stop`` (or at the end of a ``fit`` that stops earlier) the engine is
waited on, the profiler stopped, its trace dumped and handed to the writer (run ``train_batch``,
``plugins/profile/<session>/<host>.xplane.pb``, see ``writer/_summaries/profile.py``), and its aggregate
table logged as Markdown text ``profile/operator_stats`` at the last profiled batch's step.
Outside the range no profiler function is called. It profiles once per handler.

(``TensorBoardCallback``: ``Module.fit`` calls nothing before a batch, so the profiler is started at
the callback before batch ``start``; :class:`ModuleProfiler` below.)

How MXNet's profiler is driven (steps, failures, its files): ``_mxnet/profiler.py``.
"""
from __future__ import annotations

import logging
from typing import Any, NamedTuple, Optional, Tuple

from ...writer._common.checks import describe, is_python_int
from .._common.run_writers import RunWriters
from .._mxnet.profiler import BatchProfiler
from .protocol import Batch, Epoch, Option, Part


def check_profile_batch(value: Any) -> Optional[Tuple[int, int]]:
    """``None`` or ``0`` (off, Keras's meaning of 0), an int ``k >= 1`` (that global batch), or a
    ``(start, stop)`` pair with ``0 <= start <= stop`` (a range, batch 0 included if asked for)."""
    if value is None or (is_python_int(value) and value == 0):
        return None
    expect = "None or 0 (off), an int >= 1 or a (start, stop) pair of ints with 0 <= start <= stop"
    pair = (value, value) if is_python_int(value) else value
    if not isinstance(pair, (tuple, list)) or not all(is_python_int(v) for v in pair):
        raise TypeError(f"profile_batch must be {expect}, got {describe(value)}")
    if len(pair) != 2:  # ints, but not a pair: a wrong value (as Python's unpacking says)
        raise ValueError(f"profile_batch must be {expect}, got {value!r}")
    start, stop = pair
    if start < 0 or stop < start:
        raise ValueError(f"profile_batch must be {expect}, got {value!r}")
    return int(start), int(stop)


class ProfileRange(NamedTuple):
    """The checked ``profile_batch``: the batches, and the value as given (for the Module's error)."""
    batches: Tuple[int, int]
    given: Any


def profile_range(value: Any) -> Optional[ProfileRange]:
    batches = check_profile_batch(value)
    return ProfileRange(batches, value) if batches is not None else None


class GluonProfiler(Part):
    """``profile_batch`` for the Estimator: a step from each ``batch_begin`` to its ``batch_end``."""
    rank = -1

    def __init__(self, cfg: ProfileRange, out: RunWriters) -> None:
        self._prof = BatchProfiler(cfg.batches, out)
        self._given, self._out = cfg.given, out

    def batch_begin(self, step: int) -> None:
        self._prof.batch_begin(step)

    def batch_end(self, batch: Batch) -> None:
        self._prof.batch_end(batch.step)

    def epoch_end(self, epoch: Epoch) -> None:
        self._prof.drop_step()  # the next epoch's first step starts at its batch_begin

    def end(self, last_step: int, last_epoch: int) -> None:
        self._prof.finish(last_step)  # a fit that ended inside the range
        say_if_unreached(self._prof, self._given, last_step, self._out)

    def abandon(self, last_step: int) -> None:
        self._prof.finish(last_step, log=False)


class ModuleProfiler(Part):
    """``profile_batch`` for ``Module.fit``, which calls nothing before a batch: the profiler is
    started at the last callback before batch ``start``.

    That is ``batch_end`` of ``start - 1`` inside an epoch; across epochs, ``eval_end`` (or
    ``epoch_end`` without ``eval_data``), so that the epoch's validation is not profiled. The
    first batch of a ``fit`` has no callback before it: ``start`` 0 is refused here, and a
    resumed (or second) ``fit`` whose first batch is in the range is profiled from its next
    batch, with one warning. It stops at ``batch_end`` of ``stop``, or of ``fit``'s last batch
    when the range goes on past it (before the last validation), or at the end of ``fit`` (or at
    ``close``) when that batch was not seen.
    """

    rank = -1
    last_at_batch_end = True  # it opens the next batch's step

    def __init__(self, cfg: ProfileRange, out: RunWriters) -> None:
        batches, value = cfg
        if batches[0] == 0:
            raise ValueError(f"profile_batch cannot start at global batch 0 with TensorBoardCallback: "
                             f"Module.fit calls no callback before its first batch, so the profiler "
                             f"cannot be started before it; start at 1 (profile_batch=(1, ...)), got {value!r}")
        self._prof = BatchProfiler(batches, out, waits=False) if batches else None
        self._out, self._given = out, value

    def batch_end(self, batch: Batch) -> None:
        """Last in ``batch_end`` of global batch ``k``: stop after ``stop`` (or ``fit``'s last
        batch), start before ``k + 1``."""
        k, first, last_of_epoch, last_of_fit = batch.step, batch.first_of_fit, batch.last_of_epoch, \
            batch.last_of_fit
        p = self._prof
        if p is None:
            return
        p.batch_end(k)
        if last_of_epoch:  # the next step starts after the epoch's validation (between)
            p.drop_step()
        if last_of_fit:
            p.finish(k)
        if not p.done and p.start <= k <= p.stop:  # batch k ran, unprofiled: nothing came before it
            then = f"profiling from batch {k + 1}" if k < p.stop else "nothing is profiled"
            why = ("is the first of this fit, and Module.fit calls no callback before its first batch"
                   if first else "came after an epoch's end without a callback (pass cb.epoch_end as "
                   "epoch_end_callback and cb.eval_end as eval_end_callback)")
            self._out.say_once("profile-start", f"gluon_tb: profile_batch: global batch {k} {why}; {then}",
                               logging.WARNING)
        if not last_of_epoch:
            p.batch_begin(k + 1)

    def between(self, step: int) -> None:
        """After an epoch that is not ``fit``'s last, and its validation: before global batch ``step``."""
        if self._prof is not None:
            self._prof.batch_begin(step)

    def end(self, last_step: int, last_epoch: int) -> None:
        """The end of ``fit`` (or ``close``): a range that goes on past it ends at batch ``last_step``."""
        if self._prof is not None:
            self._prof.finish(last_step)
            say_if_unreached(self._prof, self._given, last_step, self._out)


def say_if_unreached(prof: BatchProfiler, given: Any, last_step: int, out: RunWriters) -> None:
    """A warning at the end of a ``fit`` that ended before the range began (nothing profiled yet)."""
    if not prof.done and prof.start > last_step:
        out.say_once(f"profile-unreached-{last_step}",
                     f"gluon_tb: profile_batch={given!r} was not reached: this fit's last global batch was "
                     f"{last_step} (global batches count from 0 over every fit of this handler); nothing "
                     "was profiled", logging.WARNING)


OPTION = Option("profile_batch", profile_range, GluonProfiler, ModuleProfiler)
