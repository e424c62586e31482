"""A minimal reader of the scalar events gluon_tb itself wrote, and ``export_scalars``."""
from __future__ import annotations

import json
from typing import AbstractSet, Dict, List, Optional, cast

from .._format.record import read_records
from .._format.wire import fields

def export_key(logdir: str, run: Optional[str], tag: str, made: AbstractSet[Optional[str]] = frozenset()) -> str:
    """mxboard's key of a scalar curve: ``<logdir>/<tag>`` for the writer's own run;
    ``<logdir>/<run>`` for the run of a named curve (``<tag>/<name>``, mxboard's
    ``add_scalar(tag, {name: v})``) or of ``add_scalars`` (``<main_tag>_<name>``),
    whose events all carry ``tag``, also under a run made by ``for_run``; ``<logdir>/<run>/<tag>``
    for any other tag, and always for a run made by ``for_run`` (in ``made``):
    ``for_run("acc_val")``'s tag ``acc`` is not a curve of ``add_scalars("acc", {"val": ...})``,
    which mxboard's names alone cannot tell. Joined with ``/`` as mxboard does, ``logdir`` as
    the caller gave it."""
    if run is None:
        return f"{logdir}/{tag}"
    if run in made:
        return f"{logdir}/{run}/{tag}"
    under = max((m for m in made if m is not None and run.startswith(m + "/")), key=len, default=None)
    rest = run if under is None else run[len(under) + 1:]  # the curve's run under a for_run writer's
    if rest.startswith(tag + "/") or rest.startswith(tag.replace("/", "_") + "_"):
        return f"{logdir}/{run}"
    return f"{logdir}/{run}/{tag}"


def export_scalars(logdir: str, paths: Dict[Optional[str], List[str]], out_path: str,
                   made: AbstractSet[Optional[str]] = frozenset(), start: Optional[Dict[str, int]] = None) -> None:
    """Write :func:`scalars_of_files` as JSON to ``out_path`` (``SummaryWriter.export_scalars``)."""
    out = scalars_of_files(logdir, paths, made, start)
    with open(out_path, "w") as f:
        json.dump(out, f)


def scalars_of_files(logdir: str, paths: Dict[Optional[str], List[str]],
                     made: AbstractSet[Optional[str]] = frozenset(),
                     start: Optional[Dict[str, int]] = None) -> Dict[str, List[list]]:
    """``{export_key: [[wall_time, step, value], ...]}`` for every simple_value event of each run's
    event files, in order; ``made``: the runs made by ``for_run`` (keyed ``<logdir>/<run>/<tag>``
    always); ``start``: ``{path: byte offset}`` where reading a file begins (``clear_scalar_dict``)."""
    out: Dict[str, List[list]] = {}
    for run, files in paths.items():
        for path in files:
            _scalars_of_file(logdir, run, path, made, (start or {}).get(path, 0), out)
    return out


def _scalars_of_file(logdir: str, run: Optional[str], path: str, made: AbstractSet[Optional[str]], offset: int,
                     out: Dict[str, List[list]]) -> None:
    keys: Dict[str, str] = {}  # tag -> its export key: the same for every event of the run
    with open(path, "rb") as f:
        f.seek(offset)
        for rec in read_records(f):
            # field values as decoded: a number, or bytes for a message or a string
            wall: object = 0.0
            step: object = 0
            summary: object = None
            for fn, v in fields(rec):
                if fn == 1:
                    wall = v
                elif fn == 2:
                    step = v
                elif fn == 5:
                    summary = v
            if summary is None:
                continue
            for fn, value in fields(cast(bytes, summary)):  # Event.summary: a message
                if fn != 1:
                    continue
                tag: Optional[str] = None
                simple: object = None
                for vf, vv in fields(cast(bytes, value)):  # Summary.value: a message
                    if vf == 1:
                        tag = cast(bytes, vv).decode("utf-8")  # Summary.Value.tag: a string
                    elif vf == 2:
                        simple = vv
                if tag is not None and simple is not None:
                    key = keys.get(tag)
                    if key is None:
                        key = keys[tag] = export_key(logdir, run, tag, made)
                    out.setdefault(key, []).append([wall, step, simple])
