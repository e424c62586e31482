"""Hooks on the trainer and batch processor, bound to the ``fit`` call that made them.

The Estimator handler shadows ``trainer.step``/``allreduce_grads``/``update``,
``batch_processor.fit_batch``/``evaluate_batch`` and the training metrics' ``reset``/``reset_local``
on those *instances* (see ``_estimator/handler.py`` and ``_mxnet/metric_windows.py`` for why).
MXNet 1.9.1 calls ``train_end`` only when ``fit`` returns normally: when anything inside
``fit`` raises, the hooks would stay, and run a dead handler's work on every later manual
``trainer.step``. So a hook belongs to one :class:`FitScope`, the ``Estimator.fit`` call
found on the stack at ``train_begin``, and is live only while that call is on the calling
thread's stack. The first call of a hook outside its ``fit`` (a manual ``trainer.step``, the
next ``fit`` with or without a handler) removes it, hands the objects their methods back and
tells its owner (which closes its writers); a new handler's ``train_begin`` does the same to
every dead hook of the process (on any trainer) before it hooks anything itself.

The cost of that check is one walk up the calling thread's stack per hooked call (a few
microseconds; ``trainer.step`` runs once per batch).
"""
from __future__ import annotations

import copy
import functools
import logging
import sys
import threading
from types import FrameType
from typing import Any, Callable, Dict, Optional, Tuple
import weakref

_MARK = "_gluon_tb_wrap"  # attribute of our wrapper functions: the Wrap that made them
_made: "weakref.WeakSet[Wrap]" = weakref.WeakSet()  # every wrap still in place


class FitScope:
    """The ``Estimator.fit`` call of ``estimator`` that is running now (if it can be found).

    ``here()`` is True while that call is on the calling thread's stack and :meth:`end` was
    not called; ``alive()`` while it is on its own thread's stack (another thread may ask).
    Without a ``fit`` on the stack (a handler driven by hand, as in unit tests) the scope
    lives until :meth:`end`.
    """

    def __init__(self, estimator: Any) -> None:
        self.frame = _find_fit_frame(estimator)
        self.thread = threading.get_ident()
        self.ended = False
        heal_all()  # a fit that raised, even on another estimator, closes its handler's writers now

    def here(self) -> bool:
        if self.ended:
            return False
        return self.frame is None or _on_stack(sys._getframe(1), self.frame)

    def alive(self) -> bool:
        if self.ended:
            return False
        if self.frame is None:
            return True
        if threading.get_ident() == self.thread:
            return _on_stack(sys._getframe(1), self.frame)
        top = sys._current_frames().get(self.thread)
        return top is not None and _on_stack(top, self.frame)

    def fit_locals(self) -> Dict[str, Any]:
        """The local variables of the ``fit`` call (``event_handlers``, ``train_data``...)."""
        return dict(self.frame.f_locals) if self.frame is not None else {}

    def end(self) -> None:
        self.ended = True
        self.frame = None  # the frame holds fit's locals (the data loaders): let them go


def _on_stack(f: Any, target: Any) -> bool:
    while f is not None:
        if f is target:
            return True
        f = f.f_back
    return False


def _find_fit_frame(estimator: Any) -> Any:
    f: Optional[FrameType] = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "fit" and f.f_locals.get("self") is estimator:
            return f
        f = f.f_back
    return None


def _itself(x: Any) -> Any:
    return x


class _Hooked:
    """A hooked method, kept in the object's ``__dict__``. ``copy.deepcopy`` of the object (a
    callback's snapshot of a metric) gives the copy its own method back, not this hook: calling a
    copy's ``reset`` reset the original. (A shallow ``copy.copy`` shares the object's ``__dict__``
    entries, this one included; nothing is told of it.)"""

    def __init__(self, call: Callable[..., Any], obj: Any, name: str, saved: Any) -> None:
        self._call, self._obj, self._name, self._saved = call, obj, name, saved
        functools.update_wrapper(self, getattr(type(obj), name, call))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __reduce__(self) -> Tuple[Any, ...]:
        """Pickled (a metric sent through a ``multiprocessing.Queue``): as the object's own method,
        or its own attribute from before the hook; unpickled, the copy is not hooked."""
        if self._saved is not None:
            return _itself, (self._saved,)
        return getattr, (self._obj, self._name)

    def __deepcopy__(self, memo: Dict[int, Any]) -> Any:
        twin = memo.get(id(self._obj))
        if twin is None:  # copied on its own, not as part of its object
            return self
        if self._saved is not None:  # the object's own attribute before it was hooked
            return copy.deepcopy(self._saved, memo)
        return getattr(type(twin), self._name).__get__(twin, type(twin))


