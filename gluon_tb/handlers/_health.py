"""The ``grad_health=`` option: gradient/weight norms and detectors, on the histogram schedule.

Scalars (run ``train``, step = the global batch index of the check), per selected parameter
and ``global`` (over all of them):

* ``grad_norm/<name>``: ``rescale_grad · ‖g‖`` — the batch's gradient (summed over devices)
  as the optimizer applies it (for a per-sample loss, the gradient of the batch mean);
* ``weight_norm/<name>``: ``‖w‖`` before the update;
* ``update_ratio/<name>``: ``u / max(weight_norm, u)`` with ``u = lr · lr_mult · grad_norm``:
  plain SGD's step relative to the weight (momentum, Adam's scaling and weight decay are not
  modelled), at most 1. A step as large as the weight or larger counts as 1, so a
  zero-initialised bias's first steps read 1, not ``u / 1e-12`` (a spike of 1e10 that
  would flatten the chart); a parameter with neither gradient nor weight reads 0.

Norms are ``sqrt(sum(square(x)))`` queued on MXNet's engine (``nd.norm`` is up to 1% off
on large float32 arrays) and handed to ``add_scalar`` as NDArrays: the writer reads them on
its worker thread. Nothing waits for a value on the training thread.

Detectors, each reported once (a ``logging`` warning on ``gluon_tb.handlers`` and an
``add_text`` at tag ``grad_health`` at the step where the problem was seen, naming the
parameters), each optionally stopping training (``batch_end``/``epoch_end`` return True):

* ``nonfinite``: a gradient holds NaN/±Inf (count of such elements per parameter), or the
  batch's loss does;
* ``vanishing``: a parameter's gradient norm below ``vanish_below`` for ``vanish_checks``
  consecutive checks;
* ``exploding``: a gradient norm (a parameter's, or the global one) above
  ``explode_factor`` times the mean of its previous (up to 5) checks.

Latency: the host values of a check are read by a helper thread (``gluon_tb-grad-health``),
which waits for MXNet to compute them; the training thread judges what the helper has handed
back at the next check or epoch end, without ever waiting. A detector fires, and training
stops, at the first check or epoch end after the values were read: typically one check
period (``histogram_period`` batches) after the batch that went wrong; on a CPU kept busy,
possibly later. At the end of ``fit`` every check still out is waited for and judged.
"""
from __future__ import annotations

import math
import queue
import threading
from collections import deque
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..writer._common.checks import check_bool, describe
from ..writer import SummaryWriter
from ._checks import check_option, check_positive_int, check_positive_number
from ._run_writers import TRAIN, RunWriters, logger

KINDS = ("nonfinite", "vanishing", "exploding")
WINDOW = 5


class GradHealth:
    """Options of ``TensorBoardHandler(grad_health=...)`` (``True`` means the defaults).

    Args:
        vanish_below: a gradient norm under this is "vanishing".
        vanish_checks: ... for this many consecutive checks.
        explode_factor: a norm above this many times its recent mean is "exploding".
        stop: stop training when a detector fires: ``False``, ``True`` (any detector) or a
            collection of detector names from ``"nonfinite"``, ``"vanishing"``, ``"exploding"``.
        per_param: log the per-parameter scalars (``False``: only ``global``).
    """

    def __init__(self, *, vanish_below: float = 1e-7, vanish_checks: int = 3,
                 explode_factor: float = 100.0, stop: Union[bool, Sequence[str]] = False,
                 per_param: bool = True) -> None:
        self.vanish_below = check_positive_number(vanish_below, "vanish_below")
        self.vanish_checks = check_positive_int(vanish_checks, "vanish_checks")
        self.explode_factor = check_positive_number(explode_factor, "explode_factor")
        if isinstance(stop, bool):
            self.stop = frozenset(KINDS if stop else ())
        elif isinstance(stop, (list, tuple, set, frozenset)) and all(k in KINDS for k in stop):
            self.stop = frozenset(stop)
        else:
            raise ValueError(f"stop must be a bool or a collection of {', '.join(map(repr, KINDS))}, "
                             f"got {describe(stop)}")
        self.per_param = check_bool(per_param, "per_param")


