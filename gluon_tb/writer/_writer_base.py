"""What every ``SummaryWriter`` call shares: its construction, the scalar path, the
queue, and its lifetime (flush, close, reopen, process exit and fork).

The summary types other than scalars are ``SummaryWriter``'s own methods
(``_summary_writer.py``); each checks its arguments, captures its payload and
queues it with :meth:`WriterBase._queue`. ``add_scalar`` is the hot path: it makes
no Python call of its own for a float with an int step (each one costs as much as
queueing the scalar), and queues a plain tuple (``_io/items.py``).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar, Union

from ._common.arrays import Mean
from ._common.checks import (MAX_TAG_LEN, as_float, check_seconds, check_step, check_tag, check_walltime,
                             describe)
from ._common.keywords import known_keywords
from ._format import proto as _proto
from ._io import lifecycle as _lifecycle
from ._io.items import Action, Summary, payload_nbytes
from ._io.logdir import check_run_name, check_run_size, run_under
from ._io.output import Output, open_output
from ._io.pipeline import DEFAULT_MAX_QUEUE_BYTES, DEFAULT_WORKER_NICE, Pipeline, WriterClosedError
from ._io.remote_options import RemoteOptions, remote_options
from ._summaries.copy_buffers import POOL_BYTES, BufferPool
from ._summaries.scalar import mean_of, scalar_value
from ._writer_args import check_writer_args

_time = time.time
_log = logging.getLogger("gluon_tb")
_W = TypeVar("_W", bound="WriterBase")
#: torch's and tensorboardX's writer arguments -> what to pass here instead
WRITER_OTHER_NAMES = {
    "log_dir": "logdir (the log directory, the first argument)",
    "flush_millis": "flush_secs (seconds)",
    "comment": "the whole directory as logdir (tensorboardX appends comment to the name of its default one, "
               "runs/<time>_<host>, which SummaryWriter() without logdir also uses)",
}


def default_logdir() -> str:
    """``runs/<Mon><DD>_<HH>-<MM>-<SS>_<host>`` under the working directory: where tensorboardX's and
    torch's ``SummaryWriter()`` write when given no directory."""
    import socket
    from datetime import datetime

    return os.path.join("runs", f"{datetime.now().strftime('%b%d_%H-%M-%S')}_{socket.gethostname()}")