class Wrap:
    """Shadows methods of one object instance with ``before(); result = original(...); after(result)``.

    ``with_args``: ``before`` receives the call's arguments. The hooks run only while
    ``scope`` is alive; the first call after that removes the wrap and calls ``on_dead``.
    """

    def __init__(self, obj: Any, names: Tuple[str, ...], before: Optional[Callable[..., None]],
                 with_args: bool = False, scope: Optional[FitScope] = None,
                 after: Optional[Callable[[Any], None]] = None,
                 on_dead: Optional[Callable[[], None]] = None) -> None:
        self.obj, self.active, self._mine, self._saved = obj, True, {}, {}
        self.scope, self.on_dead = scope, on_dead
        for name in names:
            heal(obj, name)
            if name in obj.__dict__:
                self._saved[name] = obj.__dict__[name]
            inner = getattr(obj, name)

            def call(*args: Any, _inner: Any = inner, **kwargs: Any) -> Any:
                live = self.active and self.live()
                if live and before is not None:
                    before(*args, **kwargs) if with_args else before()
                result = _inner(*args, **kwargs)
                if live and after is not None:
                    after(result)
                return result

            wrapped = _Hooked(call, obj, name, self._saved.get(name))
            setattr(wrapped, _MARK, self)
            setattr(obj, name, wrapped)
            self._mine[name] = wrapped
        _made.add(self)

    def live(self) -> bool:
        """True inside the scope's ``fit``; once that is over, removes this wrap (and says so)."""
        if self.scope is None or self.scope.here():
            return True
        if self.dead():  # not merely a call from another thread during the fit
            self.expire()
        return False

    def dead(self) -> bool:
        """Still in place, but its ``fit`` is over on every thread."""
        return self.active and self.scope is not None and not self.scope.alive()

    def expire(self) -> None:
        if not self.active:
            return
        self.remove()
        if self.on_dead is not None:
            on_dead, self.on_dead = self.on_dead, None
            try:
                on_dead()
            except Exception as e:  # noqa: BLE001 - that fit is over: its error is not the caller's
                logging.getLogger("gluon_tb").warning(
                    "gluon_tb: closing the handler of an earlier fit that raised failed too (%s: %s); "
                    "what it had not written is lost", type(e).__name__, e)

    def remove(self) -> None:
        """Hand the methods back (where nobody wrapped on top of us; else we pass through)."""
        self.active = False
        for name, fn in self._mine.items():
            if self.obj.__dict__.get(name) is fn:
                if name in self._saved:
                    setattr(self.obj, name, self._saved[name])
                    heal(self.obj, name)  # what we had wrapped may be a wrap removed meanwhile
                else:
                    delattr(self.obj, name)


def heal_all() -> None:
    """Expire every wrap whose ``fit`` is over (called when a new ``fit`` begins)."""
    for w in list(_made):
        if w.dead():
            w.expire()
        if not w.active:
            _made.discard(w)


def heal(obj: Any, name: str) -> None:
    """Remove every dead gluon_tb wrap on top of ``obj.name`` (a ``fit`` that raised left it)."""
    while True:
        fn = getattr(obj, "__dict__", {}).get(name)
        w = getattr(fn, _MARK, None)
        if w is None or (w.active and not w.dead()):  # a fit on another thread still runs it
            return
        if w.active:
            w.expire()  # restores, and closes its handler
        else:
            w.remove()  # inactive but back on top: restores
        if obj.__dict__.get(name) is fn:  # could not be removed: leave it (a pass-through)
            return


def wrap(obj: Any, names: Tuple[str, ...], before: Optional[Callable[..., None]],
         with_args: bool = False, scope: Optional[FitScope] = None,
         after: Optional[Callable[[Any], None]] = None,
         on_dead: Optional[Callable[[], None]] = None) -> Optional[Wrap]:
    try:
        return Wrap(obj, names, before, with_args, scope, after, on_dead)
    except (AttributeError, TypeError):  # __slots__ or a read-only object
        return None
