"""``gradients/<param>`` and ``weights/<param>`` of :class:`~._estimator.TensorBoardHandler`, on its schedule.

Gradients are taken inside ``trainer.step``/``allreduce_grads`` (:meth:`ParamHistograms.before_update`,
hooked by the handler), the one moment at which they are what the batch produced: summed over
devices, before a kvstore overwrites the buffers. Weights are taken at ``batch_end``, after that
batch's update. With ``histogram_period="epoch"`` the last batch of an epoch is logged: its length is
``len(train_data)`` when the loader has one; otherwise, until the first epoch has ended, its length is
unknown, so during it each batch's gradients are copied on the device (asynchronously) and the last
copy is logged at the epoch's end (the length is then the longest epoch seen). An epoch cut short (a
handler returned True from ``batch_end``) is logged at its last batch, at the epoch's end, from
the gradient buffers when the update left them as they were: MXNet's own update handler and a
Trainer without a kvstore that replaces them. So is an epoch that ends before ``len(train_data)``
said (gluon-nlp's samplers give an estimate); from then on the length is the one counted. Where an
update handler of the script's own may have changed the buffers (clipped them), that epoch's
gradients are not logged, and the user is told.

A parameter with more than ``histogram_sample`` values (default :data:`SAMPLE`) is histogrammed from
an evenly strided sample of about that many of its values (:func:`sampled`), taken on MXNet's engine:
the cost of a histogram step then stops growing with the model (an Embedding of 25.6M values costs
what one of 1M does), and so do the host copies the writer holds. ``grad_health`` always sees every
value. An explicit ``SummaryWriter.add_histogram`` never samples.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from ...writer import SummaryWriter
from .._common.run_writers import TRAIN_BATCH, RunWriters
from .._common.schedule import Schedule
from .resume import batches_before

Arrays = List[Tuple[str, Any]]

#: the default ``histogram_sample``: parameters with more values are histogrammed from a sample
SAMPLE = 1 << 16


def sampled(a: Any, limit: Optional[int], shape: Optional[Tuple[int, ...]] = None) -> Any:
    """``a`` itself when it has at most ``limit`` values (or ``limit`` is ``None``), else about
    ``limit`` of its values: every ``k``-th of the flattened array from the first, ``k`` the
    smallest stride that keeps at most ``limit`` values and that shares no factor with the last
    axis, so every column is represented (a stride of 128 on a ``(V, 128)`` matrix would take one
    column). Queued on MXNet's engine as one ``slice`` (no host copy, nothing waited for).
    ``shape``: ``a``'s, where known (reading it from an NDArray is a call into MXNet)."""
    if shape is None:
        shape = a.shape
    how = _sampling(a, limit, shape)
    return a if how is None else _slice(*how)


