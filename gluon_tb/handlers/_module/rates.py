"""``epoch_learning_rate`` and ``epoch_samples_per_second`` of :class:`~._module.TensorBoardCallback`.

What the Estimator handler logs under these tags, worked from what ``Module.fit`` shows a
``batch_end_callback``: the module (``locals["self"]``), the batch (``locals["data_batch"]``)
and the time the epoch began (``locals["tic"]``, the start of MXNet's own "Time cost").
Everything is Python: no NDArray is read.

* The learning rate is the one the epoch's first update used, as the Estimator handler logs it:
  the optimizer's ``learning_rate`` read at the epoch's first ``batch_end`` (its ``lr_scheduler``
  at its ``num_update``, which a callback sees after the batch's update).
  With a ``dist_*`` kvstore that updates on the servers, the worker's optimizer makes no update:
  its scheduler is asked at ``begin_num_update`` plus the batches this ``fit`` trained.
* The samples of a batch are its size along the batch axis of its first input (the
  ``DataDesc``'s layout: ``"NCHW"`` and ``"NT"`` 0, ``"TNC"`` 1), padded rows included, as
  MXNet's ``Speedometer`` counts them; the seconds run from the epoch's ``tic`` to ``epoch_end``.
* The wait for input (``_common/input_wait.py``) is the time spent in the training iterator's ``next()``,
  which ``Module.fit`` calls inside each batch: :class:`FetchTimer` wraps that method on the
  iterator object from the first batch of a ``fit`` to its end (so an epoch-0 first fetch, made
  before any callback, is not counted; nor are iterators whose ``__next__`` does not call
  ``next()``). The rest of the epoch, up to ``epoch_end``, is the time in batches.
"""
from __future__ import annotations

import time
from typing import Any, List, Mapping, Optional, Tuple

from .executors import executor_module


def batch_samples(module: Any, data_batch: Any) -> int:
    """The batch's size along the batch axis of its first input; 0 when it cannot be told."""
    from mxnet.io import DataDesc

    descs = getattr(data_batch, "provide_data", None) or getattr(module, "data_shapes", None)
    if descs:
        d = descs[0]
        shape, layout = (d.shape, getattr(d, "layout", "NCHW")) if hasattr(d, "shape") else (d[1], "NCHW")
        axis = DataDesc.get_batch_axis(layout)
        if 0 <= axis < len(shape):
            return int(shape[axis])
    data = getattr(data_batch, "data", None)
    if data:
        shape = data[0].shape  # one call into MXNet, no wait
        return int(shape[0]) if shape else 0
    return 0


def learning_rate(module: Any, fit_batches: int) -> Optional[float]:
    """The rate the module's optimizer used for its last update; None without an optimizer."""
    m = executor_module(module) or module
    opt = getattr(m, "_optimizer", None) or getattr(module, "_optimizer", None)
    if opt is None:
        return None
    kv = getattr(m, "_kvstore", None)
    on_servers = kv is not None and getattr(m, "_update_on_kvstore", False) and "dist" in str(kv.type)
    sched = getattr(opt, "lr_scheduler", None)
    if on_servers and sched is not None:
        return float(sched(int(getattr(opt, "begin_num_update", 0)) + fit_batches))
    return float(opt.learning_rate)


class FetchTimer:
    """Times the calls of an iterator's ``next()`` (an instance attribute put back by :meth:`release`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._data: Any = None
        self._original: Any = None

    def follow(self, data: Any) -> None:
        """Time ``data.next()`` from now on (after releasing an earlier iterator)."""
        if data is self._data or data is None:
            return
        self.release()
        original = getattr(data, "next", None)
        if not callable(original):
            return
        own = "next" in getattr(data, "__dict__", {})  # an instance attribute of its own, to put back

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

        try:
            data.next = timed
        except (AttributeError, TypeError):  # __slots__ or a read-only attribute: not timed
            return
        self._data, self._original = data, (original if own else None)

    def release(self) -> None:
        data, self._data = self._data, None
        if data is None:
            return
        try:
            if self._original is not None:
                data.next = self._original
            else:
                del data.next
        except AttributeError:
            pass
        self._original = None

    def take(self) -> float:
        """The seconds since the last take."""
        s, self.seconds = self.seconds, 0.0
        return s


class ModuleRates:
    """Counts an epoch's samples and gives the epoch's ``[(tag, value)]`` at its end."""

    def __init__(self) -> None:
        self._tic: Optional[float] = None
        self._samples = 0
        self._fit_batches = 0
        self._module: Any = None
        self._lr: Optional[float] = None
        self.fetches = FetchTimer()

    def fit_begins(self) -> None:
        self._fit_batches = 0
        self.fetches.take()  # nothing of an earlier fit (one that raised) counts
        self.fetches.calls = 0

    def see_batch(self, module: Any, fit_locals: Mapping[str, Any]) -> None:
        """At ``batch_end``, after the batch's update."""
        tic = fit_locals.get("tic")
        if tic != self._tic:  # Module.fit sets tic as each epoch begins
            self._tic, self._samples = tic, 0
            self.fetches.follow(fit_locals.get("train_data"))
            self._lr = None
        self._samples += batch_samples(module, fit_locals.get("data_batch"))
        self._fit_batches += 1
        self._module = module
        if self._lr is None:  # the epoch's first update: the rate its batches started with
            self._lr = learning_rate(module, self._fit_batches)

    def epoch_values(self) -> List[Tuple[str, float]]:
        """``learning_rate`` and ``samples_per_second`` of the epoch that ended (those known)."""
        out: List[Tuple[str, float]] = []
        if self._module is None:
            return out
        lr = self._lr
        if lr is not None:
            out.append(("learning_rate", lr))
        dt = time.time() - self._tic if isinstance(self._tic, float) else 0.0
        if self._samples and dt > 0:
            out.append(("samples_per_second", self._samples / dt))
        return out

    def epoch_times(self) -> Tuple[float, float]:
        """``(seconds waiting for input, seconds in batches)`` of the epoch that ended (0s unknown)."""
        if not isinstance(self._tic, float) or not self.fetches.calls:
            return 0.0, 0.0
        total = time.time() - self._tic
        wait = self.fetches.take()
        return wait, max(total - wait, 0.0)
