"""``autolog(logdir)``: every ``Estimator.fit`` and ``Module.fit`` of the process logs to TensorBoard.

For a script you did not write (or do not want to edit), one call before training is all:
MLflow's ``mlflow.gluon.autolog()`` (deprecated since MLflow 2.5) is the model. It replaces
``fit`` on the two classes every Gluon and Module training goes through,
``mxnet.gluon.contrib.estimator.Estimator`` and ``mxnet.module.BaseModule`` (``Module``,
``BucketingModule`` and ``SequentialModule`` inherit its ``fit``), by a wrapper that adds a
:class:`~gluon_tb.handlers.TensorBoardHandler` to ``event_handlers``, or fills every callback slot
of ``Module.fit`` with a :class:`~gluon_tb.handlers.TensorBoardCallback`
(:meth:`~gluon_tb.handlers.TensorBoardCallback.fit_callbacks`, after the script's own callbacks'
entries), then calls the original ``fit`` with the script's arguments and closes the handler when
``fit`` returns or raises. A ``fit`` that already has a gluon_tb handler or callback is left alone.

Run directories: each ``fit`` gets its own, ``<logdir>/<YYYYmmdd-HHMMSS>-fit<n>`` (the local time
the ``fit`` started, and its number among the fits since ``autolog`` was called, from 1; a
directory that exists already gets ``-2``, ``-3``, ... appended), so a re-run of
the script never draws over an earlier run's curves and TensorBoard lists runs in the order they
ran. A ``fit`` resumed in a new process (``Module.fit(begin_epoch=E)``, an Estimator with
``CheckpointHandler(resume_from_checkpoint=True)``) gets a run directory of its own whose steps go
on from the checkpoint (the handler's resume rules), so its curve continues the earlier one in
another colour. To continue one fixed run directory, pass the handler yourself.

``autolog(disable=True)`` gives the classes their own ``fit`` back (a wrapper that another library
wrapped in turn is left in place and does nothing more). Enabling again replaces the options.
Calls from several threads are safe: the options are read once per ``fit`` under a lock, and each
``fit`` has its own handler. A ``fit`` that raises before it logged anything leaves no run
directory. A class that overrides ``fit`` without calling ``BaseModule.fit`` or ``Estimator.fit``
(``mxnet.contrib.svrg_optimization.SVRGModule``) is not logged.
"""
from __future__ import annotations

import copy
import functools
import inspect
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

__all__ = ["autolog"]

_ESTIMATOR, _MODULE = "estimator", "module"


class _Config(NamedTuple):
    logdir: str
    options: Dict[str, Dict[str, Any]]  # kind -> the options its handler takes


_lock = threading.Lock()
_config: Optional[_Config] = None
_fits = 0
_patched: Dict[type, Tuple[Callable[..., Any], Callable[..., Any]]] = {}  # class -> (original, wrapper)


def autolog(logdir: Union[str, "os.PathLike[str]", None] = None, *, disable: bool = False, **options: Any) -> None:
    """Log every ``Estimator.fit`` and ``Module.fit`` of this process to TensorBoard, from now on.

    Example::

        import gluon_tb
        gluon_tb.autolog("logs", histogram_period=None)
        est.fit(train_data, val_data, epochs=5)      # logs/20261125-135001-fit1/{train,validation}
        mod.fit(train_iter, eval_data=val_iter, num_epoch=5)  # logs/20261125-135012-fit2/...
        gluon_tb.autolog(disable=True)                # fit is MXNet's own again

    Each ``fit`` writes its own run directory ``<logdir>/<YYYYmmdd-HHMMSS>-fit<n>`` (its start time
    and its number since this call), with the runs ``train`` and ``validation`` inside. A ``fit``
    that already has a gluon_tb handler (or callback, in any slot) is left alone. Nothing else in
    the script changes; the handler is closed when ``fit`` returns or raises.

    Args:
        logdir: the directory under which each ``fit``'s run directory is made (a URL too,
            with ``storage_options``). Required unless ``disable``.
        disable: ``True``: stop; every ``fit`` is MXNet's own again.
        **options: keyword arguments of :class:`~gluon_tb.handlers.TensorBoardHandler` and
            :class:`~gluon_tb.handlers.TensorBoardCallback` (``batch_period=10``,
            ``histogram_period=None``, ...). Each goes to those of the two that take it.
            ``grad_health=GradHealth(stop=...)`` stops Estimator fits; a ``Module.fit`` (which a
            callback cannot stop) gets the same detectors, which warn.

    Raises:
        TypeError: an option neither of them takes (named), ``logdir`` missing, ``disable``
            not a bool, or an option value of a type they refuse (``flush_secs="2"``).
        ValueError: an option value of the right type that they refuse (``flush_secs=0``).
        Both are checked here, before any training.
    """
    global _config, _fits
    if not isinstance(disable, bool):
        raise TypeError(f"autolog: disable must be a bool, got {type(disable).__name__} {disable!r}")
    if disable:
        if logdir is not None or options:
            raise TypeError("autolog(disable=True) takes no logdir or options, got "
                            f"{', '.join(['logdir'] * (logdir is not None) + sorted(options))}")
        with _lock:
            _config = None
            _unpatch()
        return
    if logdir is None:
        raise TypeError("autolog: logdir is required (the directory that gets one run directory per fit), got None")
    config = _check(logdir, options)
    with _lock:
        _config, _fits = config, 0
        _patch()


