"""``epoch_learning_rate`` and ``epoch_samples_per_second`` of :class:`~._module.TensorBoardCallback`.

What the Estimator handler logs under these tags, worked from what ``Module.fit`` shows a
``batch_end_callback``: the module (``locals["self"]``), the batch (``locals["data_batch"]``)
and the time the epoch began (``locals["tic"]``, the start of MXNet's own "Time cost").
Everything is Python: no NDArray is read.

* The learning rate is the one the epoch's last update used: the optimizer's ``learning_rate``
  (its ``lr_scheduler`` at its ``num_update``, which a callback sees after the batch's update).
  With a ``dist_*`` kvstore that updates on the servers, the worker's optimizer makes no update:
  its scheduler is asked at ``begin_num_update`` plus the batches this ``fit`` trained.
* The samples of a batch are its size along the batch axis of its first input (the
  ``DataDesc``'s layout: ``"NCHW"`` and ``"NT"`` 0, ``"TNC"`` 1), padded rows included, as
  MXNet's ``Speedometer`` counts them; the seconds run from the epoch's ``tic`` to ``epoch_end``.
"""
from __future__ import annotations

import time
from typing import Any, List, Mapping, Optional, Tuple

from ._module_insight import executor_module


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


class ModuleRates:
    """Counts an epoch's samples and gives the epoch's ``[(tag, value)]`` at its end."""

    def __init__(self) -> None:
        self._tic: Optional[float] = None
        self._samples = 0
        self._fit_batches = 0
        self._module: Any = None

    def fit_begins(self) -> None:
        self._fit_batches = 0

    def see_batch(self, module: Any, fit_locals: Mapping[str, Any]) -> None:
        """At ``batch_end``, after the batch's update."""
        tic = fit_locals.get("tic")
        if tic != self._tic:  # Module.fit sets tic as each epoch begins
            self._tic, self._samples = tic, 0
        self._samples += batch_samples(module, fit_locals.get("data_batch"))
        self._fit_batches += 1
        self._module = module

    def epoch_values(self) -> List[Tuple[str, float]]:
        """``learning_rate`` and ``samples_per_second`` of the epoch that ended (those known)."""
        out: List[Tuple[str, float]] = []
        if self._module is None:
            return out
        lr = learning_rate(self._module, self._fit_batches)
        if lr is not None:
            out.append(("learning_rate", lr))
        dt = time.time() - self._tic if isinstance(self._tic, float) else 0.0
        if self._samples and dt > 0:
            out.append(("samples_per_second", self._samples / dt))
        return out
