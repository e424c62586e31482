"""Argument checks shared by every layer: what a wrong value's error message says, and the
common types (an int that is not a bool, a tag, a step, a wall time).

One vocabulary, in the writer and the handlers alike: a value of the wrong type (a str where a
number is wanted, a bool where an int is, a list where a dict is) is a ``TypeError``; a value of
the right type but out of range or not one of the choices is a ``ValueError``. Each message names
the argument, what it must be and the value received (:func:`describe`)."""
from __future__ import annotations

import math
import numbers
import os
import re
import warnings
from typing import TYPE_CHECKING, Any, Literal, Mapping, Optional, Tuple, Union, overload

import numpy as np

from .arrays import is_ndarray

if TYPE_CHECKING:  # typing.TypeGuard is Python 3.10+; annotations here are never evaluated
    from typing import TypeGuard

MAX_TAG_LEN = 4096
MAX_STEP = 2**63 - 1  # an Event's step is an int64: a larger one would not decode
# bytes in one file or directory name: os.pathconf(d, "PC_NAME_MAX") is 255 on ext4, xfs, btrfs,
# tmpfs, overlayfs and ZFS (Linux's NAME_MAX), and APFS and NTFS hold 255 characters; a longer
# name fails with "File name too long" (ENAMETOOLONG) when the writer thread makes it
NAME_MAX = 255


def step_too_large(name: str, step: Any) -> ValueError:
    """The error for a step past :data:`MAX_STEP` (``global_step``, ``purge_step``, ``initial_step``)."""
    return ValueError(f"{name} must be at most 2**63 - 1 (an event's step is an int64), got {step!r}")
Number = Union[int, float, np.number]  # what a numeric argument (sample_rate, fps, a metric) may be


def describe(x: Any) -> str:
    """A short description of a received value for error messages."""
    if isinstance(x, np.ndarray) or is_ndarray(x):
        return f"{type(x).__name__} of shape {tuple(x.shape)} and dtype {np.dtype(x.dtype).name}"
    try:
        r = repr(x)
    except ValueError:  # an int past Python's limit on digits
        r = f"<{x.bit_length()} bits>" if isinstance(x, int) else "<no repr>"
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{type(x).__name__} {r}"


def is_int(x: Any) -> bool:
    """An integer (Python, numpy) that is not a bool."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def is_real(x: Any) -> bool:
    """A real number (int, float, numpy scalar) that is not a bool."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def as_float(value: Any, name: str) -> float:
    """``float(value)``; a ``ValueError`` naming ``name`` for an int beyond float64's range
    (Python raises ``OverflowError``)."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a number within float64's range, got an int of "
                         f"{int(value).bit_length()} bits") from None


def is_python_int(value: Any) -> TypeGuard[int]:
    """An int that is not a bool (:func:`is_int`) and a Python ``int``: for arguments (queue sizes,
    periods) that refuse numpy integers, where the summary arguments take them."""
    return is_int(value) and isinstance(value, int)


def is_python_number(value: Any) -> TypeGuard[Union[int, float]]:
    """A real number that is not a bool (:func:`is_real`) and a Python ``int`` or ``float``
    (``numpy.float64`` is one; other numpy scalars are not)."""
    return is_real(value) and isinstance(value, (int, float))


def check_positive_int(value: Any, name: str) -> int:
    """A Python int >= 1 (:func:`is_python_int`: not a bool, not a numpy integer). A value of
    another type is a ``TypeError``; an int below 1 a ``ValueError``; both name ``name``."""
    if not is_python_int(value):
        raise TypeError(f"{name} must be a positive int, got {describe(value)}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {describe(value)}")
    return value


def check_positive_number(value: Any, name: str) -> float:
    """A Python int or float > 0 (:func:`is_python_number`), as a float. A value of another type
    (a str, a bool, None) is a ``TypeError``; a number that is not > 0 (NaN too) a ``ValueError``."""
    if not is_python_number(value):
        raise TypeError(f"{name} must be a positive number, got {describe(value)}")
    if not value > 0:
        raise ValueError(f"{name} must be a positive number, got {describe(value)}")
    return float(value)


def check_seconds(value: Any, name: str) -> Optional[float]:
    """None, or a Python int or float >= 0 (:func:`is_python_number`), as a float: a wait's bound.
    A value of another type is a ``TypeError``; a negative number or NaN a ``ValueError``."""
    if value is None:
        return None
    if not is_python_number(value):
        raise TypeError(f"{name} must be None or a number of seconds >= 0, got {describe(value)}")
    if not value >= 0:
        raise ValueError(f"{name} must be None or a number of seconds >= 0, got {describe(value)}")
    return float(value)


def check_choice(value: Any, name: str, choices: Tuple[str, ...]) -> str:
    """One of the str ``choices``: another type is a ``TypeError``, another str a ``ValueError``."""
    expect = f"one of {', '.join(map(repr, choices))}"
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {expect}, got {describe(value)}")
    if value not in choices:
        raise ValueError(f"{name} must be {expect}, got {describe(value)}")
    return value


@overload
def check_name(value: Any, name: str, expect: str) -> str: ...
@overload
def check_name(value: Any, name: str, expect: str, *, allow_none: Literal[True]) -> Optional[str]: ...


def check_name(value: Any, name: str, expect: str, *, allow_none: bool = False) -> Optional[str]:
    """A non-empty str naming something (a layer, a block, a tag), or ``None`` when ``allow_none``:
    another type is a ``TypeError``, ``""`` a ``ValueError``; both say ``<name> must be <expect>, got ...``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {expect}, got {describe(value)}")
    if not value:
        raise ValueError(f"{name} must be {expect}, got {describe(value)}")
    return value


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {describe(value)}")
    return value


