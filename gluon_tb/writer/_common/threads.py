"""Thread priority: the background threads (the writer's, ``grad_health``'s reader) run at a low
one, so that they take the CPU the training loop leaves idle and never preempt it."""
from __future__ import annotations

import os
import sys

__all__ = ["lower_thread_priority", "BACKGROUND_NICE"]

#: the nice value of the background threads (measured in benchmarks/RESULTS-notes.md: on a CPU that
#: MXNet's operators keep busy, nice 15-19 keeps the writer's work out of the training loop's way)
BACKGROUND_NICE = 19


def lower_thread_priority(nice: int) -> bool:
    """Raise the calling thread's nice value to ``nice`` (never lower it); True if done.

    Linux only: there a nice value is a thread's own (``setpriority(PRIO_PROCESS, 0)``
    means the calling thread); elsewhere the same call would slow the whole process.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        return True
    except (AttributeError, OSError):  # a sandbox that forbids it: normal priority then
        return False
