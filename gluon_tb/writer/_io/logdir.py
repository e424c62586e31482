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


def check_run_name(name: Any, arg: str) -> str:
    """A relative run path made of plain components: no '', '.', '..', no leading '/',
    no backslash or NUL, UTF-8, each component at most 255 bytes (``NAME_MAX``). Raises
    ValueError naming ``arg`` otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a str, got {describe(name)}")
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"{arg} must be a relative name without '..', empty parts or a "
                         f"leading '/', got {name!r}")
    check_utf8(name, arg)
    for part in parts:
        check_name_length(part, arg)
    return name


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
