"""How ``grad_health=`` measures: gradient and weight norms read off the training thread, then judged.

Norms come from sums of squares queued on MXNet's engine in few, fast operations
(``_mxnet/square_sums.py``: one ``multi_sum_sq`` for every array of up to 65,536 values, a BLAS
dot product per million values of each larger one; partial sums, added in float64 on the host),
gathered into one vector; the operations are planned once per ``fit``.
A helper thread reads that vector; the scalars are computed from it in float64 and logged (at
their own step) when the check is judged. The training thread pushes a handful of operations
per check and never waits for a value.

Latency: the host values of a check are read by a helper thread (``gluon_tb-grad-health``),
which waits for MXNet to compute them; the training thread judges what the helper has handed
back at the next check or epoch end, without ever waiting. A detector fires, and training
stops, at the first check or epoch end after the values were read: typically one check
period (``histogram_period`` batches) after the batch that went wrong; on a CPU kept busy,
possibly later. At the end of ``fit`` every check still out is waited for and judged.

:class:`HealthMonitor` is used by both adapters' parts (``grad_health.py``) and fed by the gradient
histograms' hook (``param_histograms.py``, or the Module's executors).
"""
from __future__ import annotations

from collections import deque
import math
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...writer import SummaryWriter
from ...writer._common.threads import start_batch_thread
from .._common.run_writers import TRAIN_BATCH, RunWriters, logger
from .._mxnet.square_sums import SquareSums, sum_squares

if TYPE_CHECKING:
    from .grad_health import GradHealth

