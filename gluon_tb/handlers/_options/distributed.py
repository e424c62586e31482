"""Distributed training: which worker this is, and epoch values averaged over all workers.

Where the rank comes from, first match wins:

1. Horovod, when ``horovod.mxnet`` is imported and initialised (``hvd.rank()``, ``hvd.size()``);
2. the trainer's kvstore when its type contains ``dist`` (``dist_sync``, ``dist_async``,
   ``dist_device_sync``...): ``kv.rank``, ``kv.num_workers``. A Gluon ``Trainer`` creates
   its kvstore at the first ``step``; :func:`kvstore_of` creates it at ``train_begin``
   instead (see there);
3. launcher variables: ``OMPI_COMM_WORLD_RANK``/``_SIZE`` (Open MPI), ``PMI_RANK``/
   ``PMI_SIZE`` (MPICH, Intel MPI), ``RANK``/``WORLD_SIZE`` (torchrun-style launchers),
   ``SLURM_PROCID``/``SLURM_NTASKS``;
4. otherwise a single worker.

Averaging through the kvstore
-----------------------------
Every worker pushes its vector of epoch values to its own *fresh* key (one new key
per worker and round, far above the keys a ``Trainer`` or ``Module`` uses), waits
for the push, meets the others at ``kv._barrier()`` and pulls every worker's key.
A parameter server stores the first push to an unknown key as the key's initial
value, untouched, so the optimizer that the servers run under
``update_on_kvstore=True`` (MXNet 1.9's default for ``dist_*``) never sees these
values. It works the same in ``dist_async``. Every worker must make the same calls
in the same order: the handler must be given to every worker, not only to rank 0.
Under Horovod the mean is ``hvd.allreduce``.

``Module`` names its kvstore keys, and a name must be initialised (by rank 0 alone)
before anyone pushes to it; so there the values are summed on one shared key, which
needs servers without an optimizer (``MXNET_UPDATE_ON_KVSTORE=0``). With MXNet's default
(the servers run the optimizer) rank 0 logs its own epoch values, and says so.
"""
from __future__ import annotations

from dataclasses import dataclass
import logging
import os
import sys
from typing import Any, List, Optional, Sequence

import numpy as np

from .._common.run_writers import RunWriters

