"""An independent recorder of what a training computed, and the comparison with gluon_tb's event files.

The recorder does not use gluon_tb. It records:

* per optimizer update: the base learning rate the optimizer used (``Optimizer._get_lrs``, patched at
  class level, so it sees every update of every trainer/module in the process) and the gradients it
  was handed (``Updater.__call__``: after any ``clip_global_norm`` the script did), as
  (num, sum, sum of squares, min, max) per parameter;
* Estimator: an ``EstimatorRecorder`` (priority 999: after MetricHandler/ValidationHandler at -1000
  and the update at -2000, just before gluon_tb's 1000) that recomputes, from the batch's
  ``pred``/``label``/``loss``, each training metric over the batch alone and over the whole epoch with
  private fresh copies (so no reset by another handler touches them), the mean of the returned loss
  values, the samples along ``batch_axis``, the weights after the update; and the estimator's own
  values (``get_global``) for diagnosis. A ``RawGradRecorder`` (priority -2001, before the update
  handler) records the gradients as backward left them. Validation: each validation metric's
  ``update`` is tapped, recomputed with a fresh copy, and the estimator's own value is read at
  epoch end in the epochs where it validated.
* Module: ``ModuleRecorder`` is a ``batch_end_callback``/``epoch_end_callback``/``eval_end_callback``
  doing the same from ``BatchEndParam.locals`` (``module.update_metric`` into fresh copies).

``compare(logdir, rec)`` reads the logdir with TensorBoard's ``EventAccumulator`` and returns rows
``(status, run/tag, detail)``.
"""
from __future__ import annotations

import copy
import math
import os
import time
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet.gluon.contrib.estimator.event_handler import (BatchBegin, BatchEnd, EpochBegin, EpochEnd, TrainBegin,
                                                         TrainEnd)

# ---------------------------------------------------------------- optimizer taps (class level)
_PENDING: Dict[str, Any] = {"lrs": [], "grads": {}}
_INSTALLED = False


def _stats(a: np.ndarray) -> tuple:
    a = np.asarray(a, dtype=np.float64).ravel()
    return (a.size, float(a.sum()), float((a * a).sum()), float(a.min()), float(a.max()))


def install_optimizer_taps() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    Opt = mx.optimizer.Optimizer
    orig_lrs = Opt._get_lrs

    def _get_lrs(self, indices):
        base = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        _PENDING["lrs"].append(float(base))
        return orig_lrs(self, indices)

    Opt._get_lrs = _get_lrs
    orig_call = mx.optimizer.Updater.__call__

    def __call__(self, index, grad, weight):
        idx = index if isinstance(index, (list, tuple)) else [index]
        gs = grad if isinstance(grad, (list, tuple)) else [grad]
        opt = self.optimizer
        for i, g in zip(idx, gs):
            if i in getattr(opt, "param_dict", {}):
                name = opt.param_dict[i].name
            else:
                name = opt.idx2name.get(i, str(i))
            a = g.asnumpy().astype(np.float64)
            prev = _PENDING["grads"].get(name)
            _PENDING["grads"][name] = a if prev is None else prev + a  # summed over devices
        return orig_call(self, index, grad, weight)

    mx.optimizer.Updater.__call__ = __call__


def take_pending() -> tuple:
    lrs, grads = _PENDING["lrs"], _PENDING["grads"]
    _PENDING["lrs"], _PENDING["grads"] = [], {}
    return lrs, {k: _stats(v) for k, v in grads.items()}


