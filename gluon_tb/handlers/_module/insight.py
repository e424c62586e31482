"""The see-inside options of :class:`~._module.TensorBoardCallback` (Module): filters, projector, grad health.

The same tags and runs as :class:`~._estimator.TensorBoardHandler`'s options, worked from what ``Module.fit``
shows its callbacks: the module (``BatchEndParam.locals["self"]``), its symbol, the data batch
and ``eval_data`` in ``locals``, and ``arg_params`` at each epoch end.

* ``conv_filters``: the weight of a 2-D ``Convolution`` of the symbol (from ``arg_params`` at
  epoch end) as the filter grid, and its ``<name>_output`` for the first input of the first
  batch (kept as a host copy) as feature maps, computed by a :class:`SymbolProbe` on the
  module's parameters at epoch end, not on the training path.
* ``embeddings``: the held-out sample (``Embeddings(data=...)``, else the first inputs of
  ``fit``'s ``eval_data``, read once when first logged) through the symbol up to the input of
  the layer that feeds the loss output (or ``Embeddings(layer=...)``); predicted labels are
  the ``argmax`` of that prediction layer's output.
* ``grad_health``: at ``batch_end`` of a due batch, each parameter's gradient in the module's
  executors (summed over devices, unless the kvstore has already pulled the reduced gradient
  into every device's buffer: ``update_on_kvstore=False``) and its weight. Module's callbacks
  run *after* the optimizer's update, so ``weight_norm`` is the weight after the batch's update.
  :class:`~._health.HealthMonitor` is used as the estimator uses it (its helper thread reads the
  detectors' values, never the training thread); ``Module.fit`` cannot be stopped by a
  callback, so ``GradHealth(stop=...)`` is refused.
* ``word_vectors``: the weight of an ``Embedding`` operator of the symbol (found at the first
  batch of each ``fit``), ``arg_params[<its weight>]`` as ``fit`` hands it to ``epoch_end`` (the
  module's own host copy; the writer takes its copy on the engine), through
  :class:`~._word_vectors.WordVectorsLogger`.
* ``profile_batch``: :class:`~._profile.BatchProfiler` started at the last callback before batch
  ``start`` (:class:`ModuleProfiler` says which), stopped at ``batch_end`` of ``stop``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ...writer import SummaryWriter
from .._options.conv_filters import write_filters
from .._options.param_histograms import batch_gradient
from .._options.profile_batch import BatchProfiler, check_profile_batch
from .._options.embeddings import Embeddings, Projector
from .._common.run_writers import TRAIN, RunWriters
from .._mxnet.symbols import SymbolProbe, _graph, classifier_input, conv_layer, layer_output
from .._options.word_vectors import WordVectorsLogger


def _cpu_copy(x: Any, n: Optional[int] = None) -> Any:
    import mxnet as mx

    return (x if n is None else x[:n]).copyto(mx.cpu())  # a new array, copied on the engine


def _batch(data_batch: Any) -> Any:
    return data_batch[0] if isinstance(data_batch, (list, tuple)) and data_batch else data_batch


class ModuleFilters:
    """``conv_filters/<layer>`` and ``feature_maps/<layer>`` in run ``train`` at each epoch end."""

    def __init__(self, value: Union[bool, str], out: RunWriters, max_filters: int = 64) -> None:
        self._layer = value if isinstance(value, str) else None
        self._out, self._max = out, max_filters
        self._symbol: Any = None
        self._conv: Optional[Tuple[str, str]] = None
        self._probe: Optional[SymbolProbe] = None
        self._sample: Any = None  # {data name: 1-sample host copy}, or False: not images

    def see_batch(self, module: Any, data_batch: Any) -> None:
        """Find the layer (ValueError naming it) and keep the first input of the first batch."""
        if module.symbol is not self._symbol:
            self._symbol = module.symbol
            self._conv = conv_layer(self._symbol, self._layer)
            self._probe = SymbolProbe([layer_output(self._symbol, self._conv[0])])
        b = _batch(data_batch)
        if self._sample is not None or b is None or not getattr(b, "data", None):
            return
        if len(b.data[0].shape) != 4:
            self._out.say_once("maps", f"gluon_tb: inputs of shape {tuple(b.data[0].shape)} are not "
                               "N×C×H×W; feature maps are not logged", logging.WARNING)
            self._sample = False
            return
        self._sample = {n: _cpu_copy(x, 1) for n, x in zip(module.data_names, b.data)}

    def epoch_end(self, epoch: int, arg_params: Any, aux_params: Any) -> None:
        if self._conv is not None and arg_params:
            self._out.call(TRAIN, self._log, self._conv, epoch, arg_params, aux_params)

    def _log(self, w: SummaryWriter, conv: Tuple[str, str], epoch: int, arg_params: Any,
             aux_params: Any) -> None:
        name, weight = conv
        maps = None
        probe = self._probe  # made with the layer, before any sample is kept
        if self._sample and probe is not None:
            maps = probe(self._sample, arg_params, aux_params)[0]
        write_filters(w, name, arg_params[weight], maps, epoch, self._max)


class ModuleProjector(Projector):
    """The projector option for Module: the sample from ``Embeddings(data=)`` or ``eval_data``."""

    def __init__(self, cfg: Embeddings, out: RunWriters) -> None:
        super().__init__(cfg, out)
        self._symbol: Any = None
        self._module: Any = None
        self._eval: Any = None

    def see_fit(self, module: Any, eval_data: Any) -> None:
        """At the first batch of a ``fit``: the module, its symbol and the validation iterator."""
        self._module, self._eval = module, eval_data
        if module.symbol is not self._symbol:
            self._symbol = module.symbol
            if self.cfg.layer:
                feats, pred = layer_output(self._symbol, self.cfg.layer), classifier_input(self._symbol)[1]
            else:
                feats, pred = classifier_input(self._symbol)
            self._probe = SymbolProbe([feats, pred])
            self._data_name = module.data_names[0]

    def log(self, step: int) -> None:
        if self._have < self.cfg.samples and self._module is not None:
            self._collect()
        super().log(step)

    def _collect(self) -> None:
        import mxnet as mx

        src = self.cfg.data if self.cfg.data is not None else self._eval
        if src is None:
            return
        if not isinstance(src, mx.io.DataIter):
            self._take_from(src)
            return
        src.reset()
        try:
            for b in src:
                if not b.label:
                    self._out.say_once("emb-labels", "gluon_tb: the held-out batches have no labels; "
                                       "embeddings are not logged", logging.WARNING)
                    self._have = self.cfg.samples
                    return
                n = int(b.data[0].shape[0]) - int(b.pad or 0)
                self._keep([b.data[0][:n], b.label[0][:n]])
                if self._have >= self.cfg.samples:
                    break
        finally:
            src.reset()

    def _embed(self, x: Any) -> Any:
        import mxnet as mx

        arg_params, aux_params = self._module.get_params()
        feats, pred = self._probe({self._data_name: x}, arg_params, aux_params)
        return mx.nd.flatten(feats), (pred.argmax(axis=-1) if len(pred.shape) > 1 else pred)


def embedding_layer(symbol: Any, name: Optional[str]) -> Tuple[str, int]:
    """``(weight argument name, rows)`` of the ``Embedding`` operator ``name`` of ``symbol``, or its first."""
    nodes = _graph(symbol)["nodes"]
    embs = [n for n in nodes if n["op"] == "Embedding"]
    if name is None and not embs:
        ops = ", ".join(n["name"] for n in nodes if n["op"] != "null")
        raise ValueError(f"word_vectors needs an Embedding layer, and the symbol has none (its layers are {ops})")
    node = embs[0] if name is None else next((n for n in embs if n["name"] == name), None)
    if node is None:
        kind = next((n["op"] for n in nodes if n["name"] == name), None)
        got = f"a {kind}" if kind else "not a layer of the symbol"
        raise ValueError(f"word_vectors: layer must name an Embedding of the symbol "
                         f"({', '.join(n['name'] for n in embs) or 'it has none'}), got {name!r} ({got})")
    return nodes[node["inputs"][1][0]]["name"], int(node.get("attrs", {})["input_dim"])


class ModuleWordVectors(WordVectorsLogger):
    """``word_vectors`` for Module: the Embedding operator's weight from ``arg_params`` at epoch end."""

    def __init__(self, cfg: Any, out: RunWriters) -> None:
        super().__init__(cfg, out)
        self._symbol: Any = None
        self._arg = ""

    def see_symbol(self, symbol: Any) -> None:
        """At the first batch of a ``fit``: find the Embedding, check the vocabulary (ValueError)."""
        if symbol is not self._symbol:
            self._arg, rows = embedding_layer(symbol, self.cfg.layer)
            self.choose(rows)
            self._symbol = symbol

    def see_params(self, arg_params: Any) -> None:
        """At epoch end, before :meth:`epoch_end` or :meth:`log`: the weight to log."""
        self._weight = (arg_params or {}).get(self._arg)

    def _array(self) -> Any:
        return self._weight


