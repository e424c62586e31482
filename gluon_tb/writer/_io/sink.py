"""What an action (an :class:`~.items.Action` item) sees of the worker: event records by run, and whole files.

Actions write what is not one ``Summary.Value``: the graph event, the projector's
files, a profile. They run on the worker thread, between two writes of the queued
events, so their events keep their place in the order of the queue. Whole files go
to the worker's :class:`~.output.Output`, which writes them atomically (a local
directory: temporary files renamed into place, ``local_output.py``; an object store:
one object each).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Union

from .logdir import run_under
from .output import Output


class Sink:
    """Event records go to ``pending`` (the worker's records by run, written after the
    action); files to ``output``. ``run``: the run the action writes in (a writer made by
    ``for_run``), its events and its files' paths relative to it; None: the log directory.

    Example::

        sink = Sink(open_output("logs"), run="train")
        sink.write_file("projector_config.pbtxt", b"...")  # logs/train/projector_config.pbtxt
    """

    def __init__(self, output: Output, pending: Optional[Dict[Optional[str], List[bytes]]] = None,
                 run: Optional[str] = None) -> None:
        self.output = output
        self.run = run
        self._pending: Dict[Optional[str], List[bytes]] = {} if pending is None else pending

    def write_event(self, event: bytes, run: Optional[str] = None) -> None:
        """Queue ``event`` for the run (``run``: a run under it)."""
        self._pending.setdefault(run_under(self.run, run), []).append(event)

    def write_file(self, relpath: str, data: bytes) -> None:
        """Write ``data`` to ``relpath`` of the run atomically (temp file, then rename)."""
        self.write_files({relpath: data})

    def write_files(self, files: Mapping[str, Union[bytes, memoryview]]) -> None:
        """Write every ``{relpath: data}`` under the run's directory: all of them, or none.

        On an error nothing of this call is left behind (see the output's
        ``write_files``) and the error is raised.
        """
        if self.run is not None:
            files = {run_under(self.run, rel): data for rel, data in files.items()}
        self.output.write_files(files)