# ---------------------------------------------------------------- records
class Record:
    """What the training computed, keyed like gluon_tb's tags."""

    def __init__(self) -> None:
        self.batch: Dict[str, Dict[int, float]] = defaultdict(dict)   # batch_<x> -> {step: value}
        self.epoch: Dict[str, Dict[int, float]] = defaultdict(dict)   # train epoch_<x>
        self.epoch_est: Dict[str, Dict[int, float]] = defaultdict(dict)  # the estimator's own get_global
        self.val: Dict[str, Dict[int, float]] = defaultdict(dict)     # validation epoch_<x> (estimator's)
        self.val_fresh: Dict[str, Dict[int, float]] = defaultdict(dict)  # recomputed
        self.lrs: Dict[int, List[float]] = {}                          # step -> base rates used
        self.grads_applied: Dict[int, Dict[str, tuple]] = {}           # step -> name -> stats
        self.grads_raw: Dict[int, Dict[str, tuple]] = {}
        self.weights: Dict[int, Dict[str, tuple]] = {}
        self.samples: Dict[int, int] = {}
        self.loss_sums: Dict[int, Tuple[float, int]] = {}  # step -> (float64 sum, count) of the returned losses
        self.epoch_batches: Dict[int, List[int]] = defaultdict(list)   # epoch -> steps
        self.epoch_seconds: Dict[int, float] = {}
        self.notes: List[str] = []
        self.start_updates: Optional[int] = None  # the optimizer's update count before this fit's first batch

    def shifted(self, boff: int, eoff: int) -> "Record":
        """The record with batch indices moved by ``boff`` and epoch indices by ``eoff``."""
        r = Record()
        r.__dict__.update(self.__dict__)
        sb = lambda d: {k + boff: v for k, v in d.items()}  # noqa: E731
        se = lambda d: {k + eoff: v for k, v in d.items()}  # noqa: E731
        r.batch = defaultdict(dict, {t: sb(d) for t, d in self.batch.items()})
        r.epoch = defaultdict(dict, {t: se(d) for t, d in self.epoch.items()})
        r.epoch_est = defaultdict(dict, {t: se(d) for t, d in self.epoch_est.items()})
        r.val = defaultdict(dict, {t: se(d) for t, d in self.val.items()})
        r.val_fresh = defaultdict(dict, {t: se(d) for t, d in self.val_fresh.items()})
        r.lrs, r.grads_applied, r.grads_raw = sb(self.lrs), sb(self.grads_applied), sb(self.grads_raw)
        r.weights, r.samples, r.loss_sums = sb(self.weights), sb(self.samples), sb(self.loss_sums)
        r.epoch_batches = defaultdict(list, {e + eoff: [k + boff for k in ks] for e, ks in self.epoch_batches.items()})
        r.epoch_seconds = se(self.epoch_seconds)
        return r

    def epoch_first_lr(self, e: int) -> Optional[float]:
        for k in self.epoch_batches.get(e, []):
            if self.lrs.get(k):
                return self.lrs[k][0]
        return None


def tag_of(name: str) -> str:
    import re
    s = re.sub(r"^(training|validation)[\s_]+", "", str(name).strip(), flags=re.I).lower()
    s = re.sub(r"\s+", "_", s)
    return re.sub(r"[^\w.\-/]", "_", s) or "metric"


def pristine(m: Any) -> Any:
    """A deep copy of a metric without instance-level method overrides (wrappers another tool put on
    the instance would act on the original metric), reset."""
    c = copy.deepcopy(m)
    stack = [c]
    while stack:
        x = stack.pop()
        for k in [k for k, v in vars(x).items() if callable(v) and not isinstance(v, type) and k in
                  ("reset", "reset_local", "update", "get", "get_global", "update_dict")]:
            del x.__dict__[k]
        stack.extend(getattr(x, "metrics", []) or [])
    c.reset()
    return c


def _pairs(m: Any, use_global: bool = False) -> List[tuple]:
    """(tag, value) of a metric, a Loss metric named ``loss`` (as gluon_tb's docs say)."""
    nv = m.get_global_name_value() if use_global else m.get_name_value()
    if isinstance(m, mx.metric.Loss):
        return [("loss", float(nv[0][1]))]
    return [(tag_of(n), float(v)) for n, v in nv]


def _update(m: Any, label: Any, pred: Any, loss: Any) -> None:
    if isinstance(m, mx.metric.Loss):
        m.update(0, loss)
    else:
        m.update(label, pred)


