"""When a handler logs: small, validated schedule values.

A schedule is one of

* ``None``: never;
* a positive ``int`` ``k``: every ``k`` batches, on the global batch indices
  ``0, k, 2k, ...`` (counted from 0 across epochs);
* ``"epoch"``: once per epoch, on its last batch.

The projector options add ``every=k`` epochs (:func:`every_epochs`) to their log at the end of
training.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

from ...writer._common.checks import describe, is_int

EPOCH = "epoch"

Period = Union[int, str, None]


class Schedule(NamedTuple):
    """A checked schedule. ``every`` is a batch period, or ``None`` with ``per_epoch``/never."""

    every: Optional[int]
    per_epoch: bool

    @property
    def never(self) -> bool:
        return self.every is None and not self.per_epoch

    def due(self, step: int) -> bool:
        """True when a batch-period schedule fires at global batch index ``step``."""
        return self.every is not None and step % self.every == 0


def schedule(value: Any, name: str, *, allow_epoch: bool = False) -> Schedule:
    """Validate ``value`` (argument ``name``) and return its :class:`Schedule`."""
    if value is None:
        return Schedule(None, False)
    expected = "a positive int, 'epoch' or None" if allow_epoch else "a positive int or None"
    if allow_epoch and isinstance(value, str):
        if value == EPOCH:
            return Schedule(None, True)
        raise ValueError(f"{name} must be {expected}, got {describe(value)}")  # a str, not 'epoch'
    if not is_int(value):  # a numpy integer too (a period computed with numpy): taken as its int
        raise TypeError(f"{name} must be {expected}, got {describe(value)}")
    value = int(value)
    if value < 1:
        off = " (None switches it off)"
        raise ValueError(f"{name} must be {expected}, got {value}{off if value == 0 else ''}")
    return Schedule(value, False)


def every_epochs(every: Optional[int], epoch: int) -> bool:
    """An ``every=k`` option (``Embeddings``, ``WordVectors``) is due at the end of epoch ``epoch``
    (from 0): epochs ``k - 1``, ``2k - 1``, ...; never for ``None``."""
    return every is not None and (epoch + 1) % every == 0
