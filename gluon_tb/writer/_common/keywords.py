"""An unknown keyword argument gets an error that says what to pass instead.

Python's own message is "``__init__() got an unexpected keyword argument``" (or
"``WriterBase.add_x() got ...``"), naming an internal class when the function is inherited
(``WriterBase``) and suggesting nothing. :func:`known_keywords` wraps a constructor or a method so
that such a name raises a ``TypeError`` naming the class the user called (and the method), and
then the argument of ours that does the job (``other``: another tool's names, mapped to ours) or
the closest name it takes.

The names are looked at only when the call raised a ``TypeError``: a call with an unknown keyword
fails before the function's body runs, so a call that goes through pays only for the wrapper's
own call (not for ``add_scalar`` and ``add_mean``, which are not wrapped).

Example::

    class Writer:
        @known_keywords({"log_dir": "logdir"})
        def __init__(self, logdir, flush_secs=2.0): ...

        @known_keywords({"img_tensor": "image"}, "tensorboardX")
        def add_image(self, tag, image): ...

    Writer("logs", flush_sec=1)  # TypeError: Writer() has no argument 'flush_sec'; did you mean 'flush_secs'?
    Writer("logs").add_image("x", img_tensor=a)
    # TypeError: Writer.add_image() has no argument 'img_tensor' (tensorboardX's name): pass image
"""
from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any, Callable, Mapping, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def known_keywords(other: Mapping[str, str], tool: str = "another tool") -> Callable[[F], F]:
    """A decorator of ``__init__`` or a method: an unknown keyword is a ``TypeError`` that says
    what to pass. ``other``: ``tool``'s argument names -> what to pass here instead."""

    def decorate(fn: F) -> F:
        params = inspect.signature(fn).parameters
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return fn  # it takes every name
        names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"]

        def refuse(self: Any, name: str) -> TypeError:
            cls = type(self).__name__
            called = f"{cls}()" if fn.__name__ == "__init__" else f"{cls}.{fn.__name__}()"
            if name in other:
                return TypeError(f"{called} has no argument {name!r} ({tool}'s name): pass {other[name]}")
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; its arguments: {', '.join(names)}"
            return TypeError(f"{called} has no argument {name!r}{hint}")

        @functools.wraps(fn)
        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except TypeError:
                for name in kwargs:  # an unknown one: Python refused the call before fn's body ran
                    if name not in params:
                        raise refuse(self, name) from None
                raise

        return checked  # type: ignore[return-value]

    return decorate