def _loss_sum(loss: Any) -> Optional[Tuple[float, int]]:
    """(float64 sum, count) of every returned loss value, or None."""
    ls = loss if isinstance(loss, (list, tuple)) else [loss]
    vals = []
    for l in ls:
        if hasattr(l, "asnumpy"):
            vals.append(l.asnumpy().astype(np.float64).ravel())
        elif isinstance(l, np.ndarray):
            vals.append(l.astype(np.float64).ravel())
        elif isinstance(l, (int, float)):
            vals.append(np.array([float(l)]))
        else:
            return None
    if not vals:
        return None
    v = np.concatenate(vals)
    return float(v.sum()), int(v.size)


def _param_stats(params: Any, attr: str) -> Dict[str, tuple]:
    out = {}
    for name, p in params.items():
        if p.grad_req == "null":
            continue
        try:
            arrs = p.list_grad() if attr == "grad" else p.list_data()
        except Exception:  # noqa: BLE001
            continue
        a = sum(x.asnumpy().astype(np.float64) for x in arrs) if attr == "grad" else arrs[0].asnumpy()
        out[p.name] = _stats(a)
    return out


# ---------------------------------------------------------------- Estimator
class RawGradRecorder(BatchEnd):
    """Before the update handler (-2000): the gradients as backward left them."""
    priority = -2001

    def __init__(self, rec: Record, owner: "EstimatorRecorder") -> None:
        self.rec, self.owner = rec, owner

    def batch_end(self, estimator, *args, **kwargs):
        self.owner.raw = _param_stats(estimator.net.collect_params(), "grad")


class EstimatorRecorder(TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd):
    priority = 999

    def __init__(self, rec: Optional[Record] = None, weights: bool = True) -> None:
        install_optimizer_taps()
        self.rec = rec or Record()
        self.pre = RawGradRecorder(self.rec, self)
        self.raw: Dict[str, tuple] = {}
        self.step = 0
        self.epoch = 0
        self.weights = weights
        self._templates: List[Any] = []
        self._val_templates: List[Any] = []

    def handlers(self) -> list:
        return [self.pre, self]

    def train_begin(self, estimator, *args, **kwargs):
        # pristine copies, before gluon_tb (priority 1000) wraps anything on the metric instances
        self._templates = [pristine(m) for m in estimator.train_metrics]
        self._val_templates = [pristine(m) for m in estimator.val_metrics]
        self._val_fresh = [copy.deepcopy(m) for m in self._val_templates]
        for m in self._val_fresh:
            m.reset()
        self._val_updates = 0
        self._val_seen = 0
        for m, fresh in zip(estimator.val_metrics, self._val_fresh):
            if getattr(m, "_tp_tapped", False):
                m._tp_fresh = fresh
                continue
            orig = m.update
            m._tp_fresh = fresh

            def update(label, pred, _orig=orig, _m=m, _self=self):
                _self._val_updates += 1
                _m._tp_fresh.update(label, pred)
                return _orig(label, pred)
            m.update = update
            m._tp_tapped = True
        take_pending()

    def epoch_begin(self, estimator, *args, **kwargs):
        self._ep_metrics = [copy.deepcopy(m) for m in self._templates]
        for m in self._ep_metrics:
            m.reset()
        self._t0 = time.perf_counter()

    def batch_end(self, estimator, *args, **kwargs):
        k, rec = self.step, self.rec
        pred, label, loss, batch = kwargs.get("pred"), kwargs.get("label"), kwargs.get("loss"), kwargs.get("batch")
        ls = _loss_sum(loss)
        if ls is not None and ls[1]:
            rec.batch["batch_loss"][k] = ls[0] / ls[1]
            rec.loss_sums[k] = ls
        for t, em in zip(self._templates, self._ep_metrics):
            fresh = copy.deepcopy(t)
            fresh.reset()
            _update(fresh, label, pred, loss)
            _update(em, label, pred, loss)
            for tag, v in _pairs(fresh):
                rec.batch[f"batch_{tag}_metric" if tag == "loss" else f"batch_{tag}"][k] = v
        lrs, grads = take_pending()
        rec.lrs[k] = lrs
        rec.grads_applied[k] = grads
        rec.grads_raw[k] = self.raw
        self.raw = {}
        if self.weights:
            rec.weights[k] = _param_stats(estimator.net.collect_params(), "data")
        axis = getattr(estimator, "batch_axis", 0)
        data = batch[0] if isinstance(batch, (list, tuple)) else batch
        rec.samples[k] = int(data.shape[axis])
        rec.epoch_batches[self.epoch].append(k)
        self.step += 1

    def epoch_end(self, estimator, *args, **kwargs):
        e, rec = self.epoch, self.rec
        rec.epoch_seconds[e] = time.perf_counter() - self._t0
        for m in self._ep_metrics:
            for tag, v in _pairs(m):
                rec.epoch[f"epoch_{tag}"][e] = v
        for m in estimator.train_metrics:
            for tag, v in _pairs(m, use_global=True):
                rec.epoch_est[f"epoch_{tag}"][e] = v
        if self._val_updates != self._val_seen:  # the estimator validated in this epoch
            self._val_seen = self._val_updates
            for m in estimator.val_metrics:
                for tag, v in _pairs(m):
                    rec.val[f"epoch_{tag}"][e] = v
                f = m._tp_fresh
                for tag, v in _pairs(f):
                    rec.val_fresh[f"epoch_{tag}"][e] = v
                f.reset()
        self.epoch += 1

    def batch_begin(self, estimator, *args, **kwargs):
        if self.rec.start_updates is None:
            opt = getattr(estimator.trainer, "_optimizer", None)
            self.rec.start_updates = int(getattr(opt, "num_update", 0) or 0)

    def train_end(self, estimator, *args, **kwargs):
        pass


