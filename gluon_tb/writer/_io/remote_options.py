"""How a remote log directory is written (:class:`RemoteOptions`), and ``SummaryWriter``'s
``storage_options``/``remote`` arguments checked against its ``logdir``.

The defaults can come from the environment (``$GLUON_TB_PART_BYTES``,
``$GLUON_TB_PART_SECS``, ``$GLUON_TB_REMOTE_TIMEOUT``, ``$GLUON_TB_CLOSE_TIMEOUT``), read
when the options are made (so a handler's writers take them too); ``remote.py`` says what
a part is and why the log directory is written in parts.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from .._common.checks import (check_positive_int, check_storage_options, describe, is_python_number,
                             is_remote)


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be a number, got {raw!r}") from None


@dataclass(frozen=True)
class RemoteOptions:
    """How a remote log directory is written.

    Args:
        part_bytes: upload a part once this many bytes are buffered
            (default 16 MiB, or ``$GLUON_TB_PART_BYTES``).
        part_secs: upload a part once its oldest record is this old
            (default 30 s, or ``$GLUON_TB_PART_SECS``).
        max_buffer_bytes: most bytes kept in memory per run while the store
            fails; past it they are dropped (default ``4 * part_bytes``).
        retries: attempts per upload before the error is reported.
        retry_wait: seconds before the second attempt, doubled after each.
        timeout: seconds one attempt (one request to the store) may take; a store that
            does not answer by then fails that attempt (default 30; fsspec's asynchronous
            file systems, ``s3://``, ``gs://``, ``az://``, ``http://``, honour it), or
            ``$GLUON_TB_REMOTE_TIMEOUT``.
        close_timeout: the most seconds ``close()``, and so the end of a handler's ``fit``,
            waits for the uploads (default 30, or ``$GLUON_TB_CLOSE_TIMEOUT``). Past it, it returns, raising
            :class:`RemoteWriteError` that names the runs and the events not uploaded,
            which are given up on; a stalled store can hold a writer no longer.
        storage_options: keyword arguments of the fsspec file system
            (``{"endpoint_url": ..., "key": ..., "secret": ...}`` for s3fs).
    """

    part_bytes: int = 0
    part_secs: float = 0.0
    max_buffer_bytes: int = 0
    retries: int = 3
    retry_wait: float = 0.5
    timeout: Optional[float] = None
    close_timeout: Optional[float] = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        put = object.__setattr__
        if not self.part_bytes:
            put(self, "part_bytes", int(_env_number("GLUON_TB_PART_BYTES", 16 << 20)))
        if not self.part_secs:
            put(self, "part_secs", _env_number("GLUON_TB_PART_SECS", 30.0))
        if self.timeout is None:
            put(self, "timeout", _env_number("GLUON_TB_REMOTE_TIMEOUT", 30.0))
        if self.close_timeout is None:
            put(self, "close_timeout", _env_number("GLUON_TB_CLOSE_TIMEOUT", 30.0))
        if not self.max_buffer_bytes:
            put(self, "max_buffer_bytes", 4 * self.part_bytes)
        # a wrong type is a TypeError, a number out of range a ValueError (checks.py)
        for name in ("part_bytes", "max_buffer_bytes", "retries"):
            check_positive_int(getattr(self, name), name)
        for name in ("part_secs", "retry_wait", "close_timeout"):
            v = getattr(self, name)
            if not is_python_number(v):
                raise TypeError(f"{name} must be a non-negative number, got {describe(v)}")
            if not v >= 0 or v == float("inf"):
                raise ValueError(f"{name} must be a non-negative number, got {v!r}")
        if not is_python_number(self.timeout):
            raise TypeError(f"timeout must be a positive number of seconds, got {describe(self.timeout)}")
        if not 0 < self.timeout < float("inf"):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.max_buffer_bytes < self.part_bytes:
            raise ValueError(f"max_buffer_bytes must be >= part_bytes ({self.part_bytes}), "
                             f"got {self.max_buffer_bytes}")
        if not isinstance(self.storage_options, Mapping):
            raise TypeError(f"storage_options must be a dict, got {type(self.storage_options).__name__}")


def remote_options(logdir: str, storage_options: Any, remote: Any) -> Optional[RemoteOptions]:
    """Check ``storage_options``/``remote``; the RemoteOptions for a URL logdir, else None."""
    if remote is not None and not isinstance(remote, RemoteOptions):
        raise TypeError(f"remote must be a RemoteOptions, got {describe(remote)}")
    check_storage_options(storage_options, logdir, remote, names="storage_options and remote")
    if not is_remote(logdir):
        return None
    if storage_options:
        remote = replace(remote or RemoteOptions(), storage_options=dict(storage_options))
    return remote
