"""Hyperparameters for TensorBoard's HParams dashboard, in the caller's own run.

The dashboard reads three summaries, each a ``Summary.Value`` whose metadata
names the ``hparams`` plugin and carries an ``HParamsPluginData`` message
(``tensorboard/plugins/hparams/plugin_data.proto``):

* ``_hparams_/experiment``: the columns (hparam names and types, metric tags);
* ``_hparams_/session_start_info``: this run's hparam values (a map of
  ``google.protobuf.Value``);
* ``_hparams_/session_end_info``: the run's status (always success: the values
  are logged when they are known).

A *session* is the run directory holding ``session_start_info``; its metric
values are the last values of the scalar tags named in ``metric_dict``, read
from that same run (or runs below it). So, unlike tensorboardX/torch, which
write these into a new timestamped sub-run, the writer logs them in the run
the caller writes to, together with the metric values as ordinary scalars:
one row per run, next to that run's curves. A run holds one session: another set
of hyperparameters logged by the same writer (a loop of trials) goes into a run
of its own under it, named by ``run_name`` or by the values (:func:`session_run_name`).

Experiment summary and several runs: TensorBoard uses the experiment summary of
*one* run (whichever it meets first) for the whole log directory. Runs that log
the same hparam names and metric tags (the usual sweep) are shown correctly; of
runs with different names, only that one run's names become columns.
``add_hparams`` writes the experiment summary unless given ``experiment=False``;
without it in any run, TensorBoard derives the columns from every run's values
(``tests/writer/summaries/test_hparams_custom_scalars.py`` shows both).
"""
from __future__ import annotations

import hashlib
import numbers
import re
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from .._format import proto as _proto
from .._common.arrays import Mean, host_float, is_ndarray
from .._common.checks import as_float, check_tag, check_utf8, describe, is_real
from .._format.wire import f_bool, f_bytes, f_double, f_str, f_varint

PLUGIN_NAME = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_INFO_TAG = "_hparams_/session_start_info"
SESSION_END_INFO_TAG = "_hparams_/session_end_info"

# tensorboard.hparams.DataType / Status
DATA_TYPE_STRING, DATA_TYPE_BOOL, DATA_TYPE_FLOAT64 = 1, 2, 3
STATUS_SUCCESS = 1

HParamValue = Union[str, bool, float]


class HParamsPayload(NamedTuple):
    """Validated, normalised arguments (plain Python values, safe to hand to the worker)."""

    hparams: Dict[str, HParamValue]
    metrics: Dict[str, float]
    domains: Dict[str, List[HParamValue]]
    start_time: float
    experiment: bool


# ------------------------------------------------------------ validation
def _hparam_value(v: Any, where: str) -> HParamValue:
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return check_utf8(v, where)
    if isinstance(v, numbers.Real):
        return as_float(v, where)
    raise TypeError(f"{where} must be a str, bool, int or float, got {describe(v)}")


def _metric_value(v: Any, where: str) -> Any:
    """A host number, or a one-element MXNet NDArray (a copy) or a :class:`Mean`: read on the writer thread."""
    if type(v) is Mean:
        return v
    if is_ndarray(v):
        if v.size != 1:
            raise ValueError(f"{where} must hold one value, got an NDArray of shape {tuple(v.shape)}")
        return v.copy()  # a later write to v must not change what is logged
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if not is_real(v):  # numpy's bool is no numbers.Real either
        raise TypeError(f"{where} must be an int or float, got {describe(v)}")
    return as_float(v, where)


def _mapping(d: Any, name: str) -> Mapping:
    if not isinstance(d, Mapping):
        raise TypeError(f"{name} must be a dict, got {describe(d)}")
    return d


def _key(k: Any, name: str) -> str:
    if not isinstance(k, str):
        raise TypeError(f"{name} keys must be str, got {describe(k)}")
    if not k:
        raise ValueError(f"{name} keys must be non-empty str, got ''")
    return check_utf8(str(k), f"{name} key")


def check_hparams(hparam_dict: Any, name: str = "hparam_dict") -> Dict[str, HParamValue]:
    """``{name: str | bool | int | float}`` (numpy scalars accepted) -> a normalised copy.
    ``name``: the argument's, for the errors (a handler's ``hparams``)."""
    d = _mapping(hparam_dict, name)
    if not d:  # TensorBoard would show an experiment without a column
        raise ValueError(f"{name} must name at least one hyperparameter, got an empty {type(d).__name__}")
    return {_key(k, name): _hparam_value(v, f"{name}[{k!r}]") for k, v in d.items()}


def check_metrics(metric_dict: Any) -> Dict[str, float]:
    """``{scalar tag: int | float}`` -> a normalised copy. Tags follow ``check_tag``."""
    d = _mapping(metric_dict, "metric_dict")
    out = {}
    for k, v in d.items():
        out[check_tag(_key(k, "metric_dict"), "metric_dict key")] = _metric_value(
            v, f"metric_dict[{k!r}]")
    return out


