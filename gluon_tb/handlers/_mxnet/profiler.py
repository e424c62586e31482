"""MXNet's profiler over a range of batches, for the ``profile_batch=`` option (``_options/profile_batch.py``).

:class:`BatchProfiler` configures, starts, stops and dumps the profiler, marks each batch as a step,
and hands the trace and the aggregate table to the writer; both adapters' parts drive it.

Steps: each profiled batch is marked in the trace, on the profiler's own clock, by an
``mx.profiler.Task`` ``train <k>`` in the domain ``gluon_tb.step``, which the XSpace builder turns
into the step events the Profile dashboard's Overview and Input Pipeline Analysis pages read. A
step runs from the previous batch's ``batch_end`` to its own, so that the loop's wait for the batch
is in it: the task ``input <k>`` marks that wait, up to ``batch_begin``, and XProf shows it as
input time, the rest as host compute. The first profiled batch and the first batch of an epoch
start their step at their ``batch_begin`` (no input part; an epoch's end, validation and
``epoch_end`` handlers are in no step). Times are the training thread's: with MXNet's
asynchronous engine, a batch's operators may still run after its ``batch_end`` unless something
in the loop reads a result (the metric updates of the Estimator and of ``Module.fit`` do). The tasks also
appear in ``profile/operator_stats`` (section ``gluon_tb.step``).
``TensorBoardCallback``'s steps have no ``input`` part: they run from one ``batch_end`` callback (or ``eval_end``)
to the next, and ``Module.fit`` reads the next batch between the two.

A failure of the profiler itself (``set_config``, ``set_state``, ``dump``, ``dumps``) is the
handler's ``on_error``'s, like a writer's: ``"raise"`` raises it, ``"warn"`` gives one warning
and training goes on without the profile; either way the profiler is stopped and set back first
(best effort), and nothing already logged is touched. An error of ``mx.nd.waitall()`` is the
training's own and always raises. When the ``fit`` has already raised (``finish(log=False)``) a
profiler failure is only logged, so that it does not hide the ``fit``'s error.

What is profiled (:data:`PROFILED`): operators (imperative and symbolic), memory and the aggregate
table, but not MXNet's C API calls (``profile_api``, part of ``profile_all``). MXNet records an API
call as a task pushed on a thread-local stack when the call begins and popped when it ends, each
only if the profiler runs at that moment; a call of another thread that began before
``set_state("run")`` and ends after it finds its stack empty, and the ``CHECK`` that fails there
throws out of a C function: the process aborts ("terminate called after throwing an instance of
'dmlc::Error' ... c_api_profile.cc:140: Check failed: !thread_profiling_data.calls_.empty()";
apache/mxnet#15486). The writer thread waits on MXNet (a histogram's copy) and DataLoader threads
make arrays while the training thread starts the profiler: with ``profile_api`` a fit aborted
(measured: 4 of 5 processes of 30 starts beside one thread waiting on a ``dot``; 0 of 11 without).

MXNet 1.9.1 cannot say whether its profiler is running (no query in its C API), so a user's
own profiler session cannot be detected, only avoided: with ``MXNET_PROFILER_AUTOSTART`` set
the option does nothing (one warning), and a user who calls ``mx.profiler.set_state("run")``
themselves should not also pass ``profile_batch``. Afterwards the profiler is stopped and its
configuration set back to MXNet's defaults (nothing profiled), except the file (see
:func:`private_folder`), so a later ``dump()`` needs its own ``set_config(filename=...)``.

Files: MXNet's ``set_config`` *unlinks* the file it is given, and once the profiler has run,
MXNet writes its trace into the configured file again when the process exits (a C++ destructor,
after Python's ``atexit``). So the profiler is only ever given files inside directories this
module made itself with ``mkdtemp``: never ``os.devnull`` (as root, MXNet deleted ``/dev/null``
and left a regular file in its place) and never the working directory.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple

from ...writer import SummaryWriter
from ...writer._common.profile_steps import STEP_DOMAIN, STEP_EVENT, WAIT_EVENT
from .._common.run_writers import TRAIN_BATCH, RunWriters, logger

TEXT_TAG = "profile/operator_stats"

_root_lock = threading.Lock()
_root: Optional[str] = None


def private_folder() -> str:
    """This process's folder for every file MXNet's profiler is given (made on first use).

    ``mkdtemp`` makes it (mode 0700, a fresh name) and Python's exit removes it with all it holds.
    MXNet writes the last dump's closing JSON into its configured file when the process exits,
    in a C++ destructor that runs after Python's ``atexit``: it then finds no folder and leaves
    nothing behind, whether the process stopped mid-profile or long after one."""
    global _root
    with _root_lock:
        if _root is None or not os.path.isdir(_root):  # made again if something removed it
            folder = tempfile.mkdtemp(prefix="gluon_tb_profiler_")
            atexit.register(shutil.rmtree, folder, True)
            _root = folder
        return _root


#: what ``profile_batch`` profiles: ``profile_all`` but the API calls (see the module docstring)
PROFILED = dict(profile_symbolic=True, profile_imperative=True, profile_memory=True, profile_api=False,
                aggregate_stats=True)


def _defaults() -> Dict[str, Any]:
    """MXNet's defaults (nothing profiled), but a file in :func:`private_folder`."""
    return dict(filename=os.path.join(private_folder(), "idle.json"), profile_all=False, aggregate_stats=False)