# ---------------------------------------------------------------- Module
class ModuleRecorder:
    """Module.fit callbacks: ``batch_end_callback=[..., rec.batch_end]``, ``epoch_end_callback=rec.epoch_end``,
    ``eval_end_callback=rec.eval_end``."""

    def __init__(self, rec: Optional[Record] = None) -> None:
        install_optimizer_taps()
        self.rec = rec or Record()
        self.step = 0
        self.epoch = None
        self._ep_metric = None
        self._template = None
        self._t0 = None

    def batch_end(self, param):
        rec, k = self.rec, self.step
        local = param.locals
        mod = local["self"]
        if self._template is None:
            self._template = pristine(param.eval_metric)
        if param.epoch != self.epoch:
            self.epoch = param.epoch
            self._ep_metric = copy.deepcopy(self._template)
            self._t0 = local.get("tic")
        fresh = copy.deepcopy(self._template)
        mod.update_metric(fresh, local["data_batch"].label)
        mod.update_metric(self._ep_metric, local["data_batch"].label)
        for tag, v in _pairs(fresh):
            rec.batch[f"batch_{tag}"][k] = v
        lrs, grads = take_pending()
        rec.lrs[k] = lrs
        rec.grads_applied[k] = grads
        g = mod._exec_group
        rec.grads_raw[k] = {n: _stats(sum(x.asnumpy().astype(np.float64) for x in gs))
                            for n, gs in zip(g.param_names, g.grad_arrays)}
        rec.weights[k] = {n: _stats(ws[0].asnumpy()) for n, ws in zip(g.param_names, g.param_arrays)}
        db = local["data_batch"]
        rec.samples[k] = int(db.data[0].shape[0])
        rec.epoch_batches[param.epoch].append(k)
        self.step += 1

    def epoch_end(self, epoch, symbol=None, arg_params=None, aux_params=None):
        rec = self.rec
        rec.epoch_seconds[epoch] = time.time() - self._t0 if self._t0 else float("nan")
        for tag, v in _pairs(self._ep_metric):
            rec.epoch[f"epoch_{tag}"][epoch] = v
        if arg_params:
            rec.notes.append(f"epoch {epoch}: arg_params given to epoch_end")
            self._arg_params = {n: _stats(a.asnumpy()) for n, a in arg_params.items()}
            rec.weights_epoch = getattr(rec, "weights_epoch", {})
            rec.weights_epoch[epoch] = self._arg_params

    def eval_end(self, param):
        for tag, v in _pairs(param.eval_metric):
            self.rec.val[f"epoch_{tag}"][param.epoch] = v