DISTRIBUTED = ("rank0", "all")
# MXNet sends a small array to server (key * 9973) % num_servers in int32 arithmetic, so
# keys stay below 2**31 / 9973; a Trainer's own keys are its parameter indices (0, 1, ...)
_KEY_BASE = 100_000
_KEY_END = (2 ** 31 - 1) // 9973
_ENV = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
        ("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))

log = logging.getLogger("gluon_tb.handlers")


@dataclass(frozen=True)
class Worker:
    """This process's place in the job: ``rank`` of ``size`` workers, and where that came from."""

    rank: int = 0
    size: int = 1
    source: str = "single"
    kvstore: Any = None  # the distributed kvstore, when that is the source
    string_keys: bool = False  # the kvstore's keys are names (Module) rather than ints (Trainer)
    server_optimizer: bool = False  # the servers run the optimizer (update_on_kvstore)


def _horovod() -> Optional[Any]:
    hvd = sys.modules.get("horovod.mxnet")
    if hvd is None:
        return None
    try:
        return hvd if hvd.is_initialized() else None
    except Exception:  # noqa: BLE001 - an old or half-built Horovod
        return None


def kvstore_of(trainer: Any) -> Any:
    """The trainer's distributed kvstore, else None.

    A ``Trainer`` given ``kvstore="dist_sync"`` (a name) creates it at its first ``step``.
    Here it is created now with ``mx.kv.create`` and handed to the trainer in place of the
    name, which ``step`` then uses exactly as it would have used its own. (Not
    ``trainer._init_kvstore()``: that would send the optimizer to the servers before
    ``step`` sets its ``rescale_grad`` from the batch size.)
    """
    if trainer is None:
        return None
    kv = getattr(trainer, "_kvstore", None)
    if kv is None:
        params: Any = getattr(trainer, "_kvstore_params", None)
        wanted = params.get("kvstore") if isinstance(params, dict) else None
        if isinstance(wanted, str) and "dist" in wanted:
            import mxnet as mx

            kv = params["kvstore"] = mx.kv.create(wanted)
        else:
            kv = wanted
    return kv if kv is not None and "dist" in str(getattr(kv, "type", "")) else None


def from_env(environ: Optional[dict] = None) -> Worker:
    env = os.environ if environ is None else environ
    for rank_var, size_var in _ENV:
        r, s = env.get(rank_var), env.get(size_var)
        if r is not None and s is not None:
            try:
                rank, size = int(r), int(s)
            except ValueError:
                continue
            if 0 <= rank < size:
                return Worker(rank, size, f"env:{rank_var}")
    return Worker()


def detect(trainer: Any = None, kvstore: Any = None, module: Any = None) -> Worker:
    """Rank and count of this worker (see the module docstring for the order).

    Give the Gluon ``trainer``, or the ``Module`` (whose kvstore exists once ``fit`` has
    called ``init_optimizer``), or a ``kvstore`` itself.
    """
    hvd = _horovod()
    if hvd is not None:
        return Worker(int(hvd.rank()), int(hvd.size()), "horovod")
    owner = module if module is not None else trainer
    if kvstore is None and module is not None:
        kvstore = getattr(module, "_kvstore", None)
    kv = kvstore if kvstore is not None and "dist" in str(getattr(kvstore, "type", "")) \
        else kvstore_of(trainer)
    if kv is not None:
        on_kv = getattr(owner, "_update_on_kvstore", None)
        if on_kv is None:  # not decided yet: MXNet's rule for a dist kvstore
            on_kv = "async" in kv.type or os.environ.get("MXNET_UPDATE_ON_KVSTORE", "1") != "0"
        return Worker(int(kv.rank), int(kv.num_workers), f"kvstore:{kv.type}", kv,
                      string_keys=module is not None, server_optimizer=bool(on_kv))
    return from_env()


class WorkerMean:
    """Element-wise mean (NaN-aware) of a vector of floats over all workers; collective."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._round = 0
        self._told = False

    @property
    def shared(self) -> bool:
        """True when the values really are combined across workers.

        Not with a name-keyed kvstore (``Module``) whose servers run the optimizer: a name
        must be initialised (by rank 0 alone) before anyone can push to it, and a push to
        an initialised key goes through the servers' optimizer.
        """
        w = self.worker
        if w.size == 1:
            return False
        if w.kvstore is not None:
            if w.string_keys:
                return not w.server_optimizer
            if _KEY_BASE + (self._round + 1) * w.size > _KEY_END:  # the same on every worker
                if self._round and not self._told:
                    self._told = True
                    log.warning("gluon_tb: no kvstore keys left for averaging; epoch values are "
                                "rank 0's own from now on")
                return False
            return True
        return w.source == "horovod"

    def __call__(self, values: Sequence[float]) -> List[float]:
        if not self.shared or not values:
            return [_float(v) for v in values]
        mine = np.array([_float(v) for v in values], dtype=np.float64)
        have = np.isfinite(mine)
        # sums and counts travel together, so a worker without a value (NaN) is left out
        packed = np.concatenate([np.where(have, mine, 0.0), have.astype(np.float64)])
        rows = self._horovod(packed) if self.worker.source == "horovod" else self._kvstore(packed)
        n = len(values)
        total, count = rows[:n], rows[n:]
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        return [float(v) for v in out]

    def _horovod(self, packed: np.ndarray) -> np.ndarray:
        import mxnet as mx

        hvd: Any = _horovod()  # not None: this worker's source is Horovod
        self._round += 1
        got = hvd.allreduce(mx.nd.array(packed, dtype="float64"), average=False,
                            name=f"gluon_tb_epoch_{self._round}")
        return got.asnumpy().astype(np.float64)

    def _kvstore(self, packed: np.ndarray) -> np.ndarray:
        import mxnet as mx

        w, kv = self.worker, self.worker.kvstore
        if w.string_keys:  # no optimizer on the servers: a shared key simply sums the pushes
            key = f"gluon_tb/epoch_values/{self._round}"
            self._round += 1
            kv.init(key, mx.nd.zeros(packed.shape))  # collective: rank 0 sets it, all wait
            kv.push(key, mx.nd.array(packed, dtype="float32"))
            total = mx.nd.zeros(packed.shape)
            kv.pull(key, out=total)  # ordered after the push; the servers answer once all pushed
            return total.asnumpy().astype(np.float64)
        first = _KEY_BASE + self._round * w.size
        self._round += 1
        # float32 on the wire: the servers keep real_t; counts and float32 means are exact enough
        kv.push(first + w.rank, mx.nd.array(packed, dtype="float32"))
        mx.nd.waitall()  # the push has reached the server
        kv._barrier()  # ... on every worker
        outs = [mx.nd.zeros(packed.shape, dtype="float32") for _ in range(w.size)]
        for r, out in enumerate(outs):
            kv.pull(first + r, out=out)
        rows = np.stack([o.asnumpy() for o in outs]).astype(np.float64)
        return rows.sum(axis=0)


def _float(v: Any) -> float:
    """A metric value as a float: Python and numpy numbers, one-element arrays and NDArrays."""
    if hasattr(v, "asnumpy"):
        v = v.asnumpy()
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def place(out: RunWriters, worker: Worker, mode: str) -> WorkerMean:
    """Point the handler's ``RunWriters`` at this worker's runs; returns the averager to use.

    ``"rank0"``: the other ranks are muted and epoch values are averaged; ``"all"``: every
    worker writes its own values under ``worker_<rank>/``.
    """
    out.place(f"worker_{worker.rank}" if mode == "all" and worker.size > 1 else "",
              muted=mode == "rank0" and worker.rank != 0)
    mean = WorkerMean(worker if mode == "rank0" else Worker())
    if worker.size == 1:
        return mean
    who = f"gluon_tb: worker {worker.rank} of {worker.size} ({worker.source})"
    if mode == "all":
        out.say_once("dist", f"{who} writes its own runs under worker_{worker.rank}/")
    elif mean.shared:
        out.say_once("dist", f"{who}; only rank 0 writes; epoch values are the mean over all workers")
    else:
        why = ("a Module's kvstore whose servers run the optimizer cannot average them; "
               "MXNET_UPDATE_ON_KVSTORE=0 can" if worker.kvstore is not None
               else "there is no kvstore or Horovod to average them through")
        out.say_once("dist", f"{who}; only rank 0 writes; epoch values are rank 0's own ({why})",
                     logging.WARNING)
    return mean
