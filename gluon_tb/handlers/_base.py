"""What the training adapters share: argument checks, run writers, naming, the error policy.

The adapters (``_estimator.py``, ``_module.py``) only decide *what* to log and *when*;
everything that touches a :class:`~gluon_tb.writer.SummaryWriter` goes through
:meth:`RunWriters.call` (``out.call(TRAIN, SummaryWriter.add_scalar, tag, value, step)``, a call
that a type checker follows), which opens one writer per run directory lazily (so no empty event
files appear) and applies the ``on_error`` policy.

Nothing here has "metric" in an attribute name: the Gluon estimator rejects
handlers with such attributes unless they hold one of its metric objects.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import warnings
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    TypeVar, Union)

from ..writer import SummaryWriter
from ..writer._common.checks import check_storage_options, describe, is_python_int, is_python_number
from ._hooks import FitScope, Wrap, wrap  # noqa: F401 - re-exported for the adapters

TRAIN = "train"
VALIDATION = "validation"
ON_ERROR = ("raise", "warn")

logger = logging.getLogger("gluon_tb.handlers")

ParamFilter = Union[None, str, Callable[[str], bool]]
R = TypeVar("R")
if TYPE_CHECKING:  # typing has these from Python 3.10; annotations here are never evaluated
    from typing import Concatenate, ParamSpec

    P = ParamSpec("P")


# ---------------------------------------------------------------- argument checks
def check_choice(value: Any, name: str, choices: Tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {describe(value)}")
    return value


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {describe(value)}")
    return value


def check_positive_int(value: Any, name: str) -> int:
    if not is_python_int(value):
        raise TypeError(f"{name} must be a positive int, got {describe(value)}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def check_positive_number(value: Any, name: str) -> float:
    if not is_python_number(value):
        raise TypeError(f"{name} must be a positive number, got {describe(value)}")
    if not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value}")
    return float(value)


def param_selector(value: ParamFilter, name: str = "params") -> Callable[[str], bool]:
    """``None`` (all), a regular expression (``re.search`` on the name) or ``callable(name) -> bool``."""
    if value is None:
        return lambda _name: True
    if isinstance(value, str):
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise ValueError(f"{name} must be a valid regular expression, got {value!r}: {e}") from None
        return lambda n: pattern.search(n) is not None
    if callable(value):
        return lambda n: bool(value(n))
    raise TypeError(f"{name} must be None, a regular expression str or a callable(name) -> bool, "
                    f"got {describe(value)}")


def check_hparams(value: Any) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    from ..writer._summaries.hparams import check_hparams as _check

    if not isinstance(value, Mapping):
        raise TypeError(f"hparams must be a mapping of name to str/bool/int/float, got {describe(value)}")
    return _check(value)


# ---------------------------------------------------------------- naming
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
    ``reset_local()`` (``Speedometer(auto_reset=True)``) does not clear.
    """
    out: List[Tuple[str, float]] = []
    seen = set()
    loss_done = False
    for m in ms:
        pairs = m.get_global_name_value() if use_global else m.get_name_value()
        if not loss_done and is_loss(m) and len(pairs) == 1:
            loss_done = True
            if not skip_loss:
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


