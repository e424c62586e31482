"""Which ``Module.fit`` slot called the Module callback: a wrong slot does the right thing or says what to pass.

``Module.fit`` has four callback slots, and a callback put in the wrong one used to log
silently wrong curves (validation values as ``batch_accuracy``, validation batches as training
batches) or nothing at all. What MXNet (1.9.1, ``module/base_module.py``) passes differs per slot:

* ``batch_end_callback``: ``BatchEndParam(epoch, nbatch, eval_metric, locals)``, whose
  ``locals`` are ``fit``'s own (they hold ``train_data`` and the four slots);
* ``epoch_end_callback``: ``(epoch, symbol, arg_params, aux_params)``;
* ``eval_end_callback`` and ``eval_batch_end_callback``: ``fit`` hands them to ``score()`` as its
  ``score_end_callback`` and ``batch_end_callback``; each gets a ``BatchEndParam`` whose
  ``locals`` are ``score()``'s (they hold ``score_end_callback``).

:func:`slot_of` reads which slot a ``BatchEndParam`` came from, and :func:`reroute` makes each
entry point of the callback (the object, ``epoch_end``, ``eval_end``) do what that slot needs:
in a batch slot it logs the batch, at the end of validation the validation values. In
``eval_batch_end_callback`` there is nothing to log, and one warning says what to pass.
:func:`missing_slots` reads ``fit``'s locals at the first batch and warns about a slot the callback
is not in (no ``epoch_*`` values, no validation values). :func:`fit_callbacks` fills every slot at
once, merged with the user's own callbacks.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

BATCH_END = "batch_end_callback"
EPOCH_END = "epoch_end_callback"
EVAL_END = "eval_end_callback"
EVAL_BATCH_END = "eval_batch_end_callback"
SLOTS = (BATCH_END, EPOCH_END, EVAL_END, EVAL_BATCH_END)

EVERY_SLOT = "or every slot at once with mod.fit(..., **cb.fit_callbacks())"


def entries(value: Any) -> List[Any]:
    """A slot's callbacks as a list (MXNet's ``_as_list``: one callable or a list of them)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def is_ours(fn: Any, cb: Any) -> bool:
    """``fn`` is ``cb`` or one of its bound methods."""
    return fn is cb or getattr(fn, "__self__", None) is cb


def is_batch_param(value: Any) -> bool:
    """``value`` looks like MXNet's ``BatchEndParam`` (not an epoch index)."""
    return all(hasattr(value, a) for a in ("epoch", "nbatch", "eval_metric", "locals"))


def slot_of(param: Any, cb: Any) -> Optional[str]:
    """The ``Module.fit`` slot that passed ``param`` (a ``BatchEndParam``), or None when neither
    ``fit`` nor ``score()`` made it (a hand-made one: the method called keeps its meaning)."""
    loc = getattr(param, "locals", None)
    if not isinstance(loc, Mapping) or "self" not in loc:  # not a module's method (FeedForward's loop)
        return None
    if "score_end_callback" in loc:  # score(): fit's eval_end_callback or eval_batch_end_callback
        at_end = any(is_ours(f, cb) for f in entries(loc.get("score_end_callback")))
        at_batch = any(is_ours(f, cb) for f in entries(loc.get("batch_end_callback")))
        if at_end != at_batch:
            return EVAL_END if at_end else EVAL_BATCH_END
        # in both slots, or wrapped: score() calls a batch callback before it counts the batch
        return EVAL_BATCH_END if "nbatch" in loc and loc["nbatch"] == param.nbatch else EVAL_END
    if "train_data" in loc and "eval_end_callback" in loc:
        return BATCH_END
    return None


def reroute(cb: Any, param: Any, here: str) -> bool:
    """When MXNet called ``cb``'s entry point for slot ``here`` from another slot, do what that
    slot needs and return True (the entry point then returns); False: go on as ``here``."""
    slot = slot_of(param, cb)
    if slot is None or slot == here:
        return False
    if slot == BATCH_END:
        cb(param)
    elif slot == EVAL_END:
        cb.eval_end(param)
    else:
        cb._out.say_once("eval-batch", "gluon_tb: TensorBoardCallback was passed as eval_batch_end_callback, "
                         "which MXNet calls after every validation batch; it logs nothing there. Pass "
                         f"eval_end_callback=cb.eval_end for the validation values, {EVERY_SLOT}",
                         logging.WARNING)
    return True


def missing_slots(cb: Any, fit_locals: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """At the first batch of a ``fit``: ``(key, message)`` of a warning per slot that ``cb`` should
    be in and is not (read from ``fit``'s locals), for the caller to log once per key."""
    out = []
    if not any(is_ours(f, cb) for f in entries(fit_locals.get(EPOCH_END))):
        out.append(("no-epoch-end", "gluon_tb: TensorBoardCallback is not in fit's epoch_end_callback, so epoch_* values and "
                   f"weight histograms are not logged; pass epoch_end_callback=cb.epoch_end, {EVERY_SLOT}"))
    if fit_locals.get("eval_data") is not None and \
            not any(is_ours(f, cb) for f in entries(fit_locals.get(EVAL_END))):
        out.append(("no-eval-end", "gluon_tb: TensorBoardCallback is not in fit's eval_end_callback, so "
                    f"validation values are not logged; pass eval_end_callback=cb.eval_end, {EVERY_SLOT}"))
    return out


def _checked(value: Any, name: str) -> List[Callable[..., Any]]:
    items = entries(value)
    bad = [f for f in items if not callable(f)]
    if bad:
        raise TypeError(f"fit_callbacks: {name} must be a callable or a list of callables, "
                        f"got {type(bad[0]).__name__} {bad[0]!r}")
    return items


def fit_callbacks(cb: Any, extra: Mapping[str, Any]) -> Dict[str, List[Callable[..., Any]]]:
    """Every slot ``cb`` needs, its own entry first, then the user's callbacks of that slot (``extra``).

    ``cb``'s own entries given again in ``extra`` are dropped (no double logging)."""
    own: Dict[str, List[Callable[..., Any]]] = {BATCH_END: [cb], EPOCH_END: [cb.epoch_end],
                                                EVAL_END: [cb.eval_end]}
    out: Dict[str, List[Callable[..., Any]]] = {}
    for name in SLOTS:
        theirs = [f for f in _checked(extra.get(name), name) if not is_ours(f, cb)]
        if name in own or theirs:
            out[name] = own.get(name, []) + theirs
    return out
