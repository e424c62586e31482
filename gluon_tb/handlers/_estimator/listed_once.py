"""A handler listed twice in ``event_handlers`` acts once.

``Estimator.fit(event_handlers=[h, h])`` makes MXNet call each of ``h``'s events twice in a row
(its handler lists keep both; they are sorted by priority, so the two calls are adjacent): every
batch point would be logged twice and every epoch counted twice. At ``train_begin`` the handler
removes its later entries from the ``fit`` call's own lists (the ones MXNet iterates; removing a
later entry of the list being iterated is safe) and warns once.
"""
from __future__ import annotations

from typing import Any, Dict
import warnings

#: the local variables of MXNet 1.9.1's ``Estimator.fit`` that hold the lists it iterates (made by
#: ``_categorize_handlers``; ``event_handlers`` itself is the user's list, only counted)
_LISTS = ("train_begin", "epoch_begin", "batch_begin", "batch_end", "epoch_end", "train_end")


def keep_first(fit_locals: Dict[str, Any], handler: Any) -> int:
    """Drop every entry of ``handler`` after its first from the ``fit``'s handler lists; returns how
    many times it is listed in ``event_handlers``, warning when more than once."""
    listed = fit_locals.get("event_handlers")
    times = sum(h is handler for h in listed) if isinstance(listed, list) else 1
    if times < 2:
        return times
    for name in _LISTS:
        entries = fit_locals.get(name)
        if isinstance(entries, list):
            first = next((i for i, e in enumerate(entries) if e is handler), None)
            if first is not None:
                entries[first + 1:] = [e for e in entries[first + 1:] if e is not handler]
    warnings.warn(f"{type(handler).__name__} is listed {times} times in event_handlers; it logs once "
                  "(pass it once)", UserWarning, stacklevel=3)
    return times
