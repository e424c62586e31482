"""``SummaryWriter``'s constructor arguments, checked before anything starts.

Each wrong argument is a ``TypeError`` (a wrong type) or ``ValueError`` (a wrong
value of the right type) naming it, what was expected and what was received,
raised before a thread, file or lock exists.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from ._common.checks import (check_choice, check_logdir, check_name_length, check_positive_int,
                             check_positive_number, check_utf8, describe, is_python_int, is_remote)
from ._io.event_file import event_file_name


def check_writer_args(logdir: Any, max_queue: Any, flush_secs: Any, filename_suffix: Any,
                      max_queue_bytes: Any, on_full: Any, worker_nice: Any) -> str:
    """Check ``SummaryWriter``'s arguments; the log directory as a str."""
    logdir = check_logdir(logdir)  # a URL is opened by the Pipeline
    check_positive_int(max_queue, "max_queue")
    check_positive_number(flush_secs, "flush_secs")  # the handlers' check of their flush_secs too
    if filename_suffix is not None and not isinstance(filename_suffix, str):
        raise TypeError(f"filename_suffix must be a str, got {describe(filename_suffix)}")
    if filename_suffix and (os.sep in filename_suffix or "/" in filename_suffix or "\x00" in filename_suffix):
        raise ValueError(f"filename_suffix must not contain a path separator or NUL, got {filename_suffix!r}")
    if filename_suffix:  # the longest event file name: 10-digit time, an 8-digit counter
        check_utf8(filename_suffix, "filename_suffix")
        check_name_length(event_file_name(9999999999, 99999999, ""), "filename_suffix", filename_suffix)
    if not is_remote(logdir):
        if "\x00" in logdir:
            raise ValueError(f"logdir must not contain a NUL character, got {logdir!r}")
        for part in logdir.split(os.sep):
            check_name_length(part, "logdir")  # each directory of it, made by the writer thread
    if max_queue_bytes is not None:
        if not is_python_int(max_queue_bytes):
            raise TypeError(f"max_queue_bytes must be None or an int >= 1024, got {describe(max_queue_bytes)}")
        if max_queue_bytes < 1024:
            raise ValueError(f"max_queue_bytes must be None or an int >= 1024, got {describe(max_queue_bytes)}")
    check_choice(on_full, "on_full", ("block", "drop"))
    check_nice(worker_nice)
    return logdir


def check_nice(worker_nice: Optional[int]) -> None:
    if worker_nice is None:
        return
    if not is_python_int(worker_nice):
        raise TypeError(f"worker_nice must be None or an int from 0 to 19, got {describe(worker_nice)}")
    if not 0 <= worker_nice <= 19:
        raise ValueError(f"worker_nice must be None or an int from 0 to 19, got {describe(worker_nice)}")
