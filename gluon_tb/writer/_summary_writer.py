"""``SummaryWriter``: the public writer, a drop-in for mxboard's.

Every ``add_*`` call validates what is cheap to validate, takes what it needs
(a copy, or an NDArray copy queued on MXNet's engine), queues it and returns;
the background :class:`~._io.pipeline.Pipeline` does the rest. What the calls
share (construction, scalars, flush/close/reopen) is :class:`~._writer_base.WriterBase`.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Collection, Mapping, Optional, Sequence, Union

import numpy as np

from ._common.checks import Number, check_bool, check_tag
from ._common.keywords import known_keywords
from ._format import proto as _proto
from ._format.chain import Message
from ._io.child import run_builder
from ._io.items import payload_nbytes
from ._writer_base import WriterBase

_time = time.time
_log = logging.getLogger("gluon_tb")
#: a symbol JSON or a trace file of at least this many bytes is converted in a child process
#: (``_io/child.py``): converting it here holds the GIL ~9 ms (graph: ~0.28 ms a KB; a trace
#: ~0.13 ms a KB), while a child costs ~0.3 s of CPU at low priority and delays what is queued
#: behind it by as much (a fit of a small model would wait for it at its end)
GRAPH_CHILD_BYTES = 32 * 1024
PROFILE_CHILD_BYTES = 64 * 1024
#: frames of at least this many bytes are encoded as a GIF in a child process: Pillow's GIF
#: writer holds the GIL for most of its work (16 frames of 64x64 RGB, 196 KB: ~160 ms of it)
VIDEO_CHILD_BYTES = 32 * 1024
#: whose argument names the ``add_*`` methods' unknown keywords are mapped from (``known_keywords``)
TBX = "tensorboardX"
#: tensorboardX's ``add_graph(model, input_to_model)`` names -> what to pass here instead
GRAPH_TBX_NAMES = {
    "model": "net",
    "input_to_model": "input_shapes (the input's shape, x.shape, or a list or {name: shape} dict of them; "
                      "not the input: run the hybridized net on it once before add_graph)",
}
#: tensorboardX's ``add_embedding(mat, metadata, label_img, ..., metadata_header)`` names -> ours
EMBEDDING_TBX_NAMES = {
    "mat": "embedding", "metadata": "labels", "label_img": "images",
    "metadata_header": "labels as a dict {column name: values}",
}


class SummaryWriter(WriterBase):
    """Writes TensorBoard event files from a background thread.

    The same methods, argument names and order as mxboard 0.1.0's
    ``SummaryWriter`` (so an mxboard script runs with only its import
    changed), plus ``add_scalars``, ``add_mean``, ``add_histograms``, ``add_video``,
    ``add_hparams``, ``add_custom_scalars``, ``add_profile``, and a ``walltime=`` on
    every ``add_*`` call of a value at a step (scalars, histograms, images, audio,
    video, text, PR curves).

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
            it can be; a file in its place (or an ancestor's) is a ValueError here;
            otherwise (read-only parent...) the first write or ``flush()``
            raises the error, naming the directory. Event files are opened on the
            first write: no empty ones. A URL one is made by its file system.
            ``None`` (the default): ``runs/<Mon><DD>_<HH>-<MM>-<SS>_<host>`` under the working
            directory, as tensorboardX's and torch's ``SummaryWriter()``.
        max_queue: pending events that wake the writer thread early.
        flush_secs: the most seconds an event waits in memory before it is
            written to the OS (and so survives a crash of this process), plus the
            time to write it, whatever the load of the machine (see ``worker_nice``).
            ``float("inf")``: no time bound (the writer thread still writes when it is woken,
            usually at once, but nothing promises when); ``flush()`` and ``close()`` write all.
        filename_suffix: appended to every event file's name.
        verbose: accepted for mxboard compatibility; nothing is printed (the
            ``gluon_tb`` logger reports what needs saying).
        max_queue_bytes: bound in bytes of what waits for the writer thread (queued
            events and the private copies of arrays given to ``add_histogram``,
            ``add_images`` and the rest); past it ``add_*`` calls block until the writer
            catches up, or, with ``on_full="drop"``, drop the event and count it in the
            scalar ``gluon_tb/dropped_events``. ``None`` (default): 1/32 of the memory the
            process may use (the machine's, or its container's limit), at least 64 MiB and
            at most 1 GiB (``gluon_tb.writer.DEFAULT_MAX_QUEUE_BYTES``), so that several
            large arrays logged back to back are handed over without waiting. Scalars
            alone hold at most 64 MiB of it, and the idle copy buffers kept for reuse
            (``_summaries/copy_buffers.py``) at most 64 MiB more.
        on_full: ``"block"`` (default): past ``max_queue_bytes``, an ``add_*`` call
            waits for the writer thread, and every accepted event is written;
            ``"drop"``: it returns at once and the event is counted in
            ``gluon_tb/dropped_events`` instead (for a loop that must never wait). An event
            larger than the whole bound is queued alone: ``"block"`` waits until nothing
            else is queued, ``"drop"`` takes it when nothing else is.
        purge_step: when resuming from a checkpoint taken at this step,
            TensorBoard hides the events of earlier runs at or after it. Without it,
            a ``RuntimeWarning`` (once per run directory) says when another writer is
            appending to the same run directory: one of this process, or a live process
            of this host whose event file was written in the last 5 minutes.
        storage_options: for a URL ``logdir`` (``s3://...``), keyword arguments of
            its fsspec file system, e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``
            for s3fs (default: fsspec's configuration and the environment).
        remote: a :class:`gluon_tb.writer.RemoteOptions` (part size and age,
            retries) for a URL ``logdir``; see ``docs/remote.md``.
        worker_nice: the nice value at which the writer counts histograms (Linux;
            default 19, the lowest priority: the counting uses the CPU the training
            leaves idle instead of competing with MXNet's operators for it); ``None``
            or 0: normal priority. The writer's threads themselves run Python and keep
            the process's priority: a low-priority thread holding the GIL on a busy CPU
            stalls the training thread. On a CPU that other work keeps fully busy,
            where nice-19 counting gets about 1% of a core, a second writer thread
            writes (counting at normal priority) whenever something logged has waited
            ``3/4 flush_secs``, so the bound of ``flush_secs`` holds (a local log
            directory; a URL one uploads parts by ``RemoteOptions.part_secs``).
    """

    # ------------------------------------------------------------ arrays
    @known_keywords({"max_bins": "bins"}, TBX)
    def add_histogram(self, tag: str, values: Any, global_step: Optional[int] = None,
                      bins: Any = "default", walltime: Optional[float] = None) -> None:
        """A histogram of ``values`` (numpy or NDArray). ``bins``: ``'default'``
        (TensorBoard's exponential buckets; tensorboardX's name for them, ``'tensorflow'``, is
        the same), an int, a numpy strategy name (``'auto'``, ``'fd'``, ...) or a sequence of
        edges. NaN/±Inf are left out of the buckets and counted in a warning."""
        from ._summaries.histogram import build_histogram, capture_histogram

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_histogram, capture_histogram(values, bins, self._pool), global_step, walltime)

    @known_keywords({}, TBX)
    def add_histograms(self, values: Mapping[str, Any], global_step: Optional[int] = None,
                       bins: Any = "default", walltime: Optional[float] = None) -> None:
        """Several histograms at one step: ``values`` maps tags to arrays.

        The same as ``add_histogram`` for each, but queued as one item and written
        as one event (what a handler logging every parameter's gradient does).

        Example::

            sw.add_histograms({f"weights/{n}": p.data() for n, p in params.items()}, step)
        """
        self._add_histograms_known(values, None, global_step, bins, walltime)

    def _add_histograms_known(self, values: Mapping[str, Any], known: Optional[Mapping[str, Any]],
                              global_step: Optional[int] = None, bins: Any = "default",
                              walltime: Optional[float] = None, private: Collection[str] = (),
                              wake: bool = True) -> None:
        """``add_histograms`` of NDArrays whose ``(shape, dtype, context)`` the caller knows, by tag
        (a handler, from the parameters): reading them is a call into MXNet each. ``private``: tags
        whose NDArray is the caller's own new array (a sample), never written again: one on the
        CPU is read as it is, not copied. ``wake=False`` (a handler, every batch): the writer's
        worker reads the group 0.1 s later at the earliest, when MXNet has copied it, with the
        groups queued meanwhile, instead of waiting for MXNet's engine at every call
        (``Pipeline.put``)."""
        from ._summaries.histogram import build_histograms, capture_histograms

        self._check()
        group = capture_histograms(values, bins, self._pool, known, private)
        self._queue(group.items[0][0], build_histograms, group, global_step, walltime, wake=wake)

    @known_keywords({"img_tensor": "image"}, TBX)
    def add_image(self, tag: str, image: Any, global_step: Optional[int] = None,
                  dataformats: Optional[str] = None, walltime: Optional[float] = None) -> None:
        """One image (HW, CHW, HWC), or a batch (NCHW, NHWC) tiled into one grid of
        8 per row, as mxboard's (``add_images``: ``ceil(sqrt(N))`` per row).
        Float values are taken in [0, 1], uint8 in [0, 255]; gray stays gray."""
        from ._summaries.image import build_image, capture_image

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_image, capture_image(image, dataformats=dataformats, pool=self._pool), global_step, walltime)

    @known_keywords({"img_tensor": "images"}, TBX)
    def add_images(self, tag: str, images: Any, global_step: Optional[int] = None,
                   dataformats: Optional[str] = None, walltime: Optional[float] = None,
                   max_images: Optional[int] = None) -> None:
        """A batch of images (NCHW, NHWC or NHW) tiled into one grid image."""
        from ._summaries.image import build_image, capture_images

        self._check()
        tag = check_tag(tag)
        payload = capture_images(images, dataformats=dataformats, max_images=max_images, pool=self._pool)
        self._queue(tag, build_image, payload, global_step, walltime)

    @known_keywords({"snd_tensor": "audio"}, TBX)
    def add_audio(self, tag: str, audio: Any, sample_rate: Number = 44100,
                  global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """A clip of mono (N,) or stereo (N, 2) samples in [-1, 1] (clipped), as WAV.
        A ``sample_rate`` under 1000 Hz is warned about (once): tensorboardX's third argument is
        the step."""
        from ._summaries.audio import build_audio, capture_audio

        self._check()
        tag = check_tag(tag)
        payload = capture_audio(audio, sample_rate)
        if sample_rate < 1000:
            self._warn_once("audio sample_rate", "gluon_tb: add_audio(%r, ...): sample_rate=%r Hz, written as given. "
                            "The order is mxboard's, add_audio(tag, audio, sample_rate, global_step); tensorboardX's is "
                            "add_audio(tag, snd_tensor, global_step, sample_rate): pass global_step= by name", tag,
                            sample_rate)
        self._queue(tag, build_audio, payload, global_step, walltime)

    @known_keywords({"vid_tensor": "video"}, TBX)
    def add_video(self, tag: str, video: Any, global_step: Optional[int] = None, fps: Number = 4,
                  walltime: Optional[float] = None, dataformats: Optional[str] = None) -> None:
        """A clip (T, C, H, W) or a batch of clips (N, T, C, H, W), as an animated GIF.
        ``dataformats``: ``'TCHW'`` or ``'THWC'`` for a clip, ``'NTCHW'`` or ``'NTHWC'`` for a
        batch (default: channels first, as above)."""
        from ._summaries.video import capture_video

        self._check()
        tag = check_tag(tag)
        self._queue(tag, _build_video, capture_video(video, fps, dataformats), global_step, walltime)

    @known_keywords({"text_string": "text"}, TBX)
    def add_text(self, tag: str, text: str, global_step: Optional[int] = None,
                 walltime: Optional[float] = None) -> None:
        """Markdown text, shown by the text dashboard."""
        from ._summaries.text import build_text, capture_text

        self._check()
        tag = check_tag(tag)
        self._queue(tag, build_text, capture_text(text), global_step, walltime)

    @known_keywords({}, TBX)
    def add_pr_curve(self, tag: str, labels: Any, predictions: Any, num_thresholds: int = 127,
                     global_step: Optional[int] = None, weights: Any = None,
                     walltime: Optional[float] = None) -> None:
        """A precision-recall curve of binary ``labels`` against ``predictions`` in [0, 1].
        A ``num_thresholds`` other than 127 without ``global_step`` is warned about (once):
        tensorboardX's fourth argument is the step."""
        from ._summaries.pr_curve import build_pr_curve, capture_pr_curve

        self._check()
        tag = check_tag(tag)
        payload = capture_pr_curve(labels, predictions, num_thresholds=num_thresholds, weights=weights)
        if global_step is None and num_thresholds != 127:
            self._warn_once("pr_curve num_thresholds", "gluon_tb: add_pr_curve(%r, ...): num_thresholds=%r at step 0, "
                            "written as given. The order is mxboard's, add_pr_curve(tag, labels, predictions, "
                            "num_thresholds, global_step); tensorboardX's is add_pr_curve(tag, labels, predictions, "
                            "global_step, num_thresholds): pass global_step= by name", tag, num_thresholds)
        self._queue(tag, build_pr_curve, payload, global_step, walltime)

    # ------------------------------------------------------------ whole-run items
    @known_keywords(GRAPH_TBX_NAMES, TBX)
    def add_graph(self, net: Any, input_shapes: Any = None) -> None:
        """The graph of a hybridized Gluon ``HybridBlock`` (run forward once) or a ``Symbol``.

        ``input_shapes`` (a shape, a list of shapes in input order, or a
        ``{name: shape}`` dict) lets every node show its output shape; without
        it only the parameters' shapes are known.
        """
        from ._summaries.graph import build_graph, built_before, capture_graph, keep_built

        self._check()
        payload = capture_graph(net, input_shapes=input_shapes)
        wall = _time()

        def write(sink: Any) -> None:
            graph_def = built_before(payload)  # the same net's graph, logged by another writer
            if graph_def is None:
                graph_def = run_builder(build_graph, payload, size=len(payload.symbol_json),
                                        child_from=GRAPH_CHILD_BYTES)
                keep_built(payload, graph_def)
            sink.write_event(_proto.event(wall, 0, graph_def=graph_def))

        self._put_action(write, 0)

    @known_keywords(EMBEDDING_TBX_NAMES, TBX)
    def add_embedding(self, tag: str, embedding: Any, labels: Any = None, images: Any = None,
                      global_step: Optional[int] = None) -> None:
        """Vectors for TensorBoard's projector, with optional labels (a list: one column;
        a dict of columns or a list of rows: several columns with a header) and
        thumbnails (NCHW or NHW) for a sprite. Files go under ``logdir/<tag>/<step>/``
        and ``projector_config.pbtxt`` is rewritten whole."""
        from ._summaries.embedding import capture_embedding, check_embedding_tag, embedding_action

        self._check()
        tag = check_embedding_tag(tag)
        step = self._step(global_step)
        payload = capture_embedding(embedding, labels=labels, images=images)
        self._put_action(embedding_action(tag, step, payload, self._projector), payload_nbytes(payload))

    @known_keywords({}, TBX)
    def add_profile(self, trace: Any, session: Optional[str] = None, host: Optional[str] = None) -> Optional[str]:
        """A profiler timeline for TensorBoard's Profile dashboard: MXNet's Chrome trace (the
        path of the JSON file ``mx.profiler.dump()`` wrote, its dict or its event list) as
        ``plugins/profile/<session>/<host>.xplane.pb`` of this run (see ``_summaries/profile.py``).
        ``session``: default the local time, ``2026_11_24_02_30_00``; ``host``: default the host
        name. Returns the file's path relative to the run, or ``None`` when the profile was
        dropped (``on_full="drop"`` and the queue full: counted in ``gluon_tb/dropped_events``).

        A path is the fast way: this call only reads the file's bytes (it may be deleted
        next), and a child process parses and converts them (``_io/child.py``), off this
        process's GIL (a file under 64 KiB is converted on the writer thread: ~8 ms). A file
        that is not UTF-8 JSON text raises a TypeError here; one found bad only when parsed is
        reported by a warning of the ``gluon_tb`` logger, and no profile is written. A dict or
        list is converted on the writer thread.
        """
        from ._summaries.profile import profile_path, read_trace_file, trace_events, xspace_from_trace
        from ._summaries.profile import xspace_from_trace_bytes

        self._check()
        if isinstance(trace, (str, os.PathLike)):
            data = read_trace_file(trace)
            events = None
        else:
            events = trace_events(trace)
        rel, host = profile_path(session, host)

        def write(sink: Any) -> None:
            if events is not None:
                sink.write_file(rel, xspace_from_trace(events, host)[0])
                return
            try:
                xspace = run_builder(xspace_from_trace_bytes, data, host, size=len(data),
                                     child_from=PROFILE_CHILD_BYTES)
            except (TypeError, ValueError) as e:
                _log.warning("gluon_tb: add_profile(%r): no profile written: %s", trace, e)
                return
            sink.write_file(rel, xspace)

        if not self._put_action(write, len(data) if events is None else 0):
            return None  # dropped: no file will appear there
        return rel

    @known_keywords({"name": "run_name"}, TBX)
    def add_hparams(self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Number],
                    global_step: Optional[int] = None,
                    hparam_domain_discrete: Optional[Mapping[str, Union[Sequence[Any], np.ndarray]]] = None,
                    *, experiment: bool = True, run_name: Optional[str] = None) -> None:
        """Hyperparameters and their final metrics as one session of the HParams dashboard, in
        this same run. The metrics are also logged as scalars under their own tags, at
        ``global_step`` (default: the largest step this writer was given, so that a curve of the
        same tag is not sent back to an earlier step, which TensorBoard reads as a restart; its
        default loader then shows the metric in place of the curve's last point).

        TensorBoard shows one session per run. Calling again with the same hyperparameters
        updates the session's metrics; with others (a loop over trials on one writer, as with
        tensorboardX) each new set goes into a run of its own under this one, named by
        ``run_name`` or, when not given, by the values (``lr=0.01,batch=32``), with a warning
        the first time. ``run_name`` given: the session (and its metric scalars, from step 0
        by default) goes into the run ``<this run>/<run_name>``, as torch's ``add_hparams``.

        ``experiment``: also write the dashboard's columns (the hparam names and metric tags)
        with this run. TensorBoard takes the columns from one run only; when the runs of one
        log directory log different hparam names, pass ``experiment=False`` in all of them and
        it takes the columns from every run's values.

        Example::

            sw.add_hparams({"lr": 0.1, "optimizer": "sgd"}, {"epoch_accuracy": 0.93})
            for lr in (0.1, 0.01):  # one run per trial
                sw.add_hparams({"lr": lr}, {"hp/accuracy": train(lr)}, run_name=f"lr={lr}")
        """
        from ._io.logdir import check_run_name, run_under
        from ._summaries.hparams import capture_hparams

        self._check()
        payload = capture_hparams(hparam_dict, metric_dict, hparam_domain_discrete=hparam_domain_discrete,
                                  experiment=check_bool(experiment, "experiment"))
        if global_step is not None:
            global_step = self._step(global_step)
        if run_name is None:
            held = self._sessions.get(self._run)
            if held is None or held == payload.hparams:
                self._add_session(payload, global_step)
                return
            from ._summaries.hparams import session_run_name

            run_name = session_run_name(hparam_dict)
            self._warn_once(f"hparams moved from {self._run}", "gluon_tb: add_hparams: %s already holds the session "
                            "of other hyperparameters (TensorBoard shows one session per run): this one goes into "
                            "the run %r under it, and so does each later new set; pass run_name= to name them",
                            self._logdir, run_name)
        else:
            run_name = check_run_name(run_name, "run_name")
            held = self._sessions.get(run_under(self._run, run_name))
            if held is not None and held != payload.hparams:
                raise ValueError(f"run_name {run_name!r} already holds the session of other hyperparameters "
                                 f"({held}), got {payload.hparams}: TensorBoard shows one session per run, "
                                 "so each set needs a run_name of its own")
        self.for_run(run_name)._add_session(payload, global_step)

    def _add_session(self, payload: Any, global_step: Optional[int]) -> None:
        """``add_hparams``' session in this run (made by ``for_run``), at ``global_step`` or the
        largest step this run was given."""
        from ._summaries.hparams import build_hparams

        self._sessions[self._run] = payload.hparams
        self._queue("_hparams_", build_hparams, payload, self._top_step if global_step is None else global_step, None)

    @known_keywords({}, TBX)
    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Any]]) -> None:
        """Chart layout for the custom scalars dashboard, in tensorboardX's form:
        ``{category: {chart: ["Multiline", [tag regexes]] | ["Margin", [value, lower, upper]]}}``."""
        from ._summaries.custom_scalars import build_custom_scalars, capture_custom_scalars

        self._check()
        self._queue("custom_scalars__config__", build_custom_scalars,
                    capture_custom_scalars(layout), 0, None)


def _build_video(tag: str, payload: Any) -> "Message":
    """``build_video``, the GIF encoded in a child process when the frames are large (writer thread)."""
    from ._summaries.video import build_video, encode_gif

    def encode(frames: Any, fps: float) -> bytes:
        return run_builder(encode_gif, frames, fps, size=frames.nbytes, child_from=VIDEO_CHILD_BYTES)

    return build_video(tag, payload, encode)