def _sampling(a: Any, limit: Optional[int], shape: Tuple[int, ...]) -> Optional[Tuple[Any, int, int]]:
    """``(a's flat view, its size, the stride)`` when ``a`` is to be sampled, else None."""
    n = math.prod(shape)
    if limit is None or n <= limit:
        return None
    import mxnet as mx

    if type(a) is not mx.nd.NDArray:  # not a dense NDArray: left whole
        return None
    stride = -(-n // limit)
    while math.gcd(stride, shape[-1]) != 1:
        stride += 1
    return a.reshape((-1,)), n, stride


def _slice(flat: Any, n: int, stride: int) -> Any:
    import mxnet as mx

    return mx.nd.slice(flat, begin=(0,), end=(n,), step=(stride,))


class Sampler:
    """:func:`sampled` of the parameters' own arrays, which come back batch after batch: each one's
    flat view and stride are worked out once, so a later batch costs one ``slice`` (no view made,
    no shape read: each is a call into MXNet). Holds the arrays it has seen until :meth:`forget`.

    Example::

        sample = Sampler(1 << 16)
        part, shape = sample(p.data(), p.shape)  # a slice of about 65,536 values, or p.data()
    """

    def __init__(self, limit: Optional[int]) -> None:
        self.limit = limit
        self._seen: Dict[int, Tuple[Any, Optional[Tuple[Any, int, int]]]] = {}  # id: (array, _sampling's)

    def __call__(self, a: Any, shape: Tuple[int, ...]) -> Tuple[Any, Tuple[int, ...]]:
        """``a`` (of ``shape``) or a sample of it, and the shape of what is returned."""
        seen = self._seen.get(id(a))
        if seen is None or seen[0] is not a:  # held in _seen: no other array can have its id
            seen = self._seen[id(a)] = (a, _sampling(a, self.limit, shape))
        how = seen[1]
        if how is None:
            return a, shape
        _flat, n, stride = how
        return _slice(*how), (-(-n // stride),)

    def forget(self) -> None:
        """Let go of the arrays (the ``fit`` is over)."""
        self._seen.clear()


class ParamHistograms:
    """Decides, per batch, whose gradients and weights are logged, and logs them."""

    def __init__(self, out: RunWriters, hist: Schedule, want: Callable[[str], bool], health: Any,
                 sample: Optional[int] = SAMPLE) -> None:
        self._out, self._hist, self._want, self._health = out, hist, want, health
        self._sample = sample
        self._sampler = Sampler(sample)
        self._est: Any = None
        self._fit_first = 0  # global index of the fit's first batch
        self._epoch_len: Optional[int] = None
        self._chosen: Optional[Arrays] = None
        self._sparse: Set[str] = set()  # chosen parameters whose weight is row_sparse: gradients only
        self._meta: Dict[str, Tuple[Tuple[int, ...], Any, Any]] = {}  # name: (shape, dtype, context), from the Parameter
        self._grads_at = -1  # batch whose gradients were taken (or stashed)
        self._done = False  # this epoch's histograms are logged
        self._stash: Dict[str, Any] = {}
        self._stash_at = -1
        self._len_known = False
        self._fit_locals: Optional[Callable[[], Dict[str, Any]]] = None

    def train_begin(self, estimator: Any, step: int, epoch_len: Optional[int] = None,
                    fit_locals: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
        """``epoch_len``: batches an epoch, when the training data can say (``len(loader)``);
        ``fit_locals``: the ``fit`` call's local variables, when asked (its handlers, and whether
        one of them stopped the epoch)."""
        self._est, self._fit_first = estimator, step
        self._epoch_len, self._chosen, self._meta, self._sparse = epoch_len, None, {}, set()
        self._sampler.forget()
        self._len_known = epoch_len is not None
        self._fit_locals = fit_locals

    @property
    def last_logged(self) -> int:
        """The global batch index whose gradients were logged (or stashed) last; -1: none."""
        return self._grads_at

    def epoch_begin(self) -> None:
        self._done = False
        if self._len_known and self._fit_locals is not None:  # len() was right so far: this epoch's
            n = batches_before(self._fit_locals().get("train_data"), 1)  # (a loader whose length changes)
            if n is not None:
                self._epoch_len = n

    def before_update(self, k: int, in_epoch: int) -> None:
        """Inside ``trainer.step``/``allreduce_grads`` of global batch ``k``, ``in_epoch`` of its epoch."""
        if self._grads_at == k:
            return
        if self._hist.every is not None:
            if self._hist.due(k):
                self._grads_at = k
                self.log("gradients", self._gradients(), k)
            return
        max_batch = getattr(self._est, "max_batch", None)
        if (self._epoch_len is not None and in_epoch == self._epoch_len - 1) or \
                (max_batch and k - self._fit_first == max_batch - 1):
            self._grads_at, self._done = k, True
            self.log("gradients", self._gradients(), k)
        elif self._epoch_len is None:  # unknown length: keep a device copy of every batch's
            self._grads_at = self._stash_at = k
            for name, g in self._gradients():
                part = g if self._health else sampled(g, self._sample)  # health reads every value
                if part is not g:  # a new array: a copy already
                    self._stash[name] = part
                    continue
                buf = self._stash.get(name)
                if buf is None or buf.shape != g.shape or buf.context != g.context:
                    self._stash[name] = g.copy()
                else:
                    g.copyto(buf)

    def batch_end(self, k: int) -> None:
        """After batch ``k``'s update: its weights, when its gradients were (or were due)."""
        if self._hist.every is not None and self._hist.due(k) or self._grads_at == k and self._done:
            if self._grads_at != k:
                self._out.say_once("no-step", "gluon_tb: trainer.step was not called; gradient "
                                   "histograms are not logged", logging.WARNING)
            self.log("weights", self._weights(), k)

    def epoch_end(self, last: int, in_epoch: int, step: int) -> None:
        """``last``: the epoch's last global batch; ``step``: the next one."""
        if not self._hist.per_epoch:
            return
        fit = self._fit_locals() if self._fit_locals is not None else {}
        stopped = any(fit.get("batch_end_result") or ())  # a handler returned True from batch_end
        max_batch = getattr(self._est, "max_batch", None)
        cut = stopped or bool(max_batch and step - self._fit_first >= max_batch)
        if not self._done and in_epoch:
            if self._stash_at == last:  # the first epoch: the last batch's copy
                self.log("gradients", list(self._stash.items()), last, own=False)  # samples, perhaps
            elif self._grads_untouched(fit):  # the update left the buffers as backward did
                self.log("gradients", self._gradients(), last)
            elif cut:
                self._out.say_once("partial", "gluon_tb: training stopped inside an epoch; its "
                                   "gradient histograms are not logged (the update has changed "
                                   "the gradients in place), its weight histograms are")
            else:
                self._out.say_once("short", f"gluon_tb: an epoch ended after {in_epoch} batches where "
                                   f"len(train_data) said {self._epoch_len}; its last batch's gradients "
                                   "were changed in place by the update (clipped, say) and are not "
                                   "logged, its weights are. Later epochs are logged at their last "
                                   "batch as this one counted them", logging.WARNING)
            self.log("weights", self._weights(), last)
        if self._len_known and not cut and in_epoch != self._epoch_len:
            self._len_known, self._epoch_len = False, in_epoch  # len() was an estimate: count instead
        elif not self._len_known and not cut:
            self._epoch_len = max(self._epoch_len or 0, in_epoch)  # an epoch cut short: not its length
        self._stash, self._stash_at = {}, -1

    def log(self, kind: str, arrays: Arrays, step: int, own: bool = True) -> None:
        """``own``: the arrays are the parameters' own (their shapes are known), not copies."""
        meta = self._meta if own else {}
        if arrays:  # one queued item, one event
            values: Dict[str, Any] = {}
            known: Dict[str, Any] = {}
            private: List[str] = []  # samples: new arrays of ours, read by the writer as they are
            for n, a in arrays:
                tag = f"{kind}/{n}"
                if n in meta:  # the parameter's own array: sampled the same way every batch
                    shape, dtype, ctx = meta[n]
                    values[tag], part_shape = self._sampler(a, shape)
                    known[tag] = (part_shape, dtype, ctx)
                    if values[tag] is not a:
                        private.append(tag)
                else:
                    values[tag] = sampled(a, self._sample)
            # on a batch schedule, read a little later, when MXNet has copied them (Pipeline.put);
            # once an epoch, at once, while validation and the epoch's end run
            self._out.call(TRAIN_BATCH, SummaryWriter._add_histograms_known, values, known, step,
                           private=private, wake=self._hist.every is None)
        if kind == "gradients" and self._health:
            arrays = [(n, a) for n, a in arrays if n not in self._sparse]  # no weight to judge against
            whole = all(n in meta for n, _ in arrays)
            self._health.observe(step, arrays, dict(self._selected()),
                                 [(math.prod(meta[n][0]), meta[n][1]) for n, _ in arrays] if whole else None,
                                 meta[arrays[0][0]][2] if whole and arrays else None)

    def _selected(self) -> Arrays:
        if self._chosen is None:
            chosen = []
            for name, p in self._est.net.collect_params().items():
                if p.grad_req == "null" or not self._want(name):
                    continue
                try:
                    p.list_ctx()
                except RuntimeError:  # never initialized (unused parameter)
                    continue
                chosen.append((name, p))
                stype = getattr(p, "_stype", "default")
                if stype != "default":
                    self._sparse.add(name)
                shape = tuple(p.shape or ())
                dense = stype == getattr(p, "_grad_stype", "default") == "default"
                ctxs = p.list_ctx()
                if shape and all(d > 0 for d in shape) and len(ctxs) == 1 and dense:
                    self._meta[name] = (shape, np.dtype(p.dtype), ctxs[0])  # its arrays' (no call into MXNet)
            self._chosen = chosen
            if self._sparse:
                self._out.say_once("sparse-weights", "gluon_tb: the weights of row_sparse parameters ("
                                   f"{', '.join(sorted(self._sparse))}) are not histogrammed (nor judged by "
                                   "grad_health): the parameter holds only the rows the last batch pulled, and "
                                   "reading every row would pull the whole weight; their gradients are",
                                   logging.WARNING)
        return self._chosen

    def _grads_untouched(self, fit: Dict[str, Any]) -> bool:
        """Whether the gradient buffers still hold what the last batch produced after its update:
        MXNet's own update handler (not a subclass, which may clip them in place as gluon-nlp's
        do), and a plain Trainer with no kvstore or one whose kvstore updates (only pushes them)."""
        from mxnet import gluon
        from mxnet.gluon.contrib.estimator import GradientUpdateHandler

        handlers = fit.get("event_handlers")
        if handlers is None or any(isinstance(h, GradientUpdateHandler) and type(h) is not GradientUpdateHandler
                                   for h in handlers):
            return False
        tr = getattr(self._est, "trainer", None)
        if getattr(tr, "_kvstore", None) is not None:
            return bool(getattr(tr, "_update_on_kvstore", False))
        return getattr(type(tr), "_allreduce_grads", None) is gluon.Trainer._allreduce_grads

    def _gradients(self) -> Arrays:
        chosen = self._selected()
        meta = self._meta  # dense, on one device: the gradient is its array (no storage type read)
        return [(name, p.list_grad()[0] if name in meta else batch_gradient(p)) for name, p in chosen]

    def _weights(self) -> Arrays:
        return [(name, p.list_data()[0]) for name, p in self._selected() if name not in self._sparse]


def batch_gradient(p: Any) -> Any:
    """The gradient of the whole batch: the sum over devices (what the kvstore reduces)."""
    gs = p.list_grad()
    g = gs[0]
    for other in gs[1:]:
        g = g + other.as_in_context(gs[0].context)
    return g.tostype("default") if getattr(g, "stype", "default") != "default" else g