class ModuleProfiler:
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

    def __init__(self, value: Any, out: RunWriters) -> None:
        batches = check_profile_batch(value)
        if batches is not None and batches[0] == 0:
            raise ValueError(f"profile_batch cannot start at global batch 0 with TensorBoardCallback: "
                             f"Module.fit calls no callback before its first batch, so the profiler "
                             f"cannot be started before it; start at 1 (profile_batch=(1, ...)), got {value!r}")
        self._prof = BatchProfiler(batches, out, waits=False) if batches else None
        self._out = out

    def batch_end(self, k: int, first: bool, last_of_epoch: bool, last_of_fit: bool) -> None:
        """Last in ``batch_end`` of global batch ``k``: stop after ``stop`` (or ``fit``'s last
        batch), start before ``k + 1``."""
        p = self._prof
        if p is None:
            return
        p.batch_end(k)
        if last_of_epoch:  # the next step starts after the epoch's validation (between_epochs)
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

    def between_epochs(self, step: int) -> None:
        """After an epoch that is not ``fit``'s last, and its validation: before global batch ``step``."""
        if self._prof is not None:
            self._prof.batch_begin(step)

    def finish(self, last: int) -> None:
        """The end of ``fit`` (or ``close``): a range that goes on past it ends at batch ``last``."""
        if self._prof is not None:
            self._prof.finish(last)