# ---------------------------------------------------------------- writers and errors
class RunWriters:
    """One lazily opened :class:`SummaryWriter` per run directory, and the error policy.

    ``on_error="raise"`` lets a writer error propagate (it stops training);
    ``"warn"`` issues one ``RuntimeWarning`` for the first error, counts the rest and
    lets training go on. In distributed training ``prefix`` (``"worker_<rank>"``) puts
    the runs of one worker in a directory of their own, and ``muted`` makes every
    write a no-op (the workers other than rank 0).
    """

    def __init__(self, logdir: str, on_error: str, flush_secs: float,
                 storage_options: Optional[Mapping[str, Any]] = None) -> None:
        self.logdir = logdir
        check_storage_options(storage_options, logdir)
        self.storage_options = storage_options
        self.on_error = on_error
        self.flush_secs = flush_secs
        self.errors = 0
        self.prefix = ""
        self.muted = False
        self._open: Dict[str, SummaryWriter] = {}
        self._told: set = set()
        self.purge: Dict[str, int] = {}  # run -> purge_step of its next writer (a resumed run)

    def writer(self, run: str) -> SummaryWriter:
        w = self._open.get(run)
        if w is None:
            w = self._open[run] = SummaryWriter(os.path.join(self.logdir, self.prefix, run),
                                                flush_secs=self.flush_secs,
                                                storage_options=self.storage_options,
                                                purge_step=self.purge.pop(run, None))
        return w

    def call(self, run: str, fn: Callable[Concatenate[SummaryWriter, P], R], *args: P.args,
             **kwargs: P.kwargs) -> Optional[R]:
        """``fn(writer of run, *args, **kwargs)`` under the error policy; None when muted or failed.

        ``fn`` is a :class:`SummaryWriter` method, unbound (``SummaryWriter.add_scalar``), or a
        function whose first argument is the writer: a type checker follows the call and checks
        its arguments against ``fn``'s signature. A failure goes to :meth:`failed` (``"raise"``:
        re-raised; ``"warn"``: counted, None returned).
        """
        if self.muted:
            return None
        try:
            return fn(self.writer(run), *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the policy decides
            self.failed(e)
            return None

    def failed(self, e: BaseException) -> None:
        self.errors += 1
        if self.on_error == "raise":
            raise e
        if self.errors == 1:
            warnings.warn(f"gluon_tb: writing to {self.logdir} failed ({type(e).__name__}: {e}); "
                          "training goes on (on_error='warn'), later writer errors are only counted",
                          RuntimeWarning, stacklevel=4)

    def add_graph(self, run: str, net: Any) -> None:
        """Log ``net``'s graph; a net that cannot give one is skipped with one message."""
        if self.muted:
            return
        try:
            self.writer(run).add_graph(net)
        except (TypeError, ValueError) as e:
            self.say_once("graph", f"gluon_tb: the graph is not logged: {e}")
        except Exception as e:  # noqa: BLE001 - the error policy decides
            self.failed(e)

    def say_once(self, key: str, msg: str, level: int = logging.INFO) -> None:
        if key not in self._told:
            self._told.add(key)
            logger.log(level, msg)

    def flush(self) -> None:
        for w in list(self._open.values()):
            try:
                w.flush()
            except Exception as e:  # noqa: BLE001
                self.failed(e)

    def close(self) -> None:
        """Close every writer; the next write opens new event files."""
        writers, self._open = list(self._open.values()), {}
        for w in writers:
            try:
                w.close()
            except Exception as e:  # noqa: BLE001
                self.failed(e)
        if self.errors > 1 and self.on_error == "warn":
            logger.warning("gluon_tb: %d writer errors in %s were ignored (on_error='warn')",
                           self.errors, self.logdir)


# ---------------------------------------------------------------- hooks and array helpers
def batch_gradient(p: Any) -> Any:
    """The gradient of the whole batch: the sum over devices (what the kvstore reduces)."""
    gs = p.list_grad()
    g = gs[0]
    for other in gs[1:]:
        g = g + other.as_in_context(gs[0].context)
    return g.tostype("default") if getattr(g, "stype", "default") != "default" else g


def loss_total(losses: Sequence[Any]) -> Tuple[Any, int]:
    """Sum over all elements of the per-device losses (an NDArray, no host sync) and their count."""
    ctx = losses[0].context
    total = losses[0].sum()
    for l in losses[1:]:
        total = total + l.sum().as_in_context(ctx)
    return total, sum(int(l.size) for l in losses)


# ---------------------------------------------------------------- where counting starts
def check_start(value: Any, name: str) -> Optional[int]:
    """``initial_epoch=`` / ``initial_step=``: ``None`` (found) or an int >= 0."""
    if value is None:
        return None
    if not is_python_int(value):
        raise TypeError(f"{name} must be None or an int >= 0, got {describe(value)}")
    if value < 0:
        raise ValueError(f"{name} must be None or an int >= 0, got {value}")
    return value


def check_option(value: Any, name: str, cls: type) -> Any:
    """An option object argument: ``None``/``False`` (off), ``True`` (``cls()``'s defaults) or a ``cls``."""
    if value is None or value is False:
        return None
    if value is True:
        return cls()
    if isinstance(value, cls):
        return value
    raise TypeError(f"{name} must be None, a bool or a {cls.__name__}(...), got {describe(value)}")
