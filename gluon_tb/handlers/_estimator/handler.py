"""``TensorBoardHandler``: one line in ``Estimator.fit`` puts the training in TensorBoard.

The priority problem, and how it is solved
------------------------------------------
MXNet runs the ``batch_end`` of every handler in ascending ``priority``: the optimizer
step (``GradientUpdateHandler``, -2000), then the metrics and validation (-1000), then the
rest. Fresh metric values exist only above -1000, the batch's own gradients only below
-2000, and a handler has one priority. The estimator builds its handler lists before
``train_begin``, so nothing can be added to them from there.

So the handler runs late (:attr:`TensorBoardHandler.priority` = 1000, after metrics,
validation, checkpointing and early stopping, before MXNet's ``LoggingHandler``) and, at
``train_begin``, hooks the trainer instead of the handler list: ``trainer.step`` and
``trainer.allreduce_grads``/``update`` are shadowed on that trainer *instance* by thin wrappers
that first hand the gradients to the writer (when the histogram schedule is due), then call
the original, and so is ``batch_processor.fit_batch``, whose wrapper hands them over when it
returns. The first of these in a batch takes them: when ``fit_batch`` returns the gradients are
what backward produced, before an update handler clips them (gluon-nlp's scripts call
``clip_global_norm`` before ``trainer.step``), for any number of devices, and before a
distributed kvstore overwrites the buffers with pulled weights; a batch processor that steps
inside ``fit_batch`` is seen at its ``allreduce_grads`` or ``step`` (after a clip it made
before a single-device ``step``). ``train_end`` removes the wrappers. The same way, ``batch_processor.evaluate_batch``
is wrapped to count validation batches and sum their losses, so validation values (and
``validation/epoch_loss``, also without a loss metric) are logged exactly for the epochs in
which the estimator validated.

MXNet does not call ``train_end`` when ``fit`` raises; the wrappers are bound to the ``fit``
call that made them and remove themselves at their first call outside it (``_mxnet/hooks.py``).
A handler's first ``fit`` continues a resumed training's steps (``_options/resume.py``). The
see-inside options (filters, projector, word vectors, gradient health, profiler) are handed
their events through ``_options/registry.py``'s :class:`Parts`, in the protocol of ``_options/protocol.py``.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from mxnet.gluon.contrib.estimator.event_handler import BatchBegin, BatchEnd, EpochBegin, EpochEnd, TrainBegin, TrainEnd

from ...writer import SummaryWriter
from ...writer._common.arrays import Mean
from ...writer._common.checks import check_bool, check_logdir
from .._common.checks import (ParamFilter, check_choice, check_hparams, check_positive_int, check_positive_int_or_none,
                              check_positive_number, check_start, param_selector)
from .._common.input_wait import InputWait
from .._common.keras_names import known_names
from .._common.run_writers import ON_ERROR, TRAIN, TRAIN_BATCH, RunWriters, close_leaving_with
from .._common.schedule import Period, schedule
from .._mxnet.hooks import FitScope, Wrap, wrap
from .._mxnet.metric_windows import BatchMetrics
from .._options.distributed import DISTRIBUTED, Worker
from .._options.embeddings import Embeddings
from .._options.grad_health import GradHealth
from .._options.images import log_first_batch
from .._options.param_histograms import SAMPLE, ParamHistograms
from .._options.protocol import Batch, Epoch, Fit
from .._options.registry import GLUON, Parts
from .._options.resume import batches_before, continue_at, graph_logged_before, resume_point, run_has_events
from .._options.word_vectors import WordVectors
from .epoch_values import EpochValues
from .listed_once import keep_first

__all__ = ["TensorBoardHandler"]


class TensorBoardHandler(TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd):
    """Logs a Gluon ``Estimator.fit`` to TensorBoard, in Keras's layout.

    Example::

        from gluon_tb.handlers import TensorBoardHandler
        est.fit(train_data, val_data=val_data, epochs=5,
                event_handlers=[TensorBoardHandler("logs/run1")])
        # then: tensorboard --logdir logs

    Run ``<logdir>/train`` (step: the epoch index from 0): ``epoch_loss`` (the estimator's loss
    metric, or the mean of the epoch's returned loss values when it has none), ``epoch_<metric>``
    (the epoch-wide value, ``get_global()``), ``epoch_learning_rate`` (the rate the epoch's
    batches trained with), ``epoch_samples_per_second`` (samples counted along
    ``fit(batch_axis=)`` of the data), ``epoch_input_wait_seconds``, ``epoch_batch_seconds`` and
    ``epoch_input_wait_fraction`` (``_common/input_wait.py``); the graph of a hybridized net once per
    run, after the first batch (not by a ``fit`` that continues a training: its first process
    logged it); ``first_batch``, the first inputs of every epoch as one image grid.
    Run ``<logdir>/train_batch`` (step: the global batch index from 0 across epochs):
    ``batch_loss`` (the mean of the loss values the batch processor returned for the batches
    since the previous point: with ``batch_period=1`` the batch alone) and ``batch_<metric>`` (the
    metric over the same batches) every ``batch_period`` batches; histograms
    ``gradients/<param>`` (the batch's gradient as backward produced it, summed over devices,
    taken when ``fit_batch`` returns: before any handler clips or scales it and before the
    optimizer step) and ``weights/<param>`` (after that batch's update) on the
    ``histogram_period`` schedule; ``grad_health``'s scalars and the profiler's output. Run
    ``<logdir>/validation``: ``epoch_loss`` and ``epoch_<metric>``, the estimator's own values.
    Metric names lose their ``training``/``validation`` prefix, are lower-cased and use ``_``
    for spaces. Steps go on if the same handler is passed to a second ``fit``. A resumed
    training hides what an earlier process logged from the resume point on, in each run at its
    own step (``_options/resume.py``).

    Args:
        logdir: the log directory; run directories are created in it on first write.
        batch_period: log ``batch_*`` every this many batches; ``None``: never.
        histogram_period: ``"epoch"`` (default): on the last batch of every epoch;
            an int ``k``: on global batches ``0, k, 2k, ...``; ``None``: no histograms.
            Until the first epoch has ended its length is unknown, so during it the
            gradients are copied on the device after every batch (asynchronously) and the
            last copy is logged at the epoch's end; with ``fit(batches=n)`` batch
            ``n - 1`` also counts as a last batch.
        params: which parameters get histograms: ``None`` (all with a gradient), a
            regular expression searched in the parameter name, or ``callable(name)``.
        histogram_sample: a parameter with more values than this is histogrammed from an
            evenly strided sample of about this many of them (taken on MXNet's engine), so a
            histogram step costs no more for a 50M-value Embedding than for a 1M one;
            ``None``: every value, whatever the size (see ``_options/param_histograms.py``).
        images: log ``first_batch`` when the inputs look like images (N×C×H×W or N×H×W×C with 1 or
            3 channels, or N×H×W; floats outside [0, 1] are rescaled by the batch's min and max,
            with a warning: the writer's one rule, ``writer/_summaries/pixels.py``).
        max_images: at most this many images in ``first_batch``.
        graph: log the graph of the network (hybridized nets only; others are skipped
            with one log message).
        hparams: hyperparameters to log at the end of training with the final values
            (``hparams/<run>/epoch_<metric>``) for TensorBoard's HParams dashboard.
        on_error: ``"raise"``: a writer error stops training; ``"warn"``: one warning,
            training goes on.
        flush_secs: the most seconds an event waits in memory before it is written.
        conv_filters: ``True`` (the first ``Conv2D``) or a Conv2D's name: log its filters
            (``conv_filters/<layer>``) and its feature maps for the first input of the first
            batch (``feature_maps/<layer>``) at every epoch end (see ``_options/conv_filters.py``).
        embeddings: a sample count or :class:`Embeddings`: the held-out sample's hidden
            representation for the projector, with true and predicted labels and sprites.
        word_vectors: ``True`` or :class:`WordVectors`: an ``nn.Embedding``'s weight rows in the
            projector, labelled with their tokens (see ``_options/word_vectors.py``).
        grad_health: ``True`` or :class:`GradHealth`: ``grad_norm/``, ``weight_norm/``,
            ``update_ratio/`` scalars and non-finite/vanishing/exploding detectors on the
            ``histogram_period`` schedule (see ``_options/grad_health.py``).
        profile_batch: ``None`` or ``0`` (off, as in Keras), a global batch index or a ``(start, stop)`` pair (both included):
            MXNet's profiler over those batches, its timeline for TensorBoard's Profile
            dashboard and ``profile/operator_stats`` text (see ``_options/profile_batch.py``).
        distributed: with several workers (a ``dist_*`` kvstore, Horovod, or an MPI/Slurm
            launcher; see ``_options/distributed.py``): ``"rank0"`` (default): only rank 0 writes, and the
            epoch values are the mean over all workers (``epoch_samples_per_second`` their
            sum), combined through the kvstore or Horovod; batch values, histograms and the
            rest are rank 0's own. Give the handler to *every* worker: the averaging is a
            collective call. ``"all"``: every worker writes its own values under
            ``<logdir>/worker_<rank>/``.
        storage_options: for a URL ``logdir`` (``s3://bucket/run``), keyword arguments of
            its fsspec file system (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
        initial_epoch: the epoch index at which the first ``fit`` starts; ``None``: found
            (a resuming ``CheckpointHandler`` in the same ``fit``, or a trainer that has
            already made updates; see ``_options/resume.py``), else 0.
        initial_step: the global batch index at which the first ``fit`` starts; ``None``:
            found the same way, else 0. When either is not 0, points that an earlier process
            logged at or after it are hidden in TensorBoard (``purge_step``).
    """

    #: After ``MetricHandler``/``ValidationHandler`` (-1000) and user handlers (0),
    #: before MXNet's ``LoggingHandler`` (inf). Gradients are taken from the trainer hook.
    priority = 1000

    @known_names
    def __init__(self, logdir: Union[str, "os.PathLike[str]"], *, batch_period: Optional[int] = 1,
                 histogram_period: Period = "epoch", params: ParamFilter = None,
                 histogram_sample: Optional[int] = SAMPLE,
                 images: bool = True, max_images: int = 16, graph: bool = True,
                 hparams: Optional[Mapping[str, Any]] = None, on_error: str = "raise",
                 flush_secs: float = 2.0, conv_filters: Union[bool, str] = False,
                 embeddings: Union[None, bool, int, Embeddings] = None,
                 word_vectors: Union[bool, WordVectors] = False,
                 grad_health: Union[bool, GradHealth] = False,
                 profile_batch: Union[None, int, Tuple[int, int]] = None, distributed: str = "rank0",
                 storage_options: Optional[Mapping[str, Any]] = None,
                 initial_epoch: Optional[int] = None, initial_step: Optional[int] = None) -> None:
        self._out = RunWriters(check_logdir(logdir), check_choice(on_error, "on_error", ON_ERROR),
                               check_positive_number(flush_secs, "flush_secs"), storage_options)
        self._every = schedule(batch_period, "batch_period")
        self._hist = schedule(histogram_period, "histogram_period", allow_epoch=True)
        self._images = check_bool(images, "images")
        self._max_images = check_positive_int(max_images, "max_images")
        self._graph = check_bool(graph, "graph")
        self._hparams = check_hparams(hparams)
        self._epochs = EpochValues(self._out, check_choice(distributed, "distributed", DISTRIBUTED))
        self._initial = (check_start(initial_epoch, "initial_epoch"), check_start(initial_step, "initial_step"))
        self._step = 0  # global index of the batch being processed
        self._epoch = 0
        self._fits = 0
        self._scope: Optional[FitScope] = None
        self.resumed_from = ""  # what the first fit's starting point was found from
        self._continues_run = False  # resumed into a run directory an earlier process wrote
        self._graph_done = False
        self._in_epoch = 0
        self._taps: List[Wrap] = []
        self._windows = BatchMetrics()  # (no "metric" in the name: MXNet checks such attributes)
        self._waits = InputWait(self._out)
        #: with batch_period=k > 1, the losses since the previous batch_loss point, added up by the
        #: writer thread as it reads them (each batch's into it, and into the epoch's loss)
        self._loss_window: Optional[Mean] = Mean([], (0.0, 0)) if (self._every.every or 1) > 1 else None
        #: whether the wait for a batch ends at our batch_begin and starts at our batch_end (else
        #: at the first batch_begin and the last batch_end handler of the fit: _time_the_gaps)
        self._gaps_end_here = (True, True)
        self._parts = Parts(GLUON, self._out, self._hist, conv_filters=conv_filters, embeddings=embeddings,
                            grad_health=grad_health, word_vectors=word_vectors, profile_batch=profile_batch)
        self._params = param_selector(params)
        self._hists = ParamHistograms(self._out, self._hist, self._params, self._parts.health,
                                      check_positive_int_or_none(histogram_sample, "histogram_sample"))

    @property
    def logdir(self) -> str:
        """The log directory (runs ``train``, ``train_batch`` and ``validation`` are inside it)."""
        return self._out.logdir

    @property
    def worker(self) -> Worker:
        """This process's rank and worker count, as found at ``train_begin``."""
        return self._epochs.worker

    @property
    def health_events(self) -> Dict[str, int]:
        """``{detector: batch}`` of the ``grad_health`` detectors that fired (empty without it)."""
        return dict(self._parts.health.fired) if self._parts.health else {}

    def close(self) -> None:
        """Write everything logged and close the event files (``train_end`` does it too; a later
        ``fit`` opens new ones). For scripts that stop a ``fit`` by hand, and ``with`` blocks."""
        self._out.close()

    def __enter__(self) -> "TensorBoardHandler":
        return self

    def __exit__(self, *exc: Any) -> None:
        close_leaving_with(self.close, self._out.logdir, exc[0])

    # ------------------------------------------------------------ events
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._remove_taps()
        self._parts.prepare(Fit(net=estimator.net, estimator=estimator))  # raises before anything is hooked
        scope = self._scope = FitScope(estimator)
        keep_first(scope.fit_locals(), self)  # listed twice: acts once
        self._epochs.place_worker(estimator)  # a muted rank says nothing from here on
        if not self._fits:
            self._start_at(resume_point(estimator, scope, *self._initial))
        else:  # after a fit that raised, its last batch may have logged gradients: go past it
            self._step = max(self._step, self._hists.last_logged + 1)
        self._fits += 1
        self._in_epoch = 0
        self._hists.train_begin(estimator, self._step, batches_before(scope.fit_locals().get("train_data"), 1),
                                scope.fit_locals)
        self._taps.extend(self._epochs.train_begin(estimator, scope, self._abandon))
        if self._every.every is not None:
            self._taps.extend(self._windows.watch(estimator.train_metrics, scope, self._abandon))
            self._windows.say_unusable(self._out)
        if not self._hist.never:
            net = estimator.net
            self._params.say_if_none(self._out.say_once, lambda: [n for n, p in net.collect_params().items()
                                                                  if p.grad_req != "null"])
        if not self._hist.never and not self._out.muted:
            # gradients as backward left them: when fit_batch returns (before any update handler
            # clips or scales them), or at the trainer's first call inside fit_batch
            grads = lambda *_: self._hists.before_update(self._step, self._in_epoch)  # noqa: E731
            tap = wrap(estimator.trainer, ("step", "allreduce_grads", "update"), grads,
                       scope=scope, on_dead=self._abandon)
            fit = wrap(estimator.batch_processor, ("fit_batch",), None, scope=scope, after=grads,
                       on_dead=self._abandon)
            if tap is None and fit is None:
                self._out.say_once("tap", "gluon_tb: cannot hook the trainer; gradients are not logged",
                                   logging.WARNING)
            self._taps.extend(t for t in (tap, fit) if t is not None)
        self._taps.extend(self._parts.begin(Fit(net=estimator.net, estimator=estimator, scope=scope,
                                                on_dead=self._abandon)))
        self._taps.extend(self._time_the_gaps(scope))

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._in_epoch = 0
        self._hists.epoch_begin()
        self._epochs.epoch_begin(estimator)
        self._waits.epoch_begin()

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self._gaps_end_here[0]:
            self._waits.batch_begin()
        self._parts.batch_begin(self._step)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        k = self._step
        loss, batch = kwargs.get("loss"), kwargs.get("batch")
        losses = loss if isinstance(loss, (list, tuple)) else ([] if loss is None else [loss])
        usable = self._epochs.see_batch(estimator, losses, batch)
        due = self._every.due(k)
        into = self._epochs.loss_into  # the epoch's loss, added up by the writer thread
        window = self._loss_window
        if losses and usable and window is not None:  # batch_period=k: the k batches since the last point
            self._out.later(TRAIN_BATCH, None, list(losses), k, window if into is None else (into, window))
            if due:
                self._out.later(TRAIN_BATCH, "batch_loss", window, k)  # read after the batch's losses
        elif losses and usable and (due or into is not None):
            # the loss arrays are fresh outputs, read by the writer thread as they are. Not due:
            # only added into the epoch's loss (no event). Queued a block of batches at a time
            self._out.later(TRAIN_BATCH, "batch_loss" if due else None, list(losses), k, into)
        if due and window is not None:
            self._loss_window = Mean([], (0.0, 0))
        if due:
            for tag, v in self._windows.take(estimator.train_metrics, skip_loss=bool(losses) and usable):
                self._out.later(TRAIN_BATCH, f"batch_{tag}", v, k)
        if self._out.muted:  # a worker other than rank 0: only the epoch values are shared
            self._step += 1
            self._in_epoch += 1
            if self._gaps_end_here[1]:
                self._waits.batch_end()
            return False
        if self._in_epoch == 0 and self._images:
            log_first_batch(self._out, batch, self._max_images, self._epoch)
        if not self._graph_done:
            self._add_graph(estimator.net)
        self._hists.batch_end(k)
        self._parts.batch_end(Batch(k, first_of_epoch=self._in_epoch == 0, data=batch, trainer=estimator.trainer,
                                    losses=losses))
        self._step += 1
        self._in_epoch += 1
        stop = self._parts.stop_requested(self._epochs.worker.size)
        self._out.batch_done()  # slow batches: their values queued now, not with the next batch's
        if self._gaps_end_here[1]:
            self._waits.batch_end()  # from here to the next batch_begin: waiting for the next batch
        return stop

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        e, last = self._epoch, self._step - 1
        self._epochs.epoch_end(estimator, e)
        self._waits.epoch_end(e)
        self._hists.epoch_end(last, self._in_epoch, self._step)
        self._parts.epoch_end(Epoch(e, trainer=estimator.trainer))
        self._epoch += 1
        return self._parts.stop_requested(self._epochs.worker.size)

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._unhook()
        self._parts.end(self._step - 1, max(self._epoch - 1, 0))
        self._parts.close()
        if self._hparams is not None:
            final = dict(self._epochs.final)  # floats, or NDArrays the writer thread reads
            self._out.call(TRAIN, SummaryWriter.add_hparams, self._hparams, final,
                           max(self._epoch - 1, 0))
        self._out.close()

    def _time_the_gaps(self, scope: FitScope) -> List[Wrap]:
        """Time the wait for each batch from the end of the fit's *last* ``batch_end`` handler to
        the start of its *first* ``batch_begin`` handler: a handler after ours (MXNet's
        ``LoggingHandler``, at priority inf, or a user's slow one) or before ours is part of the
        batch's time, not of the input's. Those handlers' methods are wrapped on the instance
        (removed at ``train_end``); one that cannot be wrapped leaves the edge at ours."""
        fit = scope.fit_locals()
        taps: List[Wrap] = []
        here = [True, True]
        begins, ends = fit.get("batch_begin"), fit.get("batch_end")
        if isinstance(begins, list) and begins and begins[0] is not self:
            tap = wrap(begins[0], ("batch_begin",), self._waits.batch_begin, scope=scope, on_dead=self._abandon)
            if tap is not None:
                taps.append(tap)
                here[0] = False
        if isinstance(ends, list) and ends and ends[-1] is not self:
            tap = wrap(ends[-1], ("batch_end",), None, scope=scope, after=lambda _stop: self._waits.batch_end(),
                       on_dead=self._abandon)
            if tap is not None:
                taps.append(tap)
                here[1] = False
        self._gaps_end_here = (here[0], here[1])
        return taps

    def _remove_taps(self) -> None:
        for tap in self._taps:  # removed on purpose: removing the one on top of another of ours
            tap.on_dead = None  # (the trainer's step has two) must not take that one for dead and abandon the fit
        for tap in reversed(self._taps):  # the last made is on top
            tap.remove()
        self._taps = []
        self._gaps_end_here = (True, True)

    def _unhook(self) -> None:
        """Hand the trainer and batch processor their methods back; the fit's scope is over."""
        self._remove_taps()
        if self._scope is not None:
            self._scope.end()

    def _abandon(self) -> None:
        """The ``fit`` that hooked the trainer raised (no ``train_end``): unhook, close everything."""
        self._unhook()
        self._parts.abandon(self._step - 1)
        self._out.close()

    def _start_at(self, start: Any) -> None:
        """Continue a resumed training: epoch and batch indices, and hide what they replace."""
        self._epoch, self._step, self.resumed_from = start.epoch, start.step, start.source
        self._continues_run = bool(start.source) and run_has_events(self._out.logdir, TRAIN)  # before any write
        continue_at(self._out, start.epoch, start.step, start.source)

    # ------------------------------------------------------------ pieces
    def _add_graph(self, net: Any) -> None:
        self._graph_done = True
        if not self._graph or graph_logged_before(self._out, self._continues_run):
            return
        if not getattr(net, "_cached_graph", None):
            self._out.say_once("graph", "gluon_tb: the graph is not logged: the net is not a hybridized "
                               "HybridBlock; call net.hybridize() before fit (or pass graph=False)",
                               logging.WARNING)
            return
        self._out.add_graph(TRAIN, net)