def check_grad_health(value: Any) -> Optional[GradHealth]:
    return check_option(value, "grad_health", GradHealth)


class HealthMonitor:
    """``observe`` at the gradient hook, ``finish`` after the update, ``settle`` at epoch end,
    ``settle(wait=True)`` at the end of ``fit``."""

    def __init__(self, cfg: GradHealth, out: RunWriters) -> None:
        self.cfg, self._out = cfg, out
        self.stop = False
        self.fired: Dict[str, int] = {}  # detector -> step at which it fired
        self._fresh: Any = None
        self._pending: Any = None
        self._streak: Dict[str, int] = {}
        self._recent: Dict[str, List[float]] = {}
        # checks read back by a helper thread, so the training thread never waits for MXNet
        self._todo: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._ready: deque = deque()
        self._out_n = 0  # checks sent to the helper and not judged yet
        self._epoch_of_reads = 0
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def observe(self, step: int, grads: List[Tuple[str, Any]], params: Dict[str, Any]) -> None:
        """Queue the sums of squares of the gradients and weights (before the update)."""
        from mxnet import nd

        if not grads:
            return
        ctx = grads[0][1].context
        one = lambda v: v.reshape((1,)).as_in_context(ctx)  # noqa: E731
        g2 = nd.concat(*[one(nd.sum(nd.square(g))) for _, g in grads], dim=0)
        bad = nd.concat(*[one(g.size - nd.sum(nd.contrib.isfinite(g))) for _, g in grads], dim=0)
        w2 = nd.concat(*[one(nd.sum(nd.square(params[n].list_data()[0]))) for n, _ in grads], dim=0)
        mults = [float(getattr(params[n], "lr_mult", 1.0)) for n, _ in grads]
        self._fresh = (step, [n for n, _ in grads], g2, bad, w2, mults)

    def finish(self, trainer: Any, losses: Optional[Sequence[Any]] = None) -> None:
        """After the optimizer step of the observed batch: log its scalars, judge the previous check."""
        from mxnet import nd

        if self._fresh is None:
            return
        step, names, g2, bad, w2, mults = self._fresh
        self._fresh = None
        self.settle()
        ctx = g2.context
        scale = float(getattr(trainer.optimizer, "rescale_grad", 1.0))
        lr = float(trainer.learning_rate)
        gn, wn = nd.sqrt(g2) * scale, nd.sqrt(w2)
        step_n = gn * nd.array([lr * m for m in mults], ctx=ctx)
        ratio = step_n / nd.maximum(nd.maximum(wn, step_n), 1e-30)
        ggn, gwn = nd.sqrt(nd.sum(g2)) * scale, nd.sqrt(nd.sum(w2))
        g_step = lr * ggn
        loss_bad = nd.zeros((1,), ctx=ctx)
        for l in losses or []:
            loss_bad = loss_bad + (l.size - nd.sum(nd.contrib.isfinite(l))).as_in_context(ctx)
        w = self._out
        g_ratio = g_step / nd.maximum(nd.maximum(gwn, g_step), 1e-30)
        for tag, v in (("grad_norm", ggn), ("weight_norm", gwn), ("update_ratio", g_ratio)):
            w.call(TRAIN, SummaryWriter.add_scalar, f"{tag}/global", v, step)
        if self.cfg.per_param:
            for i, n in enumerate(names):
                w.call(TRAIN, SummaryWriter.add_scalar, f"grad_norm/{n}", gn[i], step)
                w.call(TRAIN, SummaryWriter.add_scalar, f"weight_norm/{n}", wn[i], step)
                w.call(TRAIN, SummaryWriter.add_scalar, f"update_ratio/{n}", ratio[i], step)
        self._pending = (step, names, nd.concat(gn, ggn.reshape((1,)), bad, loss_bad, dim=0))
        self._send()

    def forget(self) -> None:
        """Drop the checks not judged yet (the ``fit`` they belong to raised)."""
        self._fresh = self._pending = None
        with self._cond:
            self._ready.clear()
            self._out_n = 0
            self._epoch_of_reads += 1  # reads still out are dropped when they come back
        if self._thread is not None:
            self._todo.put(None)
            self._thread = None

    def settle(self, wait: bool = False) -> bool:
        """Judge the checks the helper thread has read back; True when training should stop.

        Never waits for MXNet on the calling (training) thread; ``wait=True`` (the end of
        ``fit``) waits for the helper to hand back every check still out.
        """
        self._send()
        with self._cond:
            while wait and self._out_n > len(self._ready):
                self._cond.wait()
            ready, self._ready = list(self._ready), deque()
            self._out_n -= len(ready)
        if wait and self._thread is not None:
            self._todo.put(None)
            self._thread = None
        for step, names, values in ready:
            if isinstance(values, BaseException):
                self._out.failed(values)
            else:
                self._judge(step, names, values)
        return self.stop

    def _send(self) -> None:
        """Hand the last check's NDArray to the helper thread, which reads it (waits for MXNet)."""
        if self._pending is None:
            return
        item, self._pending = self._pending, None
        if self._thread is None:
            self._thread = threading.Thread(target=self._read, name="gluon_tb-grad-health", daemon=True)
            self._thread.start()
        with self._cond:
            self._out_n += 1
        self._todo.put((self._epoch_of_reads, item))

    def _read(self) -> None:
        while True:
            got = self._todo.get()
            if got is None:  # the end of fit: this helper is done (the next check starts another)
                return
            gen, (step, names, vec) = got
            try:
                values: Any = vec.asnumpy()  # on this helper thread: MXNet is waited for here
            except Exception as e:  # noqa: BLE001 - reported on the training thread
                values = e
            with self._cond:
                if gen == self._epoch_of_reads:
                    self._ready.append((step, names, values))
                self._cond.notify_all()

    # ------------------------------------------------------------ detectors
    def _judge(self, step: int, names: List[str], v: Any) -> None:
        p = len(names)
        norms = dict(zip(names + ["global"], (float(x) for x in v[: p + 1])))
        counts = {n: int(c) for n, c in zip(names, v[p + 1: 2 * p + 1]) if c > 0}
        loss_bad = int(v[2 * p + 1])
        counts.update({n: -1 for n, x in norms.items() if not math.isfinite(x) and n not in counts})
        if counts or loss_bad:
            parts = [f"`{n}` ({c} non-finite values)" if c > 0 else f"`{n}` (non-finite norm)"
                     for n, c in counts.items() if n != "global"]
            if loss_bad:
                parts.insert(0, f"the loss ({loss_bad} non-finite values)")
            self._fire("nonfinite", step, "non-finite gradients or loss", parts)
        vanishing, exploding = [], []
        for n, x in norms.items():
            if not math.isfinite(x):
                self._streak[n] = 0
                continue
            self._streak[n] = self._streak.get(n, 0) + 1 if x < self.cfg.vanish_below else 0
            if n != "global" and self._streak[n] >= self.cfg.vanish_checks:
                vanishing.append(f"`{n}` (norm {x:.3g})")
            recent = self._recent.setdefault(n, [])
            if recent:
                mean = sum(recent) / len(recent)
                if mean > self.cfg.vanish_below and x > self.cfg.explode_factor * mean:
                    exploding.append(f"`{n}` (norm {x:.3g}, recent mean {mean:.3g})")
            recent.append(x)
            del recent[:-WINDOW]
        if vanishing:
            self._fire("vanishing", step, f"vanishing gradients (norm below {self.cfg.vanish_below:g} "
                       f"for {self.cfg.vanish_checks} checks)", vanishing)
        if exploding:
            self._fire("exploding", step, f"exploding gradients (norm above {self.cfg.explode_factor:g}× "
                       "its recent mean)", exploding)

    def _fire(self, kind: str, step: int, what: str, parts: List[str]) -> None:
        if kind in self.cfg.stop:
            self.stop = True
        if kind in self.fired:
            return
        self.fired[kind] = step
        stopping = " Training stops." if kind in self.cfg.stop else ""
        logger.warning("gluon_tb: %s at batch %d in %s.%s", what, step,
                       ", ".join(p.replace("`", "") for p in parts), stopping)
        text = f"**{what}** at batch {step}:\n\n" + "\n".join(f"* {p}" for p in parts) + \
            (f"\n\n{stopping.strip()}" if stopping else "")
        self._out.call(TRAIN, SummaryWriter.add_text, "grad_health", text, step)
