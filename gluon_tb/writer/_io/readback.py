"""A minimal reader of the scalar events gluon_tb itself wrote, and ``export_scalars``."""
from __future__ import annotations

import json
from typing import Dict, List, Optional, cast

from .._format.record import read_records
from .._format.wire import fields

def export_key(logdir: str, run: Optional[str], tag: str) -> str:
    """mxboard's key of a scalar curve: ``<logdir>/<tag>`` for the writer's own run;
    ``<logdir>/<run>`` for the run of a named curve (``<tag>/<name>``, mxboard's
    ``add_scalar(tag, {name: v})``) or of ``add_scalars`` (``<main_tag>_<name>``),
    whose events all carry ``tag``; ``<logdir>/<run>/<tag>`` for any other tag.
    Joined with ``/`` as mxboard does, ``logdir`` as the caller gave it."""
    if run is None:
        return f"{logdir}/{tag}"
    if run.startswith(tag + "/") or run.startswith(tag.replace("/", "_") + "_"):
        return f"{logdir}/{run}"
    return f"{logdir}/{run}/{tag}"


def export_scalars(logdir: str, paths: Dict[Optional[str], str], out_path: str) -> None:
    """Write :func:`scalars_of_files` as JSON to ``out_path`` (``SummaryWriter.export_scalars``)."""
    out = scalars_of_files(logdir, paths)
    with open(out_path, "w") as f:
        json.dump(out, f)


def scalars_of_files(logdir: str, paths: Dict[Optional[str], str]) -> Dict[str, List[list]]:
    """``{export_key: [[wall_time, step, value], ...]}`` for every simple_value event."""
    out: Dict[str, List[list]] = {}
    for run, path in paths.items():
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
                        out.setdefault(export_key(logdir, run, tag), []).append([wall, step, simple])
    return out
