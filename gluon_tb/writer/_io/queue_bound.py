"""How much the writer's queue may hold (``max_queue_bytes``) and what a queued scalar costs.

The default bound is a share of the memory the process may use (a container's limit, where
lower than the machine's), so a writer on a small machine never holds much of it.
"""
from __future__ import annotations

import os

# bytes one queued scalar costs: its tuple, floats, int and deque slot (tracemalloc: 168 for
# today's 5-field tuple; kept at the 176 of the former 6-field one, so the bound stays as it was)
SCALAR_COST = 176
# scalars alone never hold more of the queue than this: a backlog of scalars only delays them,
# while a bound that large arrays fit in lets a caller hand over several without waiting
SCALAR_BOUND = 64 << 20


CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def memory_limit() -> int:
    """The bytes of memory this process may use: the machine's, or its cgroup's limit where
    lower (a container); 0 when unknown."""
    try:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        limit = 0
    for path in CGROUP_LIMITS:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and (limit == 0 or 0 < int(text) < limit):
            limit = int(text)
    return limit


def default_max_queue_bytes() -> int:
    """``max_queue_bytes`` when none is given: 1/32 of :func:`memory_limit`, at least 64 MiB
    and at most 1 GiB."""
    return min(1 << 30, max(64 << 20, memory_limit() // 32))


DEFAULT_MAX_QUEUE_BYTES = default_max_queue_bytes()