def _check_domains(domains: Any, hparams: Dict[str, HParamValue]) -> Dict[str, List[HParamValue]]:
    name = "hparam_domain_discrete"
    if domains is None:
        return {}
    d = _mapping(domains, name)
    out: Dict[str, List[HParamValue]] = {}
    for k, values in d.items():
        k = _key(k, name)
        if k not in hparams:
            raise ValueError(f"{name} names {k!r}, which is not in hparam_dict")
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, np.ndarray)):
            raise TypeError(f"{name}[{k!r}] must be a list of values, got {describe(values)}")
        vals = [_hparam_value(v, f"{name}[{k!r}] items") for v in values]
        kind = type(hparams[k])
        if any(type(v) is not kind for v in vals):  # a value of another type than the hparam's
            raise TypeError(f"{name}[{k!r}] must hold only {kind.__name__} values like "
                            f"hparam_dict[{k!r}], got {vals!r}")
        if hparams[k] not in vals:
            raise ValueError(f"{name}[{k!r}] must contain hparam_dict[{k!r}] = {hparams[k]!r}, "
                             f"got {vals!r}")
        out[k] = vals
    return out


def capture_hparams(hparam_dict: Any, metric_dict: Any, *,
                    hparam_domain_discrete: Optional[Mapping[str, Union[Sequence[Any], np.ndarray]]] = None,
                    experiment: bool = True) -> HParamsPayload:
    """Check every argument (caller's thread) and return plain copies for
    :func:`build_hparams`. The session starts (and ends) now.

    ``experiment``: also write the experiment summary (see the module docstring).
    """
    hparams = check_hparams(hparam_dict)
    metrics = check_metrics(metric_dict)
    domains = _check_domains(hparam_domain_discrete, hparams)
    return HParamsPayload(hparams, metrics, domains, time.time(), bool(experiment))


# ------------------------------------------------------------ encoding
def struct_value(v: HParamValue) -> bytes:
    """A ``google.protobuf.Value`` (string, bool or number) message."""
    if isinstance(v, str):
        return f_str(3, v)
    if isinstance(v, bool):
        return f_bool(4, v)  # written even when False: a oneof member is present
    return f_double(2, float(v))


def list_value(values: Sequence[HParamValue]) -> bytes:
    """A ``google.protobuf.ListValue``."""
    return b"".join(f_bytes(1, struct_value(v)) for v in values)


def _data_type(v: HParamValue) -> int:
    if isinstance(v, str):
        return DATA_TYPE_STRING
    if isinstance(v, bool):
        return DATA_TYPE_BOOL
    return DATA_TYPE_FLOAT64


def experiment_message(hparams: Mapping[str, HParamValue], metrics: Sequence[str],
                       domains: Mapping[str, Sequence[HParamValue]], time_created: float) -> bytes:
    """``tensorboard.hparams.Experiment``: hparam infos (name, type, domain) and metric infos."""
    out = f_double(3, time_created)
    for name in sorted(hparams):
        info = f_str(1, name) + f_varint(4, _data_type(hparams[name]))
        if name in domains:
            info += f_bytes(5, list_value(domains[name]))
        out += f_bytes(4, info)
    for tag in sorted(metrics):
        metric_name = f_str(2, tag)  # group "" = the session's own run
        out += f_bytes(5, f_bytes(1, metric_name))
    return out


def session_start_message(hparams: Mapping[str, HParamValue], start_time: float) -> bytes:
    """``tensorboard.hparams.SessionStartInfo`` with the ``hparams`` map (no group name:
    every run is a row of its own)."""
    out = b"".join(
        f_bytes(1, f_str(1, name) + f_bytes(2, struct_value(hparams[name])))
        for name in sorted(hparams)
    )
    return out + f_double(5, start_time)


def session_end_message(end_time: float) -> bytes:
    """``tensorboard.hparams.SessionEndInfo`` of a successful session."""
    return f_varint(1, STATUS_SUCCESS) + f_double(2, end_time)


def _plugin_value(tag: str, field: int, message: bytes) -> bytes:
    content = f_bytes(field, message)  # HParamsPluginData{version: 0 (default), <oneof>}
    meta = _proto.metadata(PLUGIN_NAME, content, data_class=_proto.DATA_CLASS_TENSOR)
    null_tensor = _proto.tensor_array(np.zeros(0, np.float32))  # as the plugin's NULL_TENSOR
    return _proto.value(tag, tensor=null_tensor, metadata=meta)


def build_hparams(tag: str, payload: HParamsPayload) -> List[bytes]:
    """Encoded ``Summary.Value`` messages for one session (worker thread; ``tag`` is unused).

    In order: the experiment (unless captured with ``experiment=False``),
    session_start_info, session_end_info, then one ``simple_value`` scalar per
    metric tag. Written in one event of the caller's run.
    """
    p = payload
    out = []
    if p.experiment:
        out.append(_plugin_value(EXPERIMENT_TAG, 2, experiment_message(
            p.hparams, list(p.metrics), p.domains, p.start_time)))
    out.append(_plugin_value(SESSION_START_INFO_TAG, 3, session_start_message(p.hparams, p.start_time)))
    out.append(_plugin_value(SESSION_END_INFO_TAG, 4, session_end_message(p.start_time)))
    out += [_proto.value(metric, simple_value=host_float(v)) for metric, v in p.metrics.items()]
    return out


def session_run_name(hparams: Mapping[str, Any]) -> str:
    """A run name for a session from its hyperparameters, ``lr=0.01,opt=sgd``: characters other
    than letters, digits and ``._=,+-`` become ``_``, and then (or past 120 characters, where the
    name is cut) a hash of the whole text follows, so that two sets never share a name
    (``opt=adam w`` and ``opt=adam_w``)."""
    text = ",".join(f"{k}={v}" for k, v in hparams.items())
    name = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text).lstrip(".") or "hparams"
    if name != text or len(name) > 120:
        name = name[:100] + "-" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return name