# ---------------------------------------------------------------- comparison
def read_logdir(logdir: str) -> Dict[str, Any]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = {}
    for run in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, run)
        if not os.path.isdir(path):
            continue
        ea = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
        ea.Reload()
        tags = ea.Tags()
        out[run] = {"scalars": {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]},
                    "histograms": {t: [(e.step, e.histogram_value) for e in ea.Histograms(t)]
                                   for t in tags["histograms"]},
                    "tensors": list(tags["tensors"])}
    return out


def _close(a: float, b: float, rel: float = 2e-6, abs_: float = 1e-7) -> bool:
    if a != a and b != b:
        return True
    return abs(a - b) <= abs_ + rel * max(abs(a), abs(b))


class Report:
    def __init__(self, case: str) -> None:
        self.case = case
        self.rows: List[tuple] = []

    def add(self, status: str, tag: str, detail: str) -> None:
        self.rows.append((status, tag, detail))

    def scalars(self, tag: str, ours: List[tuple], want: Dict[int, float], what: str, rel: float = 2e-6) -> None:
        got = dict(ours)
        steps_o, steps_w = sorted(got), sorted(want)
        bad = []
        if steps_o != steps_w:
            bad.append(f"steps differ: ours {steps_o[:12]}{'...' if len(steps_o) > 12 else ''} "
                       f"vs recorded {steps_w[:12]}{'...' if len(steps_w) > 12 else ''}")
        for s in steps_w:
            if s in got and not _close(got[s], want[s], rel):
                bad.append(f"step {s}: ours {got[s]:.7g} vs recorded {want[s]:.7g}")
        n = len(set(steps_o) & set(steps_w))
        if bad:
            self.add("FAIL", tag, f"[{what}] {len(bad)} problem(s) over {n} common steps; " + "; ".join(bad[:6]))
        else:
            self.add("PASS", tag, f"[{what}] {n} steps equal")

    def hists(self, tag: str, ours: List[tuple], want: Dict[int, Dict[str, tuple]], name: str, what: str,
              alt: Optional[Dict[int, Dict[str, tuple]]] = None, alt_what: str = "") -> None:
        bad, n, alt_match, sampled, differs = [], 0, 0, 0, 0
        for step, h in ours:
            w = want.get(step, {}).get(name)
            if w is None:
                bad.append(f"step {step}: nothing recorded")
                continue
            n += 1
            o = (h.num, h.sum, h.sum_squares, h.min, h.max)
            if w[0] > 65536 and o[0] < w[0]:  # documented: histogram_sample=65536, an evenly strided sample
                sampled += 1
                if not (w[3] - 1e-6 <= o[3] and o[4] <= w[4] + 1e-6 and 0.4 * 65536 <= o[0] <= 1.5 * 65536):
                    bad.append(f"step {step}: sampled histogram ({o[0]:.0f} of {w[0]} values) outside the recorded "
                               f"range or size: min/max ({o[3]:.4g},{o[4]:.4g}) vs ({w[3]:.4g},{w[4]:.4g})")
                continue
            a = alt.get(step, {}).get(name) if alt else None
            if a is not None and not (a[0] == w[0] and all(_close(x, y, 1e-6, 1e-9) for x, y in zip(a[1:], w[1:]))):
                differs += 1
            if not (o[0] == w[0] and all(_close(a, b, 1e-4, 1e-6 * max(1.0, math.sqrt(abs(w[2]))))
                                         for a, b in zip(o[1:], w[1:]))):
                a = alt.get(step, {}).get(name) if alt else None
                hit = a is not None and o[0] == a[0] and all(_close(x, y, 1e-4, 1e-7) for x, y in zip(o[1:], a[1:]))
                alt_match += hit
                bad.append(f"step {step}: ours (n,sum,sumsq,min,max)=({o[0]:.0f},{o[1]:.6g},{o[2]:.6g},{o[3]:.4g},"
                           f"{o[4]:.4g}) vs recorded ({w[0]},{w[1]:.6g},{w[2]:.6g},{w[3]:.4g},{w[4]:.4g})"
                           + (f" [equals {alt_what}]" if hit else ""))
        if bad:
            self.add("FAIL", tag, f"[{what}] " + "; ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""))
        else:
            note = (f" ({sampled} of them sampled by the documented histogram_sample=65536: range and size checked)"
                    if sampled else "")
            if differs:
                note += f"; at {differs} of them the {alt_what} differs, and ours is not it"
            self.add("PASS", tag, f"[{what}] {n} histogram steps: count, sum, sum of squares, min, max equal" + note)

    def print(self) -> int:
        print(f"\n=== {self.case}")
        fails = 0
        for status, tag, detail in self.rows:
            print(f"  {status:5s} {tag}: {detail}")
            fails += status == "FAIL"
        return fails


def compare(case: str, logdir: str, rec: Record, *, expect_val: bool = True, samples_tol: float = 0.25,
            grads_documented: str = "raw") -> Report:
    """Value-by-value comparison of gluon_tb's logdir with the record."""
    rep = Report(case)
    ev = read_logdir(logdir)
    tb = ev.get("train_batch", {"scalars": {}, "histograms": {}})
    tr = ev.get("train", {"scalars": {}, "histograms": {}})
    va = ev.get("validation", {"scalars": {}, "histograms": {}})
    # a fit that continues a training (resumed from a checkpoint, or a second fit of the same trainer)
    # numbers its batches from the optimizer's update count (documented): align the record on it
    bsteps = [s for pts in tb["scalars"].values() for s, _ in pts]
    esteps = [s for pts in tr["scalars"].values() for s, _ in pts]
    boff, eoff = (min(bsteps) if bsteps else 0), (min(esteps) if esteps else 0)
    if boff or eoff:
        want = rec.start_updates or 0
        rep.add("PASS" if boff == want else "FAIL", "train_batch/<first step>",
                f"this fit continues a training: ours starts at batch {boff} (the optimizer had made {want} updates "
                f"before this fit) and epoch {eoff}; the record is compared shifted by these")
        rec = rec.shifted(boff, eoff)
    # batch scalars
    for tag, want in sorted(rec.batch.items()):
        if tag.endswith("_metric"):
            continue  # the Loss metric per batch: gluon_tb logs batch_loss from the returned loss instead
        if tag not in tb["scalars"]:
            rep.add("FAIL", f"train_batch/{tag}", "missing in our logdir")
            continue
        rep.scalars(f"train_batch/{tag}", tb["scalars"][tag], want, "batch: recomputed from pred/label/loss")
    for tag in sorted(tb["scalars"]):
        if tag not in rec.batch:
            rep.add("INFO", f"train_batch/{tag}", f"not recorded; ours {tb['scalars'][tag][:3]}...")
    # epoch train scalars
    for tag, want in sorted(rec.epoch.items()):
        if tag not in tr["scalars"]:
            rep.add("FAIL", f"train/{tag}", "missing in our logdir")
            continue
        rep.scalars(f"train/{tag}", tr["scalars"][tag], want, "epoch: fresh metric over all the epoch's batches")
        if rec.epoch_est.get(tag) and any(not _close(rec.epoch_est[tag][e], want[e]) for e in want if e in rec.epoch_est[tag]):
            rep.add("INFO", f"train/{tag}", f"the estimator's own get_global differs from the recomputed value: "
                    f"{rec.epoch_est[tag]} vs {want}")
    checked = set()
    if "epoch_loss" not in rec.epoch and "batch_loss" in rec.batch and "epoch_loss" in tr["scalars"]:
        checked.add("epoch_loss")
        # no loss metric: documented as the mean of every returned loss value of the epoch
        want_loss = {}
        for e, ks in rec.epoch_batches.items():
            got = [rec.loss_sums[k] for k in ks if k in rec.loss_sums]
            if got and sum(n for _, n in got):
                want_loss[e] = sum(t for t, _ in got) / sum(n for _, n in got)
        rep.scalars("train/epoch_loss", tr["scalars"]["epoch_loss"], want_loss,
                    "no loss metric: the mean of every loss value the batches returned in the epoch (float64)")
    want_lr = {e: rec.epoch_first_lr(e) for e in rec.epoch_batches if rec.epoch_first_lr(e) is not None}
    if want_lr:
        rep.scalars("train/epoch_learning_rate", tr["scalars"].get("epoch_learning_rate", []), want_lr,
                    "rate of the epoch's first update (optimizer._get_lrs)", rel=1e-6)
        varied = {e: sorted({round(x, 9) for k in rec.epoch_batches[e] for x in rec.lrs.get(k, [])})
                  for e in rec.epoch_batches}
        varied = {e: v for e, v in varied.items() if len(v) > 1}
        if varied:
            rep.add("INFO", "train/epoch_learning_rate", "rates used within an epoch: "
                    + "; ".join(f"epoch {e}: {v[:5]}{'...' if len(v) > 5 else ''}" for e, v in varied.items()))
    sps = tr["scalars"].get("epoch_samples_per_second", [])
    if sps:
        bad = []
        for e, v in sps:
            n = sum(rec.samples[k] for k in rec.epoch_batches.get(e, []))
            secs = n / v if v else float("inf")
            mine = rec.epoch_seconds.get(e, float("nan"))
            if not (abs(secs - mine) <= samples_tol * mine + 0.05):
                bad.append(f"epoch {e}: ours {v:.6g}/s => {secs:.4f}s for the {n} recorded samples; recorder timed {mine:.4f}s")
        rep.add("FAIL" if bad else "PASS", "train/epoch_samples_per_second",
                ("; ".join(bad) if bad else f"[samples recorded along batch_axis / ours = epoch seconds within "
                 f"{samples_tol:.0%}] {len(sps)} epochs; samples/epoch "
                 f"{[sum(rec.samples[k] for k in rec.epoch_batches[e]) for e in sorted(rec.epoch_batches)]}"))
    for tag in sorted(tr["scalars"]):
        if tag not in rec.epoch and tag not in checked and \
                tag not in ("epoch_learning_rate", "epoch_samples_per_second"):
            rep.add("INFO", f"train/{tag}", f"not recorded (timing or not computed by the training); ours "
                    f"{[(s, round(v, 5)) for s, v in tr['scalars'][tag][:4]]}")
    # validation
    for tag, want in sorted(rec.val.items()):
        if tag not in va["scalars"]:
            rep.add("FAIL", f"validation/{tag}", "missing in our logdir")
            continue
        rep.scalars(f"validation/{tag}", va["scalars"][tag], want, "the estimator's/module's own validation value")
    for tag, want in sorted(rec.val_fresh.items()):
        if tag in va["scalars"] and any(not _close(want[e], rec.val[tag].get(e, float('nan'))) for e in want):
            rep.add("INFO", f"validation/{tag}", f"recomputed from the updates {want} differs from the estimator's {rec.val[tag]}")
    for tag in sorted(va["scalars"]):
        if tag not in rec.val:
            rep.add("INFO", f"validation/{tag}", f"not recorded; ours {[(s, round(v, 6)) for s, v in va['scalars'][tag]]}")
    if expect_val and not va["scalars"]:
        rep.add("FAIL", "validation/*", "no validation scalars in our logdir")
    # histograms
    for tag in sorted(tb["histograms"]):
        kind, _, name = tag.partition("/")
        if kind == "gradients":
            want, alt = (rec.grads_raw, rec.grads_applied) if grads_documented == "raw" else (rec.grads_applied, rec.grads_raw)
            rep.hists(f"train_batch/{tag}", tb["histograms"][tag], want, name,
                      "gradient as backward left it (documented)" if grads_documented == "raw" else
                      "gradient the optimizer was handed",
                      alt, "other gradient (after clipping/before)")
        elif kind == "weights":
            src = getattr(rec, "weights_epoch", None) if False else rec.weights
            rep.hists(f"train_batch/{tag}", tb["histograms"][tag], src, name, "weights after that batch's update")
    return rep
