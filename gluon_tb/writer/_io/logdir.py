"""Log directories: a local path or a URL, made at once, and run names that stay inside them."""
from __future__ import annotations

import os
from typing import Any, Optional, overload

from .._common.checks import check_name_length, check_utf8, describe


def local_path(logdir: str) -> str:
    """``logdir`` without a leading ``file://``."""
    return logdir[len("file://"):] if logdir[:7].lower() == "file://" else logdir


def make_logdir(path: str) -> bool:
    """Create a local log directory now, as mxboard did; False when it cannot be.

    Best effort: a read-only parent or a file in the way is not an error here but
    at the first write, where ``EventFile`` raises it naming the directory (so a
    handler's ``on_error="warn"`` policy, which wraps the writes, sees it too).
    """
    try:
        os.makedirs(path, exist_ok=True)
        return True
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return False


#: a run's name under its log directory, at most: bytes (UTF-8) and levels. Linux refuses a path
#: past 4096 bytes (``PATH_MAX``), and ``os.makedirs`` recurses once a level: a name past these
#: failed only at the first write, as ENAMETOOLONG or a RecursionError of the writer thread.
#: 1024 bytes leave room for the log directory and the event file's name.
MAX_RUN_BYTES = 1024
MAX_RUN_DEPTH = 64


def check_run_size(run: str, arg: str) -> str:
    """``run`` (a relative run name, joined already: a run writer's run under its parent's, a
    named curve's under its tag) within :data:`MAX_RUN_BYTES` and :data:`MAX_RUN_DEPTH`.
    Raises ValueError naming ``arg`` otherwise."""
    n = len(run) if run.isascii() else len(run.encode("utf-8", "surrogatepass"))
    depth = run.count("/") + 1
    if n > MAX_RUN_BYTES or depth > MAX_RUN_DEPTH:
        raise ValueError(f"{arg} makes a run directory of {n} bytes and {depth} levels under the log "
                         f"directory; at most {MAX_RUN_BYTES} bytes and {MAX_RUN_DEPTH} levels fit in "
                         f"a path: {describe(run)}")
    return run


def check_run_name(name: Any, arg: str) -> str:
    """A relative run path made of plain components: no '', '.', '..', no leading '/',
    no backslash or NUL, UTF-8, each component at most 255 bytes (``NAME_MAX``), the whole
    within :func:`check_run_size`'s bound. Raises ValueError naming ``arg`` otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a str, got {describe(name)}")
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"{arg} must be a relative name without '..', empty parts, a leading '/', "
                         f"a backslash or a NUL, got {name!r}")
    check_utf8(name, arg)
    for part in parts:
        check_name_length(part, arg)
    return check_run_size(name, arg)


@overload
def run_under(parent: Optional[str], run: str) -> str: ...
@overload
def run_under(parent: Optional[str], run: None) -> Optional[str]: ...
def run_under(parent: Optional[str], run: Optional[str]) -> Optional[str]:
    """The run (or a path) ``run`` under the run ``parent``, as one relative name: None stands
    for the log directory itself on either side."""
    if parent is None:
        return run
    return parent if run is None else f"{parent}/{run}"
