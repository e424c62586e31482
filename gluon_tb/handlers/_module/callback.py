"""``TensorBoardCallback``: the legacy ``Module.fit`` API in the same layout as the estimator handler."""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from ...writer import SummaryWriter
from ...writer._common.checks import check_bool, check_logdir
from .._common.checks import (ParamFilter, check_choice, check_positive_int_or_none, check_positive_number, check_start,
                              param_selector)
from .._common.input_wait import InputWait
from .._common.keras_names import module_known_names
from .._common.run_writers import ON_ERROR, TRAIN, TRAIN_BATCH, VALIDATION, RunWriters, close_leaving_with
from .._common.schedule import Period, schedule
from .._mxnet.metric_names import scores
from .._mxnet.metric_windows import BatchMetrics
from .._mxnet.symbols import graph_symbol
from .._options.distributed import DISTRIBUTED, Worker, WorkerMean, detect, place
from .._options.embeddings import Embeddings
from .._options.grad_health import GradHealth
from .._options.param_histograms import SAMPLE, sampled
from .._options.protocol import Batch, Epoch, Fit
from .._options.registry import MODULE, Parts
from .._options.resume import ModuleSteps, graph_logged_before
from .._options.word_vectors import WordVectors
from .executors import executor_module, module_gradients
from .rates import ModuleRates
from .slots import BATCH_END, EPOCH_END, EVAL_BATCH_END, EVAL_END, fit_callbacks, is_batch_param, missing_slots, reroute

__all__ = ["TensorBoardCallback"]


