"""The handlers' argument checks, run when a handler is made so that a bad value fails before training.

Each error is a ``TypeError`` or ``ValueError`` that names the argument, what it must be and what was
given (the writer's ``describe``): a ``TypeError`` for a wrong type, a ``ValueError`` for a wrong value
of the right type. ``check_choice``, ``check_positive_int`` and ``check_positive_number`` are the writer's
(``writer/_common/checks.py``), so a mistake made in a handler and in ``SummaryWriter`` raises one type;
``hparams=`` is checked with the writer's own check.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

# the checks the writer's arguments use too: one error type for one mistake (re-exported for the handlers)
from ...writer._common import checks as _writer_checks
from ...writer._common.checks import MAX_STEP, check_choice, describe, is_int, is_real, step_too_large


def check_positive_int(value: Any, name: str) -> int:
    """The writer's :func:`~gluon_tb.writer._common.checks.check_positive_int`, a numpy integer
    taken as its int (a count or period computed with numpy)."""
    return _writer_checks.check_positive_int(int(value) if is_int(value) else value, name)


def check_positive_number(value: Any, name: str) -> float:
    """The writer's :func:`~gluon_tb.writer._common.checks.check_positive_number`, a numpy float or
    integer taken as its Python number."""
    return _writer_checks.check_positive_number(float(value) if is_real(value) else value, name)

ParamFilter = Union[None, str, Callable[[str], bool]]


def check_positive_int_or_none(value: Any, name: str) -> Optional[int]:
    """``None`` (an option switched off or left unbounded), or :func:`check_positive_int`'s."""
    return None if value is None else check_positive_int(value, name)


class ParamSelector:
    """``params=`` as a test of a parameter's name, which remembers what the user gave."""

    __slots__ = ("given", "_test")

    def __init__(self, given: ParamFilter, test: Callable[[str], bool]) -> None:
        self.given, self._test = given, test

    def __call__(self, name: str) -> bool:
        return self._test(name)

    def say_if_none(self, say: Callable[[str, str, int], None], names: Callable[[], Sequence[str]]) -> None:
        """A ``params=`` the user gave that matches none of ``names()`` (the parameters with a
        gradient) is a typo that would silently log no histogram: ``say`` it (once, a warning)."""
        if self.given is None:
            return
        have = list(names())
        if not have or any(self._test(n) for n in have):
            return
        what = repr(self.given) if isinstance(self.given, str) else getattr(self.given, "__name__", "<callable>")
        shown = ", ".join(have[:4]) + (", ..." if len(have) > 4 else "")
        say("params-none", f"gluon_tb: params={what} matches none of the net's {len(have)} parameters with a "
            f"gradient ({shown}); no gradient or weight histograms are logged", logging.WARNING)


def param_selector(value: ParamFilter, name: str = "params") -> ParamSelector:
    """``None`` (all), a regular expression (``re.search`` on the name) or ``callable(name) -> bool``."""
    if value is None:
        return ParamSelector(None, lambda _name: True)
    if isinstance(value, str):
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise ValueError(f"{name} must be a valid regular expression, got {value!r}: {e}") from None
        return ParamSelector(value, lambda n: pattern.search(n) is not None)
    if callable(value):
        return ParamSelector(value, lambda n: bool(value(n)))
    raise TypeError(f"{name} must be None, a regular expression str or a callable(name) -> bool, "
                    f"got {describe(value)}")


def check_hparams(value: Any) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    from ...writer._summaries.hparams import check_hparams as _check

    if not isinstance(value, Mapping):
        raise TypeError(f"hparams must be a mapping of name to str/bool/int/float, got {describe(value)}")
    return _check(value, "hparams")


def check_start(value: Any, name: str) -> Optional[int]:
    """``initial_epoch=`` / ``initial_step=``: ``None`` (found) or an int >= 0."""
    if value is None:
        return None
    if not is_int(value):  # a numpy integer too (read from a checkpoint's name, say): taken as its int
        raise TypeError(f"{name} must be None or an int >= 0, got {describe(value)}")
    value = int(value)
    if value < 0:
        raise ValueError(f"{name} must be None or an int >= 0, got {value}")
    if value > MAX_STEP:
        raise step_too_large(name, value)
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
