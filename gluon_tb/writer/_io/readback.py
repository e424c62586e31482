"""A minimal reader of the scalar events gluon_tb itself wrote, and ``export_scalars``."""
from __future__ import annotations

import json
from typing import AbstractSet, Dict, List, Optional, cast

from .._format.record import read_records
from .._format.wire import fields

def export_key(logdir: str, run: Optional[str], tag: str, made: bool = False) -> str:
    """mxboard's key of a scalar curve: ``<logdir>/<tag>`` for the writer's own run;
    ``<logdir>/<run>`` for the run of a named curve (``<tag>/<name>``, mxboard's
    ``add_scalar(tag, {name: v})``) or of ``add_scalars`` (``<main_tag>_<name>``),
    whose events all carry ``tag``; ``<logdir>/<run>/<tag>`` for any other tag, and always
    for a run made by ``for_run`` (``made``): ``for_run("acc_val")``'s tag ``acc`` is not a
    curve of ``add_scalars("acc", {"val": ...})``, which mxboard's names alone cannot tell.
    Joined with ``/`` as mxboard does, ``logdir`` as the caller gave it."""
    if run is None:
        return f"{logdir}/{tag}"
    if not made and (run.startswith(tag + "/") or run.startswith(tag.replace("/", "_") + "_")):
        return f"{logdir}/{run}"
    return f"{logdir}/{run}/{tag}"


def export_scalars(logdir: str, paths: Dict[Optional[str], str], out_path: str,
                   made: AbstractSet[Optional[str]] = frozenset()) -> None:
    """Write :func:`scalars_of_files` as JSON to ``out_path`` (``SummaryWriter.export_scalars``)."""
    out = scalars_of_files(logdir, paths, made)
    with open(out_path, "w") as f:
        json.dump(out, f)


def scalars_of_files(logdir: str, paths: Dict[Optional[str], str],
                     made: AbstractSet[Optional[str]] = frozenset()) -> Dict[str, List[list]]:
    """``{export_key: [[wall_time, step, value], ...]}`` for every simple_value event; ``made``:
    the runs made by ``for_run`` (keyed ``<logdir>/<run>/<tag>`` always)."""
    out: Dict[str, List[list]] = {}
    for run, path in paths.items():
        is_made = run in made
        with open(path, "rb") as f:
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
                        out.setdefault(export_key(logdir, run, tag, is_made), []).append([wall, step, simple])
    return out
