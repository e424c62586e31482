"""Where an epoch's time goes: waiting for the next batch, or in the batches.

The question after "is it learning?" is "why is it slow?", and the first answer to rule out is a
data loader that cannot keep up. Every epoch, run ``train`` gets three scalars at the epoch index:

* ``epoch_input_wait_seconds``: the seconds the training loop spent waiting for its next batch
  (the Estimator: from the end of the last handler's ``batch_end`` to the start of the first
  handler's ``batch_begin``, and before the first batch, so every handler's batch events are the
  batch's time whatever their priority; ``Module.fit``: inside the data iterator's ``next()``,
  which the loop calls in each batch);
* ``epoch_batch_seconds``: the seconds spent in the batches themselves (forward, backward,
  update, metrics, the other handlers' batch events);
* ``epoch_input_wait_fraction``: the first over their sum, from 0 (never waits) to 1.

Validation and the other epoch-end work are in neither. Costs: two clock reads a batch, no host
sync, no thread.

MXNet's engine is asynchronous: a batch whose outputs nobody reads on the host (no metric, no
loss printed) returns to the loop before the device has computed it, and its compute time then
shows up wherever the loop next blocks, which may be inside the loader. Metrics read every
batch's outputs (``Accuracy``, ``Loss`` and the others call ``asnumpy()``), so with any metric the
split is the real one; without any, read the fraction as an upper bound on the wait.

When the wait is over half of the epoch, and at least :data:`WORTH` s, in two epochs,
:class:`InputWait` warns once (with the fraction, and what to try) and writes the same advice as the
text ``input_wait/advice``. A shorter wait is not worth the advice whatever its share: the epochs of a
tiny model on a busy machine would otherwise get it now and then.
"""
from __future__ import annotations

import logging
import time
from typing import Optional

from ...writer import SummaryWriter
from .run_writers import TRAIN, RunWriters

ADVICE_TAG = "input_wait/advice"
#: the fraction of an epoch spent waiting above which the input is called the bottleneck
SLOW = 0.5
#: the least wait (seconds in an epoch) that counts toward the advice
WORTH = 0.1


class InputWait:
    """Adds up one epoch's waiting and batch time; logs them at the epoch's end."""

    def __init__(self, out: RunWriters) -> None:
        self._out = out
        self._wait = 0.0
        self._busy = 0.0
        self._mark: Optional[float] = None  # the end of the last batch's handling (or the epoch's start)
        self._begun: Optional[float] = None  # the start of the batch being handled
        self._slow_epochs = 0
        self._advised = False

    # ------------------------------------------------------------ Estimator: the gaps between batches
    def epoch_begin(self, now: Optional[float] = None) -> None:
        self._wait = self._busy = 0.0
        self._mark = time.perf_counter() if now is None else now
        self._begun = None

    def batch_begin(self) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            self._wait += now - self._mark
        self._begun = now

    def batch_end(self) -> None:
        now = time.perf_counter()
        if self._begun is not None:
            self._busy += now - self._begun
        self._mark, self._begun = now, None

    # ------------------------------------------------------------ Module.fit: timed fetches
    def add(self, waited: float, busy: float) -> None:
        """Add seconds measured elsewhere (``Module.fit``: the iterator's ``next()`` and the rest)."""
        self._wait += max(waited, 0.0)
        self._busy += max(busy, 0.0)

    # ------------------------------------------------------------ the epoch's end
    def epoch_end(self, epoch: int) -> None:
        """Log the epoch's three scalars (nothing when no batch was timed)."""
        wait, busy = self._wait, self._busy
        self._wait = self._busy = 0.0
        self._mark = self._begun = None
        total = wait + busy
        if total <= 0.0:
            return
        fraction = wait / total
        self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_input_wait_seconds", wait, epoch)
        self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_batch_seconds", busy, epoch)
        self._out.call(TRAIN, SummaryWriter.add_scalar, "epoch_input_wait_fraction", fraction, epoch)
        self._slow_epochs += fraction > SLOW and wait >= WORTH
        if self._slow_epochs >= 2 and not self._advised:
            self._advised = True
            advice = (f"gluon_tb: the training loop spent {fraction:.0%} of epoch {epoch} waiting for its next "
                      f"batch ({wait:.2f} s waiting, {busy:.2f} s in batches): the input is the bottleneck. "
                      "Try DataLoader(num_workers=N) (or thread_pool=True), a larger prefetch, "
                      "or moving pre-processing to the device.")
            self._out.say_once("input-wait", advice, logging.WARNING)
            self._out.call(TRAIN, SummaryWriter.add_text, ADVICE_TAG, advice.replace("gluon_tb: ", ""), epoch)
