"""``TensorBoardCallback``: the legacy ``Module.fit`` API in the same layout as the estimator handler."""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

from ._base import (ON_ERROR, TRAIN, VALIDATION, ParamFilter, RunWriters, check_bool, check_choice,
                    check_logdir, check_positive_number, param_selector, scores)
from ._dist import DISTRIBUTED, Worker, WorkerMean, detect, place
from ._schedule import schedule

__all__ = ["TensorBoardCallback"]


class TensorBoardCallback:
    """Logs ``Module.fit`` to TensorBoard: runs ``train`` and ``validation`` under ``logdir``.

    Example::

        from gluon_tb.handlers import TensorBoardCallback
        cb = TensorBoardCallback("logs/module")
        mod.fit(train_iter, eval_data=val_iter, num_epoch=5,
                batch_end_callback=[cb, mx.callback.Speedometer(64, 50)],
                epoch_end_callback=cb.epoch_end, eval_end_callback=cb.eval_end)
        cb.close()

    Writes ``batch_<metric>`` in ``train`` every ``batch_period`` batches at the global batch
    index (from 0 across epochs); ``epoch_<metric>`` in ``train`` (from the epoch-wide
    values, which ``Speedometer(auto_reset=True)``'s ``reset_local()`` leaves intact) and in
    ``validation`` at the epoch index; ``weights/<name>`` histograms of ``arg_params`` at
    each epoch end (at the global index of the epoch's last batch); the module's symbol as
    the graph, once.

    Pass the object itself as (or in a list as) ``batch_end_callback``, its
    :meth:`epoch_end` as ``epoch_end_callback`` and its :meth:`eval_end` as
    ``eval_end_callback``; not as ``eval_batch_end_callback``. Call :meth:`close` (or use it
    as a context manager) when done; a forgotten one is closed at interpreter exit.

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
            under ``<logdir>/worker_<rank>/``. As for :class:`TensorBoardHandler`.
        storage_options: for a URL ``logdir`` (``s3://bucket/run``), keyword arguments of
            its fsspec file system (``{"endpoint_url": ..., "key": ..., "secret": ...}``).
    """

    def __init__(self, logdir: Union[str, "os.PathLike[str]"], *, batch_period: Optional[int] = 1,
                 weights: bool = True, params: ParamFilter = None, graph: bool = True,
                 on_error: str = "raise", flush_secs: float = 2.0, distributed: str = "rank0",
                 storage_options: Optional[Mapping[str, Any]] = None) -> None:
        self._out = RunWriters(check_logdir(logdir), check_choice(on_error, "on_error", ON_ERROR),
                               check_positive_number(flush_secs, "flush_secs"), storage_options)
        self._every = schedule(batch_period, "batch_period")
        self._weights = check_bool(weights, "weights")
        self._want = param_selector(params)
        self._graph = check_bool(graph, "graph")
        self._graph_done = False
        self._step = 0  # global index of the next training batch
        self._train_src: Any = None  # the training EvalMetric seen in the last batch
        self._dist_mode = check_choice(distributed, "distributed", DISTRIBUTED)
        self._worker: Optional[Worker] = None
        self._mean = WorkerMean(Worker())

    @property
    def logdir(self) -> str:
        """The log directory (runs ``train`` and ``validation`` are inside it)."""
        return self._out.logdir

    def __call__(self, param: Any) -> None:
        """``batch_end_callback``: ``param`` is MXNet's ``BatchEndParam``."""
        k = self._step
        self._step += 1
        src = param.eval_metric
        self._train_src = src
        module = (param.locals or {}).get("self")
        if self._worker is None:
            self._join(module)
        if not self._graph_done:
            self._add_graph(getattr(module, "symbol", None))
        if src is not None and self._every.due(k):
            for tag, v in scores([src], use_global=True):
                self._out.write(TRAIN, "add_scalar", f"batch_{tag}", v, k)

    def epoch_end(self, epoch: int, symbol: Any = None, arg_params: Optional[Mapping[str, Any]] = None,
                  aux_params: Optional[Mapping[str, Any]] = None) -> None:
        """``epoch_end_callback``: train values of the epoch and weight histograms."""
        if not self._graph_done and symbol is not None:
            self._add_graph(symbol)
        if self._train_src is not None:
            for tag, v in self._shared(scores([self._train_src], use_global=True)):
                self._out.write(TRAIN, "add_scalar", f"epoch_{tag}", v, epoch)
        else:
            self._out.say_once("no-batches", "gluon_tb: pass the callback as batch_end_callback too, "
                               "or training values are not logged")
        if self._weights and arg_params:
            step = max(self._step - 1, 0)
            for name in sorted(arg_params):
                if self._want(name):
                    self._out.write(TRAIN, "add_histogram", f"weights/{name}", arg_params[name], step)

    def eval_end(self, param: Any) -> None:
        """``eval_end_callback``: the validation values of the epoch."""
        if param.eval_metric is None:
            return
        for tag, v in self._shared(scores([param.eval_metric], use_global=True)):
            self._out.write(VALIDATION, "add_scalar", f"epoch_{tag}", v, param.epoch)

    def flush(self) -> None:
        """Return when everything logged so far is written."""
        self._out.flush()

    def close(self) -> None:
        """Write everything and close the event files (logging again opens new ones)."""
        self._out.close()

    def __enter__(self) -> "TensorBoardCallback":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def worker(self) -> Optional[Worker]:
        """This process's rank and worker count (known from the first batch on)."""
        return self._worker

    def _join(self, module: Any) -> None:
        w = detect(module=module)
        self._worker = w
        self._mean = place(self._out, w, self._dist_mode)

    def _shared(self, pairs: list) -> list:
        """The pairs with their values averaged over the workers (collective when shared)."""
        if not self._mean.shared:
            return pairs
        return list(zip([t for t, _ in pairs], self._mean([v for _, v in pairs])))

    def _add_graph(self, symbol: Any) -> None:
        if symbol is None:
            return
        self._graph_done = True
        if not self._graph:
            return
        self._out.add_graph(TRAIN, symbol)