def stats_markdown(table: str) -> str:
    """MXNet's ``profiler.dumps()`` table as Markdown: one table per section."""
    out: List[str] = []
    lines = table.splitlines()
    i = 0
    while i < len(lines):
        if i + 2 < len(lines) and lines[i + 1].startswith("====") and lines[i].strip():
            out.append(f"**{lines[i].strip()}**\n")
            head = lines[i + 2]
            dashes = lines[i + 3] if i + 3 < len(lines) and lines[i + 3].lstrip().startswith("-") else ""
            # the header's cells lie above the runs of dashes ("Min Use  (kB)" holds two spaces)
            spans = [m.span() for m in re.finditer(r"-+", dashes)]
            header = [head[a:b if k < len(spans) - 1 else None].strip() for k, (a, b) in enumerate(spans)] \
                if spans else re.split(r"\s{2,}", head.strip())
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            i += 4 if dashes else 3
            while i < len(lines) and lines[i].strip():
                # numbers on the right, the name (which may hold spaces, or overrun its column) first
                cells = lines[i].strip().rsplit(None, len(header) - 1)
                out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
                i += 1
            out.append("")
        else:
            if lines[i].strip() and not out:
                out.append(lines[i].strip() + "\n")
            i += 1
    return "\n".join(out).strip() + "\n"


