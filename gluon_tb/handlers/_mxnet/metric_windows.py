"""``batch_<metric>``: each metric over the batches since the previous point, for both adapters.

An MXNet metric holds running sums: ``sum_metric``/``num_inst`` since its last ``reset_local()``
and, for metrics with global statistics (every built-in one), ``global_sum_metric``/
``global_num_inst`` since its last ``reset()``. Its ``get()`` is the mean since a reset, not the
batch's value (Keras's running-mean complaint: the curve saw-tooths at every epoch boundary).
So a point is formed from the *differences* of the sums since the previous point: with
``batch_period=1``, the batch alone; with ``batch_period=k``, the ``k`` batches since the last
point. The value is the metric's own ``get()`` applied to those differences (so
``Perplexity`` stays ``exp(mean)``), computed in Python from the numbers the metric already
holds: no host read. Sums that are NDArrays give an NDArray the writer thread reads.

Resets (``MetricHandler``'s ``reset()`` at each epoch, ``Speedometer``'s and gluon-nlp's
``MetricResetHandler``'s ``reset_local()``) would lose the part since the previous point, so
``reset``/``reset_local`` of each metric (the leaves of a ``CompositeEvalMetric``) are wrapped
on the instance (``_mxnet/hooks.py``): just before a reset the part not yet logged is carried over.

Exact for metrics whose value comes from additive sums (accuracy, top-k, loss, MAE, MSE, RMSE,
cross-entropy, NLL, perplexity, macro F1, custom metrics); for metrics that overwrite their sums
with a running statistic (micro F1, MCC, Pearson) the difference of those sums is logged.
"""
from __future__ import annotations

import copy
import logging
import numbers
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .hooks import FitScope, Wrap, wrap
from .metric_names import name_pairs

Pairs = List[Tuple[str, Any]]


def leaves(ms: Iterable[Any]) -> List[Any]:
    """The metrics of ``ms`` with every ``CompositeEvalMetric`` replaced by its own metrics."""
    out: List[Any] = []
    for m in ms:
        subs = getattr(m, "metrics", None)
        if isinstance(subs, list) and hasattr(m, "get_metric"):
            out.extend(leaves(subs))
        else:
            out.append(m)
    return out


def _sums(m: Any) -> Tuple[Any, Any]:
    """The sums a metric's value comes from: the global ones when it keeps them."""
    if getattr(m, "_has_global_stats", False):
        return m.global_sum_metric, m.global_num_inst
    return m.sum_metric, m.num_inst


def _summable(m: Any) -> bool:
    """Whether a metric keeps sums that differences can be taken of (numbers or NDArrays)."""
    try:
        s, n = _sums(m)
    except AttributeError:
        return False
    return all(isinstance(v, numbers.Number) or hasattr(v, "context") for v in (s, n))


class _Window:
    """One metric's sums at the previous point, and what a reset carried over since."""

    __slots__ = ("metric", "prev", "carry", "settled")

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self.prev = _sums(metric)
        self.carry: Tuple[Any, Any] = (0, 0)
        self.settled = False  # the training part is folded: updates until the next reset are not training's

    def fold(self) -> None:
        """Before a reset (or at :meth:`BatchMetrics.settle`): keep the part since the previous point."""
        s, n = _sums(self.metric)
        if not self.settled:
            self.carry = (self.carry[0] + (s - self.prev[0]), self.carry[1] + (n - self.prev[1]))
        self.prev = (s, n)

    def after_reset(self, _result: Any = None) -> None:
        self.prev = _sums(self.metric)

    def take(self) -> Tuple[Any, Any]:
        """The sums since the previous point (and make this the previous point)."""
        s, n = _sums(self.metric)
        ds, dn = self.carry[0] + (s - self.prev[0]), self.carry[1] + (n - self.prev[1])
        self.prev, self.carry = (s, n), (0, 0)
        return ds, dn


