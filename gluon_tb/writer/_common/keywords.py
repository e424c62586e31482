"""A constructor's unknown keyword argument gets an error that says what to pass instead.

Python's own message is "``__init__() got an unexpected keyword argument``", naming an internal
class when the constructor is inherited (``WriterBase``) and suggesting nothing. :func:`known_keywords`
wraps ``__init__`` so that such a name raises a ``TypeError`` naming the class the user called, and
then the argument of ours that does the job (``other``: another tool's names, mapped to ours) or the
closest name it takes.

Example::

    class Writer:
        @known_keywords({"log_dir": "logdir"})
        def __init__(self, logdir, flush_secs=2.0): ...

    Writer("logs", flush_sec=1)  # TypeError: Writer() has no argument 'flush_sec'; did you mean 'flush_secs'?
"""
from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any, Callable, Mapping, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def known_keywords(other: Mapping[str, str]) -> Callable[[F], F]:
    """A decorator of ``__init__``: an unknown keyword is a ``TypeError`` that says what to pass."""

    def decorate(init: F) -> F:
        params = inspect.signature(init).parameters
        names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"]

        @functools.wraps(init)
        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            for name in kwargs:
                if name not in params:
                    cls = type(self).__name__
                    if name in other:
                        raise TypeError(f"{cls}() has no argument {name!r} (another tool's name): pass {other[name]}")
                    close = difflib.get_close_matches(name, names, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else f"; its arguments: {', '.join(names)}"
                    raise TypeError(f"{cls}() has no argument {name!r}{hint}")
            return init(self, *args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate
