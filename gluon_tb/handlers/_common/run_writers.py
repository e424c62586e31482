"""Run writers: one lazily opened SummaryWriter per run directory, and the ``on_error`` policy.

The adapters (``_estimator/handler.py``, ``_module/callback.py``) only decide *what* to log and *when*;
everything that touches a :class:`~gluon_tb.writer.SummaryWriter` goes through
:meth:`RunWriters.call` (``out.call(TRAIN, SummaryWriter.add_scalar, tag, value, step)``, a call
that a type checker follows), which opens one writer per run directory lazily (so no empty event
files appear) and applies the ``on_error`` policy. The runs' writers are made by one writer's
``for_run`` and share its queue and writer thread: a fit starts one writer thread and closes one
(each writer of its own cost the training thread ~0.8 ms made and closed, and its threads woke
on their own).

Per-batch values (``batch_loss``, ``batch_<metric>``, the losses an epoch's loss adds up) are
kept here, on the training thread, and queued a block at a time (:meth:`RunWriters.later`): a
call into the writer at every batch cost the training thread ~20-25 us each, cold (the checks,
the ``Mean``, the queue item), an append here ~2 us. The block is queued in one call, before any
other write (so the event files keep the order of the calls), at the latest :data:`LATER_SECS`
after its first value, and when the writers flush or close or the process ends inside a fit.
Where batches take :data:`LATER_SECS` or longer, each batch's values are queued at its end
(:meth:`RunWriters.batch_done`): nothing waits for the next batch to be seen in TensorBoard.

Nothing here has "metric" in an attribute name: the Gluon estimator rejects
handlers with such attributes unless they hold one of its metric objects.
"""
from __future__ import annotations

import logging
import os
import time
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar
import warnings

from ...writer import SummaryWriter
from ...writer._common.checks import check_storage_options

#: epoch-level points of the training (step: the epoch index), beside ``validation``'s
TRAIN = "train"
#: batch-level points of the training (step: the global batch index): batch scalars,
#: gradient and weight histograms, ``grad_health``, the profiler's output. A run of their
#: own, so that a resumed training purges each run at its own step (``_options/resume.py``).
TRAIN_BATCH = "train_batch"
VALIDATION = "validation"
ON_ERROR = ("raise", "warn")
#: a block of per-batch values is queued at the latest this long after its first value (or at
#: :data:`LATER_MAX` values), and before any other write, a flush or a close
LATER_SECS = 0.1
LATER_MAX = 512

logger = logging.getLogger("gluon_tb.handlers")

R = TypeVar("R")
if TYPE_CHECKING:  # typing has these from Python 3.10; annotations here are never evaluated
    from typing import Concatenate, ParamSpec

    P = ParamSpec("P")


class RunWriter(SummaryWriter):
    """A run's writer, opened just before its first write: its directory is made by the writer
    thread at that write (in ``SummaryWriter``'s constructor, ``os.makedirs`` cost the training
    thread 0.1-0.4 ms a run in a fit)."""

    _MAKE_LOGDIR_NOW = False


def close_leaving_with(close: Callable[[], None], logdir: str, exc_type: Optional[type]) -> None:
    """``__exit__`` of a handler used as a context manager: ``close()``; while an error is on its way
    out (the writer's own, with ``on_error="raise"``, say), an error of the close is logged instead of
    raised, so that it does not replace the first one (it is often the same, met again)."""
    if exc_type is None:
        close()
        return
    try:
        close()
    except Exception as e:  # noqa: BLE001 - reported, and the first error goes on
        logger.warning("gluon_tb: closing %s after %s also failed: %s: %s", logdir, exc_type.__name__,
                       type(e).__name__, e)