class WriterBase:
    """The part of :class:`~gluon_tb.writer.SummaryWriter` that every ``add_*`` call
    shares, and its scalars (see the module docstring)."""

    #: make the log directory in the constructor, as mxboard did (a subclass that opens its writers
    #: just before their first write leaves it to the writer thread, which makes it at that write)
    _MAKE_LOGDIR_NOW = True

    @known_keywords(WRITER_OTHER_NAMES)
    def __init__(self, logdir: Union[str, "os.PathLike[str]", None] = None, max_queue: int = 1024,
                 flush_secs: float = 2.0, filename_suffix: Optional[str] = None,
                 verbose: bool = False, *, max_queue_bytes: Optional[int] = None,
                 on_full: str = "block", purge_step: Optional[int] = None,
                 storage_options: Optional[Mapping[str, Any]] = None,
                 remote: Optional[RemoteOptions] = None,
                 worker_nice: Optional[int] = DEFAULT_WORKER_NICE) -> None:
        if logdir is None:  # tensorboardX's and torch's default: runs/<time>_<host>
            logdir = default_logdir()
        logdir = check_writer_args(logdir, max_queue, flush_secs, filename_suffix, max_queue_bytes,
                                   on_full, worker_nice)
        purge_step = check_step(purge_step, "purge_step")
        if max_queue_bytes is None:
            max_queue_bytes = DEFAULT_MAX_QUEUE_BYTES
        remote = remote_options(logdir, storage_options, remote)
        self._logdir = logdir
        # look_for_others: a resumed run (purge_step) appends to its earlier files on purpose
        output = self._open_output(logdir, remote, filename_suffix or "", purge_step is None)
        self._p = Pipeline(output, flush_secs=float(flush_secs), max_queue_bytes=max_queue_bytes,
                           wake_items=max_queue, on_full=on_full, nice=worker_nice)
        # histogram and image copies, reused once written: the bound of the idle ones
        self._pool = BufferPool(min(max_queue_bytes, POOL_BYTES))
        self._closed = False
        # a writer made by for_run: its run, under the writer it came from (_parent), whose queue,
        # thread and files it shares. Instance attributes: add_scalar reads _run (a class attribute
        # read through the instance is slower on Python 3.11)
        self._run: Optional[str] = None
        self._parent: Optional[WriterBase] = None
        self._top_step = 0  # the largest step this writer was given (add_hparams' default step)
        self._sessions: Dict[Optional[str], Dict[str, Any]] = {}  # each run's add_hparams session (its hparams)
        self._warned: Set[str] = set()  # the kinds of _warn_once this writer (and its for_run ones) gave
        self._close_lock = threading.Lock()
        self._projector: List[Any] = []  # embeddings of this run, touched by the worker only
        self._views: "weakref.WeakValueDictionary[str, WriterBase]" = weakref.WeakValueDictionary()
        # each for_run run's embeddings, kept here: a writer of for_run may be dropped and made again
        self._run_projectors: Dict[str, List[Any]] = {}
        self._made_runs: Set[str] = set()  # every run for_run made (their own export keys)
        self._earlier_files: Dict[Optional[str], List[str]] = {}  # event files before a reopen, by run
        self._export_from: Dict[str, int] = {}  # clear_scalar_dict: where export reads each file from
        self._before_exit: Optional[Callable[[], None]] = None  # see _on_exit
        if self._MAKE_LOGDIR_NOW:
            output.make_logdir()
        _lifecycle.register(self, remote=self._p.is_remote)
        if purge_step is not None:
            self._queue_purge(purge_step)

    def _queue_purge(self, purge_step: int) -> None:
        # TensorBoard purges at a SessionLog.START only when it has seen an earlier START
        # in the run; earlier writers (ours, mxboard's, tensorboardX's) usually wrote none,
        # so two are written: the first makes sure the second counts as a restart.
        ev = _proto.event(_time(), purge_step, session_log=_proto.session_log(_proto.SESSION_START))

        def purge(sink: Any) -> None:
            sink.write_event(ev)
            sink.write_event(ev)

        self._put_action(purge, 0)

    def _put_action(self, fn: Any, nbytes: int) -> bool:
        """Queue ``fn(sink)`` for the worker, in this writer's run; False when dropped."""
        return self._p.put(Action(fn, nbytes, self._run))

    def for_run(self: _W, name: str, *, purge_step: Optional[int] = None) -> _W:
        """A writer for the run ``<logdir>/<name>`` that shares this writer's queue, writer thread
        and files: no thread or queue of its own, and its events are written in the order they
        were logged with this writer's. The same object for the same ``name`` while it is kept (one
        made again goes on with the run's embeddings); ``name`` may have several parts
        (``"eval/clean"``); on a writer made by ``for_run``, a run under its own.

        It is closed and reopened with this writer; its own :meth:`close` only makes its later
        calls raise (after a :meth:`flush` of the shared queue) until it is reopened or asked for
        again with ``for_run``, and its :meth:`reopen` reopens this writer if closed.
        ``purge_step``: as the constructor's, for this run only.

        Example::

            with SummaryWriter("logs/exp1") as sw:  # one writer thread for both runs
                train, val = sw.for_run("train"), sw.for_run("validation")
                train.add_scalar("loss", 0.31, global_step=1)
                val.add_scalar("loss", 0.35, global_step=1)  # one "loss" chart, two curves
        """
        self._check()
        run = check_run_size(run_under(self._run, check_run_name(name, "name")), "name")
        purge_step = check_step(purge_step, "purge_step")
        root = self._parent if self._parent is not None else self
        with root._close_lock:
            view = root._views.get(run)
            if view is not None and view._closed:  # closed by its own close(): open again, as asked
                view._closed = False
            if view is None:
                view = object.__new__(type(self))
                view.__dict__.update(
                    _p=root._p, _pool=root._pool, _closed=root._closed, _close_lock=threading.Lock(),
                    _projector=root._run_projectors.setdefault(run, []), _run=run, _parent=root,
                    _top_step=0, _sessions=root._sessions, _warned=root._warned,
                    _logdir=f"{root._logdir.rstrip('/')}/{run}" if root._p.is_remote
                    else os.path.join(root._logdir, run))
                root._views[run] = view
                root._made_runs.add(run)
        if purge_step is not None:
            view._p.resumed(run)  # before anything of the run is queued (when new)
            view._queue_purge(purge_step)
        return view  # type: ignore[return-value]

    def _open_output(self, logdir: str, remote: Optional[RemoteOptions], suffix: str,
                     look_for_others: bool) -> Output:
        """Where the worker writes (``_io/output.py``): a local directory or an object store.
        Tests override it in a subclass to hand in a failing or in-memory output."""
        return open_output(logdir, remote, suffix, look_for_others)

    # ------------------------------------------------------------ basics
    @property
    def logdir(self) -> str:
        """The run directory this writer writes to."""
        return self._logdir

    def get_logdir(self) -> str:
        """The run directory (mxboard's name for :attr:`logdir`)."""
        return self._logdir

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _take_error(self) -> Optional[BaseException]:
        """The error the writer thread met, taken (the next call will not raise it), or None: a
        handler reports it under its own policy before it hands over more."""
        return self._p.take_error()

    def _check(self) -> None:
        if self._closed:
            raise WriterClosedError("SummaryWriter is already closed")
        err = self._p.take_error()
        if err is not None:
            raise err

    def _step(self, global_step: Any) -> int:
        if global_step is None:
            return 0
        if type(global_step) is int and 0 <= global_step <= 9223372036854775807:  # MAX_STEP
            step = global_step
        else:
            step = check_step(global_step)
        if step > self._top_step:
            self._top_step = step
        return step

    def _warn_once(self, kind: str, msg: str, *args: Any) -> None:
        """``msg % args`` as a warning of the ``gluon_tb`` logger, the first time of ``kind`` only
        for this writer and the writers of its :meth:`for_run`."""
        if kind not in self._warned:
            self._warned.add(kind)
            _log.warning(msg, *args)

    def _queue(self, tag: str, builder: Any, payload: Any, global_step: Any, walltime: Any,
               run: Optional[str] = None, wake: bool = True) -> None:
        """``wake=False``: the worker reads it a little later, with others (``Pipeline.put``)."""
        step = self._step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
        run = self._run if run is None else run_under(self._run, run)
        self._p.put(Summary(run, tag, builder, payload, step, wall, payload_nbytes(payload)), wake)

    # ------------------------------------------------------------ scalars
    def add_scalar(self, tag: str, value: Any, global_step: Optional[int] = None,
                   walltime: Optional[float] = None) -> None:
        """Log one number; or, mxboard-style, a ``(name, value)`` pair or ``{name: value}``
        dict drawn as several curves of one chart (run ``<logdir>/<tag>/<name>`` each).

        ``value`` may be a Python or numpy number, a bool (logged as 0/1), or a
        one-element numpy array or MXNet NDArray (read on the writer thread, so
        the training thread never waits for MXNet's engine). NaN and ±Inf are
        logged as they are.
        """
        if self._closed or self._p.error is not None:
            self._check()
        if type(tag) is not str or not tag or len(tag) > MAX_TAG_LEN or not tag.isascii():
            tag = check_tag(tag)  # (isascii is O(1); others are checked for UTF-8 each time)
        t = type(value)
        if t is not float:
            if t is int:
                try:
                    value = float(value)
                except OverflowError:
                    value = as_float(value, "value")  # its ValueError
            elif t is dict or t is tuple or t is list:
                return self._named_scalars(tag, value, global_step, walltime)
            else:
                value = scalar_value(value)
        if global_step is None:
            step = 0
        elif type(global_step) is int and 0 <= global_step <= 9223372036854775807:  # MAX_STEP
            step = global_step
            if step > self._top_step:
                self._top_step = step
        else:
            step = self._step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
        self._p.put_scalar((self._run, tag, value, step, wall))  # a scalar item (_io/items.py)

    def _named_scalars(self, tag: str, value: Any, global_step: Any, walltime: Any) -> None:
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError("value must be a number, a (name, value) pair or a {name: value} "
                                 f"dict, got a {type(value).__name__} of {len(value)} elements")
            if not isinstance(value[0], str):  # two numbers: not mxboard's (name, value) pair
                raise TypeError("value must be a number, a (name, value) pair with a str name or a {name: value} "
                                f"dict, got {describe(value)}; several values of one tag: add_scalars, "
                                "or add_histogram")
            value = {value[0]: value[1]}
        runs = [(self._curve_run(check_run_name(tag, "tag") + "/" + check_run_name(name, "value name"),
                                 "value name"), self._number(v, f"value[{name!r}]"))
                for name, v in value.items()]  # every name and value checked before any is queued
        for run, v in runs:
            self._put_scalar(run, tag, v, global_step, walltime)

    @known_keywords({}, "tensorboardX")
    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any],
                    global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Several curves in one chart (``torch.utils.tensorboard``'s layout): ``tag_scalar_dict[name]``
        goes to run ``<logdir>/<main_tag>_<name>`` under the tag ``main_tag``. tensorboardX 2.6
        writes runs ``<main_tag>/<name>``, as ``add_scalar(main_tag, {name: value})`` does."""
        self._check()
        main_tag = check_tag(main_tag, "main_tag")
        if not isinstance(tag_scalar_dict, Mapping):
            raise TypeError(f"tag_scalar_dict must be a non-empty dict of name -> number, "
                            f"got {describe(tag_scalar_dict)}")
        if not tag_scalar_dict:
            raise ValueError(f"tag_scalar_dict must be a non-empty dict of name -> number, "
                             f"got {describe(tag_scalar_dict)}")
        wall = _time() if walltime is None else check_walltime(walltime)
        base = main_tag.replace("/", "_")
        runs = [(self._curve_run(check_run_name(base + "_" + check_run_name(name, "tag_scalar_dict key"),
                                                "main_tag"), "tag_scalar_dict key"),
                 self._number(v, f"tag_scalar_dict[{name!r}]")) for name, v in tag_scalar_dict.items()]  # all checked first
        for run, v in runs:
            self._put_scalar(run, main_tag, v, global_step, wall)

    def _curve_run(self, run: str, arg: str) -> str:
        """A named curve's run (its parts checked), checked whole as it will be made: joined, and
        under this writer's own run."""
        check_run_size(run_under(self._run, run), arg)
        return run

    @staticmethod
    def _number(value: Any, name: str = "value") -> Any:
        """A scalar's value checked: a float, or what the worker turns into one (an NDArray).
        ``name``: the argument's, for the errors (a dict's entry: ``tag_scalar_dict['b']``)."""
        return as_float(value, name) if type(value) in (int, float) else scalar_value(value, name)

    def _put_scalar(self, run: Optional[str], tag: Optional[str], value: Any, global_step: Any, walltime: Any) -> None:
        """Queue a checked value (a float, or what the worker turns into one with ``float()``)."""
        step = self._step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
        run = self._run if run is None else run_under(self._run, run)  # None (most calls): no call
        self._p.put_scalar((run, tag, value, step, wall))

    def add_mean(self, tag: str, values: Any, global_step: Optional[int] = None,
                 walltime: Optional[float] = None, *, copy: bool = True) -> None:
        """Log the mean of every element of ``values`` as one scalar.

        ``values`` is an array (numpy or MXNet NDArray) or a list of them, for
        instance the per-sample losses of a batch on each device; the mean is over
        all their elements together. For NDArrays the per-array means are queued
        on MXNet's engine and read on the writer thread, so this costs the training
        thread one asynchronous MXNet operation per array and no wait (``add_scalar``
        of ``loss.mean()`` costs two: the mean and the copy it must take).

        ``copy=False`` costs it none: NDArrays of up to 65,536 elements are neither
        reduced nor copied but read on the writer thread. Only for arrays that
        nothing writes to afterwards, such as the outputs of a forward pass (the
        handlers pass their batch losses so); larger ones are reduced as with ``True``.

        Example::

            with autograd.record():
                loss = loss_fn(net(x), y)
            sw.add_mean("batch_loss", loss, global_step=i)
        """
        self._check()
        tag = check_tag(tag)
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be a bool, got {describe(copy)}")
        self._put_scalar(None, tag, mean_of(values, copy), global_step, walltime)

    def _add_values(self, items: Sequence[Tuple[Optional[str], Any, int, float, Optional[Mean]]]) -> None:
        """Queue, in order, values a handler kept for a while on its own thread: each item
        ``(tag, value, step, wall, into)`` is ``add_scalar(tag, value, step, wall)`` when
        ``value`` is a number, and ``add_mean(tag, value, step, wall, copy=False)`` when it is a
        list of fresh loss arrays (their sizes read here), added into the running Mean ``into``
        when the writer thread reads them (a handler's epoch loss; ``tag`` None: only that, no
        event). One call for a block of batches: a call from the training thread at every batch
        cost it far more than the queueing itself. Every item that can be queued is; the first
        error met is raised after them."""
        self._check()
        first: Optional[Exception] = None
        tags: Dict[str, str] = {}
        put, run = self._p.put_scalar, self._run
        for tag, value, step, wall, into in items:
            try:
                if tag is not None:
                    checked = tags.get(tag)
                    if checked is None:
                        checked = tags[tag] = check_tag(tag)
                    tag = checked
                if type(value) is list:
                    value = mean_of(value, False, into)
                elif tag is None:
                    raise ValueError("tag must be a string for a number, got None")
                else:
                    value = self._number(value)
                put((run, tag, value, self._step(step), check_walltime(wall)))
            except Exception as e:  # noqa: BLE001 - the rest are queued all the same
                if first is None:
                    first = e
        if first is not None:
            raise first

    # ------------------------------------------------------------ mxboard extras
    def export_scalars(self, path: str) -> None:
        """Write every scalar this writer logged so far (since :meth:`clear_scalar_dict`, if
        called; before and after a :meth:`reopen`; also once closed) to a JSON file
        ``{key: [[wall_time, step, value], ...]}`` with mxboard's keys:
        ``<logdir>/<tag>`` for ``add_scalar(tag, number)``, ``<logdir>/<tag>/<name>``
        for each curve of ``add_scalar(tag, (name, value))`` or ``{name: value}``
        (``<logdir>`` as :meth:`get_logdir` returns it; ``add_scalars`` curves:
        ``<logdir>/<main_tag>_<name>``). A step not given is 0 (mxboard wrote ``null``).
        Read back from the event files, so keeping it costs no memory: values are the
        float32 the files hold, steps ints."""
        from ._io.readback import export_scalars

        paths, start = self._written_files()
        root = self._parent if self._parent is not None else self
        made: Set[Optional[str]] = set(root._made_runs)
        if self._run is not None:  # this writer's run and those under it, named from it
            own, under = self._run, self._run + "/"

            def relative(r: Optional[str]) -> Optional[str]:
                return None if r is None or r == own else r[len(under):]

            def mine(r: Optional[str]) -> bool:
                return r == own or (r is not None and r.startswith(under))

            paths = {relative(r): f for r, f in paths.items() if mine(r)}
            made = {relative(r) for r in root._made_runs if mine(r)}
        export_scalars(self._logdir, paths, path, made, start)

    def clear_scalar_dict(self) -> None:
        """Forget the scalars logged so far for :meth:`export_scalars` (mxboard's): it exports
        what is logged after this call. The event files keep everything. On a writer of
        :meth:`for_run`, it clears for the writer it came from and all its runs."""
        try:
            paths, _ = self._written_files()
        except NotImplementedError:  # a URL log directory: no export to clear for
            return
        root = self._parent if self._parent is not None else self
        root._export_from = {f: os.path.getsize(f) for files in paths.values() for f in files if os.path.exists(f)}

    def _written_files(self) -> Tuple[Dict[Optional[str], List[str]], Dict[str, int]]:
        """Every event file of the writer (this one and the ones before a reopen), by run, with
        everything logged on disk (flushed when open); and where export starts in each."""
        if not self._closed:
            self.flush()
        root = self._parent if self._parent is not None else self
        paths: Dict[Optional[str], List[str]] = {r: list(f) for r, f in root._earlier_files.items()}
        _add_files(paths, self._p.event_paths())
        return paths, root._export_from

    # ------------------------------------------------------------ lifetime
    def flush(self, fsync: bool = False) -> None:
        """Return once everything passed before is written to the OS (and, with
        ``fsync=True``, on stable storage); raise what the writer thread met.
        Raises :class:`WriterClosedError` if the writer is (or gets) closed first."""
        self._check()
        p = self._p
        ok = p.flush(fsync=fsync)
        err = p.take_error()
        if err is not None:
            raise err
        if not ok:
            if p.closed:
                raise WriterClosedError("SummaryWriter was closed while flush() waited")
            raise RuntimeError("gluon_tb writer thread is not running")

    @property
    def close_timeout(self) -> Optional[float]:
        """The most seconds :meth:`close` waits: ``RemoteOptions.close_timeout`` (default 30)
        for a URL log directory; None for a local one (it waits until all is written)."""
        return self._p.close_timeout

    def close(self, *, timeout: Optional[float] = None) -> None:
        """Write everything still queued and close the files. Idempotent; a second
        ``close()`` on another thread returns once the first has finished.

        ``timeout``: the most seconds to wait (default :attr:`close_timeout`: 30 for a URL
        log directory, unbounded for a local one). Past it ``close()`` returns, raising
        :class:`RemoteWriteError` (``TimeoutError`` for a local directory) that names the
        runs and the events not written, which are given up on.
        """
        timeout = check_seconds(timeout, "timeout")
        if self._parent is not None:
            return self._close_run(timeout)
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            for view in list(self._views.values()):
                view._closed = True
            p = self._p
            if timeout is None:
                timeout = p.close_timeout
            done = p.close(timeout)
            self._pool.clear()
        if not done and timeout is not None and p.running and not p.on_worker():
            err: Optional[BaseException] = p.give_up(timeout)
            _log.warning("%s", err)
            p.take_error()  # the store's own error is part of what give_up says
        else:
            err = p.take_error()
        if err is not None:
            raise err

    def _close_run(self, timeout: Optional[float]) -> None:
        """``close()`` of a writer made by :meth:`for_run`: what it logged is written (a flush of
        the shared queue), and its later calls raise; the writer it came from goes on."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        p = self._p
        if not p.closed:
            p.flush(timeout=p.close_timeout if timeout is None else timeout)
        err = p.take_error()
        if err is not None:
            raise err

    def reopen(self) -> None:
        """Start writing again after :meth:`close` (into new event files)."""
        parent = self._parent
        if parent is not None:  # a writer of for_run: the writer it came from reopened if closed
            parent.reopen()
            with self._close_lock:
                self._p, self._closed = parent._p, False
            return
        with self._close_lock:
            if not self._closed:
                return
            try:  # export_scalars reads these too
                _add_files(self._earlier_files, self._p.event_paths())
            except NotImplementedError:  # a URL log directory: nothing is read back
                pass
            self._p = self._p.reopened()
            self._closed = False
            for view in list(self._views.values()):  # they share the new queue
                view._p, view._closed = self._p, False

    def _on_exit(self, fn: Optional[Callable[[], None]]) -> None:
        """``fn()`` runs first when this writer is closed at interpreter exit, on SIGTERM or when
        collected unclosed (and before a remote directory's flush at the main thread's end): a
        handler's values kept on its thread for a moment are queued then (``None``: nothing)."""
        self._before_exit = fn

    def _run_before_exit(self, last: bool = True) -> None:
        """``last``: the writer closes now, the hook is dropped (a remote directory's flush at the
        main thread's end keeps it: a non-daemon thread may go on training until atexit)."""
        fn = self._before_exit
        if last:
            self._before_exit = None
        if fn is not None:
            try:
                fn()
            except Exception:  # noqa: BLE001 - what it queued before failing is written all the same
                _log.exception("gluon_tb: could not queue a handler's last values at exit")

    def _close_at_exit(self) -> None:
        # no _close_lock: a SIGTERM handler may run on a thread inside close(); the
        # pipeline's close() is safe twice (the second waits for the first)
        if self._parent is not None:
            return  # the writer it came from closes the queue they share
        if not self._closed:
            self._run_before_exit()
        self._closed = True
        p = self._p
        if p.abandoned:  # close() gave up on it already and said what was lost
            return
        wait = p.close_timeout or 30.0
        if not p.close(timeout=wait) and not p.on_worker():  # on it, close() only queues the stop
            if p.running:
                _log.warning("%s", p.give_up(wait))
                return
            _log.warning("gluon_tb: %s was not finished writing within %g s at exit", self._logdir, wait)
        err = p.take_error()
        if err is not None:  # nobody is left to raise it to
            _log.warning("gluon_tb: could not write %s at exit: %s", self._logdir, err)

    def _flush_before_shutdown(self) -> None:
        # the main thread ended: upload what a remote log directory holds while Python's
        # thread pools still take work; atexit closes the writer later (_io/lifecycle.py)
        p = self._p
        if p.is_remote and p.running and not p.abandoned:
            self._run_before_exit(last=False)
            p.flush(timeout=p.close_timeout)
            if p.error is not None:
                _log.warning("gluon_tb: could not write %s at exit: %s", p.logdir, p.error)

    def _after_fork(self) -> None:
        self._p.after_fork_in_child()
        self._close_lock = threading.Lock()  # a parent's thread may have held these at fork()
        self._pool = BufferPool(self._pool.max_bytes)
        for view in list(self._views.values()):
            view._close_lock, view._pool = threading.Lock(), self._pool

    def __del__(self) -> None:  # best effort: a forgotten writer still writes what it has
        try:
            self._close_at_exit()
        except Exception:
            pass


def _add_files(into: Dict[Optional[str], List[str]], more: Mapping[Optional[str], List[str]]) -> None:
    """Each run's event files of ``more`` appended to its list in ``into``, each file once, in order."""
    for run, files in more.items():
        kept = into.setdefault(run, [])
        kept.extend(f for f in files if f not in kept)