def check_utf8(s: str, name: str) -> str:
    """``s`` encodes as UTF-8: not so a str holding a lone surrogate (``os.fsdecode`` of a file
    name that is not UTF-8 makes them), which no event file can hold."""
    if not s.isascii():  # O(1): ASCII is always fine
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{name} must be encodable as UTF-8, got {describe(s)} (a lone surrogate "
                             f"{s[e.start]!r} at position {e.start})") from None
    return s


def check_name_length(component: str, name: str, extra: str = "") -> None:
    """``component + extra`` fits in one file or directory name: at most :data:`NAME_MAX` bytes
    as the file system stores it (UTF-8). ``extra``: what the writer adds to it (a file
    extension). Raises ValueError naming ``name`` otherwise."""
    whole = component + extra
    try:
        n = len(whole) if whole.isascii() else len(os.fsencode(whole))
    except UnicodeEncodeError as e:  # a lone surrogate that no file name holds
        raise ValueError(f"{name} must be encodable as a file name, got {describe(component)} "
                         f"(a lone surrogate at position {e.start})") from None
    if n > NAME_MAX:
        raise ValueError(f"{name} must fit in one file or directory name of at most {NAME_MAX} "
                         f"bytes in UTF-8, got a name of {n} bytes: {describe(whole)}")