class BatchMetrics:
    """Follows a set of metrics and gives ``(tag, value)`` pairs over the window since the last call."""

    def __init__(self) -> None:
        self._windows: Dict[int, _Window] = {}
        self._seen: Tuple[int, ...] = ()
        self._taps: List[Wrap] = []
        self._settled = False
        self._plan: Optional[tuple] = None  # (list, skip_loss, its metrics, [(tag, window)]): _make_plan
        self.unusable: List[str] = []  # names of metrics without sums to take differences of

    def watch(self, ms: Iterable[Any], scope: Optional[FitScope] = None,
              on_dead: Optional[Callable[[], None]] = None, from_zero: bool = False) -> List[Wrap]:
        """Start windows at the metrics' present sums (``from_zero``: at no sums, for metrics reset
        just before the batches they hold) and hook their resets; returns the hooks."""
        self.stop()
        self._plan = None
        ms = list(ms)
        found = leaves(ms)
        self._seen = tuple(id(m) for m in ms)
        self._windows = {}
        self.unusable = [str(getattr(m, "name", type(m).__name__)) for m in found if not _summable(m)]
        for m in found:
            if not _summable(m):  # no batch_ point rather than a running mean
                continue
            w = self._windows[id(m)] = _Window(m)
            if from_zero:
                w.prev = (0, 0)
            tap = wrap(m, ("reset", "reset_local"), w.fold, scope=scope, after=w.after_reset, on_dead=on_dead)
            if tap is not None:
                self._taps.append(tap)
        return list(self._taps)

    def say_unusable(self, out: Any) -> None:
        """One warning (``out.say_once``) naming the metrics that get no ``batch_`` point."""
        if self.unusable:
            out.say_once("batch-metric", f"gluon_tb: batch_<metric> is not logged for {', '.join(self.unusable)}: "
                         "the metric keeps no numeric sum_metric/num_inst", logging.WARNING)

    def settle(self) -> None:
        """The last training batch of an epoch: keep the part not yet logged for the next point, and
        leave out whatever the metrics add until their next reset (``Module.fit`` scores the
        validation data with the same metric object, between this batch and the next epoch's reset)."""
        for w in self._windows.values():
            w.fold()
            w.settled = True
        self._settled = True

    def resume(self) -> None:
        """A training batch again (after :meth:`settle`): updates count again. ``Module.fit`` reset
        the metric before this epoch's first batch, which dropped what validation had added."""
        if self._settled:
            self._settled = False
            for w in self._windows.values():
                w.settled = False

    def watching(self, ms: Iterable[Any]) -> bool:
        return tuple(id(m) for m in ms) == self._seen and bool(self._seen)

    def stop(self) -> None:
        for tap in reversed(self._taps):
            tap.remove()
        self._taps = []

    def take(self, ms: Iterable[Any], skip_loss: bool = False) -> Pairs:
        """``[(tag suffix, value)]``: each metric over the batches since the last ``take``.

        A metric that had no new instance gives no pair."""
        if type(ms) is not list:  # a tuple or an iterator: its identity says nothing
            return self._take(ms, skip_loss)
        plan = self._plan
        if plan is None or plan[0] is not ms or plan[1] != skip_loss or len(plan[2]) != len(ms) \
                or not all(a is b for a, b in zip(plan[2], ms)):
            plan = self._plan = self._make_plan(ms, skip_loss)
        if plan[3] is None:
            return self._take(ms, skip_loss)
        out: Pairs = []
        for tag, w in plan[3]:
            ds, dn = w.take()  # every window moves on, whether its metric is logged or not (a skipped loss)
            if tag is not None and not (isinstance(dn, numbers.Number) and dn == 0):  # no new instance: no point
                out.append((tag, ds / dn))
        return out

    def _make_plan(self, ms: List[Any], skip_loss: bool) -> tuple:
        """``(ms, skip_loss, its metrics, [(tag, window)] or None)``. The list is there when every
        metric of ``ms`` is plain (no composite, MXNet's own ``get()``, a str name, watched): a
        point is then ``sum / count`` of its window (as :func:`window_value` computes it), and its
        tag depends on the names alone. Worked out once for a list of metrics; each batch is then
        a division a metric (the general path costs ~40 us a batch on the training thread, cold)."""
        ms_list = list(ms)
        entries: Optional[List[Tuple[Optional[str], _Window]]] = None
        ws = [self._windows.get(id(m)) for m in ms_list]
        plain = all(w is not None and w.metric is m and _plain_get(m) and type(m.name) is str
                    and not isinstance(getattr(m, "metrics", None), list) for w, m in zip(ws, ms_list))
        if ms_list and plain and len({id(m) for m in ms_list}) == len(ms_list):  # each once
            named = name_pairs(ms_list, lambda m: [(m.name, m)], skip_loss=skip_loss)  # [(tag, metric)]
            tag_of_metric = {id(m): tag for tag, m in named}
            entries = [(tag_of_metric.get(id(m)), w) for m, w in zip(ms_list, ws) if w is not None]
        return ms, skip_loss, ms_list, entries

    def _take(self, ms: Iterable[Any], skip_loss: bool) -> Pairs:
        def pairs_of(top: Any) -> List[Tuple[Any, Any]]:
            out: List[Tuple[Any, Any]] = []
            for m in leaves([top]):
                w = self._windows.get(id(m))
                if w is not None:
                    out.extend(window_value(m, *w.take()))
            return out

        # named as scores() names them (a composite's metrics by their own names)
        return [(t, v) for t, v in name_pairs(ms, pairs_of, skip_loss=skip_loss) if v is not None]


_PLAIN_GET: Dict[type, bool] = {}


def _plain_get(m: Any) -> bool:
    """Whether ``m``'s ``get()`` is MXNet's ``EvalMetric.get`` (``(name, sum_metric / num_inst)``),
    as for accuracy, top-k, MAE, MSE, cross-entropy, loss and most custom metrics: then a window's
    value is that division, without copying the metric (~30 us a metric a batch on the training
    thread, cold)."""
    t = type(m)
    plain = _PLAIN_GET.get(t)
    if plain is None:
        base = next((c for c in t.__mro__ if c.__name__ == "EvalMetric" and c.__module__.startswith("mxnet")), None)
        plain = _PLAIN_GET[t] = base is not None and getattr(t, "get", None) is getattr(base, "get", None)
    return plain


def window_value(m: Any, ds: Any, dn: Any) -> List[Tuple[Any, Any]]:
    """``m``'s own ``get()`` of the sums ``ds``/``dn``, as ``(name, value)`` pairs; value ``None``
    where no instance was added (no point rather than NaN)."""
    if isinstance(dn, numbers.Number) and dn == 0:
        return [(n, None) for n, _ in m.get_name_value()]
    if isinstance(ds, numbers.Number) and isinstance(dn, numbers.Number):
        if _plain_get(m) and type(m.name) is str:  # EvalMetric's own get(): its formula, without the copy
            total: Any = ds
            return [(m.name, total / dn)]
        shadow = copy.copy(m)  # the metric's formula, on the window's sums
        shadow.sum_metric, shadow.num_inst = ds, dn
        shadow.global_sum_metric, shadow.global_num_inst = ds, dn
        name, value = shadow.get()
    else:  # NDArray sums: a value the writer thread reads
        name, value = m.name, ds / dn
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))
