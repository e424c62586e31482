"""Metric naming: MXNet metrics as ``(tag suffix, value)`` pairs, the loss metric named ``loss``."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable, List, Tuple

_PREFIX = re.compile(r"^(training|validation)[\s_]+", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def tag_of(name: Any) -> str:
    """An MXNet metric name as a tag suffix: ``"training accuracy"`` -> ``"accuracy"``."""
    s = _PREFIX.sub("", str(name).strip()).lower()
    s = re.sub(r"\s+", "_", s)
    s = re.sub(r"[^\w.\-/]", "_", s)
    return s or "metric"


@functools.lru_cache(maxsize=1)
def _loss_class() -> type:
    from mxnet.metric import Loss

    return Loss


def is_loss(m: Any) -> bool:
    return isinstance(m, _loss_class())


def scores(ms: Iterable[Any], use_global: bool = False, *,
           skip_loss: bool = False) -> List[Tuple[str, float]]:
    """``[(tag suffix, value)]`` of MXNet metrics, already host floats after their update.

    The first :class:`mxnet.metric.Loss` among them is named ``loss`` (the estimator
    names it after the loss block, e.g. ``"training softmaxcrossentropyloss"``);
    ``skip_loss`` leaves it out. ``use_global`` reads the epoch-wide values that
    ``reset_local()`` (``Speedometer(auto_reset=True)``, gluon-nlp's ``MetricResetHandler``)
    does not clear.
    """
    def pairs_of(m: Any) -> List[Tuple[Any, Any]]:
        return m.get_global_name_value() if use_global else m.get_name_value()

    return name_pairs(ms, pairs_of, skip_loss=skip_loss)


def name_pairs(ms: Iterable[Any], pairs_of: Callable[[Any], List[Tuple[Any, Any]]], *,
               skip_loss: bool = False) -> List[Tuple[str, Any]]:
    """``[(tag suffix, value)]`` of ``pairs_of(m)`` (``(name, value)`` pairs) for each metric, named
    as :func:`scores` says."""
    out: List[Tuple[str, Any]] = []
    seen = set()
    loss_done = False
    for m in ms:
        pairs = pairs_of(m)
        if not loss_done and is_loss(m) and len(pairs) <= 1:
            loss_done = True
            if not skip_loss and pairs:
                out.append(("loss", pairs[0][1]))
                seen.add("loss")
            continue
        for n, v in pairs:
            tag = base = tag_of(n)
            i = 2
            while tag in seen:
                tag, i = f"{base}_{i}", i + 1
            seen.add(tag)
            out.append((tag, v))
    return out
