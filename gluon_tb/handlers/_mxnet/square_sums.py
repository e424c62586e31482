"""Sums of squares of many NDArrays, queued on MXNet's engine in a few operations.

``grad_health=`` needs the norm of every gradient and weight at every check. Each call into
MXNet from Python costs the training thread tens of microseconds while the engine is busy
(a ctypes call that drops the GIL and takes it back, behind the writer thread), and reading
an array's shape, dtype or context is such a call, as is making a view. So the work is
planned once for a list of arrays (:class:`SquareSums`: which arrays share one
``multi_sum_sq``, the views of the chunks of the large ones, what needs a cast), and a later
call with the same arrays only pushes the operations: one ``multi_sum_sq`` per dtype, one
``dot`` per chunk of a million values, one ``concat``. A model's gradients and weights are
the same NDArray objects batch after batch, so the plan is made once per ``fit``.

Measured on 1.4M float32 values on the CPU: ``sum(square(x))`` 10 ms, ``multi_sum_sq`` 1.4 ms,
chunked ``dot`` 0.14 ms (BLAS). Accumulating a whole large array in float32 drifts
(``multi_sum_sq`` by 50% over 50M values); chunks keep it within a few 1e-6.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

SMALL = 1 << 16  # arrays up to this many values share one multi_sum_sq (float32 sums: ~1e-5 there)
CHUNK = 1 << 20  # a larger array: a dot product of itself per chunk of this many values (~3e-6)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class _Plan:
    """The operations for one list of arrays, and where each array's partial sums land."""

    def __init__(self, arrays: Sequence[Any], ctx: Any, meta: Optional[Sequence[Tuple[int, Any]]]) -> None:
        self.ctx = ctx
        small: Dict[Any, List[Any]] = {}
        self.chunks: List[Any] = []  # views whose dot with themselves is a part
        chunk_casts: List[bool] = []
        self.others: List[Tuple[Any, bool]] = []  # (array, on ctx): sum(square(x)), a part each
        other_casts: List[bool] = []
        spots: List[Tuple[str, Any, int]] = []  # per array: where its partial sums are
        for i, a in enumerate(arrays):
            if meta is not None:
                n, dtype = meta[i]
                dtype, here = np.dtype(dtype), True
            else:
                n, dtype, here = a.size, np.dtype(a.dtype), a.context == ctx
            if here and n <= SMALL:
                group = small.setdefault(dtype, [])
                spots.append(("small", dtype, len(group)))
                group.append(a)
            elif here and dtype in _FLOATS:
                flat = a.reshape((-1,))
                count = -(-n // CHUNK)
                spots.append(("chunks", len(self.chunks), count))
                self.chunks.extend(flat[k:min(k + CHUNK, n)] for k in range(0, n, CHUNK))
                chunk_casts.extend([dtype != _FLOATS[0]] * count)
            else:
                spots.append(("other", len(self.others), 1))
                self.others.append((a, here))
                other_casts.append(dtype != _FLOATS[0])
        # the vector: each group's multi_sum_sq (float32 whatever the input), the chunks, the others
        self.groups = list(small.values())
        group_at: Dict[Any, int] = {}
        at = 0
        for dtype, group in small.items():
            group_at[dtype] = at
            at += len(group)
        kind_at = {"chunks": at, "other": at + len(self.chunks)}
        self.index: List[List[int]] = []
        for kind, key, k in spots:  # small: (dtype, place in its group); else: (first of its kind, count)
            if kind == "small":
                self.index.append([group_at[key] + k])
            else:
                self.index.append(list(range(kind_at[kind] + key, kind_at[kind] + key + k)))
        self.casts = [False] * len(self.groups) + chunk_casts + other_casts

    def run(self) -> Any:
        from mxnet import nd

        pieces: List[Any] = [nd.multi_sum_sq(*g, num_arrays=len(g)) for g in self.groups]
        pieces.extend(nd.dot(v, v) for v in self.chunks)
        for a, here in self.others:
            part = nd.sum(nd.square(a))
            pieces.append(part if here else part.as_in_context(self.ctx))
        pieces = [x.astype(np.float32) if cast else x for x, cast in zip(pieces, self.casts)]
        return pieces[0] if len(pieces) == 1 else nd.concat(*pieces, dim=0)


def sum_squares(arrays: Sequence[Any], ctx: Any,
                meta: Optional[Sequence[Tuple[int, Any]]] = None) -> Tuple[Any, List[List[int]]]:
    """The sums of squares of the arrays' values, queued on MXNet's engine (nothing waited for):
    one float32 vector on ``ctx`` of partial sums, and for each array the indices of its partial
    sums in it (add them in float64).

    Small arrays on ``ctx`` share one ``multi_sum_sq`` per dtype; a larger float32/float64 one is
    ``dot(v, v)`` of views of chunks of its flattened values (a view costs no operation). Anything
    else (another device, other dtypes) is ``sum(square(x))``, on ``ctx``. ``meta``: each array's
    ``(size, dtype)`` where known, for arrays known to be on ``ctx``.
    """
    plan = _Plan(arrays, ctx, meta)
    return plan.run(), plan.index


class SquareSums:
    """:func:`sum_squares`, planned once for arrays that come back batch after batch.

    Example::

        sums = SquareSums()
        vec, index = sums(grads + weights, ctx)  # first call: plans, then queues
        vec, index = sums(grads + weights, ctx)  # the same NDArray objects: queues only
    """

    def __init__(self) -> None:
        self._arrays: List[Any] = []  # held, so that no other array can take their ids
        self._plan: Optional[_Plan] = None

    def __call__(self, arrays: Sequence[Any], ctx: Any,
                 meta: Optional[Sequence[Tuple[int, Any]]] = None) -> Tuple[Any, List[List[int]]]:
        plan = self._plan
        if plan is None or plan.ctx != ctx or len(arrays) != len(self._arrays) or \
                any(a is not b for a, b in zip(arrays, self._arrays)):
            plan = self._plan = _Plan(arrays, ctx, meta)
            self._arrays = list(arrays)
        return plan.run(), plan.index

    def forget(self) -> None:
        """Let go of the arrays (the ``fit`` is over)."""
        self._arrays, self._plan = [], None
