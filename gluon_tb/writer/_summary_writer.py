"""``SummaryWriter``: the public writer, a drop-in for mxboard's.

Every ``add_*`` call validates what is cheap to validate, takes what it needs
(a copy, or an NDArray copy queued on MXNet's engine), queues it and returns;
the background :class:`~._io.pipeline.Pipeline` does the rest.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Iterable, List, Mapping, Optional, Union

import numpy as np

from ._common.checks import MAX_TAG_LEN, check_step, check_tag, check_walltime, describe
from ._format import proto as _proto
from ._io import lifecycle as _lifecycle
from ._io.items import Action, Summary, payload_nbytes
from ._io.logdir import check_run_name, make_logdir
from ._io.pipeline import DEFAULT_MAX_QUEUE_BYTES, DEFAULT_WORKER_NICE, Pipeline, WriterClosedError
from ._io.remote_options import remote_options
from ._summaries.copy_buffers import BufferPool
from ._summaries.scalar import mean_of, scalar_value
from ._writer_args import check_writer_args

Number = Union[int, float, np.number]
_time = time.time
_log = logging.getLogger("gluon_tb")


class SummaryWriter:
    """Writes TensorBoard event files from a background thread.

    The same methods, argument names and order as mxboard 0.1.0's
    ``SummaryWriter`` (so an mxboard script runs with only its import
    changed), plus ``add_scalars``, ``add_video``, ``add_hparams``,
    ``add_custom_scalars`` and a ``walltime=`` on every ``add_*`` call.

    Example::

        from gluon_tb import SummaryWriter
        with SummaryWriter("logs/run1") as sw:
            for step in range(100):
                sw.add_scalar("loss", 1.0 / (step + 1), global_step=step)
            sw.add_histogram("weights", np.random.randn(1000), global_step=0)

    Threads: every method may be called from several threads at once (the training
    loop, DataLoader worker threads, a monitoring thread): all ``add_*``, ``flush``,
    ``close`` and ``reopen``. An ``add_*`` call that returns was accepted: with
    ``on_full="block"`` its event is written; with ``"drop"`` it is written or counted
    in ``gluon_tb/dropped_events``, never both, never neither. One that raises was not.
    A call racing ``close()`` on another thread is accepted and written, or raises
    :class:`WriterClosedError`. ``flush()`` returns once everything accepted before it,
    on any thread, is written; one racing ``close()`` returns or raises
    ``WriterClosedError``. A second ``close()`` returns when the first has finished.
    The events of one thread keep their order. No call waits on anything but the
    writer thread, and no wait outlives it.

    Args:
        logdir: directory of this run's event files. A local one is created here,
            like mxboard (files may be saved into :meth:`get_logdir` at once), when
            it can be; if not (read-only parent...), the first write or ``flush()``
            raises the error, naming the directory. Event files are opened on the
            first write: no empty ones. A URL one is made by its file system.
        max_queue: pending events that wake the writer thread early.
        flush_secs: the most seconds an event waits in memory before it is
            written to the OS (and so survives a crash of this process).
        filename_suffix: appended to every event file's name.
        verbose: log an info line when event files are opened.
        max_queue_bytes: bound of the queue in bytes (default 64 MiB); past it
            ``add_*`` calls block until the writer catches up, or, with
            ``on_full="drop"``, drop the event and count it in the scalar
            ``gluon_tb/dropped_events``. Histogram copy buffers kept for reuse
            (see ``_summaries/copy_buffers.py``) are bounded by the same number of bytes.
        purge_step: when resuming from a checkpoint taken at this step,
            TensorBoard hides the events of earlier runs at or after it.
        storage_options: for a URL ``logdir`` (``s3://...``), keyword arguments of
            its fsspec file system, e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``
            for s3fs (default: fsspec's configuration and the environment).
        remote: a :class:`gluon_tb.writer.RemoteOptions` (part size and age,
            retries) for a URL ``logdir``; see ``docs/remote.md``.
        worker_nice: the writer thread's nice value (Linux; default 19, the lowest
            priority: it uses the CPU the training leaves idle instead of competing
            with MXNet's operators for it); ``None`` or 0: normal priority. On a CPU
            that other work keeps fully busy, a low-priority writer may take longer
            than ``flush_secs`` to write; ``flush()`` still waits until it has.
    """

    def __init__(self, logdir: Union[str, "os.PathLike[str]"], max_queue: int = 1024,
                 flush_secs: float = 2.0, filename_suffix: Optional[str] = None,
                 verbose: bool = False, *, max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
                 on_full: str = "block", purge_step: Optional[int] = None,
                 storage_options: Optional[Mapping[str, Any]] = None,
                 remote: Optional[Any] = None,
                 worker_nice: Optional[int] = DEFAULT_WORKER_NICE) -> None:
        logdir = check_writer_args(logdir, max_queue, flush_secs, filename_suffix, max_queue_bytes,
                                   on_full, worker_nice)
        purge_step = check_step(purge_step, "purge_step")
        remote = remote_options(logdir, storage_options, remote)
        self._logdir = logdir
        self._verbose = verbose
        self._p = Pipeline(logdir, flush_secs=float(flush_secs), filename_suffix=filename_suffix or "",
                           max_queue_bytes=max_queue_bytes, wake_items=max_queue, on_full=on_full,
                           remote=remote, nice=worker_nice)
        self._pool = BufferPool(max_queue_bytes)  # histogram copies, reused once written
        self._closed = False
        self._close_lock = threading.Lock()
        self._projector: List[Any] = []  # embeddings of this run, touched by the worker only
        if not self._p.is_remote:
            make_logdir(self._p.logdir)
        _lifecycle.register(self, remote=self._p.is_remote)
        if purge_step is not None:
            # TensorBoard purges at a SessionLog.START only when it has seen an earlier START
            # in the run; earlier writers (ours, mxboard's, tensorboardX's) usually wrote none,
            # so two are written: the first makes sure the second counts as a restart.
            ev = _proto.event(_time(), purge_step, session_log=_proto.session_log(_proto.SESSION_START))

            def purge(sink: Any) -> None:
                sink.write_event(ev)
                sink.write_event(ev)

            self._p.put(Action(purge, 0))

    # ------------------------------------------------------------ basics
    @property
    def logdir(self) -> str:
        """The run directory this writer writes to."""
        return self._logdir

    def get_logdir(self) -> str:
        """The run directory (mxboard's name for :attr:`logdir`)."""
        return self._logdir

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check(self) -> None:
        if self._closed:
            raise WriterClosedError("SummaryWriter is already closed")
        err = self._p.take_error()
        if err is not None:
            raise err

    def _step(self, global_step: Any) -> int:
        if global_step is None:
            return 0
        if type(global_step) is int and global_step >= 0:
            return global_step
        return check_step(global_step)  # type: ignore[return-value]

    def _queue(self, tag: str, builder: Any, payload: Any, global_step: Any, walltime: Any,
               run: Optional[str] = None) -> None:
        step = self._step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
        self._p.put(Summary(run, tag, builder, payload, step, wall, payload_nbytes(payload)))

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
        if type(tag) is not str or not tag or len(tag) > MAX_TAG_LEN:
            tag = check_tag(tag)
        t = type(value)
        if t is not float:
            if t is int:
                value = float(value)
            elif t is dict or t is tuple or t is list:
                return self._named_scalars(tag, value, global_step, walltime)
            else:
                value = scalar_value(value)
        if global_step is None:
            step = 0
        elif type(global_step) is int and global_step >= 0:
            step = global_step
        else:
            step = check_step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
        self._p.put_scalar((None, tag, value, step, wall))  # a scalar item (_io/items.py)

    def _named_scalars(self, tag: str, value: Any, global_step: Any, walltime: Any) -> None:
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError("value must be a number, a (name, value) pair or a {name: value} "
                                 f"dict, got a {type(value).__name__} of {len(value)} elements")
            value = {value[0]: value[1]}
        for name, v in value.items():
            self._scalar_in_run(check_run_name(tag, "tag") + "/" + check_run_name(name, "value name"),
                                tag, v, global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any],
                    global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Several curves in one chart (tensorboardX layout): ``tag_scalar_dict[name]``
        goes to run ``<logdir>/<main_tag>_<name>`` under the tag ``main_tag``."""
        self._check()
        main_tag = check_tag(main_tag, "main_tag")
        if not isinstance(tag_scalar_dict, Mapping) or not tag_scalar_dict:
            raise TypeError(f"tag_scalar_dict must be a non-empty dict of name -> number, "
                            f"got {describe(tag_scalar_dict)}")
        wall = _time() if walltime is None else check_walltime(walltime)
        base = main_tag.replace("/", "_")
        for name, v in tag_scalar_dict.items():
            run = check_run_name(base + "_" + check_run_name(name, "tag_scalar_dict key"), "main_tag")
            self._scalar_in_run(run, main_tag, v, global_step, wall)

    def _scalar_in_run(self, run: str, tag: str, value: Any, global_step: Any, walltime: Any) -> None:
        value = float(value) if type(value) in (int, float) else scalar_value(value)
        self._put_scalar(run, tag, value, global_step, walltime)

    def _put_scalar(self, run: Optional[str], tag: str, value: Any, global_step: Any, walltime: Any) -> None:
        """Queue a checked value (a float, or what the worker turns into one with ``float()``)."""
        step = self._step(global_step)
        wall = _time() if walltime is None else check_walltime(walltime)
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

    # ------------------------------------------------------------ arrays
    def add_histogram(self, tag: str, values: Any, global_step: Optional[int] = None,
                      bins: Any = "default", walltime: Optional[float] = None) -> None:
        """A histogram of ``values`` (numpy or NDArray). ``bins``: ``'default'``
        (TensorBoard's exponential buckets), an int, a numpy strategy name
        (``'auto'``, ``'fd'``, ...) or a sequence of edges. NaN/±Inf are left out
        of the buckets and counted in a warning."""
        from ._summaries.histogram import build_histogram, capture_histogram

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_histogram, capture_histogram(values, bins, self._pool), global_step, walltime)

    def add_histograms(self, values: Mapping[str, Any], global_step: Optional[int] = None,
                       bins: Any = "default", walltime: Optional[float] = None) -> None:
        """Several histograms at one step: ``values`` maps tags to arrays.

        The same as ``add_histogram`` for each, but queued as one item and written
        as one event (what a handler logging every parameter's gradient does).

        Example::

            sw.add_histograms({f"weights/{n}": p.data() for n, p in params.items()}, step)
        """
        from ._summaries.histogram import build_histograms, capture_histograms

        self._check()
        group = capture_histograms(values, bins, self._pool)
        self._queue(group.items[0][0], build_histograms, group, global_step, walltime)

    def add_image(self, tag: str, image: Any, global_step: Optional[int] = None,
                  dataformats: Optional[str] = None, walltime: Optional[float] = None) -> None:
        """One image (HW, CHW, HWC), or a batch (NCHW, NHWC) tiled into one grid of
        8 per row, as mxboard's (``add_images``: ``ceil(sqrt(N))`` per row).
        Float values are taken in [0, 1], uint8 in [0, 255]; gray stays gray."""
        from ._summaries.image import MXBOARD_NROW, build_image, capture_image, capture_images

        self._check()
        tag = check_tag(tag)
        ndim = len(getattr(image, "shape", ()))
        fmt = (dataformats or "").upper()
        if ndim == 4 or len(fmt) == 4:
            payload = capture_images(image, dataformats=dataformats)._replace(nrow=MXBOARD_NROW)
        else:
            payload = capture_image(image, dataformats=dataformats)
        self._queue(tag, build_image, payload, global_step, walltime)

    def add_images(self, tag: str, images: Any, global_step: Optional[int] = None,
                   dataformats: Optional[str] = None, walltime: Optional[float] = None,
                   max_images: Optional[int] = None) -> None:
        """A batch of images (NCHW, NHWC or NHW) tiled into one grid image."""
        from ._summaries.image import build_image, capture_images

        self._check()
        tag = check_tag(tag)
        payload = capture_images(images, dataformats=dataformats, max_images=max_images)
        self._queue(tag, build_image, payload, global_step, walltime)

    def add_audio(self, tag: str, audio: Any, sample_rate: Number = 44100,
                  global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """A clip of mono (N,) or stereo (N, 2) samples in [-1, 1] (clipped), as WAV."""
        from ._summaries.audio import build_audio, capture_audio

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_audio, capture_audio(audio, sample_rate), global_step, walltime)

    def add_video(self, tag: str, video: Any, global_step: Optional[int] = None, fps: Number = 4,
                  walltime: Optional[float] = None) -> None:
        """A clip (T, C, H, W) or a batch of clips (N, T, C, H, W), as an animated GIF."""
        from ._summaries.video import build_video, capture_video

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_video, capture_video(video, fps), global_step, walltime)

    def add_text(self, tag: str, text: str, global_step: Optional[int] = None,
                 walltime: Optional[float] = None) -> None:
        """Markdown text, shown by the text dashboard."""
        from ._summaries.text import build_text, capture_text

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_text, capture_text(text), global_step, walltime)

    def add_pr_curve(self, tag: str, labels: Any, predictions: Any, num_thresholds: int = 127,
                     global_step: Optional[int] = None, weights: Any = None,
                     walltime: Optional[float] = None) -> None:
        """A precision-recall curve of binary ``labels`` against ``predictions`` in [0, 1]."""
        from ._summaries.pr_curve import build_pr_curve, capture_pr_curve

        self._check()
        tag = check_tag(tag)
        payload = capture_pr_curve(labels, predictions, num_thresholds=num_thresholds, weights=weights)
        self._queue(tag, build_pr_curve, payload, global_step, walltime)

    # ------------------------------------------------------------ whole-run items
    def add_graph(self, net: Any, input_shapes: Any = None) -> None:
        """The graph of a hybridized Gluon ``HybridBlock`` (run forward once) or a ``Symbol``.

        ``input_shapes`` (a shape, a list of shapes in input order, or a
        ``{name: shape}`` dict) lets every node show its output shape; without
        it only the parameters' shapes are known.
        """
        from ._summaries.graph import build_graph, capture_graph

        self._check()
        payload = capture_graph(net, input_shapes=input_shapes)
        wall = _time()

        def write(sink: Any) -> None:
            sink.write_event(_proto.event(wall, 0, graph_def=build_graph(payload)))

        self._p.put(Action(write, 0))

    def add_embedding(self, tag: str, embedding: Any, labels: Any = None, images: Any = None,
                      global_step: Optional[int] = None) -> None:
        """Vectors for TensorBoard's projector, with optional labels (a list: one column;
        a dict of columns or a list of rows: several columns with a header) and
        thumbnails (NCHW or NHW) for a sprite. Files go under ``logdir/<tag>/<step>/``
        and ``projector_config.pbtxt`` is rewritten whole."""
        from ._summaries.embedding import capture_embedding, embedding_action

        self._check()
        tag = check_tag(tag)
        step = self._step(global_step)
        payload = capture_embedding(embedding, labels=labels, images=images)
        self._p.put(Action(embedding_action(tag, step, payload, self._projector), payload_nbytes(payload)))

    def add_profile(self, trace: Any, session: Optional[str] = None, host: Optional[str] = None) -> str:
        """A profiler timeline for TensorBoard's Profile dashboard: MXNet's Chrome trace (the
        path of the JSON file ``mx.profiler.dump()`` wrote, its dict or its event list; a path is
        read now) as ``plugins/profile/<session>/<host>.xplane.pb`` of this run (see
        ``_summaries/profile.py``). ``session``: default the local time, ``2026_11_24_02_30_00``;
        ``host``: default the host name. Returns the file's path relative to the run."""
        import socket

        from ._summaries.profile import trace_events, xspace_from_trace

        self._check()
        events = trace_events(trace)
        session = session or time.strftime("%Y_%m_%d_%H_%M_%S")
        host = host or socket.gethostname() or "localhost"
        for name, v in (("session", session), ("host", host)):
            if not isinstance(v, str) or "/" in v or "\\" in v or v in (".", ".."):
                raise ValueError(f"{name} must be a plain file name, got {v!r}")
        rel = f"plugins/profile/{session}/{host}.xplane.pb"

        def write(sink: Any) -> None:
            sink.write_file(rel, xspace_from_trace(events, host)[0])

        self._p.put(Action(write, 0))
        return rel

    def add_hparams(self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Number],
                    global_step: Optional[int] = None,
                    hparam_domain_discrete: Optional[Mapping[str, Iterable[Any]]] = None) -> None:
        """Hyperparameters and their final metrics, in this same run (HParams dashboard).
        The metrics are also logged as scalars under their own tags."""
        from ._summaries.hparams import build_hparams_payload, capture_hparams

        self._check()
        payload = capture_hparams(hparam_dict, metric_dict, hparam_domain_discrete=hparam_domain_discrete)
        self._queue("_hparams_", build_hparams_payload, payload, global_step, None)

    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Any]]) -> None:
        """Chart layout for the custom scalars dashboard, in tensorboardX's form:
        ``{category: {chart: ["Multiline", [tag regexes]] | ["Margin", [value, lower, upper]]}}``."""
        from ._summaries.custom_scalars import build_custom_scalars_payload, capture_custom_scalars

        self._check()
        self._queue("custom_scalars__config__", build_custom_scalars_payload,
                    capture_custom_scalars(layout), 0, None)

    # ------------------------------------------------------------ mxboard extras
    def export_scalars(self, path: str) -> None:
        """Write every scalar this writer logged so far to a JSON file
        ``{key: [[wall_time, step, value], ...]}`` with mxboard's keys:
        ``<logdir>/<tag>`` for ``add_scalar(tag, number)``, ``<logdir>/<tag>/<name>``
        for each curve of ``add_scalar(tag, (name, value))`` or ``{name: value}``
        (``<logdir>`` as :meth:`get_logdir` returns it; ``add_scalars`` curves:
        ``<logdir>/<main_tag>_<name>``). A step not given is 0 (mxboard wrote ``null``).
        Read back from the event files, so keeping it costs no memory."""
        from ._io.readback import export_scalars

        self.flush()
        export_scalars(self._logdir, self._p.event_paths(), path)

    def clear_scalar_dict(self) -> None:
        """Kept for mxboard compatibility: nothing is held in memory to clear."""

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

    def close(self) -> None:
        """Write everything still queued and close the files. Idempotent; a second
        ``close()`` on another thread returns once the first has finished."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            p = self._p
            p.close()
            self._pool.clear()
        err = p.take_error()
        if err is not None:
            raise err

    def reopen(self) -> None:
        """Start writing again after :meth:`close` (into new event files)."""
        with self._close_lock:
            if not self._closed:
                return
            self._p = self._p.reopened()
            self._closed = False

    def _close_at_exit(self) -> None:
        # no _close_lock: a SIGTERM handler may run on a thread inside close(); the
        # pipeline's close() is safe twice (the second waits for the first)
        self._closed = True
        p = self._p
        if not p.close(timeout=30.0):
            _log.warning("gluon_tb: %s was not finished writing within 30 s at exit", self._logdir)
        err = p.take_error()
        if err is not None:  # nobody is left to raise it to
            _log.warning("gluon_tb: could not write %s at exit: %s", self._logdir, err)

    def _flush_before_shutdown(self) -> None:
        # the main thread ended: upload what a remote log directory holds while Python's
        # thread pools still take work; atexit closes the writer later (_io/lifecycle.py)
        p = self._p
        if p.is_remote and p.running:
            p.flush(timeout=30.0)
            if p.error is not None:
                _log.warning("gluon_tb: could not write %s at exit: %s", p.logdir, p.error)

    def _after_fork(self) -> None:
        self._p.after_fork_in_child()
        self._close_lock = threading.Lock()  # a parent's thread may have held these at fork()
        self._pool = BufferPool(self._pool.max_bytes)

    def __del__(self) -> None:  # best effort: a forgotten writer still writes what it has
        try:
            self._close_at_exit()
        except Exception:
            pass