WINDOW = 5


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
        self._todo: deque = deque()  # (generation, check): appended here, taken by the helper
        self._ready: deque = deque()  # (generation, step, names, values, how): the other way
        self._gen = 0  # checks of an earlier generation (a fit that raised) are dropped
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._launched = threading.Event()  # the reader's start() has returned (or failed)
        self._sums = SquareSums()  # the gradients and weights: the same arrays at every check

    def observe(self, step: int, grads: List[Tuple[str, Any]], params: Dict[str, Any],
                meta: Optional[Sequence[Tuple[int, Any]]] = None, ctx: Any = None) -> None:
        """Queue the sums of squares of the gradients and weights (before the update). ``meta``:
        ``(size, dtype)`` of each gradient where known (the weights' are the same), all on the
        first gradient's device, ``ctx`` where known."""
        if not grads:
            return
        names = [n for n, _ in grads]
        if ctx is None:
            ctx = grads[0][1].context
        arrays = [g for _, g in grads] + [params[n].list_data()[0] for n in names]
        sq, pos = self._sums(arrays, ctx, None if meta is None else list(meta) * 2)
        mults = [float(getattr(params[n], "lr_mult", 1.0)) for n in names]
        self._fresh = (step, names, sq, pos, mults)

    def finish(self, trainer: Any, losses: Optional[Sequence[Any]] = None) -> None:
        """After the optimizer step of the observed batch: send its values to the helper thread,
        judge (and log) the checks it has read back."""
        from mxnet import nd

        if self._fresh is None:
            return
        step, names, sq, pos, mults = self._fresh
        self._fresh = None
        self.settle()
        n_loss = 0
        if losses:
            loss_sq, _ = sum_squares(list(losses), sq.context)
            sq = nd.concat(sq, loss_sq, dim=0)
            n_loss = len(losses)
        scale = float(getattr(trainer.optimizer, "rescale_grad", 1.0))
        lr = float(trainer.learning_rate)
        self._pending = (step, names, sq, (pos, n_loss, mults, scale, lr))
        self._send()

    def forget(self) -> None:
        """Drop the checks not judged yet (the ``fit`` they belong to raised)."""
        self._fresh = self._pending = None
        self._gen += 1  # reads still out are dropped when they come back
        self._todo.clear()
        self._ready.clear()
        self._stop_reader(join=False)
        self._sums.forget()

    def settle(self, wait: bool = False) -> bool:
        """Judge the checks the helper thread has read back; True when training should stop.

        Never waits for MXNet on the calling (training) thread; ``wait=True`` (the end of
        ``fit``) waits for the helper to read every check still out, and stops it.
        """
        self._send()
        if wait:
            self._stop_reader(join=True)
            self._sums.forget()
        ready = self._ready
        while ready:
            gen, step, names, values, how = ready.popleft()
            if gen != self._gen:
                continue
            if isinstance(values, BaseException):
                self._out.failed(values)
            else:
                self._judge(step, names, values, how)
        return self.stop

    def _send(self) -> None:
        """Hand the last check's NDArray to the helper thread, which reads it (waits for MXNet).

        The helper runs at normal priority, as every thread that takes the GIL must: at nice 19,
        returning from ``asnumpy`` (re-taking the GIL) on a CPU that MXNet keeps busy, it made the
        training thread wait for it in turn (``writer/_common/threads.py``). Under ``SCHED_BATCH``,
        as the writer thread: woken, it does not preempt MXNet's OpenMP threads."""
        if self._pending is None:
            return
        item, self._pending = self._pending, None
        self._todo.append((self._gen, item))
        if self._thread is None:
            self._wake, self._stopping = threading.Event(), threading.Event()
            self._thread = threading.Thread(target=self._read, name="gluon_tb-grad-health", daemon=True,
                                            args=(self._todo, self._ready, self._wake, self._stopping))
            self._launched = launched = threading.Event()
            gen = self._gen  # started by the starter thread, born under SCHED_BATCH (waking, it does not
            start_batch_thread(self._thread, launched,  # preempt MXNet's threads), not waited for here
                               lambda e: self._ready.append((gen, -1, [], e, None)))
        self._wake.set()

    def _stop_reader(self, join: bool) -> None:
        t, self._thread = self._thread, None
        if t is not None:
            self._stopping.set()  # read what is left, then stop
            self._wake.set()
            if join:
                self._launched.wait()
                if t.ident is not None:  # started (else its error is in _ready)
                    t.join()

    @staticmethod
    def _read(todo: deque, ready: deque, wake: threading.Event, stopping: threading.Event) -> None:
        while True:
            wake.wait()
            wake.clear()
            while todo:
                gen, (step, names, vec, how) = todo.popleft()
                try:
                    values: Any = vec.asnumpy()  # on this helper thread: MXNet is waited for here
                except Exception as e:  # noqa: BLE001 - reported on the training thread
                    values = e
                ready.append((gen, step, names, values, how))
            if stopping.is_set() and not todo:
                return

    # ------------------------------------------------------------ detectors
    def _judge(self, step: int, names: List[str], v: Any, how: Tuple[Any, ...]) -> None:
        """Log the scalars of a check read back as ``v`` (sums of squares), then run the detectors."""
        pos, n_loss, mults, scale, lr = how
        p = len(names)
        v = np.asarray(v, dtype=np.float64)
        order = [i for idx in pos for i in idx]  # each array's partial sums, in turn
        starts = np.cumsum([0] + [len(idx) for idx in pos[:-1]])
        sums = np.add.reduceat(v[order], starts)
        g2, w2 = sums[:p], sums[p:2 * p]
        loss_bad = n_loss and not np.isfinite(v[len(order):]).all()  # after them
        with np.errstate(invalid="ignore", over="ignore"):
            gn, wn = np.sqrt(g2) * scale, np.sqrt(w2)
            ggn, gwn = math.sqrt(g2.sum()) * scale, math.sqrt(w2.sum())
            steps = gn * lr * np.asarray(mults)
            gstep = math.sqrt(float((steps * steps).sum()))  # the whole step, each parameter's lr_mult in it
        self._log(step, "global", ggn, gwn, gstep)
        if self.cfg.per_param:
            for i, n in enumerate(names):
                self._log(step, n, float(gn[i]), float(wn[i]), float(steps[i]))
        if self.stop:  # a detector has already stopped training: its check is the one reported
            return
        norms = dict(zip(names + ["global"], [float(x) for x in gn] + [ggn]))
        bad = [n for n, x in norms.items() if not math.isfinite(x)]
        bad_w = [n for n, x in zip(names, wn) if not math.isfinite(x)]  # a NaN batch's update, say
        if bad or bad_w or loss_bad:
            parts = [f"`{n}` (non-finite norm)" for n in bad if n != "global"]
            parts += [f"`{n}` (non-finite weights)" for n in bad_w]
            if loss_bad:
                parts.insert(0, "the loss (non-finite values)")
            self._fire("nonfinite", step, "non-finite gradients, weights or loss", parts)
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

    def _log(self, step: int, name: str, grad: float, weight: float, update: float) -> None:
        """``grad_norm``/``weight_norm``/``update_ratio`` of ``name``: the step over the weight,
        at most 1 (a step as large as the weight or larger counts as 1); 0 without either."""
        if update != update or weight != weight:
            ratio = float("nan")
        else:
            ratio = update / max(weight, update, 1e-30)
        w = self._out
        w.call(TRAIN_BATCH, SummaryWriter.add_scalar, f"grad_norm/{name}", grad, step)
        w.call(TRAIN_BATCH, SummaryWriter.add_scalar, f"weight_norm/{name}", weight, step)
        w.call(TRAIN_BATCH, SummaryWriter.add_scalar, f"update_ratio/{name}", ratio, step)

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
        self._out.call(TRAIN_BATCH, SummaryWriter.add_text, "grad_health", text, step)
