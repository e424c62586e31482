"""The see-inside options of :class:`~._estimator.TensorBoardHandler`, driven by the estimator's events.

``conv_filters`` (``_options/conv_filters.py``), ``embeddings`` (``_options/embeddings.py``), ``word_vectors``
(``_options/word_vectors.py``), ``grad_health`` (``_options/grad_health.py``) and ``profile_batch`` (``_options/profile_batch.py``)
are each a small part that knows what it logs. :class:`EstimatorInsight` checks the option
values (in the handler's constructor, before training), makes the parts that are on, and tells
each part, at each event of ``fit``, what it needs. The handler calls it at fixed points of
its own events (each method says where). A muted worker (``distributed="rank0"``, rank > 0)
gives the parts no batches and logs nothing, and a health detector's stop request is never
acted on with several workers. (:class:`~._module.TensorBoardCallback` has its own, worked from the
symbol: ``_module/insight.py``.)
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Sequence, Tuple, Union

from .._mxnet.hooks import Wrap
from .._common.run_writers import RunWriters
from .._options.conv_filters import ConvFilters, check_conv_filters
from .._options.grad_health import GradHealth, HealthMonitor, check_grad_health
from .._options.profile_batch import BatchProfiler, check_profile_batch
from .._options.embeddings import Embeddings, Projector, check_embeddings
from .._common.schedule import Schedule
from .._options.word_vectors import WordVectors, WordVectorsLogger, check_word_vectors


class EstimatorInsight:
    """The parts of the see-inside options that are on (each None when off)."""

    def __init__(self, out: RunWriters, hist: Schedule, *, conv_filters: Union[bool, str],
                 embeddings: Union[None, bool, int, Embeddings], word_vectors: Union[bool, WordVectors],
                 grad_health: Union[bool, GradHealth], profile_batch: Union[None, int, Tuple[int, int]]) -> None:
        self._out = out
        filt, emb, health = check_conv_filters(conv_filters), check_embeddings(embeddings), \
            check_grad_health(grad_health)
        if health is not None and hist.never:
            raise ValueError("grad_health runs on the histogram schedule: histogram_period must "
                             "not be None when grad_health is set")
        self._filters = ConvFilters(filt, out) if filt else None
        self._proj = Projector(emb, out) if emb else None
        words = check_word_vectors(word_vectors)
        self._words = WordVectorsLogger(words, out) if words else None
        self.health = HealthMonitor(health, out) if health else None
        prof = check_profile_batch(profile_batch)
        self._prof = BatchProfiler(prof, out) if prof else None

    def check(self, net: Any) -> None:
        """First in ``train_begin``: word_vectors finds its Embedding and checks the vocabulary
        (raises before anything is hooked)."""
        if self._words:
            self._words.train_begin(net)

    def train_begin(self, estimator: Any, scope: Any, on_dead: Any) -> Optional[Wrap]:
        """After the handler's own hooks; returns the projector's validation hook, if any."""
        if self._filters and not self._out.muted:
            self._filters.train_begin(estimator.net)
        hook = self._proj.train_begin(estimator, scope, on_dead) \
            if self._proj and not self._out.muted else None
        if self.health:
            self.health.stop = False
        return hook

    def batch_begin(self, step: int) -> None:
        if self._prof and not self._out.muted:
            self._prof.batch_begin(step)

    def batch_end(self, step: int, batch: Any, first_of_epoch: bool) -> None:
        """After the batch's histograms, on a worker that writes: the profiler's range, the filters'
        sample."""
        if self._prof:
            self._prof.batch_end(step)
        if self._filters and first_of_epoch:
            self._filters.see_batch(batch)

    def finish_batch(self, trainer: Any, losses: Sequence[Any], workers: int) -> bool:
        """Last in ``batch_end``: grad_health's scalars of the batch; True to stop training."""
        if self.health:
            self.health.finish(trainer, losses)
            return self._stop_now(workers)
        return False

    def epoch_end(self, epoch: int) -> None:
        if self._prof:  # the next epoch's first step starts at its batch_begin
            self._prof.drop_step()
        if self._filters and not self._out.muted:
            self._filters.epoch_end(epoch)
        if self._proj and not self._out.muted:
            self._proj.epoch_end(epoch)
        if self._words and not self._out.muted:
            self._words.epoch_end(epoch)

    def finish_epoch(self, trainer: Any, workers: int) -> bool:
        """Last in ``epoch_end``: grad_health judges what it has read back; True to stop training."""
        if self.health:
            self.health.finish(trainer)
            self.health.settle()
            return self._stop_now(workers)
        return False

    def train_end(self, last_step: int, last_epoch: int) -> None:
        """After the hooks are removed, before the writers close."""
        if self._prof:  # a fit that ended inside the range
            self._prof.finish(last_step)
        if self._proj and not self._out.muted:
            self._proj.log(last_epoch)
        if self._words and not self._out.muted:
            self._words.log(last_epoch)
        if self.health:
            self.health.settle(wait=True)  # every check judged (and its text queued) before closing
        self._close_probes()

    def abandon(self, last_step: int) -> None:
        """The ``fit`` raised: drop what is pending, log nothing more."""
        self._close_probes()
        if self.health:
            self.health.forget()
        if self._prof:
            self._prof.finish(last_step, log=False)

    def _close_probes(self) -> None:
        for part in (self._filters, self._proj):
            if part:
                part.close()

    def _stop_now(self, workers: int) -> bool:
        """A health detector's stop; not with several workers, whose collectives would hang."""
        if not (self.health and self.health.stop):
            return False
        if workers > 1:
            self._out.say_once("dist-stop", "gluon_tb: grad_health does not stop distributed "
                               "training (the other workers would wait forever)", logging.WARNING)
            return False
        return True