class RunWriters:
    """One lazily opened :class:`SummaryWriter` per run directory, and the error policy.

    ``on_error="raise"`` lets a writer error propagate (it stops training);
    ``"warn"`` issues one ``RuntimeWarning`` for the first error, counts the rest and
    lets training go on. In distributed training :meth:`place` puts the runs of one worker in
    a directory of their own (``prefix``, ``"worker_<rank>"``), or mutes it (``muted``: every
    write a no-op, for the workers other than rank 0). A resumed training hides what an earlier
    process logged at or after its start, per run (:meth:`purge_from`).
    """

    def __init__(self, logdir: str, on_error: str, flush_secs: float,
                 storage_options: Optional[Mapping[str, Any]] = None) -> None:
        self.logdir = logdir
        check_storage_options(storage_options, logdir)
        self.storage_options = storage_options
        self.on_error = on_error
        self.flush_secs = flush_secs
        self.errors = 0
        self._summed_up = 0  # errors the last close() reported
        self._prefix = ""
        self._muted = False
        self._root: Optional[SummaryWriter] = None  # the runs' writers are made by its for_run
        self._open: Dict[str, SummaryWriter] = {}
        self._told: set = set()
        self._purge: Dict[str, int] = {}  # run -> purge_step of its next writer (a resumed run)
        self._later: List[Tuple[str, Optional[str], Any, int, float, Any]] = []  # (run, tag, value, step, wall, into)
        self._later_since = 0.0
        self._batch_ended = 0.0  # perf_counter at the previous batch_done

    @property
    def prefix(self) -> str:
        """The folder of this worker's runs under ``logdir`` (``""``: the runs are at its top)."""
        return self._prefix

    @property
    def muted(self) -> bool:
        """Whether every write is a no-op (a worker that does not write)."""
        return self._muted

    def place(self, prefix: str, muted: bool) -> None:
        """This worker's runs go under ``logdir/prefix``; ``muted``: it writes nothing."""
        self._prefix, self._muted = prefix, muted

    def purge_from(self, run: str, step: int) -> None:
        """The next writer of ``run`` hides the points an earlier process logged at or after ``step``."""
        self._purge[run] = step

    def writer(self, run: str) -> SummaryWriter:
        w = self._open.get(run)
        if w is None:
            root = self._root
            if root is None:
                root = self._root = RunWriter(os.path.join(self.logdir, self._prefix) if self._prefix
                                              else self.logdir, flush_secs=self.flush_secs,
                                              storage_options=self.storage_options)
                root._on_exit(self.hand_over)  # a process that ends inside a fit: its kept values too
            w = self._open[run] = root.for_run(run, purge_step=self._purge.pop(run, None))
        return w

    def call(self, run: str, fn: Callable[Concatenate[SummaryWriter, P], R], *args: P.args,
             **kwargs: P.kwargs) -> Optional[R]:
        """``fn(writer of run, *args, **kwargs)`` under the error policy; None when muted or failed.

        ``fn`` is a :class:`SummaryWriter` method, unbound (``SummaryWriter.add_scalar``), or a
        function whose first argument is the writer: a type checker follows the call and checks
        its arguments against ``fn``'s signature. A failure goes to :meth:`failed` (``"raise"``:
        re-raised; ``"warn"``: counted, None returned).
        """
        if self._muted:
            return None
        if self._later:
            self.hand_over()
        else:
            self._report_pending()
        try:
            return fn(self.writer(run), *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the policy decides
            self.failed(e)
            return None

    def later(self, run: str, tag: Optional[str], value: Any, step: int, into: Any = None) -> None:
        """A batch's value, queued with the others of its block (the module docstring says when):
        ``add_scalar(tag, value, step)`` of a number, or the mean of a list of fresh loss arrays,
        added into the running Mean ``into`` (``tag`` None: only that, no event); see
        ``SummaryWriter._add_values``. The wall time is taken now."""
        if self._muted:
            return
        later = self._later
        now = time.perf_counter()
        if not later:
            self._later_since = now
        later.append((run, tag, value, step, time.time(), into))
        if len(later) >= LATER_MAX or now - self._later_since >= LATER_SECS:
            self.hand_over()

    def batch_done(self) -> None:
        """The training thread's batch is over: its kept values are queued now when batches come
        :data:`LATER_SECS` or more apart (a slow training sees each batch at once), or when the
        block is that old."""
        now = time.perf_counter()
        slow = now - self._batch_ended >= LATER_SECS
        self._batch_ended = now
        if self._later and (slow or now - self._later_since >= LATER_SECS):
            self.hand_over()

    def _report_pending(self) -> None:
        """The writer thread's error (a failed write), given to the policy before more is queued:
        raised there, it would take the values being handed over with it (under ``"warn"``, the
        rest of an epoch's loss: a wrong ``epoch_loss``)."""
        if self._root is not None:
            err = self._root._take_error()
            if err is not None:
                self.failed(err)

    def hand_over(self) -> None:
        """Queue the kept per-batch values now, one call per run, in order."""
        later, self._later = self._later, []
        try:
            self._report_pending()
        except BaseException:
            self._later = later + self._later  # "raise": kept for the close that follows
            raise
        first: Optional[Exception] = None
        for run, kept in groupby(later, key=itemgetter(0)):  # consecutive values of one run
            try:
                self.writer(run)._add_values([entry[1:] for entry in kept])
            except Exception as e:  # noqa: BLE001 - the other runs' values are queued first
                if first is None:
                    first = e
                else:
                    self.errors += 1
        if first is not None:
            self.failed(first)  # the policy decides

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
        if self._muted:
            return
        if self._later:
            self.hand_over()
        try:
            self.writer(run).add_graph(net)
        except (TypeError, ValueError) as e:
            self.say_once("graph", f"gluon_tb: the graph is not logged: {e}")
        except Exception as e:  # noqa: BLE001 - the error policy decides
            self.failed(e)

    def say_once(self, key: str, msg: str, level: int = logging.INFO) -> None:
        """Log ``msg`` once per ``key``; a muted worker (not rank 0, which speaks for the training)
        says nothing."""
        if self._muted:
            return
        if key not in self._told:
            self._told.add(key)
            logger.log(level, msg)

    def flush(self) -> None:
        if self._later:
            self.hand_over()
        if self._root is not None:
            try:
                self._root.flush()
            except Exception as e:  # noqa: BLE001
                self.failed(e)

    def close(self) -> None:
        """Close every run's writer (one queue and thread); the next write opens new event files.

        A remote log directory waits its ``close_timeout`` at most, however many runs it wrote
        and whatever the store does."""
        if self._later:
            self.hand_over()
        root, self._root, self._open = self._root, None, {}
        if root is not None:
            root._on_exit(None)
            try:
                root.close()
            except Exception as e:  # noqa: BLE001
                self.failed(e)
        if self.errors > 1 and self.errors > self._summed_up and self.on_error == "warn":
            logger.warning("gluon_tb: %d writer errors in %s were ignored (on_error='warn')",
                           self.errors, self.logdir)
            self._summed_up = self.errors  # a second close() (train_end, then the script's) says it once