class _ParamView:
    """A Module parameter in the shape ``HealthMonitor`` and ``batch_gradient`` read a Gluon one."""

    def __init__(self, grads: List[Any], weights: List[Any], lr_mult: float) -> None:
        self._g, self._w, self.lr_mult = grads, weights, lr_mult

    def list_grad(self) -> List[Any]:
        return self._g

    def list_data(self) -> List[Any]:
        return self._w


class _TrainerView:
    """What :meth:`~._health.HealthMonitor.finish` reads of a Gluon Trainer: the optimizer and its learning rate."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.learning_rate = optimizer.learning_rate


def executor_module(module: Any) -> Any:
    """The ``Module`` whose executors train (a ``BucketingModule``'s current one), or None."""
    m = getattr(module, "_curr_module", None) or module
    return m if getattr(m, "_exec_group", None) is not None and hasattr(m, "_optimizer") else None


def module_gradients(module: Any, want: Callable[[str], bool]) -> Tuple[list, Dict[str, Any], Any]:
    """``(grads [(name, NDArray)], params {name: view}, trainer view)`` of the selected parameters
    from the module's executors, as they are after the batch's update."""
    g = module._exec_group  # Module has no public accessor for its gradients
    opt = module._optimizer
    reduced = module._kvstore is not None and not module._update_on_kvstore  # pulled sums in place
    mults = getattr(opt, "lr_mult", {}) or {}
    grads, params = [], {}
    for name, gs, ws in zip(g.param_names, g.grad_arrays, g.param_arrays):
        if not want(name) or not gs or any(x is None for x in gs):
            continue
        view = _ParamView(gs[:1] if reduced else gs, ws, float(mults.get(name, 1.0)))
        params[name] = view
        grads.append((name, batch_gradient(view)))
    return grads, params, _TrainerView(opt)