def _kinds() -> Dict[str, Any]:
    from .handlers import TensorBoardCallback, TensorBoardHandler

    return {_ESTIMATOR: TensorBoardHandler, _MODULE: TensorBoardCallback}


def _check(logdir: Any, options: Mapping[str, Any]) -> _Config:
    """The options of each kind; a name neither takes is a TypeError naming it, a value either
    refuses is raised by its constructor, here (a handler made and closed, nothing written)."""
    from .writer._common.checks import check_logdir

    path = check_logdir(logdir)
    kinds = _kinds()
    takes = {k: [p for p in inspect.signature(cls).parameters if p != "logdir"] for k, cls in kinds.items()}
    known = sorted(set(takes[_ESTIMATOR]) | set(takes[_MODULE]))
    for name in options:
        if name not in known:
            from .handlers._common.keras_names import OTHER_NAMES

            if name in OTHER_NAMES:
                raise TypeError(f"autolog() has no option {name!r} (another tool's name): pass {OTHER_NAMES[name]}")
            raise TypeError(f"autolog() got an unexpected option {name!r}: options are the keyword arguments of "
                            f"TensorBoardHandler and TensorBoardCallback ({', '.join(known)})")
    split = {k: {n: v for n, v in options.items() if n in takes[k]} for k in kinds}
    health: Any = split[_MODULE].get("grad_health")
    if getattr(health, "stop", None):  # a callback cannot stop Module.fit: its fits warn only
        health = copy.copy(health)
        health.stop = frozenset()
        split[_MODULE]["grad_health"] = health
    for k, cls in kinds.items():
        made = cls(os.path.join(path, "autolog-check"), **split[k])  # lazy writers: no file is made
        if k == _MODULE:
            made.close()
    return _Config(path, split)


def _run_dir(logdir: str) -> str:
    """``<logdir>/<YYYYmmdd-HHMMSS>-fit<n>``, claimed (made) when local so that two processes
    starting a fit in the same second get two directories."""
    global _fits
    with _lock:
        _fits += 1
        n = _fits
    base = os.path.join(logdir, f"{time.strftime('%Y%m%d-%H%M%S')}-fit{n}")
    if "://" in logdir:
        return base
    path, i = base, 1
    while True:
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            i += 1
            path = f"{base}-{i}"


def _drop_if_empty(run: str) -> None:
    """A ``fit`` that raised before it logged anything leaves no empty run directory behind."""
    if "://" not in run:
        try:
            os.rmdir(run)  # only ever removes an empty directory
        except OSError:
            pass


def _current() -> Optional[_Config]:
    with _lock:
        return _config


