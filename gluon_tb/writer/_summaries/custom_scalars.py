"""Custom Scalars dashboard layout (tensorboardX's ``add_custom_scalars`` layout form).

The layout is one ``tensorboard.Layout`` message
(``tensorboard/plugins/custom_scalar/layout.proto``) serialized into a 0-d
``DT_STRING`` tensor under the tag ``custom_scalars__config__``, with the
``custom_scalars`` plugin named in the metadata. TensorBoard merges the layouts
of every run (categories with the same title are merged, duplicate charts dropped).

Layout form::

    {category_title: {chart_title: ['Multiline', [tag_regex, ...]]
                                 | ['Margin', [value_tag, lower_tag, upper_tag]]}}

Categories and charts keep the dict's order.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Sequence, Tuple

from .._format import proto as _proto
from .._common.checks import check_utf8, describe
from .._format.wire import f_bytes, f_str

PLUGIN_NAME = "custom_scalars"
CONFIG_TAG = "custom_scalars__config__"

_KINDS = ("Multiline", "Margin")


def check_layout(layout: Any) -> List[Tuple[str, List[Tuple[str, str, List[str]]]]]:
    """Validate the layout dict; returns ``[(category, [(chart, kind, tags), ...]), ...]``."""
    if not isinstance(layout, Mapping):
        raise TypeError(f"layout must be a dict {{category: {{chart: [kind, tags]}}}}, "
                        f"got {describe(layout)}")
    if not layout:
        raise ValueError("layout must hold at least one category, got {}")
    out = []
    for cat, charts in layout.items():
        if not isinstance(cat, str):
            raise TypeError(f"layout category titles must be str, got {describe(cat)}")
        check_utf8(cat, "layout category title")
        where = f"layout[{cat!r}]"
        if not isinstance(charts, Mapping):
            raise TypeError(f"{where} must be a dict {{chart title: [kind, tags]}}, "
                            f"got {describe(charts)}")
        parsed = []
        for title, spec in charts.items():
            if not isinstance(title, str):
                raise TypeError(f"{where} chart titles must be str, got {describe(title)}")
            check_utf8(title, f"{where} chart title")
            parsed.append((title,) + _check_chart(spec, f"{where}[{title!r}]"))
        out.append((cat, parsed))
    return out


def _check_chart(spec: Any, where: str) -> Tuple[str, List[str]]:
    expect = "['Multiline', [tag_regex, ...]] or ['Margin', [value_tag, lower_tag, upper_tag]]"
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
        raise TypeError(f"{where} must be {expect}, got {describe(spec)}")
    if len(spec) != 2:  # a list, but not a pair (as Python's "too many values to unpack")
        raise ValueError(f"{where} must be {expect}, got {describe(spec)}")
    kind, tags = spec
    if not isinstance(kind, str):
        raise TypeError(f"{where}[0] must be 'Multiline' or 'Margin', got {describe(kind)}")
    if kind not in _KINDS:
        raise ValueError(f"{where}[0] must be 'Multiline' or 'Margin', got {kind!r}")
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Sequence):
        raise TypeError(f"{where}[1] must be a list of str tags, got {describe(tags)}")
    tags = list(tags)
    bad = [t for t in tags if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{where}[1] must hold non-empty str tags, got {describe(bad[0])}")
    if "" in tags:
        raise ValueError(f"{where}[1] must hold non-empty str tags, got str ''")
    for t in tags:
        check_utf8(t, f"{where}[1]")
    if kind == "Multiline" and not tags:
        raise ValueError(f"{where}[1] must name at least one tag regex, got []")
    if kind == "Margin" and len(tags) != 3:
        raise ValueError(f"{where}[1] must be [value_tag, lower_tag, upper_tag] for 'Margin', "
                         f"got {len(tags)} tags: {tags!r}")
    return kind, tags


def layout_message(layout: Any) -> bytes:
    """The encoded ``tensorboard.Layout`` (validates ``layout`` first)."""
    out = b""
    for cat, charts in check_layout(layout):
        body = f_str(1, cat)
        for title, kind, tags in charts:
            if kind == "Multiline":
                content = f_bytes(2, b"".join(f_str(1, t) for t in tags))
            else:
                series = f_str(1, tags[0]) + f_str(2, tags[1]) + f_str(3, tags[2])
                content = f_bytes(3, f_bytes(1, series))
            body += f_bytes(2, f_str(1, title) + content)
        out += f_bytes(2, body)  # Layout.version 0 is the default
    return out


def capture_custom_scalars(layout: Any) -> bytes:
    """Caller-thread form: validate and encode now (cheap); the payload is the Layout bytes."""
    return layout_message(layout)


def build_custom_scalars(tag: str, payload: bytes) -> bytes:
    """The pipeline's ``builder(tag, payload)`` form; ``tag`` is unused (always ``CONFIG_TAG``)."""
    tensor = _proto.tensor_strings([payload], shape=[])
    meta = _proto.metadata(PLUGIN_NAME, data_class=_proto.DATA_CLASS_TENSOR)
    return _proto.value(CONFIG_TAG, tensor=tensor, metadata=meta)