class BatchProfiler:
    """Starts and stops MXNet's profiler around the batches of ``profile_batch``."""

    def __init__(self, batches: Tuple[int, int], out: RunWriters, waits: bool = True) -> None:
        self.start, self.stop = batches
        self._out = out
        self._waits = waits  # batch_begin is called: a step's wait for its batch can be marked
        self._dir: Optional[str] = None
        self._first = self.start  # the first profiled batch (a resumed fit's may be later)
        self.done = False
        self._domain: Any = None
        self._task: Any = None  # the open step's mx.profiler.Task (see open_step)
        self._wait: Any = None  # its wait for the batch, until batch_begin

    @property
    def running(self) -> bool:
        return self._dir is not None

    def batch_begin(self, step: int) -> None:
        if self.running:
            if self._task is None:
                self.open_step(step, wait=False)
            self._stop(self._wait)
            self._wait = None
        if self.done or self.running or not self.start <= step <= self.stop:
            return
        self.done = True  # once per handler, whatever happens next
        if os.environ.get("MXNET_PROFILER_AUTOSTART", "0") not in ("", "0"):
            self._out.say_once("profile", "gluon_tb: profile_batch does nothing: MXNET_PROFILER_AUTOSTART "
                               "is set, and the profiler belongs to that session", logging.WARNING)
            return
        import mxnet as mx

        folder = tempfile.mkdtemp(prefix="profile_", dir=private_folder())
        try:
            mx.profiler.set_config(**PROFILED, filename=os.path.join(folder, "trace.json"))
            mx.profiler.set_state("run")
        except Exception as e:  # noqa: BLE001 - the on_error policy decides
            _give_back(mx)
            shutil.rmtree(folder, ignore_errors=True)
            self._out.failed(e)
            return
        self._dir, self._first = folder, step
        self.open_step(step, wait=False)

    def open_step(self, step: int, wait: bool) -> None:
        """Start the step marker of global batch ``step``: an ``mx.profiler.Task`` named
        ``train <step>`` in the domain ``STEP_DOMAIN`` (and, with ``wait``, ``input <step>``
        until its ``batch_begin``), which the XSpace builder turns into the step events XProf's
        Overview page reads (``writer/_summaries/profile.py``). MXNet records a task when it
        stops, so a task dropped unstopped leaves nothing in the trace."""
        self._start(self._new_step(step, wait))

    def _new_step(self, step: int, wait: bool) -> Optional[Tuple[Any, Any]]:
        """The tasks of :meth:`open_step`, made but not started; None (told once) if MXNet refuses."""
        import mxnet as mx

        try:
            if self._domain is None:
                self._domain = mx.profiler.Domain(STEP_DOMAIN)
            return (mx.profiler.Task(self._domain, f"{STEP_EVENT} {step}"),
                    mx.profiler.Task(self._domain, f"{WAIT_EVENT} {step}") if wait else None)
        except Exception as e:  # noqa: BLE001 - the profile goes on without step markers
            self._no_markers(e)
            return None

    def _start(self, tasks: Optional[Tuple[Any, Any]]) -> None:
        self._task = self._wait = None
        if tasks is None:
            return
        try:
            for t in tasks:
                if t is not None:
                    t.start()
        except Exception as e:  # noqa: BLE001
            self._no_markers(e)
            return
        self._task, self._wait = tasks

    def _no_markers(self, e: Exception) -> None:
        self._out.say_once("profile-steps", f"gluon_tb: profile_batch: no step markers ({type(e).__name__}: "
                           f"{e})", logging.WARNING)

    @staticmethod
    def _stop(task: Any) -> None:
        if task is not None:
            try:
                task.stop()
            except Exception:  # noqa: BLE001 - a missing marker is not worth a training's error
                pass

    def drop_step(self) -> None:
        """Forget the open step's tasks unstopped (an epoch ended: the next step starts at its
        first batch, so that validation and the epoch's handlers are in no step)."""
        self._task = self._wait = None

    def batch_end(self, step: int) -> None:
        """The step of ``step`` ends here and the next one starts, so that the wait for the next
        batch is in its step (dropped by :meth:`drop_step` when the epoch ends)."""
        if not self.running:
            return
        # the next step's tasks are made first (each a call into MXNet, which lets another thread
        # take the GIL): the step then ends and the next starts with nothing but their stop and start between
        nxt = self._new_step(step + 1, wait=self._waits) if step < self.stop else None
        self._stop(self._wait)  # no batch_begin came (Module.fit): the whole step is the batch's
        self._stop(self._task)
        self._task = self._wait = None
        if step >= self.stop:
            self.finish(step)
        else:
            self._start(nxt)

    def finish(self, step: int, log: bool = True) -> None:
        """Stop, dump, hand the trace and the table to the writer, restore the profiler."""
        folder = self._dir
        if folder is None:  # not running
            return
        import mxnet as mx

        self.drop_step()  # a step opened after the last batch, for a batch that never came
        self._dir = None
        try:
            try:
                mx.nd.waitall()  # the profiled batches' operators have run
            except BaseException:  # the training's own error: raised whatever on_error says
                _give_back(mx)
                raise
            try:
                mx.profiler.set_state("stop")
                mx.profiler.dump(finished=False)  # see writer/_summaries/profile.trace_events
                table = mx.profiler.dumps(reset=True)
                mx.profiler.set_config(**_defaults())
            except Exception as e:  # noqa: BLE001 - the on_error policy decides
                _give_back(mx)
                if log:
                    self._out.failed(e)
                else:
                    logger.warning("gluon_tb: profile_batch: MXNet's profiler failed after fit raised "
                                   "(%s: %s)", type(e).__name__, e)
                return
            if log:  # each under on_error: one failing does not stop the other
                self._out.call(TRAIN_BATCH, SummaryWriter.add_profile, os.path.join(folder, "trace.json"))
                head = f"MXNet profiler, global batches {self._first} to {step}\n\n"
                self._out.call(TRAIN_BATCH, SummaryWriter.add_text, TEXT_TAG, head + stats_markdown(table), step)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _give_back(mx: Any) -> None:
    """Best effort after a failure: the profiler stopped, with MXNet's defaults (errors ignored)."""
    for call in (lambda: mx.profiler.set_state("stop"), lambda: mx.profiler.set_config(**_defaults())):
        try:
            call()
        except Exception:  # noqa: BLE001 - already failing; the first error is the one reported
            pass