def check_file_name(value: Any, name: str, extra: str = "") -> str:
    """A str that can be one file or directory name: no NUL, '/' or '\\', not '.' or '..',
    encodable as UTF-8, and at most :data:`NAME_MAX` bytes with ``extra``. Raises a
    TypeError/ValueError naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {describe(value)}")
    if not value or "/" in value or "\\" in value or "\x00" in value or value in (".", ".."):
        raise ValueError(f"{name} must be a plain file name (no '/', '\\' or NUL, not empty, "
                         f"'.' or '..'), got {value!r}")
    check_utf8(value, name)
    check_name_length(value, name, extra)
    return value


def check_tag(tag: Any, name: str = "tag") -> str:
    """A tag is a non-empty str of at most ``MAX_TAG_LEN`` characters, encodable as UTF-8."""
    if type(tag) is not str:
        if isinstance(tag, str):
            return check_tag(str(tag), name)
        raise TypeError(f"{name} must be a str, got {describe(tag)}")
    if not tag:
        raise ValueError(f"{name} must be a non-empty str, got ''")
    if len(tag) > MAX_TAG_LEN:
        raise ValueError(f"{name} must be at most {MAX_TAG_LEN} characters, got {len(tag)}")
    return check_utf8(tag, name)


@overload
def check_step(step: None, name: str = ...) -> None: ...
@overload
def check_step(step: int, name: str = ...) -> int: ...
@overload
def check_step(step: object, name: str = ...) -> Optional[int]: ...
def check_step(step: Any, name: str = "global_step") -> Optional[int]:
    """``None`` or an int from 0 to :data:`MAX_STEP` (numpy and 0-d integer arrays accepted).

    A finite non-negative float is truncated with ``int()``, as mxboard did (its own scalar
    demo passes ``global_step=x * 100``), with a ``UserWarning`` (shown once per calling line).
    """
    if step is None:
        return None
    if type(step) is int:
        if step < 0:
            raise ValueError(f"{name} must be a non-negative int, got {step}")
        if step > MAX_STEP:
            raise step_too_large(name, step)
        return step
    if isinstance(step, bool):
        raise TypeError(f"{name} must be a non-negative int, got bool {step!r}")
    if isinstance(step, numbers.Integral):
        return check_step(int(step), name)
    if isinstance(step, np.ndarray) and step.shape == () and step.dtype.kind in "iu":
        return check_step(int(step), name)
    if isinstance(step, (float, np.floating)):
        if not (math.isfinite(step) and step >= 0):
            raise ValueError(f"{name} must be a non-negative int, got {step!r}")
        if step >= 2.0**63:
            raise step_too_large(name, step)
        # one message text: Python's default filter shows it once per calling line
        warnings.warn(f"{name} is a float: it is truncated to an int (as mxboard did); pass an int",
                      UserWarning, stacklevel=3)
        return int(step)
    raise TypeError(f"{name} must be a non-negative int, got {describe(step)}")


@overload
def check_walltime(walltime: None) -> None: ...
@overload
def check_walltime(walltime: float) -> float: ...
@overload
def check_walltime(walltime: object) -> Optional[float]: ...
def check_walltime(walltime: Any) -> Optional[float]:
    if walltime is None:
        return None
    if not is_real(walltime):
        raise TypeError(f"walltime must be a number of seconds since the epoch, got {describe(walltime)}")
    wall = as_float(walltime, "walltime")
    if not math.isfinite(wall):
        raise ValueError(f"walltime must be a finite number of seconds since the epoch, got {describe(walltime)}")
    return wall


URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")  # group 1: the protocol


def is_remote(logdir: str) -> bool:
    """True for a URL other than ``file://`` (those are local paths)."""
    m = URL.match(logdir)
    return m is not None and m.group(1).lower() != "file"


def check_logdir(logdir: Any, name: str = "logdir") -> str:
    """A non-empty str or ``os.PathLike``, as a str; not a URL that lost a slash
    (``Path("s3://b/run")`` gives ``s3:/b/run``)."""
    if not isinstance(logdir, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, got {describe(logdir)}")
    path = os.fspath(logdir)
    if not isinstance(path, str):
        raise TypeError(f"{name} must be a str or os.PathLike of a str, got {describe(path)}")
    if not path:
        raise ValueError(f"{name} must be a non-empty path, got ''")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+:/(?!/)", path):
        raise ValueError(f"{name} looks like a URL with one slash, got {path!r}; "
                         "pass URLs as a str, like 's3://bucket/run'")
    if not URL.match(path):
        _no_file_in_the_way(path, name)
    return path


def _no_file_in_the_way(path: str, name: str) -> None:
    """A local log directory, or its nearest existing ancestor, that is a file (not a directory)
    can never be written into: said now, not at the first write (a handler's is an epoch later).
    Anything else the OS may refuse (permissions, a missing mount) is left to the first write."""
    at = os.path.abspath(path)
    while True:
        is_dir = os.path.isdir(at) if os.path.exists(at) else None  # (neither raises: False instead)
        if is_dir is False:
            what = "it is a file" if at == os.path.abspath(path) else f"{at!r} is a file"
            raise ValueError(f"{name} must be a directory (or a path where one can be made), got {path!r}: {what}")
        if is_dir:
            return
        parent = os.path.dirname(at)
        if parent == at:
            return
        at = parent


def check_storage_options(storage_options: Any, logdir: str, remote: Any = None,
                          names: str = "storage_options") -> None:
    """``storage_options`` is None or a dict; it (and ``remote``, for the writer) may be given
    only for a URL ``logdir``. ``names``: the arguments the message names."""
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict of fsspec options, got {describe(storage_options)}")
    if (storage_options or remote is not None) and not is_remote(logdir):
        raise ValueError(f"{names} apply to a URL logdir (s3://...), got the local path {logdir!r}")