class TensorBoardCallback:
    """Logs ``Module.fit`` to TensorBoard: runs ``train``, ``train_batch`` and ``validation`` under ``logdir``.

    Example::

        from gluon_tb.handlers import TensorBoardCallback
        cb = TensorBoardCallback("logs/module")
        mod.fit(train_iter, eval_data=val_iter, num_epoch=5,
                **cb.fit_callbacks(batch_end_callback=[mx.callback.Speedometer(64, 50)]))
        cb.close()

    Writes, in run ``train_batch`` at the global batch index (from 0 across epochs):
    ``batch_<metric>`` every ``batch_period`` batches, the metric over the batches since the
    previous point (with ``batch_period=1`` the batch alone), whatever ``reset_local()`` a
    ``Speedometer`` before or after the callback makes (``_mxnet/metric_windows.py``);
    ``gradients/<name>`` (the batch's gradient in the executors, summed over devices, as backward
    left it) and ``weights/<name>`` histograms on the ``histogram_period`` schedule (weights by
    default from ``arg_params`` at each epoch end; both at the index of the epoch's last batch);
    ``grad_health`` and the profiler's output. In runs ``train`` and ``validation`` at the epoch
    index: ``epoch_<metric>`` (from the epoch-wide values, which
    ``Speedometer(auto_reset=True)``'s ``reset_local()`` leaves intact); in ``train`` also
    ``epoch_learning_rate`` (the rate of the epoch's first update, from the optimizer and its
    ``lr_scheduler``), ``epoch_samples_per_second`` (the epoch's batch sizes along the batch axis
    of the first input, over the seconds from the epoch's start to ``epoch_end``;
    ``_module/rates.py``) and the module's symbol as the graph (a ``BucketingModule``'s default
    bucket), once per run: a ``fit`` that continues a training (resumed, or
    ``initial_epoch``/``initial_step``) leaves it to the process that began it. A
    ``fit(begin_epoch=E)`` resumed in a new process continues the steps (batches at ``E``
    times the batches per epoch) and hides what an earlier process logged from there on, each
    run at its own step; a second ``fit`` with the same callback goes on after the first
    (``_options/resume.py``'s :class:`ModuleSteps`). The
    see-inside options log what :class:`~._estimator.TensorBoardHandler`'s do, under the same tags
    (each option's file in ``_options/`` says how its Module part works from the symbol).

    :meth:`fit_callbacks` fills every slot of ``fit`` (with your own callbacks after its entries).
    By hand: the object itself in ``batch_end_callback``, its :meth:`epoch_end` in
    ``epoch_end_callback`` and its :meth:`eval_end` in ``eval_end_callback``. Put in another slot,
    each does what that slot needs; in ``eval_batch_end_callback`` it logs nothing and warns, and
    a missing slot is named in a warning at the first batch (``_module/slots.py``).

    When ``fit``'s last epoch has ended (after its ``eval_end``, or its ``epoch_end`` without
    ``eval_data``) everything is flushed, so it is on disk when ``fit`` returns. Call :meth:`close` (or use it as a
    context manager) when done; a forgotten one is closed at interpreter exit. Nothing is read
    back from MXNet on the training thread (``tests/handlers/module/test_module_sync.py``).

    Args:
        logdir: the log directory.
        batch_period: log ``batch_*`` every this many batches; ``None``: never.
        weights: log ``weights/<name>`` histograms at each epoch end.
        params: which ``arg_params`` get histograms: ``None`` (all but the inputs and
            labels), a regular expression searched in the name, or ``callable(name)``.
        graph: log the module's symbol once.
        on_error: ``"raise"``: a writer error stops training; ``"warn"``: one warning,
            training goes on.
        flush_secs: the most seconds an event waits in memory before it is written.
        distributed: with a ``dist_*`` kvstore (or Horovod, or an MPI/Slurm launcher):
            ``"rank0"`` (default): only rank 0 writes, epoch values are the mean over all
            workers (pass the callback to every worker); ``"all"``: each worker writes
            under ``<logdir>/worker_<rank>/``. As for :class:`~._estimator.TensorBoardHandler`.
        storage_options: for a URL ``logdir`` (``s3://bucket/run``), keyword arguments of
            its fsspec file system (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
        histogram_period: when ``gradients/<name>``, ``weights/<name>`` and ``grad_health`` are
            logged: ``"epoch"`` (default): at each epoch end (gradients and ``grad_health`` at
            the epoch's last batch); an int
            ``k``: at global batches ``0, k, 2k, ...`` (weights as the module's executors hold
            them after that batch's update); ``None``: never.
        histogram_sample: a parameter with more values than this is histogrammed from an
            evenly strided sample of about this many of them (as for
            :class:`~._estimator.TensorBoardHandler`); ``None``: every value.
        conv_filters: ``True`` (the first 2-D ``Convolution`` of the symbol) or its name:
            ``conv_filters/<layer>`` and ``feature_maps/<layer>`` (for the first input of the
            first batch) at each epoch end.
        embeddings: a sample count or :class:`Embeddings`: the held-out sample (from
            ``Embeddings(data=...)`` or ``eval_data``) at the input of the layer that feeds the
            loss output, in the projector with true and predicted labels, at the end of ``fit``
            (and every ``Embeddings.every`` epochs).
        grad_health: ``True`` or :class:`GradHealth` (without ``stop``: a callback cannot stop
            ``Module.fit``): ``grad_norm/``, ``weight_norm/``, ``update_ratio/`` scalars and the
            detectors on the ``histogram_period`` schedule.
        word_vectors: ``True`` or :class:`WordVectors`: the weight of an ``Embedding`` operator of
            the symbol (``WordVectors.layer``: its name; ``None``: the first) in the projector,
            its rows labelled with their tokens, at the end of ``fit`` (and every
            ``WordVectors.every`` epochs), as for :class:`~._estimator.TensorBoardHandler`. A
            symbol without that Embedding raises a ``ValueError`` at the first batch.
        profile_batch: ``None`` or ``0`` (off, as in Keras), a global batch index or a ``(start, stop)`` pair (both included): MXNet's
            profiler over those batches, as for :class:`~._estimator.TensorBoardHandler` (see
            ``_options/profile_batch.py``). ``Module.fit`` calls no callback before a batch, so the profiler
            starts at the callback before ``start`` and ``start`` must be at least 1; a resumed
            ``fit`` whose first batch is in the range is profiled from its next batch (one
            warning). The executors run their operators in bulk segments, one event each
            (``[FullyConnected,Activation,...]``); ``MXNET_EXEC_BULK_EXEC_TRAIN=0`` before
            ``fit`` gives one event per operator.
        initial_epoch: the epoch index at which the first ``fit`` starts; ``None``: its
            ``begin_epoch``.
        initial_step: the global batch index at which the first ``fit`` starts; ``None``: that
            epoch times the batches per epoch of ``train_data`` (``len()``, a ``ResizeIter``'s
            ``size``, an ``NDArrayIter``'s ``num_data``/``batch_size``), 0 when unknown. When
            either is not 0, points that an earlier process logged at or after it are hidden
            in TensorBoard (``purge_step``).

    Example with the see-inside options::

        cb = TensorBoardCallback("logs/module", conv_filters=True, embeddings=200,
                                 grad_health=True, histogram_period=10, profile_batch=(10, 12))
    """

    @module_known_names
    def __init__(self, logdir: Union[str, "os.PathLike[str]"], *, batch_period: Optional[int] = 1,
                 weights: bool = True, params: ParamFilter = None, graph: bool = True,
                 on_error: str = "raise", flush_secs: float = 2.0, distributed: str = "rank0",
                 storage_options: Optional[Mapping[str, Any]] = None, histogram_period: Period = "epoch",
                 histogram_sample: Optional[int] = SAMPLE, conv_filters: Union[bool, str] = False,
                 embeddings: Union[None, bool, int, Embeddings] = None,
                 grad_health: Union[bool, GradHealth] = False,
                 word_vectors: Union[bool, WordVectors] = False,
                 profile_batch: Union[None, int, Tuple[int, int]] = None, initial_epoch: Optional[int] = None,
                 initial_step: Optional[int] = None) -> None:
        self._out = RunWriters(check_logdir(logdir), check_choice(on_error, "on_error", ON_ERROR),
                               check_positive_number(flush_secs, "flush_secs"), storage_options)
        self._every = schedule(batch_period, "batch_period")
        self._hist = schedule(histogram_period, "histogram_period", allow_epoch=True)
        self._weights = check_bool(weights, "weights")
        self._want = param_selector(params)
        self._sample = check_positive_int_or_none(histogram_sample, "histogram_sample")
        self._graph = check_bool(graph, "graph")
        self._graph_done = False
        self._steps = ModuleSteps(check_start(initial_epoch, "initial_epoch"),
                                  check_start(initial_step, "initial_step"))
        self._train_src: Any = None  # the training EvalMetric seen in the last batch
        self._seen_batch: Tuple[int, int, int] = (0, -1, -1)  # the last batch_end param seen (listed twice)
        self._windows = BatchMetrics()  # batch_<metric>: each metric since the previous point
        self._dist_mode = check_choice(distributed, "distributed", DISTRIBUTED)
        self._worker: Optional[Worker] = None
        self._mean = WorkerMean(Worker())
        self._parts = Parts(MODULE, self._out, self._hist, conv_filters=conv_filters, embeddings=embeddings,
                            grad_health=grad_health, word_vectors=word_vectors, profile_batch=profile_batch)
        self._rates = ModuleRates()
        self._waits = InputWait(self._out)
        self._last_epoch = -1  # the last epoch of the running fit (from its num_epoch)
        self._has_eval = False
        self._evals = 0  # eval_end calls in the running fit

    @property
    def logdir(self) -> str:
        """The log directory (runs ``train``, ``train_batch`` and ``validation`` are inside it)."""
        return self._out.logdir

    @property
    def health_events(self) -> Dict[str, int]:
        """``{detector: batch}`` of the ``grad_health`` detectors that fired (empty without it)."""
        return dict(self._parts.health.fired) if self._parts.health else {}

    @property
    def resumed_from(self) -> str:
        """What the first ``fit``'s starting point was found from (``""``: it started at 0)."""
        return self._steps.resumed_from

    def __call__(self, param: Any, *epoch_end_args: Any) -> None:
        """``batch_end_callback``: ``param`` is MXNet's ``BatchEndParam``.

        Passed as ``epoch_end_callback`` too (MXNet then calls it with ``epoch, symbol,
        arg_params, aux_params``), it does what :meth:`epoch_end` does."""
        if epoch_end_args:
            return self.epoch_end(param, *epoch_end_args)
        if reroute(self, param, BATCH_END):  # called by score(): eval_end_callback or eval_batch_end_callback
            return None
        seen = (id(param), param.epoch, param.nbatch)  # MXNet hands every callback of a batch one param
        if seen == self._seen_batch:
            self._out.say_once("listed-twice", "gluon_tb: TensorBoardCallback is listed more than once in "
                               "batch_end_callback; it logs each batch once (pass it once)", logging.WARNING)
            return None
        self._seen_batch = seen
        src = param.eval_metric
        self._train_src = src
        local = param.locals or {}
        module = local.get("self")
        if self._worker is None:
            self._join(module)
        begins = param.nbatch == 0 and param.epoch == local.get("begin_epoch", -1)
        if begins and module is not None:
            self._parts.prepare(Fit(module=module))  # a ValueError before anything is written
        if begins:
            self._steps.fit_begins(local, self._out)  # before the first write: it may purge
            for key, msg in missing_slots(self, local):
                self._out.say_once(key, msg, logging.WARNING)
            self._rates.fit_begins()
        k = self._steps.next_batch()
        if module is not None:
            self._rates.see_batch(module, local)
        if not self._graph_done:
            self._add_graph(graph_symbol(module))
        if src is not None and self._every.every is not None:
            if not self._windows.watching([src]):  # fit's metric was reset before its first batch
                self._windows.watch([src], from_zero=param.nbatch == 0)
                self._windows.say_unusable(self._out)
            self._windows.resume()
            # due by the batch's index in its epoch, as Speedometer and MXNet's own callbacks count
            if self._every.due(param.nbatch):
                for tag, v in self._windows.take([src]):
                    self._out.call(TRAIN_BATCH, SummaryWriter.add_scalar, f"batch_{tag}", v, k)
            if local.get("end_of_batch"):  # the epoch's last batch: validation may use the same metric next
                self._windows.settle()
        if module is None or self._out.muted:
            return
        if begins:
            self._fit_begins(module, local)
        due = bool(self._hist.due(k) or (self._hist.per_epoch and local.get("end_of_batch")))
        if due:
            self._check_params(module, k)
        ends = bool(local.get("end_of_batch"))
        self._parts.batch_end(Batch(k, data=local.get("data_batch"), module=module, first_of_fit=begins,
                                    last_of_epoch=ends, last_of_fit=ends and param.epoch == self._last_epoch,
                                    histograms_due=due))

    def epoch_end(self, epoch: int, symbol: Any = None, arg_params: Optional[Mapping[str, Any]] = None,
                  aux_params: Optional[Mapping[str, Any]] = None) -> None:
        """``epoch_end_callback``: train values of the epoch and weight histograms.

        Passed as ``batch_end_callback`` (or ``eval_end_callback``), where MXNet calls it with a
        ``BatchEndParam``, it does what that slot needs (``_module/slots.py``)."""
        if is_batch_param(epoch):
            if not reroute(self, epoch, EPOCH_END):
                self(epoch)
            return
        last, epoch = epoch == self._last_epoch, self._steps.epoch(epoch)
        self._steps.epoch_ended(epoch)
        if not self._graph_done and symbol is not None:
            self._add_graph(symbol)
        if self._train_src is not None:
            for tag, v in self._epoch_train_values():
                self._out.call(TRAIN, SummaryWriter.add_scalar, f"epoch_{tag}", v, epoch)
            self._waits.add(*self._rates.epoch_times())  # this worker's own (_common/input_wait.py)
            self._waits.epoch_end(epoch)
        else:
            self._out.say_once("no-batches", "gluon_tb: TensorBoardCallback is not in fit's batch_end_callback, "
                               "so no training values are logged; pass batch_end_callback=cb, or every slot "
                               "at once with mod.fit(..., **cb.fit_callbacks())", logging.WARNING)
        if arg_params and not self._hist.never:
            self._want.say_if_none(self._out.say_once, lambda: sorted(arg_params))
        if self._weights and self._hist.per_epoch and arg_params:
            step = max(self._steps.step - 1, 0)
            arrays = {f"weights/{name}": sampled(arg_params[name], self._sample)
                      for name in sorted(arg_params) if self._want(name)}
            if arrays:  # one call: one MXNet operation copies them all
                self._out.call(TRAIN_BATCH, SummaryWriter.add_histograms, arrays, step)
        if self._out.muted:
            return
        self._parts.epoch_end(Epoch(epoch, last_of_fit=last, arg_params=arg_params, aux_params=aux_params))
        if last and (not self._has_eval or self._evals == 0):
            self._fit_ends()  # no validation follows (or no eval_end to see it)
        elif not last and not self._has_eval:
            self._parts.between(self._steps.step)

    def eval_end(self, param: Any, *epoch_end_args: Any) -> None:
        """``eval_end_callback``: the validation values of the epoch.

        Passed as ``batch_end_callback``, it does what the callback object does there; as
        ``epoch_end_callback`` (``epoch, symbol, arg_params, aux_params``), what :meth:`epoch_end`
        does; as ``eval_batch_end_callback``, nothing but one warning (``_module/slots.py``)."""
        if epoch_end_args:
            return self.epoch_end(param, *epoch_end_args)
        if reroute(self, param, EVAL_END):
            return
        self._evals += 1
        if param.eval_metric is not None:
            for tag, v in self._shared(scores([param.eval_metric], use_global=True)):
                self._out.call(VALIDATION, SummaryWriter.add_scalar, f"epoch_{tag}", v,
                               self._steps.epoch(param.epoch))
        if param.epoch == self._last_epoch and not self._out.muted:
            self._fit_ends()
        elif not self._out.muted:
            self._parts.between(self._steps.step)  # after the validation

    def fit_callbacks(self, *, batch_end_callback: Any = None, epoch_end_callback: Any = None,
                      eval_end_callback: Any = None, eval_batch_end_callback: Any = None
                      ) -> Dict[str, List[Callable[..., Any]]]:
        """Every ``Module.fit`` callback slot this callback needs, as keyword arguments of ``fit``.

        Each slot's list starts with this callback's entry; the callbacks given for that slot
        (a callable or a list) follow, in their order. Example::

            cb = TensorBoardCallback("logs/module")
            mod.fit(train_iter, eval_data=val_iter, num_epoch=5,
                    **cb.fit_callbacks(batch_end_callback=[mx.callback.Speedometer(64, 50)],
                                       epoch_end_callback=mx.callback.do_checkpoint("model")))

        Raises:
            TypeError: a slot's value is not a callable or a list of callables.
        """
        return fit_callbacks(self, {BATCH_END: batch_end_callback, EPOCH_END: epoch_end_callback,
                                    EVAL_END: eval_end_callback, EVAL_BATCH_END: eval_batch_end_callback})

    def flush(self) -> None:
        """Return when everything logged so far is written."""
        self._out.flush()

    def close(self) -> None:
        """Write everything and close the event files (logging again opens new ones)."""
        self._parts.end(self._steps.step - 1, self._last_epoch)  # a profiled range cut short by a fit that raised
        self._rates.fetches.release()
        self._windows.stop()
        self._out.close()

    def __enter__(self) -> "TensorBoardCallback":
        return self

    def __exit__(self, *exc: Any) -> None:
        close_leaving_with(self.close, self._out.logdir, exc[0])

    @property
    def worker(self) -> Optional[Worker]:
        """This process's rank and worker count (known from the first batch on)."""
        return self._worker

    def _fit_begins(self, module: Any, local: Mapping[str, Any]) -> None:
        self._last_epoch = int(local.get("num_epoch") or 0) - 1
        self._has_eval = local.get("eval_data") is not None
        self._evals = 0
        self._parts.begin(Fit(module=module, eval_data=local.get("eval_data")))

    def _fit_ends(self) -> None:
        """The last epoch of ``fit`` is over: end a profiled range, judge the last checks, then flush."""
        self._rates.fetches.release()
        self._parts.end(self._steps.step - 1, self._last_epoch)
        self._out.flush()

    def _check_params(self, module: Any, k: int) -> None:
        """Gradients, weights (int schedule) and grad_health of global batch ``k``, after its update."""
        module = executor_module(module)
        if module is None:
            self._out.say_once("no-exec", "gluon_tb: this module has no executor group of its own; "
                               "per-batch weights and grad_health are not logged", logging.WARNING)
            return
        # on a batch schedule, read by the writer a little later, when MXNet has copied them
        # (Pipeline.put); once an epoch, at once, while validation and the epoch's end run
        wake_now = self._hist.every is None
        if self._weights and self._hist.every is not None:
            g = module._exec_group  # the executors' weights (device 0), no host copy
            arrays = {f"weights/{n}": sampled(ws[0], self._sample)
                      for n, ws in zip(g.param_names, g.param_arrays) if self._want(n)}
            if arrays:
                self._out.call(TRAIN_BATCH, SummaryWriter._add_histograms_known, arrays, None, k, wake=wake_now)
        grads, params, trainer = module_gradients(module, self._want)
        if grads:  # the batch's gradients: summed over devices, as backward left them (one event)
            self._out.call(TRAIN_BATCH, SummaryWriter._add_histograms_known,
                           {f"gradients/{n}": sampled(g, self._sample) for n, g in grads}, None, k, wake=wake_now)
        if self._parts.health:
            self._parts.health.observe(k, grads, params)
            self._parts.health.finish(trainer)

    def _join(self, module: Any) -> None:
        w = detect(module=module)
        self._worker = w
        self._mean = place(self._out, w, self._dist_mode)

    def _epoch_train_values(self) -> list:
        """The epoch's metric values, learning rate and throughput (``_module/rates.py``), shared
        over the workers in one collective call (the throughput is their sum)."""
        pairs = scores([self._train_src], use_global=True) + self._rates.epoch_values()
        shared = self._shared(pairs)
        if self._mean.shared and self._worker is not None:
            shared = [(t, v * self._worker.size if t == "samples_per_second" else v) for t, v in shared]
        return shared

    def _shared(self, pairs: list) -> list:
        """The pairs with their values averaged over the workers (collective when shared)."""
        if not self._mean.shared:
            return pairs
        return list(zip([t for t, _ in pairs], self._mean([v for _, v in pairs])))

    def _add_graph(self, symbol: Any) -> None:
        """Once per run: not by a ``fit`` that continues a training (the process that began it logged it)."""
        if symbol is None:
            return
        self._graph_done = True
        if self._graph and not graph_logged_before(self._out, self._steps.continues_run):
            self._out.add_graph(TRAIN, symbol)
