"""The ``conv_filters=`` option: a Conv2D's filters and feature maps, once per epoch.

Which layer: a Conv2D of the Gluon net named by ``conv_filters`` (its block name, with or
without the net's prefix), or the first one for ``conv_filters=True``; the Module callback
finds a 2-D ``Convolution`` of its symbol instead (``_module/insight.py``). The first input of
the first training batch is kept (copied on MXNet's engine to the net's device) and used for
the feature maps of every epoch, so the maps of different epochs are comparable; a
:class:`~gluon_tb.handlers._mxnet.blocks.LayerProbe` reads the layer's output for it. The images
are built by :mod:`gluon_tb.handlers._options.conv_filter_images`; :func:`write_filters` hands them to the
writer, for both adapters.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Union

from ...writer import SummaryWriter
from ...writer._common.checks import describe
from .conv_filter_images import feature_map_images, filter_images
from .._mxnet.blocks import LayerProbe, context_of, find_block, first_of
from .._common.run_writers import TRAIN, RunWriters


def check_conv_filters(value: Any) -> Union[bool, str]:
    if isinstance(value, bool) or (isinstance(value, str) and value):
        return value
    if value == "":
        raise ValueError("conv_filters must be a bool or the name of a Conv2D layer, got str ''")
    raise TypeError(f"conv_filters must be a bool or the name of a Conv2D layer, got {describe(value)}")


def pick_conv(net: Any, layer: Optional[str] = None) -> Any:
    """The Conv2D of ``net`` named ``layer``, or its first Conv2D."""
    from mxnet.gluon import nn

    if layer is not None:
        conv = find_block(net, layer, "layer")
        if not isinstance(conv, nn.Conv2D):
            raise ValueError(f"layer {layer!r} must be a Conv2D, got a {type(conv).__name__}")
        return conv
    conv = first_of(net, nn.Conv2D)
    if conv is None:
        raise ValueError("the network has no Conv2D layer")
    return conv


class ConvFilters:
    """Logs ``conv_filters/<layer>`` and ``feature_maps/<layer>`` in run ``train`` at each epoch."""

    def __init__(self, value: Union[bool, str], out: RunWriters, max_filters: int = 64) -> None:
        self._layer: Optional[str] = value if isinstance(value, str) else None
        self._out, self._max = out, max_filters
        self._conv: Any = None
        self._net: Any = None
        self._probe: Optional[LayerProbe] = None
        self._sample: Any = None

    def train_begin(self, net: Any) -> None:
        if net is not self._net:
            self.close()
            self._net, self._conv = net, pick_conv(net, self._layer)  # ValueError names the layer

    def see_batch(self, batch: Any) -> None:
        """Keep the first input of the first ``[data, label]`` batch ever seen."""
        if self._sample is not None or not isinstance(batch, (list, tuple)) or not batch:
            return
        x = batch[0]
        if not hasattr(x, "shape") or len(x.shape) != 4:
            self._out.say_once("maps", f"gluon_tb: inputs of shape {getattr(x, 'shape', None)} are "
                               "not N×C×H×W; feature maps are not logged", logging.WARNING)
            self._sample = False
            return
        self._sample = x[:1].as_in_context(context_of(self._net)).copy()

    def epoch_end(self, epoch: int) -> None:
        if self._conv is None:
            return
        self._out.call(TRAIN, self._log, epoch)

    def _log(self, w: SummaryWriter, epoch: int) -> None:
        maps = None
        if self._sample is not None and self._sample is not False:
            if self._probe is None:
                self._probe = LayerProbe(self._net, self._conv)
            maps, _ = self._probe(self._sample)
        write_filters(w, self._conv.name, self._conv.weight.data(), maps, epoch, self._max)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def write_filters(w: SummaryWriter, name: str, weight: Any, maps: Any, step: int, max_filters: int = 64, *,
                  zoom: Optional[int] = None) -> None:
    """``conv_filters/<name>`` from a convolution's ``weight`` (O, I, kh, kw) and, unless ``maps``
    is None, ``feature_maps/<name>`` from one sample's maps (1, C, H, W); NDArray ops only.
    Shared by :class:`ConvFilters` and the Module callback (``_module/insight.py``); ``zoom``:
    see :mod:`~gluon_tb.handlers._options.conv_filter_images` (``None``: 24-pixel tiles)."""
    imgs, fmt = filter_images(weight, max_filters=max_filters, zoom=zoom)
    if fmt == "CHW":
        w.add_image(f"conv_filters/{name}", imgs, step, dataformats="CHW")
    else:
        w.add_images(f"conv_filters/{name}", imgs, step, dataformats="NCHW")
    if maps is not None:
        w.add_images(f"feature_maps/{name}", feature_map_images(maps, max_maps=max_filters, zoom=zoom), step,
                     dataformats="NCHW")