def _entries(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _estimator_params(self: Any, train_data: Any, val_data: Any = None, epochs: Any = None,
                      event_handlers: Any = None, batches: Any = None, batch_axis: Any = None) -> None:
    """``Estimator.fit``'s parameters (MXNet 1.9.1), to bind a call when the ``fit`` found on the
    class is another tool's ``(*args, **kwargs)`` wrapper, which hides them."""


def _module_params(self: Any, train_data: Any, eval_data: Any = None, eval_metric: Any = None,
                   epoch_end_callback: Any = None, batch_end_callback: Any = None, kvstore: Any = None,
                   optimizer: Any = None, optimizer_params: Any = None, eval_end_callback: Any = None,
                   eval_batch_end_callback: Any = None, initializer: Any = None, arg_params: Any = None,
                   aux_params: Any = None, allow_missing: Any = None, force_rebind: Any = None,
                   force_init: Any = None, begin_epoch: Any = None, num_epoch: Any = None,
                   validation_metric: Any = None, monitor: Any = None, sparse_row_id_fn: Any = None) -> None:
    """``BaseModule.fit``'s parameters (MXNet 1.9.1); see :func:`_estimator_params`."""


def _signature(original: Callable[..., Any], needs: Tuple[str, ...], own: Callable[..., Any]) -> inspect.Signature:
    """The signature to bind a ``fit`` call with: ``original``'s, or MXNet's own (``own``) when
    ``original`` does not name the parameters we add to (another tool's plain wrapper: binding
    against ``(*args, **kwargs)`` lost what was added, and nothing was logged)."""
    sig = inspect.signature(original)
    return sig if all(n in sig.parameters for n in needs) else inspect.signature(own)


def _call(original: Callable[..., Any], bound: inspect.BoundArguments) -> Any:
    """``original`` with the bound arguments, ``self`` first and every other one by name: a
    wrapper below may add a slot by keyword, which would clash with one passed by position."""
    args = dict(bound.arguments)
    me = args.pop("self")
    return original(me, **args)


def _estimator_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    sig = _signature(original, ("event_handlers",), _estimator_params)

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        config = _current()
        if config is None:
            return original(self, *args, **kwargs)
        from .handlers import TensorBoardHandler

        bound = sig.bind(self, *args, **kwargs)
        handlers = _entries(bound.arguments.get("event_handlers"))
        if any(isinstance(h, TensorBoardHandler) for h in handlers):
            return original(self, *args, **kwargs)
        run = _run_dir(config.logdir)
        handler = TensorBoardHandler(run, **config.options[_ESTIMATOR])
        bound.arguments["event_handlers"] = handlers + [handler]
        try:
            return _call(original, bound)
        except BaseException:
            handler._abandon()  # no train_end: unhook the trainer, close the writers
            _drop_if_empty(run)
            raise

    fit.__gluon_tb_autolog__ = True  # type: ignore[attr-defined]
    return fit


def _module_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    from .handlers._module.slots import SLOTS

    sig = _signature(original, SLOTS, _module_params)

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        config = _current()
        if config is None:
            return original(self, *args, **kwargs)
        from .handlers import TensorBoardCallback
        from .handlers._module.slots import SLOTS

        bound = sig.bind(self, *args, **kwargs)
        given = {s: bound.arguments.get(s) for s in SLOTS}
        if any(isinstance(f, TensorBoardCallback) or isinstance(getattr(f, "__self__", None), TensorBoardCallback)
               for v in given.values() for f in _entries(v)):
            return original(self, *args, **kwargs)
        run = _run_dir(config.logdir)
        cb = TensorBoardCallback(run, **config.options[_MODULE])
        bound.arguments.update(cb.fit_callbacks(**given))
        try:
            result = _call(original, bound)
        except BaseException:
            cb.close()
            _drop_if_empty(run)
            raise
        cb.close()
        return result

    fit.__gluon_tb_autolog__ = True  # type: ignore[attr-defined]
    return fit


def _patch() -> None:
    """Wrap the two classes' ``fit`` (once; called under the lock)."""
    from mxnet.gluon.contrib.estimator import Estimator
    from mxnet.module import BaseModule

    for cls, make in ((Estimator, _estimator_fit), (BaseModule, _module_fit)):
        if cls in _patched:
            continue
        original = cls.__dict__["fit"]
        wrapper = make(original)
        _patched[cls] = (original, wrapper)
        setattr(cls, "fit", wrapper)


def _unpatch() -> None:
    """Give each class its own ``fit`` back (called under the lock); a wrapper that something
    else wrapped after us stays (it does nothing more: the config is gone)."""
    for cls, (original, wrapper) in list(_patched.items()):
        if cls.__dict__.get("fit") is wrapper:
            setattr(cls, "fit", original)
            del _patched[cls]
